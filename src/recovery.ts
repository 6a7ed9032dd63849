/**
 * Crash recovery of a session: what a crashed attempt left (a pending-finalize record) is finished before the next
 * attempt touches the engine. Every attempt runs it under the session lock; hosts can run it alone with
 * {@link recoverCodexSession}.
 */
import path from "node:path";
import type { Logger } from "pino";
import type { z } from "zod";
import { isLegacyEngine } from "./context-engine/contract.js";
import { buildHarnessContextEngineRuntimeContext, finalizeHarnessContextEngineTurn } from "./context-engine/lifecycle.js";
import { errorLabel } from "./log/error-label.js";
import { silentLogger } from "./log/logger.js";
import { parseRecoverCodexSessionParams, type RecoverCodexSessionParams, type codexTurnParamsSchema } from "./params.js";
import { SessionFileError } from "./transcript/errors.js";
import { withSessionLock } from "./transcript/lock.js";
import { mirrorTurnToTranscript } from "./transcript/mirror.js";
import { completePendingFinalize, listPendingFinalize, movePendingFinalizeAside } from "./transcript/pending.js";
import { readSessionHistory } from "./transcript/session-file.js";

export type { RecoverCodexSessionParams };

/** What {@link recoverCodexSession} (and the start of every attempt) did with a crashed attempt's leftovers. */
export interface SessionRecovery {
  /** Pending-finalize records found. */
  pending: number;
  /** Messages appended to complete mirrors a crash cut short. */
  mirroredMessages: number;
  /** Turns handed to the engine's finalize. */
  finalized: number;
  /** Records dropped: the turn never reached the transcript, or the engine failed its one replay. */
  dropped: number;
}

/** The session and engine fields recovery needs (a parsed turn's params satisfy it). */
export type RecoveryParams = Pick<
  z.output<typeof codexTurnParamsSchema>,
  "sessionId" | "sessionKey" | "sessionFile" | "sessionRoot" | "contextEngine" | "contextTokenBudget" | "cwd" | "timeouts"
>;

/**
 * Finish turns a crashed earlier attempt recorded but did not finalize, before this attempt touches the engine: first
 * complete the mirror from the record's snapshot, then finalize. Exactly-once rests on the durable pending record: it
 * is cleared only after the engine call returned.
 */
export async function finalizePendingTurns(p: RecoveryParams, logger: Logger): Promise<SessionRecovery> {
  const stats: SessionRecovery = { pending: 0, mirroredMessages: 0, finalized: 0, dropped: 0 };
  let pendingTurns: Awaited<ReturnType<typeof listPendingFinalize>>;
  try {
    pendingTurns = await listPendingFinalize(p.sessionFile);
  } catch (error) {
    if (!(error instanceof SessionFileError && error.code === "SESSION_PENDING_INVALID")) throw error;
    // Unreadable record: keep it for inspection, but never let it wedge every later attempt on the session.
    const aside = await movePendingFinalizeAside(p.sessionFile);
    logger.warn(
      { event: "pending record corrupt", sessionId: p.sessionId, movedTo: aside ? path.basename(aside) : undefined },
      "unreadable pending-finalize record moved aside; its turns are not finalized again",
    );
    pendingTurns = [];
  }
  stats.pending = pendingTurns.length;
  if (pendingTurns.length === 0) return stats;
  const engine = p.contextEngine;
  for (const turn of pendingTurns) {
    if (turn.messages && turn.messages.length > 0) {
      // Complete a mirror the crash cut short (or never started): idempotent keys append only what is missing.
      try {
        const out = await mirrorTurnToTranscript({
          sessionFile: p.sessionFile,
          sessionId: p.sessionId,
          cwd: p.cwd,
          threadId: turn.threadId,
          turnId: turn.turnId,
          messages: turn.messages,
          sessionRoot: p.sessionRoot,
          logger,
          locked: true,
        });
        stats.mirroredMessages += out.appended;
        if (out.appended > 0) {
          logger.info(
            { event: "pending mirror completed", sessionId: p.sessionId, turnId: turn.turnId, appended: out.appended, skipped: out.skipped },
            "pending turn's mirror completed",
          );
        }
      } catch (error) {
        logger.warn({ event: "pending mirror failed", sessionId: p.sessionId, turnId: turn.turnId, err: errorLabel(error) }, "pending turn's mirror failed");
      }
    }
    const history = await readSessionHistory(p.sessionFile, { sessionId: p.sessionId, sessionRoot: p.sessionRoot, logger });
    const mirrored = history.origins.some((o) => o?.turnId === turn.turnId);
    if (!mirrored) {
      stats.dropped++;
      logger.warn({ event: "pending finalize dropped", sessionId: p.sessionId, turnId: turn.turnId }, "pending turn was never mirrored; nothing to finalize");
    } else if (engine && !isLegacyEngine(engine)) {
      try {
        const mode = await finalizeHarnessContextEngineTurn({
          engine,
          sessionId: p.sessionId,
          sessionKey: p.sessionKey,
          sessionFile: p.sessionFile,
          messages: history.messages,
          prePromptMessageCount: Math.min(turn.prePromptMessageCount, history.messages.length),
          tokenBudget: p.contextTokenBudget,
          runtimeContext: buildHarnessContextEngineRuntimeContext({ tokenBudget: p.contextTokenBudget }),
          turnId: turn.turnId,
          timeoutMs: p.timeouts?.engineCallMs,
        });
        stats.finalized++;
        logger.info({ event: "pending finalize completed", sessionId: p.sessionId, turnId: turn.turnId, mode }, "pending finalize completed");
      } catch (error) {
        stats.dropped++;
        // One replay only: an engine that keeps failing must not wedge the session (every later turn would reject).
        logger.warn(
          { event: "pending finalize failed", sessionId: p.sessionId, turnId: turn.turnId, err: errorLabel(error) },
          "pending finalize failed; record dropped",
        );
      }
    }
    await completePendingFinalize(p.sessionFile, turn.turnId);
  }
  return stats;
}

/**
 * Complete what a crashed attempt left on a session (finish its mirror from the pending record, finalize it in the
 * engine exactly once) without running a turn. Every attempt does this first anyway; call it on host start-up to
 * decide from the transcript which prompts still need to run.
 *
 * @example
 * ```ts
 * const r = await recoverCodexSession({ sessionId: "s1", sessionFile: "/data/s1.jsonl", contextEngine: engine });
 * console.log(r.pending, r.mirroredMessages, r.finalized);
 * ```
 */
export async function recoverCodexSession(params: RecoverCodexSessionParams): Promise<SessionRecovery> {
  const parsed = parseRecoverCodexSessionParams(params);
  return withSessionLock(parsed.sessionFile, () => finalizePendingTurns(parsed, parsed.logger ?? silentLogger));
}

