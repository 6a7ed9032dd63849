/**
 * The lifecycle decision rules of a turn, as plain functions. The turn machine's guards call them; tests call them
 * directly. They encode the spec's "Error handling" section and the OpenClaw first-port semantics.
 */
import type {
  AccordionFacts,
  AssembleOutput,
  EngineFacts,
  HistoryOutput,
  LastUsageFacts,
  LockOutput,
  NativeProjectionSummary,
  NativeSyncResult,
  ProjectionOutput,
  RequestMark,
  SessionLoadOutput,
  TurnRecord,
  TurnStatus,
} from "./turn.contract.js";

/**
 * Recover before the turn only when a crashed attempt left a pending-finalize record: the lock makes the answer
 * stable (no one else can write one until we release it), so a session without one skips recovery entirely.
 *
 * @example
 * ```ts
 * needsRecovery({ waitedMs: 0, pendingRecord: false, turnInFlight: false }); // false
 * ```
 */
export function needsRecovery(lock: Pick<LockOutput, "pendingRecord">): boolean {
  return lock.pendingRecord;
}

/**
 * Recover a turn an earlier attempt left in flight (Codex accepted it; the attempt died before writing its pending
 * record) before this turn, after any pending records: the binding's marker says so, read under the lock.
 *
 * @example
 * ```ts
 * turnLeftInFlight({ waitedMs: 0, pendingRecord: false, turnInFlight: true }); // true
 * ```
 */
export function turnLeftInFlight(lock: Pick<LockOutput, "turnInFlight">): boolean {
  return lock.turnInFlight;
}

/** Bootstrap runs only for an active engine that has `bootstrap`, and only when the session file existed before. */
export function shouldBootstrap(engine: EngineFacts, hadSessionFile: boolean): boolean {
  return engine.active && engine.hasBootstrap && hadSessionFile;
}

/** Why bootstrap was skipped (for the `engine.bootstrap` outcome label). */
export function bootstrapSkipReason(engine: EngineFacts, hadSessionFile: boolean): string {
  if (!engine.active) return "skipped:noEngine";
  if (!engine.hasBootstrap) return "skipped:noBootstrap";
  if (!hadSessionFile) return "skipped:newSession";
  return "ran";
}

/** Assemble runs only with an active (non-legacy) engine. */
export function shouldAssemble(engine: EngineFacts): boolean {
  return engine.active;
}

/** An assemble result with no messages means "nothing assembled": fall back to the unassembled prompt. */
export function isAssembleEmpty(output: AssembleOutput | undefined): boolean {
  return !output || output.messages.length === 0;
}

/**
 * An empty assembly is worth a warning only when the session has history: the engine then shows the model none of it.
 * On an empty history (a new session, an engine whose store starts empty) nothing is the expected answer.
 *
 * @example
 * ```ts
 * shouldWarnAssembleEmpty({ messages: [], estimatedTokens: 0 }, 0); // false: nothing to assemble yet
 * shouldWarnAssembleEmpty({ messages: [], estimatedTokens: 0 }, 12); // true: the history was dropped
 * ```
 */
export function shouldWarnAssembleEmpty(output: AssembleOutput | undefined, historyMessageCount: number): boolean {
  return isAssembleEmpty(output) && historyMessageCount > 0;
}

/**
 * Project again after the `beforePromptBuild` hook when it changed the developer instructions, so the resume-or-rotate
 * decision and the instructions' delivery count what the thread will really carry. Not when the projection failed
 * (the turn then starts a fresh thread, with the hook's instructions).
 *
 * @example
 * ```ts
 * shouldReprojectAfterHooks({ before: "base", after: "policy\n\nbase", projectionFailed: false }); // true
 * ```
 */
export function shouldReprojectAfterHooks(p: { before: string | undefined; after: string | undefined; projectionFailed: boolean }): boolean {
  return !p.projectionFailed && p.after !== undefined && p.after !== p.before;
}

/** The state of a finished attempt that the maintenance rule and the final status depend on. */
export interface SettleFacts {
  aborted: boolean;
  yieldAborted: boolean;
  /** Codex accepted the turn (turn/start succeeded). */
  turnAccepted: boolean;
  record?: Pick<TurnRecord, "codexStatus"> | undefined;
  /** An error ended the attempt before the turn ran (threadStart or turn/start rejected). */
  failedBeforeTurn?: boolean | undefined;
  /** The turn ran but could not be written to the transcript (its pending record keeps it for recovery). */
  mirrorFailed?: boolean | undefined;
  /** A `beforeAgentRun` gate refused the turn before any Codex work started. */
  blocked?: boolean | undefined;
  /** The request was already recorded (`requestId`): the status its earlier attempt recorded. */
  replayed?: TurnStatus | undefined;
}

