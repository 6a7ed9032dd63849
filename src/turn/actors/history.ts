/** `loadHistory`, `reloadHistory` and `finalize.rereading`: the session as the store holds it. */
import type { HistoryOutput, SessionLoadOutput } from "../../../machines/turn.contract.js";
import type { AgentMessage } from "../../context-engine/types.js";
import type { SessionHistory } from "../../store/session-store.js";
import type { TurnDeps } from "../deps.js";

/** The store's history in the machine's shape (the messages stay the store's frozen objects). */
export function toHistoryOutput(history: SessionHistory): HistoryOutput {
  return {
    messages: history.messages as AgentMessage[],
    origins: history.origins as HistoryOutput["origins"],
    entryCount: history.entryCount,
  };
}

/** Read the history and the thread binding; the binding's last usage feeds the accordion guard. */
export async function readHistory(deps: TurnDeps): Promise<SessionLoadOutput> {
  const [history, binding] = await Promise.all([deps.store.readHistory(), deps.store.readBinding()]);
  // Whether the session existed when read under the lock (a new one runs the engine's bootstrap).
  const sessionFileExisted = history.exists;
  deps.binding.load(binding);
  for (const warning of history.warnings) deps.hostWarnings.push(warning);
  deps.logger.info(
    { ...deps.ids, event: "history loaded", messageCount: history.messages.length, skippedEntries: history.skippedEntries, hasBinding: Boolean(binding) },
    "history loaded",
  );
  return {
    sessionFileExisted,
    history: toHistoryOutput(history),
    ...(binding ? { binding } : {}),
    ...(binding?.lastUsage ? { lastUsage: binding.lastUsage } : {}),
    ...(binding?.contextOverflow ? { contextOverflowed: true } : {}),
  };
}

/** Re-read the history (after an engine compaction rewrote it, or to find this turn for finalize). */
export async function rereadHistory(deps: TurnDeps): Promise<HistoryOutput> {
  return toHistoryOutput(await deps.store.readHistory());
}
