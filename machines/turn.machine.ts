/**
 * One Codex app-server turn as a pure XState v5 statechart. No I/O happens here: every effect is a named actor
 * (see the table in `turn.contract.ts`) that a host binds with `turnMachine.provide({ actors })`.
 *
 * Lifecycle: session (lock, then recovery when a crashed attempt left a pending record) -> loadHistory -> bootstrap
 * -> compactBeforeTurn (accordion, when due) -> assemble -> project -> hooks (projecting again when the hook changed the
 * developer instructions; then the admission gate, which may refuse the turn: recordingBlock -> blocked) -> threadStart (resume, or start; a failed resume goes back to project for a fresh thread)
 * -> turnRunning -> mirror (pending record, then the transcript) -> finalize (snapshot choice, then the engine) ->
 * maintain, ending in completed | failed | aborted | yieldAborted | blocked. Every decision is a guard here; the rules live in
 * `rules.ts`.
 */
import { assign, fromCallback, fromPromise, sendTo, setup, type DoneActorEvent } from "xstate";
import type { AgentMessage } from "../src/context-engine/types.js";
import {
  GATE_FAILURE_ATTRIBUTION,
  blockedTurnText,
  bootstrapSkipReason,
  canMaintain,
  engineCommitsTurns,
  historyHoldsTurn,
  requestAlreadyRecorded,
  requestStatusAtMirror,
  isAccordionDue,
  isAssembleEmpty,
  isOverflowCompactionDue,
  isAdmissionDue,
  isBackgroundMaintenance,
  isTurnRefused,
  maintenanceSkipReason,
  mirrorIsTailOfHistory,
  needsRecovery,
  turnLeftInFlight,
  settleStatus,
  turnCommittable,
  shouldAssemble,
  shouldBootstrap,
  shouldReprojectAfterHooks,
  shouldWarnAssembleEmpty,
  shouldStartFreshAfterResumeFailure,
  turnOverflowedContext,
  nativeInjectDue,
  nativeProjectionSummary,
  nativeRevertDue,
  type SettleFacts,
} from "./rules.js";
import type {
  AdmissionInput,
  AdmissionOutput,
  AssembleOutput,
  BlockedTurnRecordOutput,
  BootstrapOutput,
  CompactBeforeTurnOutput,
  CommitTurnInput,
  CommitTurnOutput,
  EngineOutcomes,
  FinalizeInput,
  FinalizeOutput,
  FinalizeSnapshotSource,
  LastUsageFacts,
  LockOutput,
  RecoveryOutput,
  RecordedRequestOutput,
  RequestMark,
  CutTurnOutput,
  SessionLoadOutput,
  HistoryOutput,
  HooksOutput,
  MaintainOutput,
  MirrorOutput,
  NativeCompactionRecord,
  NativeSyncOutput,
  NativeSyncResult,
  PreparedMessagesOutput,
  ProjectInput,
  ProjectionOutput,
  RunTurnEmitted,
  RunTurnInput,
  RunTurnReceived,
  SteerImage,
  ThreadPlan,
  ThreadStartOutput,
  TurnError,
  TurnUsage,
  TurnEvent,
  TurnMachineInput,
  TurnMachineOutput,
  TurnBlock,
  TurnPhase,
  TurnRecord,
} from "./turn.contract.js";

/**
 * What the session step and the history load found: facts of the session, fixed once the lock is held (the binding is
 * dropped when the attempt must rotate the thread).
 */
export interface SessionFacts {
  /** The session file existed before this attempt (as seen once the lock was held). */
  hadSessionFile: boolean;
  /** The thread binding as loaded (opaque here; the projection reads it). Dropped when the thread must rotate. */
  binding?: unknown;
  lastUsage?: LastUsageFacts | undefined;
  /** The bound thread's last turn overflowed the model's context window (`contextWindowExceeded`). */
  contextOverflowed: boolean;
  /** What the session lock step found (a pending record, a turn left in flight). */
  lockFacts?: LockOutput | undefined;
  recovery?: RecoveryOutput | undefined;
  /** What became of a turn an earlier attempt left in flight, when there was one. */
  cutTurn?: CutTurnOutput | undefined;
  /** With `requestId`: the transcript already held that request; this attempt returns its recorded outcome. */
  replayed?: RequestMark | undefined;
}

/** What this attempt sends to Codex, as the lifecycle settles it: the engine's view, the projection, the prompt. */
export interface TurnRequest {
  assembled?: AssembleOutput | undefined;
  projection?: ProjectionOutput | undefined;
  promptText: string;
  developerInstructions?: string | undefined;
  /** The model a `beforeModelResolve` hook chose for this turn. */
  model?: string | undefined;
}

/** The admission gate's decision. */
export interface TurnAdmission {
  /** The gate admitted this attempt (a re-projection after a refused resume does not ask it again). */
  admitted: boolean;
  /** The gate refused the turn (or failed, which refuses it too), and the redacted message recorded for it. */
  block?: TurnBlock | undefined;
  blockedUserMessage?: AgentMessage | undefined;
}

/** The Codex thread of this attempt, and why it must be a fresh one whatever the binding says. */
export interface TurnThread {
  id?: string | undefined;
  /** Native mode: what the sync before the turn did (revert, inject). */
  nativeSync?: NativeSyncResult | undefined;
  /** The accordion compacted the engine's view: the next thread starts fresh. */
  rotate: boolean;
  /** The bound thread could not be resumed: this attempt re-projected for a fresh thread (once). */
  resumeFellBack: boolean;
}

/** The Codex turn: its id once accepted, its record once ended, and its native compactions. */
export interface TurnProgress {
  id?: string | undefined;
  accepted: boolean;
  record?: TurnRecord | undefined;
  compactions: NativeCompactionRecord[];
}

/** How the attempt went so far: the facts the settle rules read (see `settleFacts`). */
export interface TurnOutcomeFlags {
  aborted: boolean;
  yieldAborted: boolean;
  failedBeforeTurn: boolean;
  mirrorOk: boolean;
  mirrorFailed: boolean;
  finalizeOk: boolean;
}

/** What the persistence steps produced: the mirror's result and the snapshot finalize used. */
export interface TurnPersistence {
  mirror?: MirrorOutput | undefined;
  /** finalize's session snapshot: where it came from, and the re-read history when it came from a re-read. */
  finalizeSource?: FinalizeSnapshotSource | undefined;
  finalizeHistory?: HistoryOutput | undefined;
}

/**
 * The machine's context: JSON-friendly, so a persisted snapshot and the inspector can carry it.
 *
 * Grouped, and kept at {@link MAX_CONTEXT_KEYS} top-level keys or fewer, because XState v5's `assign` copies the
 * context with `Object.assign({}, context, update)`, and V8 turns an object built that way into a slow dictionary
 * object from 20 properties on: every later assign and every read of the context then goes through a hash table
 * (measured: the statechart's own cost per turn 0.45 -> 0.31 ms without an engine, 0.66 -> 0.46 ms with one; docs/benchmarks.md §3).
 */
export interface TurnContext {
  input: TurnMachineInput;
  history: HistoryOutput;
  /** Mirrored history length after bootstrap: `messages.slice(prePromptMessageCount)` is this turn. */
  prePromptMessageCount: number;
  session: SessionFacts;
  request: TurnRequest;
  admission: TurnAdmission;
  thread: TurnThread;
  turn: TurnProgress;
  outcome: TurnOutcomeFlags;
  persistence: TurnPersistence;
  engine: EngineOutcomes;
  trace: string[];
  warnings: string[];
  /** Steers Codex did not take, to send as follow-up turns: their texts and (parallel) their images. */
  followUps: { texts: string[]; images: SteerImage[][] };
  backgroundMaintenance: boolean;
  error?: TurnError | undefined;
}

/**
 * The most top-level keys {@link TurnContext} may have: V8 keeps an object copied by `Object.assign` onto `{}` fast up
 * to 19 properties (Node 20 and 24). The model-based path suite checks every context it reaches against it.
 */
export const MAX_CONTEXT_KEYS = 19;

const notProvided = (name: string) => () => {
  throw new Error(`turn machine actor not provided: ${name}`);
};

function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === "string" ? error : "unknown error";
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

function toTurnError(phase: TurnPhase, error: unknown): TurnError {
  const code = errorCode(error);
  return code ? { phase, message: errorMessage(error), code } : { phase, message: errorMessage(error) };
}

/** What `projectContext` gets, in `project` and (with the hook's instructions) in `hooks.reprojecting`. */
function projectInput(context: TurnContext): ProjectInput {
  return {
    prompt: context.input.prompt,
    history: context.history,
    assembled: context.request.assembled,
    // After an accordion compaction or a failed resume the bound thread is not used: project for a fresh one.
    binding: context.thread.rotate || context.thread.resumeFellBack ? undefined : context.session.binding,
    ...(context.thread.resumeFellBack ? { freshThreadReason: "resumeFailed" } : context.thread.rotate ? { freshThreadReason: "accordion" } : {}),
  };
}

function settleFacts(context: TurnContext): SettleFacts {
  return {
    aborted: context.outcome.aborted,
    yieldAborted: context.outcome.yieldAborted,
    turnAccepted: context.turn.accepted,
    record: context.turn.record,
    failedBeforeTurn: context.outcome.failedBeforeTurn,
    mirrorFailed: context.outcome.mirrorFailed,
    blocked: context.admission.block !== undefined,
    replayed: context.session.replayed?.status,
  };
}