/** The model call failed: Codex reported a failed, interrupted (not by us) or timed-out turn. */
export function hasPromptError(facts: SettleFacts): boolean {
  if (facts.failedBeforeTurn) return true;
  if (!facts.record) return facts.turnAccepted;
  return facts.record.codexStatus !== "completed";
}

/** Turn maintenance: no prompt error, not aborted, not yield-aborted, finalization succeeded, engine has `maintain`. */
export function canMaintain(facts: SettleFacts & { finalizeOk: boolean; engine: EngineFacts }): boolean {
  return maintenanceSkipReason(facts) === undefined;
}

/** Why maintenance does not run (undefined when it may run). */
export function maintenanceSkipReason(facts: SettleFacts & { finalizeOk: boolean; engine: EngineFacts }): string | undefined {
  if (!facts.engine.active) return "skipped:noEngine";
  if (facts.yieldAborted) return "skipped:yieldAborted";
  if (facts.aborted) return "skipped:aborted";
  if (hasPromptError(facts)) return "skipped:promptError";
  if (!facts.finalizeOk) return "skipped:finalizeFailed";
  if (!facts.engine.hasMaintain) return "skipped:noMaintain";
  return undefined;
}

/**
 * The engine takes durable turns (OpenClaw 2026.8.1+, `EngineFacts.durableTurns`): finalize commits each accepted turn
 * with `commitTurn` and never calls `afterTurn`, `ingestBatch` or `ingest` (OpenClaw >= 2026.9.3 does the same).
 *
 * @example
 * ```ts
 * engineCommitsTurns({ ...facts, active: true, durableTurns: true }); // true
 * engineCommitsTurns({ ...facts, active: true }); // false: finalized the legacy way
 * ```
 */
export function engineCommitsTurns(engine: EngineFacts): boolean {
  return engine.active && engine.durableTurns === true;
}

/**
 * A turn a durable engine commits: one OpenClaw accepts, i.e. no prompt error (Codex completed it), not aborted, not
 * yield-aborted, and in the transcript. OpenClaw discards the turn intent of every other turn
 * (`finalizeAcceptedContextEngineTurn`): its messages stay in the transcript, the engine never advances over them.
 *
 * @example
 * ```ts
 * turnCommittable({ aborted: false, yieldAborted: false, turnAccepted: true, record: { codexStatus: "completed" } }); // true
 * turnCommittable({ aborted: false, yieldAborted: false, turnAccepted: true, record: { codexStatus: "failed" } }); // false
 * ```
 */
export function turnCommittable(facts: SettleFacts): boolean {
  return !facts.aborted && !facts.yieldAborted && !facts.mirrorFailed && !hasPromptError(facts);
}

/**
 * The transcript already holds this request's turn (`requestId`): the attempt returns what it recorded and runs
 * nothing (no engine call, no Codex work).
 *
 * @example
 * ```ts
 * requestAlreadyRecorded({ history: { messages: [], origins: [] } }); // false
 * ```
 */
export function requestAlreadyRecorded(load: Pick<SessionLoadOutput, "recordedRequest">): boolean {
  return load.recordedRequest !== undefined;
}

/**
 * The status recorded with a request's prompt (the attempt's status as it stands when the turn is written: what
 * `settleStatus` says of it, the transcript write assumed to succeed).
 *
 * @example
 * ```ts
 * requestStatusAtMirror({ aborted: false, yieldAborted: false, turnAccepted: true, record: { codexStatus: "completed" } }); // "completed"
 * ```
 */
export function requestStatusAtMirror(facts: SettleFacts): RequestMark["status"] {
  const status = settleStatus({ ...facts, mirrorFailed: false, blocked: false, replayed: undefined });
  return status === "blocked" ? "failed" : status;
}

/** Maintenance runs after the result is returned when the engine asks for background maintenance. */
export function isBackgroundMaintenance(engine: EngineFacts): boolean {
  return engine.turnMaintenanceMode === "background";
}

/**
 * The final status: a turn the admission gate refused is `blocked`; a turn that could not be written to the transcript is failed whatever else happened (the host
 * must know its turn is only in the pending record); then a yield wins over an abort, an abort over a failure, a
 * failure over completion.
 */
