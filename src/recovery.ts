/**
 * Crash recovery of a session: what a crashed attempt left (a pending-finalize record) is finished before the next
 * attempt touches the engine. Every attempt runs it under the session lock (the turn machine's `session.recovering`
 * state); hosts can run it alone with {@link recoverCodexSession}.
 */
import path from "node:path";
import type { Logger } from "pino";
import { isLegacyEngine } from "./context-engine/contract.js";
import { buildHarnessContextEngineRuntimeContext, finalizeHarnessContextEngineTurn } from "./context-engine/lifecycle.js";
import type { ContextEngine, ContextEngineRuntimeContext } from "./context-engine/types.js";
import { errorLabel } from "./log/error-label.js";
import { silentLogger } from "./log/logger.js";
import { parseRecoverCodexSessionParams, type ParsedTurnParams, type RecoverCodexSessionParams } from "./params.js";
import { createTranscriptRewriter } from "./context-engine/transcript-rewriter.js";
import { createJsonlSessionStore } from "./store/jsonl-store.js";
import type { SessionStore } from "./store/session-store.js";
import { SessionFileError } from "./transcript/errors.js";
import { movePendingFinalizeAside, type PendingFinalizeRecord } from "./transcript/pending.js";

export type { RecoverCodexSessionParams };

/** What {@link recoverCodexSession} (and the start of every attempt) did with a crashed attempt's leftovers. */
export interface SessionRecovery {
  /** Pending-finalize records found. */
  pending: number;
  /** Messages appended to complete mirrors a crash cut short. */
  mirroredMessages: number;
  /** Turns handed to the engine's finalize. */
  finalized: number;
  /** Records dropped: the turn never reached the transcript (a record without a snapshot), or the engine failed its one replay. */
  dropped: number;
}

