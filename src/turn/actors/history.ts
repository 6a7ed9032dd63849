/** `loadHistory`, `reloadHistory` and `finalize.rereading`: the session as the store holds it. */
import type { HistoryOutput, RecordedRequestOutput, SessionLoadOutput, TurnRecord } from "../../../machines/turn.contract.js";
import type { AgentMessage } from "../../context-engine/types.js";
import type { RecordedRequest, SessionHistory } from "../../store/session-store.js";
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
  const requestId = deps.params.requestId;
  const [history, binding, recorded] = await Promise.all([
    deps.store.readHistory(),
    deps.store.readBinding(),
    requestId !== undefined ? deps.store.findRequest(requestId) : Promise.resolve(undefined),
  ]);
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
    ...(recorded ? { recordedRequest: recordedRequestOutput(recorded) } : {}),
  };
}

/** The text of a turn's answer: its last assistant message's text parts (what the live turn reported). */
function answerText(messages: readonly AgentMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { role?: string | undefined; content?: unknown };
    if (m.role !== "assistant") continue;
    if (typeof m.content === "string") return m.content;
    const parts = Array.isArray(m.content) ? m.content.filter((p): p is { type: string; text: string } => p?.type === "text" && typeof p.text === "string") : [];
    if (parts.length > 0) return parts.map((p) => p.text).join("");
  }
  return "";
}

/** A request the transcript holds, as the turn this attempt returns. */
function recordedRequestOutput(r: RecordedRequest): RecordedRequestOutput {
  const codexStatus: TurnRecord["codexStatus"] = r.status === "completed" ? "completed" : r.status === "failed" && !r.cut ? "failed" : "interrupted";
  return {
    mark: { id: r.id, status: r.status, ...(r.cut ? { cut: true } : {}) },
    record: { threadId: r.threadId, turnId: r.turnId, codexStatus, assistantText: answerText(r.messages), messagesSnapshot: r.messages, compactions: [] },
  };
}

/** Re-read the history (after an engine compaction rewrote it, or to find this turn for finalize). */
export async function rereadHistory(deps: TurnDeps): Promise<HistoryOutput> {
  return toHistoryOutput(await deps.store.readHistory());
}
