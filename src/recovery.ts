/**
 * Crash recovery of a session: what a crashed attempt left (a pending-finalize record) is finished before the next
 * attempt touches the engine. Every attempt runs it under the session lock (the turn machine's `session.recovering`
 * state); hosts can run it alone with {@link recoverCodexSession}.
 */
import path from "node:path";
import type { Logger } from "pino";
import { declaresDurableTurns, isLegacyEngine } from "./context-engine/contract.js";
import { commitHarnessContextEngineTurn, durableTurnAdvancementKey } from "./context-engine/durable-turns.js";
import { buildHarnessContextEngineRuntimeContext, finalizeHarnessContextEngineTurn } from "./context-engine/lifecycle.js";
import { sessionTargetOf } from "./store/session-directory.js";
import type { AgentMessage, ContextEngine, ContextEngineRuntimeContext } from "./context-engine/types.js";
import { errorLabel } from "./log/error-label.js";
import { silentLogger } from "./log/logger.js";
import { parseRecoverCodexSessionParams, type ParsedTurnParams, type RecoverCodexSessionParams } from "./params.js";
import { createTranscriptRewriter } from "./context-engine/transcript-rewriter.js";
import { createJsonlSessionStore } from "./store/jsonl-store.js";
import type { SessionStore } from "./store/session-store.js";
import { SessionFileError } from "./transcript/errors.js";
import type { PendingFinalizeRecord } from "./transcript/pending.js";
import { markNativeCompaction, withContextOverflow, type ThreadBinding } from "./transcript/binding.js";
import type { CodexAppServer } from "./codex/app-server.js";
import { readThreadTurn, type TurnToRebuild } from "./codex/thread-turn.js";
import type { TurnRecordCore } from "./codex/turn-projector.js";
import type { CutTurnOutput } from "../machines/turn.contract.js";
import { turnCommittable, turnOverflowedContext } from "../machines/rules.js";

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
  /** The turn an attempt left in flight (Codex accepted it, the attempt died before recording it), when there was one. */
  cutTurn?: CutTurnRecovery | undefined;
  /**
   * Prompts whose turn the death of an attempt cut short ({@link recoverCodexSession} only; absent when none): Codex
   * did not finish the turn (`interrupted`: the transcript ends it with an assistant entry marked `stopReason:
   * "aborted"` that says so), or could not give it back (`lost`: the transcript does not hold it). A host that wants
   * these answered runs them again.
   */
  cutPrompts?: CutPrompt[] | undefined;
  /** What recovery moved aside or could not use (an unreadable pending record), as for a turn's `warnings`. */
  warnings?: string[] | undefined;
}

/** A prompt whose turn was cut short by a dead attempt (see {@link SessionRecovery.cutPrompts}). */
export interface CutPrompt {
  turnId: string;
  /** The prompt as the host gave it. */
  prompt: string;
  /** `interrupted`: in the transcript with an incomplete answer; `lost`: not in the transcript at all. */
  reason: "interrupted" | "lost";
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
  /** Hears what recovery moved aside (an unreadable pending record): the turn's `result.warnings`. */
  warn?: ((message: string) => void) | undefined;
  /** The active engine (undefined: none or legacy). */
  engine: ContextEngine | undefined;
  runtimeContext?: Record<string, unknown> | undefined;
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
    const aside = await input.store.setAsidePending();
    logger.warn(
      { event: "pending record corrupt", sessionId: input.params.sessionId, movedTo: aside ? asideName(aside) : undefined },
      "unreadable pending-finalize record moved aside; its turns are not finalized again",
    );
    input.warn?.(
      `the pending-finalize record of session ${input.params.sessionId} could not be read (${error.message}); it was moved aside${aside ? ` to ${asideName(aside)}` : ""} and the turns it held are not finalized again`,
    );
    return [];
  }
}

/** Where a store put something aside, for logs and warnings: a file's base name, another store's label as it is. */
function asideName(label: string): string {
  return path.isAbsolute(label) ? path.basename(label) : label;
}