/** A crashed attempt's turn could not be written to the transcript: the record stays, and the session waits for it. */
export class RecoveryMirrorError extends Error {
  readonly code = "RECOVERY_MIRROR_FAILED";
  constructor(readonly turnId: string, cause: unknown) {
    super(`an earlier turn (${turnId}) is only in the pending record and could not be written to the transcript: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = "RecoveryMirrorError";
  }
}

/** The session and engine recovery works on. */
export interface RecoveryInput {
  params: Pick<ParsedTurnParams, "sessionId" | "sessionKey" | "sessionFile" | "contextTokenBudget" | "timeouts">;
  store: SessionStore;
  /** The active engine (undefined: none or legacy). */
  engine: ContextEngine | undefined;
  runtimeContext?: Record<string, unknown>;
}

/**
 * Finish turns a crashed earlier attempt recorded but did not finalize: first complete the mirror from the record's
 * snapshot (a failure keeps the record and rejects: a new turn must not be appended before it), then finalize, skipping
 * messages the engine already ingested. The record is cleared only after the engine call returned.
 */
export async function finalizePendingTurns(input: RecoveryInput, logger: Logger): Promise<SessionRecovery> {
  const stats: SessionRecovery = { pending: 0, mirroredMessages: 0, finalized: 0, dropped: 0 };
  const pendingTurns = await listPendingOrSetAside(input, logger);
  stats.pending = pendingTurns.length;
  for (const turn of pendingTurns) {
    stats.mirroredMessages += await remirror(input, turn, logger);
    const outcome = await finalizeOne(input, turn, logger);
    if (outcome === "finalized") stats.finalized++;
    else if (outcome === "dropped") stats.dropped++;
    await input.store.completePending(turn.turnId);
  }
  return stats;
}

async function listPendingOrSetAside(input: RecoveryInput, logger: Logger): Promise<PendingFinalizeRecord[]> {
  try {
    return await input.store.listPending();
  } catch (error) {
    if (!(error instanceof SessionFileError && error.code === "SESSION_PENDING_INVALID")) throw error;
    // Unreadable record: keep it for inspection, but never let it wedge every later attempt on the session.
    const aside = await movePendingFinalizeAside(input.params.sessionFile);
    logger.warn(
      { event: "pending record corrupt", sessionId: input.params.sessionId, movedTo: aside ? path.basename(aside) : undefined },
      "unreadable pending-finalize record moved aside; its turns are not finalized again",
    );
    return [];
  }
}

/** Complete a mirror the crash cut short (or never started): idempotent keys append only what is missing. */
async function remirror(input: RecoveryInput, turn: PendingFinalizeRecord, logger: Logger): Promise<number> {
  if (!turn.messages || turn.messages.length === 0) return 0;
  try {
    const out = await input.store.appendTurn({ threadId: turn.threadId, turnId: turn.turnId, messages: turn.messages });
    if (out.appended > 0) {
      logger.info(
        { event: "pending mirror completed", sessionId: input.params.sessionId, turnId: turn.turnId, appended: out.appended, skipped: out.skipped },
        "pending turn's mirror completed",
      );
    }
    return out.appended;
  } catch (error) {
    logger.warn({ event: "pending mirror failed", sessionId: input.params.sessionId, turnId: turn.turnId, err: errorLabel(error) }, "pending turn's mirror failed");
    throw new RecoveryMirrorError(turn.turnId, error);
  }
}

/** Finalize one recovered turn in the engine (one replay only: an engine that keeps failing must not wedge the session). */
async function finalizeOne(input: RecoveryInput, turn: PendingFinalizeRecord, logger: Logger): Promise<"finalized" | "dropped" | "noEngine"> {
  const { engine, params } = input;
  const history = await input.store.readHistory();
  if (!history.origins.some((o) => o?.turnId === turn.turnId)) {
    logger.warn({ event: "pending finalize dropped", sessionId: params.sessionId, turnId: turn.turnId }, "pending turn was never mirrored; nothing to finalize");
    return "dropped";
  }
  if (!engine) return "noEngine";
  try {
    const mode = await finalizeHarnessContextEngineTurn({
      engine,
      sessionId: params.sessionId,
      ...(params.sessionKey !== undefined ? { sessionKey: params.sessionKey } : {}),
      sessionFile: params.sessionFile,
      messages: history.messages as never,
      prePromptMessageCount: Math.min(turn.prePromptMessageCount, history.messages.length),
      tokenBudget: params.contextTokenBudget,
      runtimeContext: {
        ...(input.runtimeContext ?? {}),
        ...buildHarnessContextEngineRuntimeContext({ tokenBudget: params.contextTokenBudget }),
        // Recovery holds the session lock while it finalizes.
        rewriteTranscriptEntries: createTranscriptRewriter({ store: input.store, logger, ids: { sessionId: params.sessionId }, lock: "held" }),
      } as ContextEngineRuntimeContext,
      turnId: turn.turnId,
      threadId: turn.threadId,
      timeoutMs: params.timeouts?.engineCallMs,
      alreadyIngested: new Set(turn.ingestedKeys ?? []),
      onIngested: (key: string) => input.store.markPendingIngested(turn.turnId, [key]),
    } as Parameters<typeof finalizeHarnessContextEngineTurn>[0]);
    logger.info({ event: "pending finalize completed", sessionId: params.sessionId, turnId: turn.turnId, mode }, "pending finalize completed");
    return "finalized";
  } catch (error) {
    logger.warn(
      { event: "pending finalize failed", sessionId: params.sessionId, turnId: turn.turnId, err: errorLabel(error) },
      "pending finalize failed; record dropped",
    );
    return "dropped";
  }
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
  const logger = parsed.logger ?? silentLogger;
  const store = createJsonlSessionStore({
    sessionFile: parsed.sessionFile,
    sessionId: parsed.sessionId,
    ...(parsed.sessionRoot !== undefined ? { sessionRoot: parsed.sessionRoot } : {}),
    ...(parsed.cwd !== undefined ? { cwd: parsed.cwd } : {}),
    logger,
  });
  const lock = await store.acquireLock({ logger });
  try {
    const engine = parsed.contextEngine && !isLegacyEngine(parsed.contextEngine) ? parsed.contextEngine : undefined;
    // The host's runtime context (a plugin host's provider, model, llm) reaches the replayed finalize, as in a turn.
    return await finalizePendingTurns({ params: parsed, store, engine, ...(parsed.runtimeContext ? { runtimeContext: parsed.runtimeContext } : {}) }, logger);
  } finally {
    await lock.release();
  }
}
