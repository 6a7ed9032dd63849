/** Background maintenance (`turnMaintenanceMode: "background"`): runs after the result is returned, tracked here. */
import type { TurnRecord } from "../../machines/turn.contract.js";
import { runHarnessContextEngineMaintenance } from "../context-engine/lifecycle.js";
import { errorLabel } from "../log/error-label.js";
import { drainDiscards } from "../transcript/discard.js";
import { runtimeContextFor, sessionTargetOf } from "./actors/engine.js";
import type { TurnDeps } from "./deps.js";

/** Background maintenance still running, so a host can wait for it before exiting (see {@link drainBackgroundWork}). */
const backgroundWork = new Set<Promise<void>>();

/** Per attempt: the promise `result.backgroundMaintenance` resolves with. */
const attemptWork = new WeakMap<TurnDeps, Promise<void>>();

/** Start background maintenance for this attempt (called by the machine's `scheduleBackgroundMaintenance` action). */
export function scheduleBackgroundMaintenance(deps: TurnDeps, record: TurnRecord | undefined): void {
  const engine = deps.engine;
  if (!engine) return;
  const work = runHarnessContextEngineMaintenance({
    engine,
    sessionId: deps.params.sessionId,
    ...(deps.params.sessionKey !== undefined ? { sessionKey: deps.params.sessionKey } : {}),
    sessionTarget: sessionTargetOf(deps),
    sessionFile: deps.params.sessionFile,
    reason: "turn",
    background: true,
    // The turn released the session lock before this runs: each transcript rewrite takes it.
    runtimeContext: runtimeContextFor(deps, record?.usage, "acquire"),
    timeoutMs: deps.engineCallMs,
  })
    .then(() => deps.logger.info({ ...deps.ids, event: "background maintenance completed" }, "background maintenance completed"))
    .catch((error: unknown) => deps.logger.warn({ ...deps.ids, event: "background maintenance failed", err: errorLabel(error) }, "background maintenance failed"));
  attemptWork.set(deps, work);
  backgroundWork.add(work);
  void work.finally(() => backgroundWork.delete(work));
}

/** The attempt's background maintenance (resolved at once when none was scheduled). */
export function backgroundWorkOf(deps: TurnDeps): Promise<void> {
  return attemptWork.get(deps) ?? Promise.resolve();
}

/**
 * Wait for all background maintenance started by earlier turns, and for the background removal of the sidecars they
 * discarded (the pending record, the lock directory; see `src/transcript/discard.ts`).
 *
 * @example
 * ```ts
 * await runCodexTurn(params);
 * await drainBackgroundWork();
 * ```
 */
export async function drainBackgroundWork(): Promise<void> {
  while (backgroundWork.size > 0) await Promise.allSettled([...backgroundWork]);
  await drainDiscards();
}
