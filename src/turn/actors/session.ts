/** `session.acquiringLock` and `session.recovering`: one attempt at a time per session, crashed attempts completed first. */
import type { LockOutput, RecoveryOutput } from "../../../machines/turn.contract.js";
import { finalizePendingTurns } from "../../recovery.js";
import { resolveSessionPath } from "../../transcript/resolve.js";
import type { TurnDeps } from "../deps.js";

/**
 * Take the session lock (waiting while another attempt, in any process, holds it), and report whether a crashed
 * attempt left a pending-finalize record. A path outside `sessionRoot` is refused before any directory is created. The
 * handle stays with the host, which releases it when the machine is done.
 */
export async function acquireSessionLock(deps: TurnDeps, signal: AbortSignal): Promise<LockOutput> {
  const { params } = deps;
  if (params.sessionRoot !== undefined) await resolveSessionPath(params.sessionFile, params.sessionRoot);
  const started = performance.now();
  const handle = await deps.store.acquireLock({ signal, logger: deps.logger });
  deps.lock.handle = handle;
  // Another process took the session (this process stalled past the stale time): stop, and write nothing more.
  handle.signal.addEventListener("abort", () => deps.lock.onLost?.(), { once: true });
  // What a crashed attempt left is a fact of the session once the lock is ours; the machine decides on recovery.
  return { waitedMs: Math.round(performance.now() - started), pendingRecord: await deps.store.hasPending() };
}

/** Complete what a crashed earlier attempt left (mirror from its pending record, then finalize), before this turn. */
export async function recoverSession(deps: TurnDeps): Promise<RecoveryOutput> {
  deps.lock.handle?.assertHeld();
  return finalizePendingTurns(
    { params: deps.params, store: deps.store, engine: deps.engine, ...(deps.params.runtimeContext ? { runtimeContext: deps.params.runtimeContext } : {}) },
    deps.logger,
  );
}
