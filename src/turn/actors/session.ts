/**
 * `session.acquiringLock`, `session.recovering` and `session.recoveringCutTurn`: one attempt at a time per session;
 * what crashed attempts left (a pending record, a turn Codex ran that nothing recorded) is completed first.
 */
import type { CutTurnOutput, LockOutput, RecoveryOutput } from "../../../machines/turn.contract.js";
import { finalizePendingTurns, recoverCutTurn } from "../../recovery.js";
import { resolveSessionPath } from "../../transcript/resolve.js";
import type { TurnDeps } from "../deps.js";
import { prepareTranscriptMessages } from "./persist.js";

/**
 * Take the session lock (waiting while another attempt, in any process, holds it), and report whether a crashed
 * attempt left a pending-finalize record. A path outside `sessionRoot` is refused before any directory is created. The
 * handle stays with the host, which releases it when the machine is done.
 */
export async function acquireSessionLock(deps: TurnDeps, signal: AbortSignal): Promise<LockOutput> {
  const { params } = deps;
  // The JSONL store of `sessionFile` checks the root itself; a store given by the host is not a path to check.
  if (params.sessionRoot !== undefined && params.store === undefined) await resolveSessionPath(params.sessionFile, params.sessionRoot);
  const started = performance.now();
  const handle = await deps.store.acquireLock({ signal, logger: deps.logger });
  deps.lock.handle = handle;
  // Another process took the session (this process stalled past the stale time): stop, and write nothing more.
  handle.signal.addEventListener("abort", () => deps.lock.onLost?.(), { once: true });
  // What a crashed attempt left is a fact of the session once the lock is ours; the machine decides on recovery.
  const [pendingRecord, binding] = await Promise.all([deps.store.hasPending(), deps.store.readBinding()]);
  return { waitedMs: Math.round(performance.now() - started), pendingRecord, turnInFlight: binding?.turnInFlight !== undefined };
}

/** Complete what a crashed earlier attempt left (mirror from its pending record, then finalize), before this turn. */
export async function recoverSession(deps: TurnDeps): Promise<RecoveryOutput> {
  deps.lock.handle?.assertHeld();
  return finalizePendingTurns(
    {
      params: deps.params,
      store: deps.store,
      engine: deps.engine,
      warn: (w: string) => deps.hostWarnings.push(w),
      ...(deps.params.runtimeContext ? { runtimeContext: deps.params.runtimeContext } : {}),
    },
    deps.logger,
  );
}

/**
 * Recover the turn an earlier attempt left in flight, from Codex's thread (see `recoverCutTurn`): the host's
 * message-write hooks see the rebuilt messages first, as they would have at the end of that turn.
 */
export async function recoverTurnLeftInFlight(deps: TurnDeps): Promise<CutTurnOutput> {
  deps.lock.handle?.assertHeld();
  const out = await recoverCutTurn(
    {
      params: deps.params,
      store: deps.store,
      engine: deps.engine,
      appServer: deps.appServer,
      ...(deps.params.runtimeContext ? { runtimeContext: deps.params.runtimeContext } : {}),
      ...(deps.hooks.has("beforeMessageWrite")
        ? { prepareMessages: async (record) => (await prepareTranscriptMessages(deps, { record })).messages }
        : {}),
    },
    deps.logger,
  );
  // The marker was seen under the lock; it can only be gone if another writer removed it (nothing to recover).
  return out ?? { turnId: "", outcome: "alreadyMirrored" };
}