/** What the prompt's entry and the pending record carry with `requestId`: the id and the attempt's status so far. */
function requestMark(context: TurnContext): { request?: RequestMark | undefined } {
  const id = context.input.requestId;
  return id === undefined ? {} : { request: { id, status: requestStatusAtMirror(settleFacts(context)) } };
}

/** The session snapshot finalize hands the engine (see the `finalize` state's guards). */
function finalizeInput(context: TurnContext): FinalizeInput {
  const record = context.turn.record!;
  const source = context.persistence.finalizeSource ?? "fallback";
  const messages =
    source === "reread" && context.persistence.finalizeHistory
      ? context.persistence.finalizeHistory.messages
      : [...context.history.messages, ...record.messagesSnapshot];
  return { record, messages, source, prePromptMessageCount: context.prePromptMessageCount };
}

function buildOutput(context: TurnContext): TurnMachineOutput {
  const output: TurnMachineOutput = {
    status: settleStatus(settleFacts(context)),
    engine: context.engine,
    trace: context.trace,
    warnings: context.warnings,
    followUps: context.followUps.texts,
    followUpImages: context.followUps.images,
    backgroundMaintenance: context.backgroundMaintenance,
  };
  if (context.thread.id) output.threadId = context.thread.id;
  if (context.turn.id) output.turnId = context.turn.id;
  if (context.turn.record) output.record = context.turn.record;
  if (context.error) output.error = context.error;
  if (context.session.cutTurn) output.cutTurn = context.session.cutTurn;
  if (context.input.requestId !== undefined) {
    const replayed = context.session.replayed;
    output.request = { id: context.input.requestId, replayed: replayed !== undefined, ...(replayed?.cut ? { cut: true } : {}) };
  }
  if (context.admission.block) output.blocked = { ...context.admission.block, ...(context.admission.blockedUserMessage ? { userMessage: context.admission.blockedUserMessage } : {}) };
  if (context.request.projection) {
    const { mode, reason, entriesSent, bytes, staleTokens } = context.request.projection;
    output.projection = { mode, reason, entriesSent, bytes, ...(staleTokens !== undefined ? { staleTokens } : {}) };
    const native = nativeProjectionSummary(context.request.projection, context.thread.nativeSync);
    if (native) output.projection.native = native;
  }
  return output;
}

/** A record for a turn Codex accepted but did not finish within the interrupt grace period. */
function timedOutRecord(context: TurnContext): TurnRecord {
  return {
    threadId: context.thread.id ?? "",
    turnId: context.turn.id ?? "",
    codexStatus: "timedOut",
    assistantText: "",
    messagesSnapshot: [{ role: "user", content: context.input.prompt, timestamp: 0 }],
    compactions: context.turn.compactions,
    error: { message: "turn did not end within the interrupt grace period" },
  };
}

type Phase = { phase: TurnPhase };