/** Complete a mirror the crash cut short (or never started): idempotent keys append only what is missing. */
async function remirror(input: RecoveryInput, turn: PendingFinalizeRecord, logger: Logger): Promise<number> {
  if (!turn.messages || turn.messages.length === 0) return 0;
  try {
    const out = await input.store.appendTurn({ threadId: turn.threadId, turnId: turn.turnId, messages: turn.messages, ...(turn.request ? { request: turn.request } : {}) });
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
  // OpenClaw's session target (lossless-claw 1.x persists a recovered turn only for a target it can read).
  const sessionTarget = sessionTargetOf(params, input.store);
  if (declaresDurableTurns(engine)) return commitRecoveredTurn(input, turn, sessionTarget, logger);
  try {
    const mode = await finalizeHarnessContextEngineTurn({
      engine,
      sessionId: params.sessionId,
      ...(params.sessionKey !== undefined ? { sessionKey: params.sessionKey } : {}),
      sessionTarget,
      sessionFile: params.sessionFile,
      messages: history.messages as never,
      prePromptMessageCount: Math.min(turn.prePromptMessageCount, history.messages.length),
      tokenBudget: params.contextTokenBudget,
      runtimeContext: {
        ...(input.runtimeContext ?? {}),
        ...buildHarnessContextEngineRuntimeContext({ tokenBudget: params.contextTokenBudget }),
        sessionTarget,
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
 * A durable engine's recovered turn (OpenClaw's `commitTurn`): committed with the key its pending record holds (the
 * key the crashed attempt used, when it got that far: a crash between the commit and the record's clearing retries the
 * same key, and the engine answers `duplicate`), when the turn is one OpenClaw accepts (`turnCommittable`: Codex
 * completed it); any other turn is not committed. One retry only, as for any finalize.
 */
async function commitRecoveredTurn(
  input: RecoveryInput,
  turn: PendingFinalizeRecord,
  sessionTarget: ReturnType<typeof sessionTargetOf>,
  logger: Logger,
): Promise<"finalized" | "dropped"> {
  const { params } = input;
  const advancementKey = turn.advancementKey ?? durableTurnAdvancementKey({ sessionId: params.sessionId, threadId: turn.threadId, turnId: turn.turnId });
  if (!turnCommittable({ aborted: false, yieldAborted: false, turnAccepted: true, record: { codexStatus: turn.status === "completed" ? "completed" : "failed" } })) {
    logger.info({ event: "pending turn commit skipped", sessionId: params.sessionId, turnId: turn.turnId, status: turn.status }, "recovered turn not committed (not an accepted turn)");
    return "finalized";
  }
  try {
    const out = await commitHarnessContextEngineTurn({
      engine: input.engine!,
      entries: await input.store.readVisibleEntries(),
      session: { sessionId: params.sessionId, sessionKey: params.sessionKey, storePath: input.store.sessionFile },
      threadId: turn.threadId,
      turnId: turn.turnId,
      advancementKey,
      sessionTarget,
      runtimeContext: {
        ...(input.runtimeContext ?? {}),
        ...buildHarnessContextEngineRuntimeContext({ tokenBudget: params.contextTokenBudget }),
        sessionTarget,
        rewriteTranscriptEntries: createTranscriptRewriter({ store: input.store, logger, ids: { sessionId: params.sessionId }, lock: "held" }),
      } as ContextEngineRuntimeContext,
      timeoutMs: params.timeouts?.engineCallMs,
    });
    logger.info(
      { event: "pending turn committed", sessionId: params.sessionId, turnId: turn.turnId, advancementKey, status: out.status, messages: out.messages, admissionSeq: out.admissionSeq, terminalSeq: out.terminalSeq },
      "recovered turn committed",
    );
    return "finalized";
  } catch (error) {
    logger.warn({ event: "pending turn commit failed", sessionId: params.sessionId, turnId: turn.turnId, advancementKey, err: errorLabel(error) }, "recovered turn's commit failed; record dropped");
    return "dropped";
  }
}

/**
 * What became of a turn an attempt left in flight (the binding's `turnInFlight`), see {@link recoverCutTurn}: the
 * statechart's `CutTurnOutput` (machines/turn.contract.ts), where each field is described.
 *
 * @example
 * ```ts
 * const r = await recoverCodexSession({ sessionId, sessionFile, appServer });
 * if (r.cutTurn?.outcome === "recovered") console.log(r.cutTurn.turnId, r.cutTurn.codexStatus, r.cutTurn.messages);
 * ```
 */
export type CutTurnRecovery = CutTurnOutput;

/**
 * What recovery uses of the app-server: `thread/read` and `turn/interrupt`, and (a `CodexAppServer` has it) the client's
 * own handle of a turn it still streams.
 */
export type RecoveryAppServer = Pick<CodexAppServer, "request"> & Partial<Pick<CodexAppServer, "runningTurn">>;

/** What recovering a cut turn needs beyond {@link RecoveryInput}. */
export interface CutTurnInput extends RecoveryInput {
  /** Reads the thread (`thread/read`); absent: the turn is left for a later attempt. */
  appServer?: RecoveryAppServer | undefined;
  /** The host's message-write hooks, applied to the rebuilt turn before anything is written (as for a live turn). */
  prepareMessages?: ((record: TurnRecordCore) => Promise<AgentMessage[]>) | undefined;
}

/**
 * Recover the turn an attempt left in flight: Codex accepted it (the binding says so) and the attempt died before it
 * recorded the turn (no pending record, nothing mirrored). Codex kept what the turn did in its thread, so the turn is
 * rebuilt from `thread/read` (the original prompt from the binding first) and goes through the crash protocol as a
 * turn that just ended: pending record (snapshot), then the marker is dropped, then the mirror and the engine's
 * finalize ({@link finalizePendingTurns}). Without it, the transcript and the engine would never see a turn the model
 * saw and whose tools ran, and a host re-running the prompt would give it to the thread twice.
 *
 * Codex failing to give the turn back (the thread or turn is gone, the app-server cannot read it) drops the marker
 * with a warning and the session goes on: the turn stays out of the transcript, as before. A transcript that cannot
 * be written rejects (RecoveryMirrorError), as for any pending turn: the session waits for it.
 *
 * @example
 * ```ts
 * const cut = await recoverCutTurn({ params, store, engine, appServer }, logger);
 * if (cut?.outcome === "recovered") console.log(`turn ${cut.turnId} recovered: ${cut.messages} messages`);
 * ```
 */
export async function recoverCutTurn(input: CutTurnInput, logger: Logger): Promise<CutTurnRecovery | undefined> {
  const { store, params } = input;
  const binding = await store.readBinding();
  const inFlight = binding?.turnInFlight;
  if (!binding || !inFlight) return undefined;
  const ids = { sessionId: params.sessionId, threadId: binding.threadId, turnId: inFlight.turnId };
  const dropMarker = async (after: ThreadBinding = binding) => {
    const { turnInFlight: _dropped, ...rest } = after;
    await store.writeBinding(rest, { durable: false });
  };
  const history = await store.readHistory();
  if (history.origins.some((o) => o?.turnId === inFlight.turnId)) {
    await dropMarker();
    return { turnId: inFlight.turnId, outcome: "alreadyMirrored" };
  }
  if (!input.appServer) {
    logger.info({ event: "cut turn left for the next turn", ...ids }, "a turn cut short is left for an attempt with an app-server");
    return { turnId: inFlight.turnId, outcome: "noAppServer" };
  }
  let read: Awaited<ReturnType<typeof readThreadTurn>>;
  try {
    read = await readSettledThreadTurn(input.appServer, { threadId: binding.threadId, ...inFlight });
  } catch (error) {
    logger.warn({ event: "cut turn unreadable", ...ids, err: errorLabel(error) }, "Codex could not read the thread of a turn cut short; it stays out of the transcript");
    await dropMarker();
    return { turnId: inFlight.turnId, outcome: "unreadable" };
  }
  if (!read.found) {
    logger.warn({ event: "cut turn not in thread", ...ids, reason: read.reason }, "Codex's thread does not hold the turn cut short; it stays out of the transcript");
    await dropMarker();
    return { turnId: inFlight.turnId, outcome: read.reason === "turnNotInThread" ? "notInThread" : "unreadable" };
  }
  const messages = input.prepareMessages ? await input.prepareMessages(read.record) : read.record.messagesSnapshot;
  // The same order as a live turn: the pending record first, then the marker goes; a crash in between recovers the
  // turn from the record (the marker then finds it mirrored).
  await store.recordPending({
    threadId: binding.threadId,
    turnId: inFlight.turnId,
    prePromptMessageCount: history.messages.length,
    messageCount: messages.length,
    status: read.record.codexStatus,
    messages,
    // The cut turn's request (the marker kept its id): its prompt is marked cut, with Codex's outcome.
    ...(inFlight.requestId !== undefined ? { request: { id: inFlight.requestId, status: read.record.codexStatus === "completed" ? ("completed" as const) : ("failed" as const), cut: true } } : {}),
    ...(input.engine && declaresDurableTurns(input.engine)
      ? { advancementKey: durableTurnAdvancementKey({ sessionId: params.sessionId, threadId: binding.threadId, turnId: inFlight.turnId }) }
      : {}),
  });
  // Codex compacted the thread natively during that turn: what the binding says the thread holds is gone (the
  // next projection re-sends it), as the live turn's TURN.COMPACTION would have recorded.
  const compacted = read.record.compactions.some((c) => c.completed);
  const after = compacted ? markNativeCompaction(binding, binding.threadId) : binding;
  // It failed because its input no longer fit the model's context window: the next turn's accordion compacts first,
  // as after a live turn that overflowed (the turn machine's `turnOverflowedContext`).
  await dropMarker(turnOverflowedContext(read.record) ? withContextOverflow(after, binding.threadId, inFlight.turnId) : after);
  const done = await finalizePendingTurns(input, logger);
  logger.info(
    { event: "cut turn recovered", ...ids, codexStatus: read.codexStatus, messages: messages.length, itemsSkipped: read.itemsSkipped, appended: done.mirroredMessages, nativeCompaction: compacted },
    "a turn cut short was recovered from Codex's thread",
  );
  return {
    turnId: inFlight.turnId,
    outcome: "recovered",
    codexStatus: read.codexStatus,
    messages: messages.length,
    itemsSkipped: read.itemsSkipped,
    mirroredMessages: done.mirroredMessages,
    finalized: done.finalized,
  };
}

/** How long recovery waits for Codex to stop a turn that still runs, and how often it looks. */
const STILL_RUNNING_WAIT_MS = 5_000;
const STILL_RUNNING_POLL_MS = 100;

/**
 * {@link readThreadTurn}, for a turn that may still run: the attempt ended but its app-server did not (the same
 * process goes on, e.g. after the attempt lost its lock). Such a turn is interrupted first and read once Codex says it
 * stopped (at most {@link STILL_RUNNING_WAIT_MS}), so the transcript gets all of it and no later item is left out.
 *
 * When this very client streams the turn, its stream decides, not the first `thread/read`: Codex (0.171.0, under load)
 * can report a turn that runs as `interrupted` on an `idle` thread when it started right after the thread's previous
 * turn ended. Read as it stood, the turn would be mirrored as a bare prompt while the model's answer was still coming.
 */
async function readSettledThreadTurn(appServer: RecoveryAppServer, turn: TurnToRebuild): Promise<Awaited<ReturnType<typeof readThreadTurn>>> {
  const live = appServer.runningTurn?.(turn.threadId, turn.turnId);
  if (live) {
    // Resolves "interrupted", or "timedOut" once the grace is over: the read below then sees what Codex kept.
    await live.interrupt({ graceMs: STILL_RUNNING_WAIT_MS });
    await live.completion;
  }
  let read = await readThreadTurn(appServer, turn);
  if (!read.found || read.codexStatus !== "inProgress") return read;
  let interruptTaken = await requestTurnInterrupt(appServer, turn);
  const until = Date.now() + STILL_RUNNING_WAIT_MS;
  while (read.found && read.codexStatus === "inProgress" && Date.now() < until) {
    await new Promise((r) => setTimeout(r, STILL_RUNNING_POLL_MS));
    // Codex (0.171.0) refuses an interrupt ("no active turn") for a moment after it accepted a turn that starts right
    // after the thread's previous one ended: sent once, the turn would run on and be mirrored cut at the wait's end.
    if (!interruptTaken) interruptTaken = await requestTurnInterrupt(appServer, turn);
    read = await readThreadTurn(appServer, turn);
  }
  return read;
}

/** `turn/interrupt` for a turn this client does not stream; whether Codex took it (a refusal is not an error here). */
async function requestTurnInterrupt(appServer: RecoveryAppServer, turn: TurnToRebuild): Promise<boolean> {
  return appServer.request("turn/interrupt", { threadId: turn.threadId, turnId: turn.turnId }).then(
    () => true,
    () => false,
  );
}

/**
 * Complete what a crashed attempt left on a session (finish its mirror from the pending record, finalize it in the
 * engine exactly once; with `appServer`, also rebuild a turn the attempt left in flight from Codex's thread: see
 * {@link recoverCutTurn}) without running a turn. Every attempt does this first anyway; call it on host start-up to
 * decide from the transcript which prompts still need to run. Without `appServer`, a turn cut short stays out of the
 * transcript until the next turn recovers it (`cutTurn.outcome: "noAppServer"`): do not run its prompt again. With
 * `store`, everything (the lock, the records, the mirror, their set-aside) goes through that store, and `sessionFile`
 * may be omitted.
 *
 * @example
 * ```ts
 * const r = await recoverCodexSession({ sessionId: "s1", sessionFile: "/data/s1.jsonl", contextEngine: engine, appServer });
 * console.log(r.pending, r.mirroredMessages, r.finalized, r.cutTurn?.outcome);
 * await recoverCodexSession({ sessionId: "s1", store, contextEngine: engine, appServer }); // a session in another store
 * ```
 */
export async function recoverCodexSession(params: RecoverCodexSessionParams): Promise<SessionRecovery> {
  const parsed = parseRecoverCodexSessionParams(params);
  const logger = parsed.logger ?? silentLogger;
  const warnings: string[] = [];
  const store =
    parsed.store ??
    createJsonlSessionStore({
      sessionFile: parsed.sessionFile,
      sessionId: parsed.sessionId,
      ...(parsed.sessionRoot !== undefined ? { sessionRoot: parsed.sessionRoot } : {}),
      ...(parsed.cwd !== undefined ? { cwd: parsed.cwd } : {}),
      logger,
      onWarning: (w) => warnings.push(w),
    });
  const lock = await store.acquireLock({ logger });
  try {
    const engine = parsed.contextEngine && !isLegacyEngine(parsed.contextEngine) ? parsed.contextEngine : undefined;
    // The host's runtime context (a plugin host's provider, model, llm) reaches the replayed finalize, as in a turn.
    const input = { params: parsed, store, engine, warn: (w: string) => warnings.push(w), ...(parsed.runtimeContext ? { runtimeContext: parsed.runtimeContext } : {}) };
    const stats: SessionRecovery = await finalizePendingTurns(input, logger);
    const withWarnings = (r: SessionRecovery): SessionRecovery => (warnings.length > 0 ? { ...r, warnings } : r);
    // After the pending records (which may hold that very turn): the turn an attempt left in flight.
    const appServer = params.appServer;
    const inFlight = (await store.readBinding())?.turnInFlight;
    const cutTurn = await recoverCutTurn({ ...input, ...(appServer ? { appServer } : {}) }, logger);
    if (!cutTurn) return withWarnings(stats);
    const cutPrompts = inFlight && inFlight.turnId === cutTurn.turnId ? cutPromptsOf(cutTurn, inFlight.prompt) : [];
    return withWarnings({
      ...stats,
      mirroredMessages: stats.mirroredMessages + (cutTurn.mirroredMessages ?? 0),
      finalized: stats.finalized + (cutTurn.finalized ?? 0),
      cutTurn,
      ...(cutPrompts.length > 0 ? { cutPrompts } : {}),
    });
  } finally {
    await lock.release();
  }
}

/** The prompt a cut turn leaves to run again: one Codex did not finish, or could not give back. */
function cutPromptsOf(cut: CutTurnRecovery, prompt: string): CutPrompt[] {
  if (cut.outcome === "recovered" && cut.codexStatus !== "completed" && cut.codexStatus !== "failed") return [{ turnId: cut.turnId, prompt, reason: "interrupted" }];
  if (cut.outcome === "notInThread" || cut.outcome === "unreadable") return [{ turnId: cut.turnId, prompt, reason: "lost" }];
  return [];
}