export function settleStatus(facts: SettleFacts): TurnStatus {
  // Decided before anything ran: a later abort found nothing to stop, and no turn can have failed.
  if (facts.blocked) return "blocked";
  // An earlier attempt of the same request ran: its recorded status, nothing of this attempt ran.
  if (facts.replayed) return facts.replayed;
  if (facts.mirrorFailed) return "failed";
  if (facts.yieldAborted) return "yieldAborted";
  if (facts.aborted) return "aborted";
  if (hasPromptError(facts)) return "failed";
  return "completed";
}

/** Codex's error code for a turn whose input no longer fit the model's context window. */
export const CONTEXT_WINDOW_EXCEEDED = "contextWindowExceeded";

/**
 * A turn that ended because its input no longer fit the model's context window. Codex 0.169 fails such a turn
 * ("Codex ran out of room in the model's context window") and compacts the thread natively at the start of the next
 * one (observed); an engine that owns compaction should compact first (see {@link isOverflowCompactionDue}).
 *
 * @example
 * ```ts
 * turnOverflowedContext({ error: { message: "…", codexErrorInfo: "contextWindowExceeded" } }); // true
 * ```
 */
export function turnOverflowedContext(record: { error?: { codexErrorInfo?: string | undefined } | undefined }): boolean {
  return record.error?.codexErrorInfo === CONTEXT_WINDOW_EXCEEDED;
}

/**
 * After an overflow, the accordion compacts in the engine before the next turn whatever the last reported usage says,
 * and the turn then starts a fresh thread from the engine's compacted view instead of letting Codex compact the old
 * thread its lossy way. Codex does report the usage as nearly full after an overflow (observed: last-call total 189,658
 * of a 190,000 window, input 0), but whether that reaches `contextThreshold` is incidental (1 is not reached).
 *
 * @example
 * ```ts
 * isOverflowCompactionDue({ enabled: true, contextThreshold: 0.9 }, true); // true
 * isOverflowCompactionDue({ enabled: false, contextThreshold: 0.9 }, true); // false: Codex's native compaction heals it
 * ```
 */
export function isOverflowCompactionDue(accordion: AccordionFacts | undefined, contextOverflowed: boolean | undefined): boolean {
  return accordion?.enabled === true && contextOverflowed === true;
}

/**
 * The accordion cadence: compact in the engine before the turn when the bound thread's last reported usage reached
 * `contextThreshold` of the model's context window. No usage or no window known: no compaction.
 *
 * @example
 * ```ts
 * isAccordionDue({ enabled: true, contextThreshold: 0.9 }, { totalTokens: 171_000, modelContextWindow: 190_000 }); // true
 * ```
 */
export function isAccordionDue(accordion: AccordionFacts | undefined, lastUsage: LastUsageFacts | undefined, contextWindow?: number): boolean {
  return accordionReason(accordion, lastUsage, contextWindow).due;
}

/** The accordion decision with its reason (the `compaction.ratio` log field and `evaluateAccordion` use it). */
export function accordionReason(
  accordion: AccordionFacts | undefined,
  lastUsage: LastUsageFacts | undefined,
  contextWindow?: number,
): { due: boolean; reason: "disabled" | "noUsage" | "noContextWindow" | "belowThreshold" | "thresholdReached"; ratio?: number | undefined } {
  if (!accordion?.enabled) return { due: false, reason: "disabled" };
  if (!lastUsage || !Number.isFinite(lastUsage.totalTokens)) return { due: false, reason: "noUsage" };
  const window = lastUsage.modelContextWindow ?? contextWindow;
  if (window === undefined || !Number.isFinite(window) || window <= 0) return { due: false, reason: "noContextWindow" };
  const ratio = lastUsage.totalTokens / window;
  // IEEE division is correctly rounded, so a ratio exactly at the threshold (171000/190000) equals the parsed 0.9.
  return ratio >= accordion.contextThreshold ? { due: true, reason: "thresholdReached", ratio } : { due: false, reason: "belowThreshold", ratio };
}

/**
 * Finalize may use "history + this turn" without re-reading the transcript only when this attempt appended every
 * message of the turn in one write and the file then held exactly the loaded history plus those entries.
 *
 * @example
 * ```ts
 * mirrorIsTailOfHistory({ historyEntryCount: 10, appended: 2, entryCountAfter: 12, turnMessages: 2 }); // true
 * ```
 */
export function mirrorIsTailOfHistory(f: {
  historyEntryCount: number | undefined;
  appended: number;
  entryCountAfter: number | undefined;
  turnMessages: number;
}): boolean {
  if (f.historyEntryCount === undefined || f.entryCountAfter === undefined) return false;
  return f.appended === f.turnMessages && f.appended > 0 && f.entryCountAfter === f.historyEntryCount + f.appended;
}