export const turnMachine = setup({
  types: {
    context: {} as TurnContext,
    events: {} as TurnEvent,
    input: {} as TurnMachineInput,
    output: {} as TurnMachineOutput,
  },
  actors: {
    acquireSessionLock: fromPromise<LockOutput, { sessionFile: string }>(notProvided("acquireSessionLock")),
    recoverSession: fromPromise<RecoveryOutput, { sessionFile: string }>(notProvided("recoverSession")),
    recoverCutTurn: fromPromise<CutTurnOutput, { sessionFile: string }>(notProvided("recoverCutTurn")),
    readHistory: fromPromise<SessionLoadOutput, { sessionFile: string }>(notProvided("readHistory")),
    rereadHistory: fromPromise<HistoryOutput, { sessionFile: string }>(notProvided("rereadHistory")),
    rereadHistoryForFinalize: fromPromise<HistoryOutput, { sessionFile: string }>(notProvided("rereadHistoryForFinalize")),
    bootstrapEngine: fromPromise<BootstrapOutput, { sessionFile: string }>(notProvided("bootstrapEngine")),
    compactEngine: fromPromise<CompactBeforeTurnOutput, { lastUsage?: LastUsageFacts | undefined; contextOverflowed: boolean }>(notProvided("compactEngine")),
    assembleContext: fromPromise<AssembleOutput, { history: HistoryOutput; prompt: string }>(notProvided("assembleContext")),
    projectContext: fromPromise<
      ProjectionOutput,
      ProjectInput
    >(notProvided("projectContext")),
    runPromptHooks: fromPromise<
      HooksOutput,
      { promptText: string; developerInstructions?: string | undefined; history: HistoryOutput }
    >(notProvided("runPromptHooks")),
    admitTurn: fromPromise<AdmissionOutput, AdmissionInput>(notProvided("admitTurn")),
    recordBlockedTurn: fromPromise<BlockedTurnRecordOutput, TurnBlock>(notProvided("recordBlockedTurn")),
    resumeThread: fromPromise<ThreadStartOutput, { plan: ThreadPlan; developerInstructions?: string | undefined }>(notProvided("resumeThread")),
    startThread: fromPromise<ThreadStartOutput, { plan: ThreadPlan; developerInstructions?: string | undefined }>(notProvided("startThread")),
    revertThread: fromPromise<NativeSyncResult, { threadId: string; sync: NativeSyncOutput }>(notProvided("revertThread")),
    injectItems: fromPromise<NativeSyncResult, { threadId: string; sync: NativeSyncOutput; fresh: boolean; reverted: boolean }>(notProvided("injectItems")),
    runTurn: fromCallback<RunTurnReceived, RunTurnInput, RunTurnEmitted>(notProvided("runTurn")),
    prepareTranscriptMessages: fromPromise<PreparedMessagesOutput, { record: TurnRecord }>(notProvided("prepareTranscriptMessages")),
    recordPendingFinalize: fromPromise<void, { record: TurnRecord; prePromptMessageCount: number; request?: RequestMark | undefined }>(notProvided("recordPendingFinalize")),
    mirrorTranscript: fromPromise<MirrorOutput, { record: TurnRecord; request?: RequestMark | undefined }>(notProvided("mirrorTranscript")),
    finalizeEngine: fromPromise<FinalizeOutput, FinalizeInput>(notProvided("finalizeEngine")),
    commitEngineTurn: fromPromise<CommitTurnOutput, CommitTurnInput>(notProvided("commitEngineTurn")),
    clearPendingRecord: fromPromise<void, { turnId: string }>(notProvided("clearPendingRecord")),
    maintainEngine: fromPromise<MaintainOutput, { record?: TurnRecord | undefined }>(notProvided("maintainEngine")),
  },
  delays: {
    interruptGrace: 10_000,
  },
  guards: {
    crashedAttemptPending: (_, params: { output: LockOutput }) => needsRecovery(params.output),
    requestAlreadyRecorded: (_, params: { output: SessionLoadOutput }) => requestAlreadyRecorded(params.output),
    turnLeftInFlight: (_, params: { lock: LockOutput | undefined }) => params.lock !== undefined && turnLeftInFlight(params.lock),
    // Read from the load's output: guards run before the transition's actions store it.
    shouldBootstrap: ({ context }, params: { output: SessionLoadOutput }) =>
      shouldBootstrap(context.input.engine, params.output.sessionFileExisted ?? context.session.hadSessionFile),
    shouldAssemble: ({ context }) => shouldAssemble(context.input.engine),
    accordionDue: ({ context }) => shouldAssemble(context.input.engine) && isAccordionDue(context.input.accordion, context.session.lastUsage),
    overflowCompactionDue: ({ context }) => shouldAssemble(context.input.engine) && isOverflowCompactionDue(context.input.accordion, context.session.contextOverflowed),
    turnOverflowedContext: (_, params: { record: TurnRecord }) => turnOverflowedContext(params.record),
    compactedBeforeTurn: (_, params: { output: CompactBeforeTurnOutput }) => params.output.compacted,
    hasPromptHooks: ({ context }) => context.input.hasPromptHooks,
    admissionDue: ({ context }) => isAdmissionDue(context.input.hasAdmissionGate === true, context.admission.admitted),
    // The hooks state runs when there is a prompt hook or an admission gate to run before the thread.
    hasHooksBeforeThread: ({ context }) => context.input.hasPromptHooks || isAdmissionDue(context.input.hasAdmissionGate === true, context.admission.admitted),
    turnRefused: (_, params: { output: AdmissionOutput }) => isTurnRefused(params.output),
    hasMessageWriteHooks: ({ context }) => context.input.hasMessageWriteHooks === true,
    hookChangedDeveloperInstructions: ({ context }, params: { output: HooksOutput }) =>
      shouldReprojectAfterHooks({
        before: context.request.developerInstructions,
        after: params.output.developerInstructions,
        projectionFailed: context.request.projection?.reason === "projectionFailed",
      }),
    assembledEmpty: (_, params: { output: AssembleOutput }) => isAssembleEmpty(params.output),
    assembledEmptyDespiteHistory: ({ context }, params: { output: AssembleOutput }) =>
      shouldWarnAssembleEmpty(params.output, context.history.messages.length),
    nativeRevertDue: ({ context }) => nativeRevertDue(context.request.projection),
    nativeInjectDue: ({ context }) => nativeInjectDue(context.request.projection),
    planResumes: ({ context }) => context.request.projection?.thread.action === "resume" && Boolean(context.request.projection.thread.threadId),
    resumeFailedFallBackToFresh: ({ context }, params: { error: unknown }) =>
      shouldStartFreshAfterResumeFailure(errorCode(params.error), context.thread.resumeFellBack),
    turnAccepted: ({ context }) => context.turn.accepted,
    isAborting: ({ context }) => context.outcome.aborted || context.outcome.yieldAborted,
    mirrorIsTail: ({ context }) =>
      mirrorIsTailOfHistory({
        historyEntryCount: context.history.entryCount,
        appended: context.persistence.mirror?.appended ?? 0,
        entryCountAfter: context.persistence.mirror?.entryCount,
        turnMessages: context.turn.record?.messagesSnapshot.length ?? 0,
      }),
    rereadHoldsTurn: ({ context }, params: { output: HistoryOutput }) => historyHoldsTurn(params.output, context.turn.record?.turnId ?? ""),
    // Durable turns (OpenClaw's commitTurn): an engine that declares them is committed, never afterTurn'd.
    engineCommitsTurns: ({ context }) => engineCommitsTurns(context.input.engine) && turnCommittable(settleFacts(context)),
    engineSkipsTurnCommit: ({ context }) => engineCommitsTurns(context.input.engine) && !turnCommittable(settleFacts(context)),
    canMaintainForeground: ({ context }) =>
      canMaintain({ ...settleFacts(context), finalizeOk: context.outcome.finalizeOk, engine: context.input.engine }) &&
      !isBackgroundMaintenance(context.input.engine),
    canMaintainBackground: ({ context }) =>
      canMaintain({ ...settleFacts(context), finalizeOk: context.outcome.finalizeOk, engine: context.input.engine }) &&
      isBackgroundMaintenance(context.input.engine),
    settlesBlocked: ({ context }) => settleStatus(settleFacts(context)) === "blocked",
    settlesYieldAborted: ({ context }) => settleStatus(settleFacts(context)) === "yieldAborted",
    settlesAborted: ({ context }) => settleStatus(settleFacts(context)) === "aborted",
    settlesFailed: ({ context }) => settleStatus(settleFacts(context)) === "failed",
  },
  actions: {
    /** Host hook: one structured log event per lifecycle step (ids and counts only). */
    logLifecycle: (_, _params: { event: string; [key: string]: unknown }) => {},
    /** Host hook: start `maintain` after the result is returned, tracked by the host. */
    scheduleBackgroundMaintenance: () => {},
    /** Host hook: Codex accepted the turn, so the thread holds what was injected: record it in the binding (no fsync). */
    persistAcceptedBinding: (_, _params: { threadId: string; turnId: string; prompt: string; projection?: ProjectionOutput | undefined; freshThread: boolean; requestId?: string | undefined }) => {},
    /**
     * Host hook: the turn's pending record is written, so the binding's in-flight marker (set on accept, with the
     * original prompt, so a crash before this point leaves the turn recoverable from Codex's thread) goes.
     */
    clearTurnInFlight: (_, _params: { turnId: string }) => {},
    /**
     * Host hook: the ended turn's usage goes to the binding (no fsync). The host writes it while the mirror waits for its
     * fsync, when the event loop is otherwise idle (a write during the turn competes with Codex for the CPU instead).
     */
    persistUsage: (_, _params: { threadId: string; usage?: TurnUsage | undefined }) => {},
    /** Bound by the host: the turn overflowed the context window; the binding says so for the next turn's accordion. */
    persistContextOverflow: (_, _params: { threadId: string; turnId: string }) => {},
    /** Host hook: Codex compacted the thread natively: what it held must be re-sent (durable). */
    persistNativeCompaction: (_, _params: { compaction: NativeCompactionRecord; preTurn: boolean }) => {},
    enterState: assign({ trace: ({ context }, params: { state: string }) => [...context.trace, params.state] }),
    storeRecovery: assign(({ context }, params: { output: RecoveryOutput }) => ({ session: { ...context.session, recovery: params.output } })),
    storeLockFacts: assign(({ context }, params: { output: LockOutput }) => ({ session: { ...context.session, lockFacts: params.output } })),
    storeCutTurn: assign(({ context }, params: { output: CutTurnOutput }) => ({
      session: { ...context.session, cutTurn: params.output },
      warnings:
        params.output.outcome === "notInThread" || params.output.outcome === "unreadable"
          ? [...context.warnings, `an earlier attempt's turn ${params.output.turnId} was cut short and Codex could not give it back (${params.output.outcome}); it is not in the transcript`]
          : context.warnings,
    })),
    warnEndedWaitingForLock: assign(({ context }) => ({
      warnings: [...context.warnings, "ended while waiting for the session lock; nothing ran"],
    })),
    storeSession: assign(({ context }, params: { output: SessionLoadOutput }) => ({
      session: {
        ...context.session,
        hadSessionFile: params.output.sessionFileExisted ?? context.session.hadSessionFile,
        binding: params.output.binding,
        lastUsage: params.output.lastUsage,
        contextOverflowed: params.output.contextOverflowed === true,
      },
      history: params.output.history,
      prePromptMessageCount: params.output.history.messages.length,
    })),
    // The request already ran: its recorded turn is this attempt's outcome; nothing of the lifecycle runs.
    storeReplay: assign(({ context }, params: { output: RecordedRequestOutput }) => {
      const { mark, record } = params.output;
      const error: TurnError | undefined =
        mark.status === "completed"
          ? undefined
          : mark.cut
            ? { phase: "loadHistory", code: "REQUEST_TURN_CUT", message: `request ${mark.id} already ran: its turn ${record.turnId} was cut short by a crash and recovered from Codex's thread (not run again)` }
            : { phase: "loadHistory", code: "REQUEST_REPLAYED", message: `request ${mark.id} already ran: its turn ${record.turnId} ended ${mark.status} (not run again)` };
      return {
        session: { ...context.session, replayed: mark },
        thread: { ...context.thread, id: record.threadId },
        turn: { ...context.turn, id: record.turnId, record },
        engine: { bootstrap: "skipped:replayed", assemble: "skipped:replayed", finalize: "skipped:replayed", maintenance: "skipped:replayed" },
        ...(error ? { error } : {}),
      };
    }),
    markBootstrapSkipped: assign({
      engine: ({ context }) => ({
        ...context.engine,
        bootstrap: bootstrapSkipReason(context.input.engine, context.session.hadSessionFile),
      }),
    }),
    markAssembleSkipped: assign({ engine: ({ context }) => ({ ...context.engine, assemble: "skipped:noEngine" }) }),
    storeBootstrap: assign(({ context }, params: { output: BootstrapOutput }) => ({
      history: { messages: params.output.messages, origins: params.output.origins, entryCount: params.output.entryCount },
      prePromptMessageCount: params.output.messages.length,
      engine: { ...context.engine, bootstrap: "ran" },
    })),
    warnBootstrapFailed: assign(({ context }, params: { message: string }) => ({
      engine: { ...context.engine, bootstrap: "failed" },
      warnings: [...context.warnings, `bootstrap failed (${params.message}); continuing without it`],
    })),
    // The engine compacted its view: the bound thread still holds the uncompacted one, so the turn rotates threads.
    markRotateThread: assign(({ context }) => ({ thread: { ...context.thread, rotate: true } })),
    warnCompactionFailed: assign(({ context }, params: { reason: string }) => ({
      warnings: [...context.warnings, `accordion compaction failed (${params.reason}); the turn runs on the uncompacted thread`],
    })),
    storeReloadedHistory: assign((_, params: { output: HistoryOutput }) => ({
      history: params.output,
      prePromptMessageCount: params.output.messages.length,
    })),
    warnReloadFailed: assign(({ context }) => ({
      warnings: [...context.warnings, "history re-read after compaction failed; assembling from the history read before it"],
    })),
    storeAssembled: assign(({ context }, params: { output: AssembleOutput }) => ({
      request: { ...context.request, assembled: params.output },
      engine: { ...context.engine, assemble: "ran" },
    })),
    // An empty result still carries its systemPromptAddition (projection falls back to the raw prompt).
    storeAssembleEmpty: assign(({ context }, params: { output: AssembleOutput }) => ({
      request: {
        ...context.request,
        assembled: params.output.systemPromptAddition?.trim()
          ? { messages: [], estimatedTokens: 0, systemPromptAddition: params.output.systemPromptAddition }
          : undefined,
      },
      engine: { ...context.engine, assemble: "fallback" },
    })),
    warnAssembleEmpty: assign(({ context }) => ({
      warnings: [...context.warnings, "assemble returned no messages; using the unassembled prompt"],
    })),
    warnAssembleFailed: assign(({ context }, params: { message: string }) => ({
      request: { ...context.request, assembled: undefined },
      engine: { ...context.engine, assemble: "failed" },
      warnings: [...context.warnings, `assemble failed (${params.message}); using the unassembled prompt`],
    })),
    storeProjection: assign(({ context }, params: { output: ProjectionOutput }) => ({
      request: {
        ...context.request,
        projection: params.output,
        promptText: params.output.promptText,
        developerInstructions: params.output.developerInstructions,
      },
    })),
    warnProjectionFailed: assign(({ context }) => {
      // Without a projection we cannot know whether the bound thread is compatible: a fresh thread is the safe choice.
      const projection: ProjectionOutput = {
        mode: "none",
        reason: "projectionFailed",
        promptText: context.input.prompt,
        thread: { action: "start", reason: "projectionFailed" },
        entriesSent: 0,
        bytes: Buffer.byteLength(context.input.prompt, "utf8"),
      };
      return {
        request: { ...context.request, projection, promptText: context.input.prompt, developerInstructions: undefined },
        warnings: [...context.warnings, "projection failed; sending the original prompt on a fresh thread"],
      };
    }),
    storeHooks: assign(({ context }, params: { output: HooksOutput }) => ({
      request: {
        ...context.request,
        promptText: params.output.promptText,
        developerInstructions: params.output.developerInstructions,
        ...(params.output.model !== undefined ? { model: params.output.model } : {}),
      },
    })),
    // The hook's prompt text stays: the projection redone for its developer instructions changes the thread plan,
    // the entries and the instructions' delivery, not the prompt.
    storeReprojection: assign(({ context }, params: { output: ProjectionOutput }) => ({
      request: { ...context.request, projection: params.output, developerInstructions: params.output.developerInstructions },
    })),
    warnReprojectionFailed: assign(({ context }, params: { message: string }) => ({
      request: {
        ...context.request,
        projection: {
          mode: "none",
          reason: "projectionFailed",
          promptText: context.request.promptText,
          thread: { action: "start", reason: "projectionFailed" },
          entriesSent: 0,
          bytes: Buffer.byteLength(context.request.promptText, "utf8"),
        } satisfies ProjectionOutput,
      },
      warnings: [...context.warnings, `projection for the hook's developer instructions failed (${params.message}); sending the prompt on a fresh thread`],
    })),
    warnHooksFailed: assign(({ context }, params: { message: string }) => ({
      warnings: [...context.warnings, `beforePromptBuild hook failed (${params.message}); keeping the unmodified prompt`],
    })),
    // Nothing of the turn ran: no finalize, no maintenance; the error says why (agentEnd reports it as OpenClaw's does).
    storeBlock: assign(({ context }, params: { block: TurnBlock }) => ({
      admission: { ...context.admission, block: params.block },
      error: { phase: "hooks" as const, message: params.block.message, code: "turnBlocked" },
      engine: { ...context.engine, finalize: "skipped:blocked", maintenance: "skipped:blocked" },
    })),
    // A gate that cannot decide must not admit the turn (OpenClaw's fail-closed `before_agent_run`).
    warnGateFailed: assign(({ context }, params: { message: string }) => ({
      warnings: [...context.warnings, `beforeAgentRun hook failed (${params.message}); the turn is blocked`],
    })),
    markAdmitted: assign(({ context }) => ({ admission: { ...context.admission, admitted: true } })),
    storeBlockedUserMessage: assign(({ context }, params: { output: BlockedTurnRecordOutput }) => ({
      admission: { ...context.admission, blockedUserMessage: params.output.userMessage },
    })),
    warnBlockNotRecorded: assign(({ context }, params: { message: string }) => ({
      warnings: [...context.warnings, `the blocked turn could not be recorded in the transcript (${params.message})`],
    })),
    storeThread: assign(({ context }, params: { output: ThreadStartOutput }) => ({ thread: { ...context.thread, id: params.output.threadId } })),
    storeNativeSync: assign(({ context }, params: { output: NativeSyncResult }) => ({ thread: { ...context.thread, nativeSync: params.output } })),
    // Codex no longer knows the bound thread: forget the binding and project again, for a fresh thread.
    markResumeFellBack: assign(({ context }) => ({
      thread: { ...context.thread, resumeFellBack: true },
      session: { ...context.session, binding: undefined },
      warnings: [...context.warnings, "the bound Codex thread could not be resumed; re-projected for a fresh thread"],
    })),
    recordError: assign((_, params: { error: TurnError }) => ({ error: params.error })),
    recordFailureBeforeTurn: assign(({ context }, params: { error: TurnError }) => ({
      error: params.error,
      outcome: { ...context.outcome, failedBeforeTurn: true },
      engine: {
        ...context.engine,
        finalize: "skipped:turnNotStarted",
        maintenance: "skipped:turnNotStarted",
      },
    })),
    recordAbortBeforeTurn: assign(({ context }, params: { yield: boolean }) => ({
      outcome: { ...context.outcome, aborted: context.outcome.aborted || !params.yield, yieldAborted: context.outcome.yieldAborted || params.yield },
      engine: {
        ...context.engine,
        finalize: "skipped:turnNotStarted",
        maintenance: params.yield ? "skipped:yieldAborted" : "skipped:aborted",
      },
    })),
    markTurnNotStarted: assign(({ context }) => ({
      engine: {
        ...context.engine,
        finalize: "skipped:turnNotStarted",
        maintenance: context.outcome.yieldAborted ? "skipped:yieldAborted" : "skipped:aborted",
      },
    })),
    markAbortFlag: assign(({ context }, params: { yield: boolean }) => ({
      outcome: { ...context.outcome, aborted: context.outcome.aborted || !params.yield, yieldAborted: context.outcome.yieldAborted || params.yield },
    })),
    forwardInterrupt: sendTo("turn", ({ context }): RunTurnReceived => ({
      type: "TURN.INTERRUPT",
      reason: context.outcome.yieldAborted ? "yield" : "abort",
    })),
    forwardSteer: sendTo("turn", (_, params: { text: string; images?: SteerImage[] | undefined }): RunTurnReceived => ({
      type: "TURN.STEER",
      text: params.text,
      ...(params.images ? { images: params.images } : {}),
    })),
    queueFollowUps: assign(({ context }, params: { texts: string[]; images?: SteerImage[][] | undefined }) => ({
      followUps: {
        texts: [...context.followUps.texts, ...params.texts],
        images: [...context.followUps.images, ...params.texts.map((_, i) => params.images?.[i] ?? [])],
      },
    })),
    storeAccepted: assign(({ context }, params: { turnId: string }) => ({ turn: { ...context.turn, accepted: true, id: params.turnId } })),
    storeCompaction: assign(({ context }, params: { compaction: NativeCompactionRecord }) => ({
      turn: {
        ...context.turn,
        compactions: [...context.turn.compactions.filter((c) => c.itemId !== params.compaction.itemId), params.compaction],
      },
    })),
    // A turn that ended has a turn id: Codex accepted it, even if TURN.ACCEPTED was not seen first.
    storeRecord: assign(({ context }, params: { record: TurnRecord }) => ({
      turn: { ...context.turn, record: params.record, id: params.record.turnId, accepted: true },
    })),
    storeTimedOutRecord: assign(({ context }) => ({ turn: { ...context.turn, record: timedOutRecord(context) } })),
    // What is stored (pending record, transcript, the engine's finalize, the result's snapshot) is what the hooks made of it.
    storePreparedMessages: assign(({ context }, params: { output: PreparedMessagesOutput }) => ({
      turn: { ...context.turn, record: { ...context.turn.record!, messagesSnapshot: params.output.messages } },
    })),
    warnPrepareFailed: assign(({ context }, params: { message: string }) => ({
      warnings: [...context.warnings, `beforeMessageWrite failed (${params.message}); the turn's messages are stored as they are`],
    })),
    warnPendingNotRecorded: assign(({ context }) => ({
      warnings: [...context.warnings, "pending-finalize record not written; a crash before finalize would not be recovered"],
    })),
    storeMirrored: assign(({ context }, params: { output: MirrorOutput }) => ({
      outcome: { ...context.outcome, mirrorOk: true },
      persistence: { ...context.persistence, mirror: params.output },
    })),
    // The turn is in no transcript: it stays in the pending record (recovery mirrors and finalizes it later); the
    // engine must not be finalized from a turn the transcript does not hold.
    failMirror: assign(({ context }, params: { error: TurnError }) => ({
      outcome: { ...context.outcome, mirrorOk: false, mirrorFailed: true },
      error: params.error,
      engine: { ...context.engine, finalize: "skipped:mirrorFailed", maintenance: "skipped:mirrorFailed" },
      warnings: [...context.warnings, "transcript mirror failed; the turn is kept in the pending record for recovery"],
    })),
    useSnapshot: assign(({ context }, params: { source: FinalizeSnapshotSource; history?: HistoryOutput | undefined }) => ({
      persistence: { ...context.persistence, finalizeSource: params.source, finalizeHistory: params.history },
    })),
    storeCommitted: assign(({ context }) => ({
      outcome: { ...context.outcome, finalizeOk: true },
      engine: { ...context.engine, finalize: "commitTurn" },
    })),
    // A turn OpenClaw would not accept (prompt error, abort, yield): the durable engine does not advance over it.
    markCommitSkipped: assign(({ context }) => ({
      engine: { ...context.engine, finalize: "skipped:notCommitted" },
    })),
    warnPendingNotCleared: assign(({ context }, params: { message: string }) => ({
      warnings: [...context.warnings, `pending-finalize record not cleared (${params.message}); the next attempt finds the turn again`],
    })),
    storeFinalized: assign(({ context }, params: { output: FinalizeOutput }) => ({
      outcome: { ...context.outcome, finalizeOk: true },
      engine: { ...context.engine, finalize: params.output.mode },
    })),
    warnFinalizeFailed: assign(({ context }, params: { message: string }) => ({
      outcome: { ...context.outcome, finalizeOk: false },
      engine: { ...context.engine, finalize: "failed" },
      warnings: [...context.warnings, `context-engine finalize failed (${params.message})`],
    })),
    markMaintenanceSkipped: assign(({ context }) => ({
      engine: {
        ...context.engine,
        maintenance:
          maintenanceSkipReason({ ...settleFacts(context), finalizeOk: context.outcome.finalizeOk, engine: context.input.engine }) ??
          "skipped",
      },
    })),
    markMaintenanceBackground: assign(({ context }) => ({
      backgroundMaintenance: true,
      engine: { ...context.engine, maintenance: "background" },
    })),
    storeMaintained: assign(({ context }) => ({ engine: { ...context.engine, maintenance: "ran" } })),
    warnMaintenanceFailed: assign(({ context }, params: { message: string }) => ({
      engine: { ...context.engine, maintenance: "failed" },
      warnings: [...context.warnings, `maintenance failed (${params.message})`],
    })),
    markMaintenanceAborted: assign(({ context }) => ({ engine: { ...context.engine, maintenance: "aborted" } })),
  },
}).createMachine({
  id: "turn",
  initial: "session",
  context: ({ input }) => ({
    input,
    history: { messages: [], origins: [] },
    prePromptMessageCount: 0,
    session: { hadSessionFile: input.hadSessionFile, contextOverflowed: false },
    request: { promptText: input.prompt },
    admission: { admitted: false },
    thread: { rotate: false, resumeFellBack: false },
    turn: { accepted: false, compactions: [] },
    outcome: { aborted: false, yieldAborted: false, failedBeforeTurn: false, mirrorOk: false, mirrorFailed: false, finalizeOk: false },
    persistence: {},
    engine: { bootstrap: "pending", assemble: "pending", finalize: "pending", maintenance: "pending" },
    trace: [],
    warnings: [],
    followUps: { texts: [], images: [] },
    backgroundMaintenance: false,
  }),
  // Before Codex accepted the turn, an abort or a yield stops at once; leaving a state stops its actor, whose
  // AbortSignal reaches the in-flight engine call. States after acceptance override these handlers.
  on: {
    ABORT: { target: ".aborted", actions: { type: "recordAbortBeforeTurn", params: { yield: false } } },
    YIELD: { target: ".yieldAborted", actions: { type: "recordAbortBeforeTurn", params: { yield: true } } },
    STEER: { actions: { type: "queueFollowUps", params: ({ event }) => ({ texts: [event.text], ...(event.images ? { images: [event.images] } : {}) }) } },
  },
  states: {
    // Session-level steps before the turn's lifecycle (not in the trace): one attempt at a time per session, and
    // whatever a crashed attempt left is completed first.
    session: {
      initial: "acquiringLock",
      states: {
        acquiringLock: {
          on: {
            ABORT: {
              target: "#turn.aborted",
              actions: [{ type: "recordAbortBeforeTurn", params: { yield: false } }, "warnEndedWaitingForLock"],
            },
            YIELD: {
              target: "#turn.yieldAborted",
              actions: [{ type: "recordAbortBeforeTurn", params: { yield: true } }, "warnEndedWaitingForLock"],
            },
          },
          invoke: {
            id: "acquireLock",
            src: "acquireSessionLock",
            input: ({ context }) => ({ sessionFile: context.input.sessionFile }),
            // A crashed attempt's pending record is completed first; a session without one goes straight on.
            onDone: [
              {
                guard: { type: "crashedAttemptPending", params: ({ event }) => ({ output: event.output }) },
                target: "recovering",
                actions: [
                  { type: "storeLockFacts", params: ({ event }) => ({ output: event.output }) },
                  { type: "logLifecycle", params: ({ event }) => ({ event: "session lock acquired", waitedMs: event.output.waitedMs, pendingRecord: true, turnInFlight: event.output.turnInFlight }) },
                ],
              },
              {
                guard: { type: "turnLeftInFlight", params: ({ event }) => ({ lock: event.output }) },
                target: "recoveringCutTurn",
                actions: [
                  { type: "storeLockFacts", params: ({ event }) => ({ output: event.output }) },
                  { type: "logLifecycle", params: ({ event }) => ({ event: "session lock acquired", waitedMs: event.output.waitedMs, pendingRecord: false, turnInFlight: true }) },
                ],
              },
              {
                target: "#turn.loadHistory",
                actions: { type: "logLifecycle", params: ({ event }) => ({ event: "session lock acquired", waitedMs: event.output.waitedMs, pendingRecord: false, turnInFlight: false }) },
              },
            ],
            onError: {
              target: "#turn.failed",
              actions: { type: "recordFailureBeforeTurn", params: ({ event }) => ({ error: toTurnError("lock", event.error) }) },
            },
          },
        },
        recovering: {
          invoke: {
            id: "recover",
            src: "recoverSession",
            input: ({ context }) => ({ sessionFile: context.input.sessionFile }),
            // After the pending records (one may hold that very turn): a turn an attempt left in flight.
            onDone: [
              {
                guard: { type: "turnLeftInFlight", params: ({ context }) => ({ lock: context.session.lockFacts }) },
                target: "recoveringCutTurn",
                actions: { type: "storeRecovery", params: ({ event }) => ({ output: event.output }) },
              },
              {
                target: "#turn.loadHistory",
                actions: { type: "storeRecovery", params: ({ event }) => ({ output: event.output }) },
              },
            ],
            // A crashed attempt's turn that cannot be completed (e.g. its mirror still fails) blocks the session:
            // a new turn appended before it would reorder the transcript.
            onError: {
              target: "#turn.failed",
              actions: { type: "recordFailureBeforeTurn", params: ({ event }) => ({ error: toTurnError("recovery", event.error) }) },
            },
          },
        },
        // Codex accepted a turn of an earlier attempt that died before recording it: the turn is rebuilt from Codex's
        // thread, mirrored and finalized before this turn (or, when Codex cannot give it back, left out with a warning).
        recoveringCutTurn: {
          invoke: {
            id: "recoverCutTurn",
            src: "recoverCutTurn",
            input: ({ context }) => ({ sessionFile: context.input.sessionFile }),
            onDone: {
              target: "#turn.loadHistory",
              actions: [
                { type: "storeCutTurn", params: ({ event }) => ({ output: event.output }) },
                { type: "logLifecycle", params: ({ event }) => ({ event: "cut turn recovery", outcome: event.output.outcome, messages: event.output.messages ?? 0 }) },
              ],
            },
            // Its transcript write failed: as for a pending turn, the session waits rather than reorder the transcript.
            onError: {
              target: "#turn.failed",
              actions: { type: "recordFailureBeforeTurn", params: ({ event }) => ({ error: toTurnError("recovery", event.error) }) },
            },
          },
        },
      },
    },
    loadHistory: {
      entry: [{ type: "enterState", params: { state: "loadHistory" } }],
      invoke: {
        id: "loadHistory",
        src: "readHistory",
        input: ({ context }) => ({ sessionFile: context.input.sessionFile }),
        onDone: [
          {
            // `requestId` already recorded: the earlier attempt's outcome is returned, Codex does not run.
            guard: { type: "requestAlreadyRecorded", params: ({ event }) => ({ output: event.output }) },
            target: "settling",
            actions: [
              { type: "storeSession", params: ({ event }) => ({ output: event.output }) },
              { type: "storeReplay", params: ({ event }) => ({ output: event.output.recordedRequest! }) },
              {
                type: "logLifecycle",
                params: ({ event }) => ({
                  event: "request replayed",
                  requestId: event.output.recordedRequest!.mark.id,
                  recordedStatus: event.output.recordedRequest!.mark.status,
                  cut: event.output.recordedRequest!.mark.cut === true,
                  recordedTurnId: event.output.recordedRequest!.record.turnId,
                  messages: event.output.recordedRequest!.record.messagesSnapshot.length,
                }),
              },
            ],
          },
          {
            guard: { type: "shouldBootstrap", params: ({ event }) => ({ output: event.output }) },
            target: "bootstrap",
            actions: [{ type: "storeSession", params: ({ event }) => ({ output: event.output }) }],
          },
          {
            guard: "shouldAssemble",
            target: "compactionCheck",
            actions: [{ type: "storeSession", params: ({ event }) => ({ output: event.output }) }, "markBootstrapSkipped"],
          },
          {
            target: "project",
            actions: [
              { type: "storeSession", params: ({ event }) => ({ output: event.output }) },
              "markBootstrapSkipped",
              "markAssembleSkipped",
            ],
          },
        ],
        onError: {
          target: "failed",
          actions: {
            type: "recordFailureBeforeTurn",
            params: ({ event }) => ({ error: toTurnError("loadHistory", event.error) }),
          },
        },
      },
    },
    bootstrap: {
      entry: [
        { type: "enterState", params: { state: "bootstrap" } },
        { type: "logLifecycle", params: { event: "bootstrap started" } },
      ],
      invoke: {
        id: "bootstrap",
        src: "bootstrapEngine",
        input: ({ context }) => ({ sessionFile: context.input.sessionFile }),
        onDone: {
          target: "compactionCheck",
          actions: [
            { type: "storeBootstrap", params: ({ event }) => ({ output: event.output }) },
            { type: "logLifecycle", params: { event: "bootstrap completed" } },
          ],
        },
        onError: {
          target: "compactionCheck",
          actions: [
            { type: "warnBootstrapFailed", params: ({ event }) => ({ message: errorMessage(event.error) }) },
            { type: "logLifecycle", params: { event: "bootstrap failed" } },
          ],
        },
      },
    },
    // Transient routing (not in the trace): the accordion compacts before Codex's own lossy compaction point.
    compactionCheck: {
      always: [
        { guard: "accordionDue", target: "compactBeforeTurn" },
        // The last turn overflowed the context window: compact in the engine whatever the (older) usage says.
        { guard: "overflowCompactionDue", target: "compactBeforeTurn" },
        { target: "assemble" },
      ],
    },
    compactBeforeTurn: {
      entry: [
        { type: "enterState", params: { state: "compactBeforeTurn" } },
        { type: "logLifecycle", params: { event: "accordion compaction started" } },
      ],
      invoke: {
        id: "compactBeforeTurn",
        src: "compactEngine",
        input: ({ context }) => ({ lastUsage: context.session.lastUsage, contextOverflowed: context.session.contextOverflowed }),
        onDone: [
          {
            guard: { type: "compactedBeforeTurn", params: ({ event }) => ({ output: event.output }) },
            target: "reloadHistory",
            actions: ["markRotateThread", { type: "logLifecycle", params: { event: "accordion compaction completed" } }],
          },
          {
            target: "assemble",
            actions: [
              {
                type: "warnCompactionFailed",
                params: ({ event }) => ({ reason: event.output.reason ?? "notCompacted" }),
              },
              { type: "logLifecycle", params: ({ event }) => ({ event: "accordion compaction skipped", reason: event.output.reason }) },
            ],
          },
        ],
        onError: {
          target: "assemble",
          actions: [
            { type: "warnCompactionFailed", params: ({ event }) => ({ reason: errorMessage(event.error) }) },
            { type: "logLifecycle", params: { event: "accordion compaction failed" } },
          ],
        },
      },
    },
    reloadHistory: {
      invoke: {
        id: "reloadHistory",
        src: "rereadHistory",
        input: ({ context }) => ({ sessionFile: context.input.sessionFile }),
        onDone: { target: "assemble", actions: { type: "storeReloadedHistory", params: ({ event }) => ({ output: event.output }) } },
        onError: { target: "assemble", actions: "warnReloadFailed" },
      },
    },
    assemble: {
      entry: [{ type: "enterState", params: { state: "assemble" } }],
      invoke: {
        id: "assemble",
        src: "assembleContext",
        input: ({ context }) => ({ history: context.history, prompt: context.input.prompt }),
        onDone: [
          // Empty although the session has history: the model would see none of it (a warning).
          {
            guard: { type: "assembledEmptyDespiteHistory", params: ({ event }) => ({ output: event.output }) },
            target: "project",
            actions: [
              { type: "storeAssembleEmpty", params: ({ event }) => ({ output: event.output }) },
              "warnAssembleEmpty",
              { type: "logLifecycle", params: { event: "assemble empty" } },
            ],
          },
          // Empty on an empty history: expected (a new session); the unassembled prompt goes, without a warning.
          {
            guard: { type: "assembledEmpty", params: ({ event }) => ({ output: event.output }) },
            target: "project",
            actions: [
              { type: "storeAssembleEmpty", params: ({ event }) => ({ output: event.output }) },
              { type: "logLifecycle", params: { event: "assemble empty" } },
            ],
          },
          {
            target: "project",
            actions: [
              { type: "storeAssembled", params: ({ event }) => ({ output: event.output }) },
              {
                type: "logLifecycle",
                params: ({ event }) => ({
                  event: "assemble applied",
                  assembledMessageCount: event.output.messages.length,
                  estimatedTokens: event.output.estimatedTokens,
                  hasSystemPromptAddition: Boolean(event.output.systemPromptAddition?.trim()),
                }),
              },
            ],
          },
        ],
        onError: {
          target: "project",
          actions: [
            { type: "warnAssembleFailed", params: ({ event }) => ({ message: errorMessage(event.error) }) },
            { type: "logLifecycle", params: { event: "assemble failed" } },
          ],
        },
      },
    },
    project: {
      entry: [{ type: "enterState", params: { state: "project" } }],
      invoke: {
        id: "project",
        src: "projectContext",
        input: ({ context }) => projectInput(context),
        onDone: [
          {
            guard: "hasHooksBeforeThread",
            target: "hooks",
            actions: { type: "storeProjection", params: ({ event }) => ({ output: event.output }) },
          },
          {
            target: "threadStart",
            actions: { type: "storeProjection", params: ({ event }) => ({ output: event.output }) },
          },
        ],
        onError: [
          {
            guard: "hasHooksBeforeThread",
            target: "hooks",
            actions: ["warnProjectionFailed", { type: "logLifecycle", params: { event: "projection failed" } }],
          },
          {
            target: "threadStart",
            actions: ["warnProjectionFailed", { type: "logLifecycle", params: { event: "projection failed" } }],
          },
        ],
      },
    },
    hooks: {
      entry: [{ type: "enterState", params: { state: "hooks" } }],
      initial: "choosing",
      states: {
        // Prompt hooks first (they settle the prompt and instructions the gate judges), then the gate.
        choosing: {
          always: [{ guard: "hasPromptHooks", target: "running" }, { target: "admissionCheck" }],
        },
        running: {
          invoke: {
            id: "hooks",
            src: "runPromptHooks",
            input: ({ context }) => ({
              promptText: context.request.promptText,
              developerInstructions: context.request.developerInstructions,
              history: context.history,
            }),
            onDone: [
              {
                // The resume-or-rotate decision and the instructions' delivery must count what the thread will carry.
                guard: { type: "hookChangedDeveloperInstructions", params: ({ event }) => ({ output: event.output }) },
                target: "reprojecting",
                actions: { type: "storeHooks", params: ({ event }) => ({ output: event.output }) },
              },
              {
                target: "admissionCheck",
                actions: { type: "storeHooks", params: ({ event }) => ({ output: event.output }) },
              },
            ],
            onError: {
              target: "admissionCheck",
              actions: [
                { type: "warnHooksFailed", params: ({ event }) => ({ message: errorMessage(event.error) }) },
                { type: "logLifecycle", params: { event: "beforePromptBuild failed" } },
              ],
            },
          },
        },
        reprojecting: {
          invoke: {
            id: "reproject",
            src: "projectContext",
            input: ({ context }) => ({ ...projectInput(context), finalDeveloperInstructions: context.request.developerInstructions }),
            onDone: {
              target: "admissionCheck",
              actions: { type: "storeReprojection", params: ({ event }) => ({ output: event.output }) },
            },
            onError: {
              target: "admissionCheck",
              actions: [
                { type: "warnReprojectionFailed", params: ({ event }) => ({ message: errorMessage(event.error) }) },
                { type: "logLifecycle", params: { event: "projection failed" } },
              ],
            },
          },
        },
        // Transient routing: the gate runs only when one is registered.
        admissionCheck: {
          always: [{ guard: "admissionDue", target: "admitting" }, { target: "#turn.threadStart" }],
        },
        // The last word before Codex: runs after the final prompt, instructions and projection are settled and
        // before any thread/start, thread/resume, turn/start or llmInput, so a refused turn starts no Codex work.
        admitting: {
          invoke: {
            id: "admitTurn",
            src: "admitTurn",
            input: ({ context }) => ({
              promptText: context.request.promptText,
              ...(context.request.developerInstructions !== undefined ? { developerInstructions: context.request.developerInstructions } : {}),
              history: context.history,
              ...(context.request.model !== undefined ? { model: context.request.model } : {}),
            }),
            onDone: [
              {
                guard: { type: "turnRefused", params: ({ event }) => ({ output: event.output }) },
                target: "#turn.recordingBlock",
                actions: [
                  {
                    type: "storeBlock",
                    params: ({ event }) => {
                      const out = event.output as Extract<AdmissionOutput, { admitted: false }>;
                      return { block: { blockedBy: out.blockedBy, message: out.message } };
                    },
                  },
                  { type: "logLifecycle", params: ({ event }) => ({ event: "turn blocked", blockedBy: (event.output as { blockedBy?: string | undefined }).blockedBy }) },
                ],
              },
              { target: "#turn.threadStart", actions: ["markAdmitted", { type: "logLifecycle", params: { event: "turn admitted" } }] },
            ],
            // Fail-closed: a gate that threw, timed out or answered something malformed refuses the turn.
            onError: {
              target: "#turn.recordingBlock",
              actions: [
                { type: "warnGateFailed", params: ({ event }) => ({ message: errorMessage(event.error) }) },
                {
                  type: "storeBlock",
                  params: { block: { blockedBy: GATE_FAILURE_ATTRIBUTION, message: blockedTurnText(undefined, GATE_FAILURE_ATTRIBUTION) } },
                },
                { type: "logLifecycle", params: { event: "turn blocked", blockedBy: GATE_FAILURE_ATTRIBUTION, gateFailed: true } },
              ],
            },
          },
        },
      },
    },
    // The refused turn goes into the transcript as a redacted user message (the gate's user-facing text, never the
    // prompt): the session shows that something was refused. Not a lifecycle step (not in the trace). A failure warns.
    recordingBlock: {
      on: {
        ABORT: { actions: { type: "markAbortFlag", params: { yield: false } } },
        YIELD: { actions: { type: "markAbortFlag", params: { yield: true } } },
      },
      invoke: {
        id: "recordBlock",
        src: "recordBlockedTurn",
        input: ({ context }) => context.admission.block!,
        onDone: {
          target: "settling",
          actions: [
            { type: "storeBlockedUserMessage", params: ({ event }) => ({ output: event.output }) },
            { type: "logLifecycle", params: { event: "blocked turn recorded" } },
          ],
        },
        onError: {
          target: "settling",
          actions: [
            { type: "warnBlockNotRecorded", params: ({ event }) => ({ message: errorMessage(event.error) }) },
            { type: "logLifecycle", params: { event: "blocked turn not recorded" } },
          ],
        },
      },
    },
    threadStart: {
      entry: [{ type: "enterState", params: { state: "threadStart" } }],
      initial: "choosing",
      states: {
        choosing: {
          always: [{ guard: "planResumes", target: "resuming" }, { target: "starting" }],
        },
        resuming: {
          invoke: {
            id: "resumeThread",
            src: "resumeThread",
            input: ({ context }) => ({
              plan: context.request.projection!.thread,
              developerInstructions: context.request.developerInstructions,
            }),
            onDone: {
              target: "syncing",
              actions: { type: "storeThread", params: ({ event }) => ({ output: event.output }) },
            },
            onError: [
              {
                guard: { type: "resumeFailedFallBackToFresh", params: ({ event }) => ({ error: event.error }) },
                target: "#turn.project",
                actions: ["markResumeFellBack", { type: "logLifecycle", params: { event: "thread resume failed" } }],
              },
              {
                target: "#turn.failed",
                actions: {
                  type: "recordFailureBeforeTurn",
                  params: ({ event }) => ({ error: toTurnError("threadStart", event.error) }),
                },
              },
            ],
          },
        },
        starting: {
          invoke: {
            id: "startThread",
            src: "startThread",
            input: ({ context }) => ({
              plan: context.request.projection?.thread ?? { action: "start", reason: "noProjection" },
              developerInstructions: context.request.developerInstructions,
            }),
            onDone: {
              target: "syncing",
              actions: { type: "storeThread", params: ({ event }) => ({ output: event.output }) },
            },
            onError: {
              target: "#turn.failed",
              actions: {
                type: "recordFailureBeforeTurn",
                params: ({ event }) => ({ error: toTurnError("threadStart", event.error) }),
              },
            },
          },
        },
        // Native mode: the thread is made to hold the engine's view before the turn starts (docs/projection.md).
        // Idle-only: nothing runs on the thread until turnRunning. Each step records its intent in the binding first.
        syncing: {
          always: [
            { guard: "nativeRevertDue", target: "reverting" },
            { guard: "nativeInjectDue", target: "injecting" },
            { target: "#turn.turnRunning" },
          ],
        },
        reverting: {
          invoke: {
            id: "revertThread",
            src: "revertThread",
            input: ({ context }) => ({ threadId: context.thread.id ?? "", sync: context.request.projection!.nativeSync! }),
            onDone: [
              {
                guard: "nativeInjectDue",
                target: "injecting",
                actions: [
                  { type: "storeNativeSync", params: ({ event }) => ({ output: event.output }) },
                  { type: "logLifecycle", params: ({ context }) => ({ event: "native thread reverted", revertedTurns: context.request.projection?.nativeSync?.counts.revertedTurns }) },
                ],
              },
              {
                target: "#turn.turnRunning",
                actions: [
                  { type: "storeNativeSync", params: ({ event }) => ({ output: event.output }) },
                  { type: "logLifecycle", params: ({ context }) => ({ event: "native thread reverted", revertedTurns: context.request.projection?.nativeSync?.counts.revertedTurns }) },
                ],
              },
            ],
            onError: {
              target: "#turn.failed",
              actions: { type: "recordFailureBeforeTurn", params: ({ event }) => ({ error: toTurnError("threadStart", event.error) }) },
            },
          },
        },
        injecting: {
          invoke: {
            id: "injectItems",
            src: "injectItems",
            input: ({ context }) => ({
              threadId: context.thread.id ?? "",
              sync: context.request.projection!.nativeSync!,
              fresh: context.request.projection!.thread.action === "start",
              reverted: context.thread.nativeSync?.reverted === true,
            }),
            onDone: {
              target: "#turn.turnRunning",
              actions: [
                { type: "storeNativeSync", params: ({ event }) => ({ output: event.output }) },
                { type: "logLifecycle", params: ({ event }) => ({ event: "native items injected", items: event.output.injectedItems, bytes: event.output.injectedBytes }) },
              ],
            },
            onError: {
              target: "#turn.failed",
              actions: { type: "recordFailureBeforeTurn", params: ({ event }) => ({ error: toTurnError("threadStart", event.error) }) },
            },
          },
        },
      },
    },
    turnRunning: {
      entry: [{ type: "enterState", params: { state: "turnRunning" } }],
      initial: "starting",
      invoke: {
        id: "turn",
        src: "runTurn",
        input: ({ context }) => ({
          threadId: context.thread.id ?? "",
          promptText: context.request.promptText,
          originalPrompt: context.input.prompt,
          additionalContext: context.request.projection?.additionalContext,
          ...(context.request.projection?.contextImages ? { contextImages: context.request.projection.contextImages } : {}),
          developerInstructions: context.request.developerInstructions,
          ...(context.request.model !== undefined ? { model: context.request.model } : {}),
          historyMessages: context.history.messages,
        }),
      },
      on: {
        ABORT: {
          target: ".interrupting",
          actions: [{ type: "markAbortFlag", params: { yield: false } }, "forwardInterrupt"],
        },
        YIELD: {
          target: ".interrupting",
          actions: [{ type: "markAbortFlag", params: { yield: true } }, "forwardInterrupt"],
        },
        STEER: { actions: { type: "forwardSteer", params: ({ event }) => ({ text: event.text, ...(event.images ? { images: event.images } : {}) }) } },
        "TURN.ACCEPTED": {
          actions: [
            { type: "storeAccepted", params: ({ event }) => ({ turnId: event.turnId }) },
            {
              type: "persistAcceptedBinding",
              params: ({ context, event }) => ({
                threadId: context.thread.id ?? "",
                turnId: event.turnId,
                prompt: context.input.prompt,
                projection: context.request.projection,
                freshThread: context.thread.rotate || context.thread.resumeFellBack,
                ...(context.input.requestId !== undefined ? { requestId: context.input.requestId } : {}),
              }),
            },
            { type: "logLifecycle", params: { event: "turn accepted" } },
          ],
        },
        "TURN.STEER_REJECTED": {
          actions: { type: "queueFollowUps", params: ({ event }) => ({ texts: event.texts, ...(event.images ? { images: event.images } : {}) }) },
        },
        "TURN.COMPACTION": {
          actions: [
            { type: "storeCompaction", params: ({ event }) => ({ compaction: event.compaction }) },
            { type: "persistNativeCompaction", params: ({ event }) => ({ compaction: event.compaction, preTurn: event.preTurn === true }) },
            { type: "logLifecycle", params: { event: "codex native compaction" } },
          ],
        },
        "TURN.START_FAILED": [
          { guard: "isAborting", target: "#turn.settling", actions: "markTurnNotStarted" },
          {
            target: "failed",
            actions: {
              type: "recordFailureBeforeTurn",
              params: ({ event }) => ({ error: event.error }),
            },
          },
        ],
        "TURN.ENDED": [
          {
            // The input no longer fit the window: the binding tells the next turn (after the usage of earlier calls).
            guard: { type: "turnOverflowedContext", params: ({ event }) => ({ record: event.record }) },
            target: "mirror",
            actions: [
              { type: "storeRecord", params: ({ event }) => ({ record: event.record }) },
              { type: "persistUsage", params: ({ event }) => ({ threadId: event.record.threadId, usage: event.record.usage }) },
              { type: "persistContextOverflow", params: ({ event }) => ({ threadId: event.record.threadId, turnId: event.record.turnId }) },
            ],
          },
          {
            target: "mirror",
            actions: [
              { type: "storeRecord", params: ({ event }) => ({ record: event.record }) },
              { type: "persistUsage", params: ({ event }) => ({ threadId: event.record.threadId, usage: event.record.usage }) },
            ],
          },
        ],
      },
      states: {
        starting: {
          on: {
            "TURN.ACCEPTED": {
              target: "streaming",
              actions: [
                { type: "storeAccepted", params: ({ event }) => ({ turnId: event.turnId }) },
                {
                  type: "persistAcceptedBinding",
                  params: ({ context, event }) => ({
                    threadId: context.thread.id ?? "",
                    turnId: event.turnId,
                    prompt: context.input.prompt,
                    projection: context.request.projection,
                    freshThread: context.thread.rotate || context.thread.resumeFellBack,
                    ...(context.input.requestId !== undefined ? { requestId: context.input.requestId } : {}),
                  }),
                },
                { type: "logLifecycle", params: { event: "turn accepted" } },
              ],
            },
          },
        },
        streaming: {},
        interrupting: {
          // Abort/yield already recorded; more of them change nothing.
          on: { ABORT: {}, YIELD: {} },
          after: {
            interruptGrace: [
              { guard: "turnAccepted", target: "#turn.mirror", actions: "storeTimedOutRecord" },
              { target: "#turn.settling", actions: "markTurnNotStarted" },
            ],
          },
        },
      },
    },
    // Persistence is never cut in half: an abort or a yield from here on only marks the outcome.
    mirror: {
      entry: [{ type: "enterState", params: { state: "mirror" } }],
      on: {
        ABORT: { actions: { type: "markAbortFlag", params: { yield: false } } },
        YIELD: { actions: { type: "markAbortFlag", params: { yield: true } } },
      },
      initial: "choosing",
      states: {
        choosing: {
          always: [{ guard: "hasMessageWriteHooks", target: "preparing" }, { target: "recordingPending" }],
        },
        // Before anything is written: the host's beforeMessageWrite (OpenClaw's tool_result_persist and
        // before_message_write) may rewrite or drop each message, so no copy (pending record included) holds what it removed.
        preparing: {
          invoke: {
            id: "prepareMessages",
            src: "prepareTranscriptMessages",
            input: ({ context }) => ({ record: context.turn.record! }),
            onDone: {
              target: "recordingPending",
              actions: [
                { type: "storePreparedMessages", params: ({ event }) => ({ output: event.output }) },
                { type: "logLifecycle", params: ({ event }) => ({ event: "messages prepared", rewritten: event.output.rewritten, dropped: event.output.dropped }) },
              ],
            },
            onError: {
              target: "recordingPending",
              actions: [
                { type: "warnPrepareFailed", params: ({ event }) => ({ message: errorMessage(event.error) }) },
                { type: "logLifecycle", params: { event: "messages prepare failed" } },
              ],
            },
          },
        },
        // The pending record (with the turn's snapshot) goes first: a crash after it still leaves the turn for recovery.
        recordingPending: {
          invoke: {
            id: "recordPending",
            src: "recordPendingFinalize",
            input: ({ context }) => ({ record: context.turn.record!, prePromptMessageCount: context.prePromptMessageCount, ...requestMark(context) }),
            // Only once the record holds the turn does the binding's in-flight marker go (a failed record keeps it).
            onDone: { target: "writing", actions: { type: "clearTurnInFlight", params: ({ context }) => ({ turnId: context.turn.record!.turnId }) } },
            onError: {
              target: "writing",
              actions: ["warnPendingNotRecorded", { type: "logLifecycle", params: { event: "pending record failed" } }],
            },
          },
        },
        writing: {
          invoke: {
            id: "mirror",
            src: "mirrorTranscript",
            input: ({ context }) => ({ record: context.turn.record!, ...requestMark(context) }),
            onDone: {
              target: "#turn.finalize",
              actions: [
                { type: "storeMirrored", params: ({ event }) => ({ output: event.output }) },
                { type: "logLifecycle", params: { event: "mirror completed" } },
              ],
            },
            onError: {
              target: "#turn.settling",
              actions: [
                { type: "failMirror", params: ({ event }) => ({ error: toTurnError("mirror", event.error) }) },
                { type: "logLifecycle", params: { event: "mirror failed" } },
              ],
            },
          },
        },
      },
    },
    finalize: {
      entry: [{ type: "enterState", params: { state: "finalize" } }],
      on: {
        ABORT: { actions: { type: "markAbortFlag", params: { yield: false } } },
        YIELD: { actions: { type: "markAbortFlag", params: { yield: true } } },
      },
      initial: "choosingSnapshot",
      states: {
        // afterTurn expects the session snapshot: the loaded history plus this turn when the mirror is provably the
        // file's tail, else the transcript re-read (when it holds the turn), else history + snapshot (fallback).
        choosingSnapshot: {
          always: [
            { guard: "engineCommitsTurns", target: "committing" },
            { guard: "engineSkipsTurnCommit", target: "skippingCommit" },
            { guard: "mirrorIsTail", target: "finalizing", actions: { type: "useSnapshot", params: { source: "mirrorTail" } } },
            { target: "rereading" },
          ],
        },
        rereading: {
          invoke: {
            id: "rereadForFinalize",
            src: "rereadHistoryForFinalize",
            input: ({ context }) => ({ sessionFile: context.input.sessionFile }),
            onDone: [
              {
                guard: { type: "rereadHoldsTurn", params: ({ event }) => ({ output: event.output }) },
                target: "finalizing",
                actions: { type: "useSnapshot", params: ({ event }) => ({ source: "reread" as const, history: event.output }) },
              },
              { target: "finalizing", actions: { type: "useSnapshot", params: { source: "fallback" } } },
            ],
            onError: { target: "finalizing", actions: { type: "useSnapshot", params: { source: "fallback" } } },
          },
        },
        // The durable turn: `commitTurn` with the turn's advancement key and its admission/terminal anchors, read from
        // the store; the pending record (which holds the key) is cleared after it answered, so a crash in between
        // retries the same key, and `duplicate` is success.
        committing: {
          invoke: {
            id: "commitTurn",
            src: "commitEngineTurn",
            input: ({ context }) => ({ record: context.turn.record! }),
            onDone: {
              target: "#turn.decideMaintenance",
              actions: [
                "storeCommitted",
                {
                  type: "logLifecycle",
                  params: ({ event }) => ({
                    event: "turn committed",
                    status: event.output.status,
                    advancementKey: event.output.advancementKey,
                    messages: event.output.messages,
                    admissionEntryId: event.output.admissionEntryId,
                    terminalEntryId: event.output.terminalEntryId,
                    admissionSeq: event.output.admissionSeq,
                    terminalSeq: event.output.terminalSeq,
                  }),
                },
              ],
            },
            onError: {
              target: "#turn.decideMaintenance",
              actions: [
                { type: "warnFinalizeFailed", params: ({ event }) => ({ message: errorMessage(event.error) }) },
                { type: "logLifecycle", params: { event: "turn commit failed" } },
              ],
            },
          },
        },
        // A durable engine's turn that is not committed (OpenClaw discards its intent): only the pending record goes.
        skippingCommit: {
          entry: ["markCommitSkipped"],
          invoke: {
            id: "clearPending",
            src: "clearPendingRecord",
            input: ({ context }) => ({ turnId: context.turn.record!.turnId }),
            onDone: {
              target: "#turn.decideMaintenance",
              actions: { type: "logLifecycle", params: ({ context }) => ({ event: "turn commit skipped", codexStatus: context.turn.record?.codexStatus, aborted: context.outcome.aborted, yieldAborted: context.outcome.yieldAborted }) },
            },
            onError: {
              target: "#turn.decideMaintenance",
              actions: [
                { type: "warnPendingNotCleared", params: ({ event }) => ({ message: errorMessage(event.error) }) },
                { type: "logLifecycle", params: { event: "turn commit skipped" } },
              ],
            },
          },
        },
        finalizing: {
          invoke: {
            id: "finalize",
            src: "finalizeEngine",
            input: ({ context }) => finalizeInput(context),
            onDone: {
              target: "#turn.decideMaintenance",
              actions: [
                { type: "storeFinalized", params: ({ event }) => ({ output: event.output }) },
                { type: "logLifecycle", params: ({ event, context }) => ({ event: "finalize completed", mode: event.output.mode, source: context.persistence.finalizeSource }) },
              ],
            },
            onError: {
              target: "#turn.decideMaintenance",
              actions: [
                { type: "warnFinalizeFailed", params: ({ event }) => ({ message: errorMessage(event.error) }) },
                { type: "logLifecycle", params: { event: "finalize failed" } },
              ],
            },
          },
        },
      },
    },
    // Transient routing after finalize (not a lifecycle state; not recorded in the trace).
    decideMaintenance: {
      always: [
        { guard: "canMaintainForeground", target: "maintain" },
        {
          guard: "canMaintainBackground",
          target: "settling",
          actions: [
            "markMaintenanceBackground",
            "scheduleBackgroundMaintenance",
            { type: "logLifecycle", params: { event: "maintenance scheduled in background" } },
          ],
        },
        {
          target: "settling",
          actions: ["markMaintenanceSkipped", { type: "logLifecycle", params: { event: "maintenance skipped" } }],
        },
      ],
    },
    maintain: {
      entry: [{ type: "enterState", params: { state: "maintain" } }],
      on: {
        ABORT: {
          target: "settling",
          actions: [{ type: "markAbortFlag", params: { yield: false } }, "markMaintenanceAborted"],
        },
        YIELD: {
          target: "settling",
          actions: [{ type: "markAbortFlag", params: { yield: true } }, "markMaintenanceAborted"],
        },
      },
      invoke: {
        id: "maintain",
        src: "maintainEngine",
        input: ({ context }) => ({ record: context.turn.record }),
        onDone: {
          target: "settling",
          actions: ["storeMaintained", { type: "logLifecycle", params: { event: "maintenance completed" } }],
        },
        onError: {
          target: "settling",
          actions: [
            { type: "warnMaintenanceFailed", params: ({ event }) => ({ message: errorMessage(event.error) }) },
            { type: "logLifecycle", params: { event: "maintenance failed" } },
          ],
        },
      },
    },
    // Transient routing to the final state (not a lifecycle state; not recorded in the trace).
    settling: {
      always: [
        { guard: "settlesBlocked", target: "blocked" },
        { guard: "settlesYieldAborted", target: "yieldAborted" },
        { guard: "settlesAborted", target: "aborted" },
        { guard: "settlesFailed", target: "failed" },
        { target: "completed" },
      ],
    },
    completed: {
      type: "final",
      entry: { type: "enterState", params: { state: "completed" } },
    },
    failed: {
      type: "final",
      entry: { type: "enterState", params: { state: "failed" } },
    },
    aborted: {
      type: "final",
      entry: { type: "enterState", params: { state: "aborted" } },
    },
    yieldAborted: {
      type: "final",
      entry: { type: "enterState", params: { state: "yieldAborted" } },
    },
    blocked: {
      type: "final",
      entry: { type: "enterState", params: { state: "blocked" } },
    },
  },
  output: ({ context }) => buildOutput(context),
});

export type TurnMachine = typeof turnMachine;
export type { DoneActorEvent, Phase };