/** A re-read transcript can serve as finalize's snapshot only if it holds this turn. */
export function historyHoldsTurn(history: Pick<HistoryOutput, "origins">, turnId: string): boolean {
  return history.origins.some((o) => o?.turnId === turnId);
}

/** Errors of `resumeThread` that mean "this thread cannot be resumed" (start a fresh one), not "Codex is down". */
export const RESUME_FAILED_CODE = "THREAD_RESUME_FAILED";

/** A failed resume falls back to a fresh thread once; a second failure (or any other error) fails the attempt. */
export function shouldStartFreshAfterResumeFailure(errorCode: string | undefined, alreadyFellBack: boolean): boolean {
  return errorCode === RESUME_FAILED_CODE && !alreadyFellBack;
}

/** Attribution of a block that no gate decided: the gate itself failed (threw, timed out, answered something malformed). */
export const GATE_FAILURE_ATTRIBUTION = "beforeAgentRun";

/**
 * The user-facing text of a refused turn, as OpenClaw renders a `before_agent_run` block (`resolveBlockMessage`): the
 * gate's own user-facing message when it gave one, always attributed. A gate's internal reason never appears here.
 *
 * @example
 * ```ts
 * blockedTurnText("Too long", "length-guard"); // "Your message could not be sent: Too long (blocked by length-guard)"
 * blockedTurnText(undefined, "beforeAgentRun"); // "Your message could not be sent: blocked by beforeAgentRun"
 * ```
 */
export function blockedTurnText(message: string | undefined, blockedBy: string): string {
  const text = message?.trim() ?? "";
  const by = blockedBy.trim();
  if (text) return by ? `Your message could not be sent: ${text} (blocked by ${by})` : `Your message could not be sent: ${text}`;
  return by ? `Your message could not be sent: blocked by ${by}` : "Your message could not be sent: blocked";
}

/**
 * The admission gate runs when one is registered and has not admitted this attempt yet: a turn re-projected after a
 * refused resume is the same turn, so the gate is not asked (or charged) again.
 *
 * @example
 * ```ts
 * isAdmissionDue(true, false); // true
 * isAdmissionDue(true, true); // false: already admitted
 * ```
 */
export function isAdmissionDue(hasGate: boolean, admitted: boolean): boolean {
  return hasGate && !admitted;
}

/** The admission gate refused the turn (its output says so). */
export function isTurnRefused(output: { admitted: boolean }): boolean {
  return !output.admitted;
}

/**
 * Native mode: the projection asks for a `thread/revert` before the turn (`threadStart.reverting`).
 *
 * @example
 * ```ts
 * nativeRevertDue(projection); // true when projection.nativeSync.revertBeforeTurnId is set on a resumed thread
 * ```
 */
export function nativeRevertDue(projection: Pick<ProjectionOutput, "nativeSync" | "thread"> | undefined): boolean {
  return projection?.thread.action === "resume" && projection.nativeSync?.revertBeforeTurnId !== undefined;
}

/**
 * Native mode: the projection has items to inject before the turn (`threadStart.injecting`).
 *
 * @example
 * ```ts
 * nativeInjectDue({ nativeSync: { items: [] } as never }); // false
 * ```
 */
export function nativeInjectDue(projection: Pick<ProjectionOutput, "nativeSync"> | undefined): boolean {
  return (projection?.nativeSync?.items.length ?? 0) > 0;
}

/**
 * Native mode in `result.projection`: the sync's decision and counts, from the projection and what the sync did.
 *
 * @example
 * ```ts
 * nativeProjectionSummary(projection, { reverted: true, injectedItems: 3, injectedBytes: 900 });
 * ```
 */
export function nativeProjectionSummary(
  projection: Pick<ProjectionOutput, "nativeSync" | "thread">,
  done: NativeSyncResult | undefined,
): NativeProjectionSummary | undefined {
  const sync = projection.nativeSync;
  if (!sync) return undefined;
  return {
    decision: sync.reason,
    reverted: done?.reverted ?? false,
    keptTurns: sync.counts.keptTurns,
    revertedTurns: done?.reverted ? sync.counts.revertedTurns : 0,
    injectedItems: done?.injectedItems ?? 0,
    injectedBytes: done?.injectedBytes ?? 0,
    staleBytes: sync.counts.staleBytes,
    rotated: projection.thread.action === "start",
  };
}
