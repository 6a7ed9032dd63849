/**
 * The contract between the pure turn statechart (`turn.machine.ts`) and the effects a host binds to it with
 * `machine.provide({ actors, actions })`. Nothing here does I/O: these are the shapes of what flows in and out.
 *
 * Actor ids (the `id` of each invoke) and actor source names (the `src`):
 *
 * | state             | invoke id          | src                   | kind         |
 * |-------------------|--------------------|-----------------------|--------------|
 * | acquireLock       | `acquireLock`      | `acquireSessionLock`  | fromPromise  |
 * | recover           | `recover`          | `recoverSession`      | fromPromise  |
 * | loadHistory       | `loadHistory`      | `readHistory`         | fromPromise  |
 * | bootstrap         | `bootstrap`        | `bootstrapEngine`     | fromPromise  |
 * | compactBeforeTurn | `compactBeforeTurn`| `compactEngine`       | fromPromise  |
 * | reloadHistory     | `reloadHistory`    | `rereadHistory`       | fromPromise  |
 * | assemble          | `assemble`         | `assembleContext`     | fromPromise  |
 * | project           | `project`          | `projectContext`      | fromPromise  |
 * | hooks.running     | `hooks`            | `runPromptHooks`      | fromPromise  |
 * | hooks.reprojecting | `reproject`       | `projectContext`      | fromPromise  |
 * | hooks.admitting   | `admitTurn`        | `admitTurn`           | fromPromise  |
 * | recordingBlock    | `recordBlock`      | `recordBlockedTurn`   | fromPromise  |
 * | threadStart.resuming | `resumeThread`  | `resumeThread`        | fromPromise  |
 * | threadStart.starting | `startThread`   | `startThread`         | fromPromise  |
 * | turnRunning       | `turn`             | `runTurn`             | fromCallback |
 * | mirror.preparing  | `prepareMessages`  | `prepareTranscriptMessages` | fromPromise |
 * | recordPending     | `recordPending`    | `recordPendingFinalize` | fromPromise |
 * | mirror            | `mirror`           | `mirrorTranscript`    | fromPromise  |
 * | finalize.rereading | `rereadForFinalize` | `rereadHistoryForFinalize` | fromPromise |
 * | finalize          | `finalize`         | `finalizeEngine`      | fromPromise  |
 * | finalize.committing | `commitTurn`     | `commitEngineTurn`    | fromPromise  |
 * | finalize.skippingCommit | `clearPending` | `clearPendingRecord` | fromPromise  |
 * | maintain          | `maintain`         | `maintainEngine`      | fromPromise  |
 */
import type { AgentMessage } from "../src/context-engine/types.js";

/**
 * The ways a turn attempt ends. `blocked`: a `beforeAgentRun` gate refused the turn before any Codex work started
 * (no thread, no model call; the transcript records a redacted user message saying so).
 */
export type TurnStatus = "completed" | "failed" | "aborted" | "yieldAborted" | "blocked";

/** Lifecycle phases an error can be attributed to. */
export type TurnPhase =
  | "lock"
  | "recovery"
  | "loadHistory"
  | "bootstrap"
  | "assemble"
  | "project"
  | "hooks"
  | "threadStart"
  | "turnRunning"
  | "recordPending"
  | "mirror"
  | "finalize"
  | "maintain";

/** A serializable error (machine context must stay JSON-friendly for persisted snapshots and the inspector). */
export interface TurnError {
  phase: TurnPhase;
  message: string;
  /** e.g. Codex `codexErrorInfo` ("internalServerError"), or our own codes ("turnStartRejected", "idleTimeout"). */
  code?: string | undefined;
}

/** Facts about the engine that guards read; the engine object itself stays in the host. */
export interface EngineFacts {
  /** A non-legacy engine is configured (absent engine or `info.id === "legacy"` => false). */
  active: boolean;
  id: string;
  hasBootstrap: boolean;
  hasMaintain: boolean;
  hasAfterTurn: boolean;
  hasIngestBatch: boolean;
  ownsCompaction: boolean;
  /** OpenClaw types it as a string: anything but "background" runs maintenance in the foreground. */
  turnMaintenanceMode: "foreground" | "background" | (string & {});
  /**
   * The engine takes durable turns (OpenClaw 2026.8.1+: `info.transcriptSemantics` declares both semantics and it
   * implements `commitTurn`): finalize commits the turn with `commitTurn` instead of `afterTurn` (`engineCommitsTurns`).
   */
  durableTurns?: boolean | undefined;
}

/** Accordion cadence settings the `accordionDue` guard reads (see `isAccordionDue`). */
export interface AccordionFacts {
  /** Compact in the engine before the turn at all (default: the engine owns compaction). */
  enabled: boolean;
  /** Share of the context window at which to compact, in (0, 1]. */
  contextThreshold: number;
}

/** Token usage of the bound thread's last turn, as the binding recorded it. */
export interface LastUsageFacts {
  inputTokens?: number | undefined;
  totalTokens: number;
  modelContextWindow?: number | undefined;
}

/** Input of the turn machine (already validated by the host with zod). */
export interface TurnMachineInput {
  sessionId: string;
  sessionKey?: string | undefined;
  sessionFile: string;
  prompt: string;
  engine: EngineFacts;
  /** The session file existed before this attempt (checked before anything is written). */
  hadSessionFile: boolean;
  /** At least one `beforePromptBuild` or `beforeModelResolve` hook is registered (the `hooks` state runs them). */
  hasPromptHooks: boolean;
  /** A `beforeAgentRun` gate is registered (`hooks.admitting` runs it last, before any thread is started or resumed). */
  hasAdmissionGate?: boolean | undefined;
  /** A `beforeMessageWrite` hook is registered (`mirror.preparing` runs it on the turn's messages before anything is written). */
  hasMessageWriteHooks?: boolean | undefined;
  /** Accordion cadence; absent means never compact before the turn. */
  accordion?: AccordionFacts | undefined;
  /** The host's id of this request (`requestId`): recorded with the prompt; a request already recorded is replayed. */
  requestId?: string | undefined;
}

/** The request mark recorded on a turn's prompt entry and in its pending record: the id and the attempt's status. */
export interface RequestMark {
  id: string;
  status: Exclude<TurnStatus, "blocked">;
  /** The turn was recovered from Codex's thread after its attempt died mid-turn. */
  cut?: boolean | undefined;
}

/** A request the transcript already holds (`SessionStore.findRequest`), as the turn to return instead of running it. */
export interface RecordedRequestOutput {
  mark: RequestMark;
  /** The recorded turn (its messages as the transcript holds them; `assistantText` from its last answer). */
  record: TurnRecord;
}

/** What `readHistory` returns at the start of the attempt: the history plus what the binding says about the thread. */
export interface SessionLoadOutput {
  history: HistoryOutput;
  /** The thread binding as read (opaque to the machine; the projection reads it). Undefined: no bound thread. */
  binding?: unknown;
  /** The bound thread's last reported usage (the accordion's input). */
  lastUsage?: LastUsageFacts | undefined;
  /**
   * The bound thread's last turn failed because its input no longer fit the model's context window (Codex's
   * `contextWindowExceeded`): the accordion's other input (`overflowCompactionDue`).
   */
  contextOverflowed?: boolean | undefined;
  /** Whether the transcript existed when it was read under the lock (overrides the input's `hadSessionFile`). */
  sessionFileExisted?: boolean | undefined;
  /** With `requestId`: the transcript already holds that request's turn (`requestAlreadyRecorded`): it is returned. */
  recordedRequest?: RecordedRequestOutput | undefined;
}

/** What the session lock state reports (the lock handle itself stays with the host). */
export interface LockOutput {
  waitedMs: number;
  /**
   * The session holds a pending-finalize record (readable or not) now that the lock is ours: a crashed earlier
   * attempt left a turn to complete, so recovery runs before this turn.
   */
  pendingRecord: boolean;
  /**
   * The thread binding records a turn Codex accepted whose pending record was never written (the binding's
   * `turnInFlight`): an earlier attempt died while Codex ran it, so the turn is recovered from Codex's thread first.
   */
  turnInFlight: boolean;
}

/** What recovering a turn an earlier attempt left in flight did (see `recoverCutTurn` in src/recovery.ts). */
export interface CutTurnOutput {
  turnId: string;
  /**
   * `recovered`: rebuilt from Codex's record of the thread, mirrored and finalized; `alreadyMirrored`: the transcript
   * holds it (nothing to do); `notInThread` / `unreadable`: Codex could not give it back (the marker is dropped, the
   * turn stays out of the transcript); `noAppServer`: left for the next turn, which has one.
   */
  outcome: "recovered" | "alreadyMirrored" | "notInThread" | "unreadable" | "noAppServer";
  /** Codex's status of the turn (`interrupted` when its attempt died mid-turn), when it was recovered. */
  codexStatus?: string | undefined;
  /** Messages of the rebuilt turn (original prompt first), when it was recovered. */
  messages?: number | undefined;
  /** Items of Codex's record this client could not read (left out). */
  itemsSkipped?: number | undefined;
  /** Messages appended to the transcript and turns finalized by recovering it (also counted in `SessionRecovery`). */
  mirroredMessages?: number | undefined;
  finalized?: number | undefined;
}

/** What recovering a crashed earlier attempt did (see `recoverCodexSession`). */
export interface RecoveryOutput {
  pending: number;
  mirroredMessages: number;
  finalized: number;
  dropped: number;
}

/** What the accordion's engine compaction did before the turn. */
export interface CompactBeforeTurnOutput {
  compacted: boolean;
  reason?: string | undefined;
  /** The engine's compaction failed or returned a malformed result (the turn runs on the uncompacted history). */
  failed: boolean;
}

/** Where finalize's session snapshot came from (see `chooseFinalizeSnapshot` in the machine). */
export type FinalizeSnapshotSource = "mirrorTail" | "reread" | "fallback";

/** What `readHistory` and `bootstrapEngine` return: the mirrored history (re-read after bootstrap). */
export interface HistoryOutput {
  messages: AgentMessage[];
  /**
   * Parallel to `messages`: the Codex thread and turn that produced each message (from the mirror's idempotency keys),
   * or null for messages that did not come from a Codex turn. Delta projection uses it to know what a thread holds.
   */
  origins: Array<{ threadId: string; turnId: string } | null>;
  /** Entries in the transcript file when this history was read (the mirror-tail check compares against it). */
  entryCount?: number | undefined;
}

export interface BootstrapOutput extends HistoryOutput {
  bootstrapped: boolean;
  importedMessages?: number | undefined;
  reason?: string | undefined;
}

/** What the engine assembled; `empty` when it returned no messages (falls back to the unassembled prompt). */
export interface AssembleOutput {
  messages: AgentMessage[];
  estimatedTokens: number;
  systemPromptAddition?: string | undefined;
  contextProjection?: { mode: "per_turn" | "thread_bootstrap"; epoch?: string | undefined; fingerprint?: string | undefined } | undefined;
}

/** A Codex `turn/start.additionalContext` entry. */
export interface AdditionalContextEntry {
  value: string;
  kind: "untrusted" | "application";
  name?: string | undefined;
}

/** Whether the turn resumes the bound thread or starts a fresh one, and why. */
export interface ThreadPlan {
  action: "start" | "resume";
  /** Thread id to resume (when action is "resume"). */
  threadId?: string | undefined;
  reason: string;
}

/**
 * Native mode's sync of the thread with the view (see `src/projection/native.ts`): revert before a turn, then inject
 * items, before the turn starts. Counts only in logs and results; `items` is content (never logged).
 */
export interface NativeSyncOutput {
  /** `match` | `revert` | `carry` | `rotate` | `resync` | `noRecord`. */
  reason: string;
  revertBeforeTurnId?: string | undefined;
  items: Array<Record<string, unknown>>;
  units: string[];
  /** The thread record after the cut, before the injection (opaque to the machine). */
  record: unknown;
  counts: { viewUnits: number; keptTurns: number; revertedTurns: number; injectedItems: number; injectedBytes: number; staleBytes: number };
}

/** Native mode in `result.projection`: the sync's decision and counts (never content). */
export interface NativeProjectionSummary {
  decision: string;
  reverted: boolean;
  keptTurns: number;
  revertedTurns: number;
  injectedItems: number;
  injectedBytes: number;
  staleBytes: number;
  /** A fresh thread was started for it. */
  rotated: boolean;
}

/** What `syncNativeThread` did (counts only). */
export interface NativeSyncResult {
  reverted: boolean;
  injectedItems: number;
  injectedBytes: number;
}

/** The projection decision: exactly what Codex will receive. */
export interface ProjectionOutput {
  mode: "none" | "prompt" | "delta" | "threadBootstrap" | "native";
  reason: string;
  /** Text for `turn/start` input. */
  promptText: string;
  /** Final developer instructions (base + systemPromptAddition). */
  developerInstructions?: string | undefined;
  additionalContext?: Record<string, AdditionalContextEntry> | undefined;
  /**
   * Images of earlier user messages whose rendered blocks this turn sends (`promptText` or `additionalContext` holds
   * each one's label): they go before the prompt text, each after its label.
   */
  contextImages?: ContextImageInput[] | undefined;
  thread: ThreadPlan;
  /** Counts for the log line; never content. */
  entriesSent: number;
  bytes: number;
  /**
   * Estimated tokens the thread carries in this turn's request that the engine's current view no longer contains
   * (dropped or summarised history, superseded injected blocks, superseded developer instructions). Set in `delta` and
   * `threadBootstrap` (0 on a fresh thread) and on a resumed thread in `none`; absent in `prompt`.
   */
  staleTokens?: number | undefined;
  /** Opaque host data carried to threadStart/mirror (e.g. ledger updates to persist once the turn is accepted). */
  bindingUpdate?: unknown;
  /** Native mode: the revert and the items to inject before the turn starts (`threadStart.reverting`/`injecting`). */
  nativeSync?: NativeSyncOutput | undefined;
}

/**
 * What `runPromptHooks` returns (a hook failure is an error event; the machine keeps the unmodified prompt). When the
 * developer instructions changed, the machine projects again with them (`hooks.reprojecting`).
 */
export interface HooksOutput {
  promptText: string;
  developerInstructions?: string | undefined;
  /** The model a `beforeModelResolve` hook chose for this turn (absent: the turn's own). */
  model?: string | undefined;
}

/** Input of `admitTurn`: the final prompt and instructions of the turn, the history, and the turn's model. */
export interface AdmissionInput {
  promptText: string;
  developerInstructions?: string | undefined;
  history: HistoryOutput;
  model?: string | undefined;
}

/** Why a turn was refused before it ran, and what the user is told (the text the transcript records). */
export interface TurnBlock {
  /** Who refused it: the gate's own attribution (e.g. a plugin id), or the gate itself when it failed. */
  blockedBy: string;
  /** User-facing text; never the gate's internal reason. */
  message: string;
}

/** What `admitTurn` returns: the gate's decision (a gate that throws is a rejection: the machine then blocks). */
export type AdmissionOutput = { admitted: true } | ({ admitted: false } & TurnBlock);

/** What `prepareTranscriptMessages` returns: the turn's messages as they are to be stored (rewritten, some dropped). */
export interface PreparedMessagesOutput {
  messages: AgentMessage[];
  /** How many messages a hook rewrote and how many it kept out of the transcript (counts for the log). */
  rewritten: number;
  dropped: number;
}

/** What `recordBlockedTurn` returns: the redacted user message it recorded, and its transcript entry. */
export interface BlockedTurnRecordOutput {
  entryId?: string | undefined;
  userMessage: AgentMessage;
}

/** Input of `projectContext`: the machine passes no binding when the thread must rotate. */
export interface ProjectInput {
  prompt: string;
  history: HistoryOutput;
  assembled?: AssembleOutput | undefined;
  binding?: unknown;
  /** Why the bound thread is not used ("accordion", "resumeFailed"): appended to the reason. */
  freshThreadReason?: string | undefined;
  /** The beforePromptBuild hook's developer instructions (`hooks.reprojecting`): they replace base + addition. */
  finalDeveloperInstructions?: string | undefined;
}

export interface ThreadStartOutput {
  threadId: string;
  resumed: boolean;
}

/** Token usage of the turn as Codex reported it (`thread/tokenUsage/updated`). */
export interface TurnUsage {
  inputTokens: number;
  cachedInputTokens: number;
  outputTokens: number;
  reasoningOutputTokens: number;
  totalTokens: number;
  /** Prompt tokens of the last model call (`last.inputTokens`). */
  lastCallInputTokens?: number | undefined;
  /** Of those, served from the prompt cache (`last.cachedInputTokens`). */
  lastCallCachedInputTokens?: number | undefined;
  lastCallOutputTokens?: number | undefined;
  lastCallTotalTokens?: number | undefined;
  modelContextWindow?: number | undefined;
}

/** A native Codex compaction observed during the turn (never an engine compaction). */
export interface NativeCompactionRecord {
  backend: "codex-app-server";
  threadId: string;
  turnId: string;
  itemId: string;
  completed: boolean;
}

/** The typed record of one Codex turn, produced from its notifications. */
export interface TurnRecord {
  threadId: string;
  turnId: string;
  /** Codex's final status; "timedOut" when we gave up waiting (idle timeout or interrupt grace). */
  codexStatus: "completed" | "failed" | "interrupted" | "timedOut";
  assistantText: string;
  /** This turn's messages as AgentMessages, starting with the ORIGINAL user prompt (not the projected text). */
  messagesSnapshot: AgentMessage[];
  usage?: TurnUsage | undefined;
  compactions: NativeCompactionRecord[];
  error?: { message: string; codexErrorInfo?: string | undefined; code?: string | undefined } | undefined;
  /** Codex answered with another model than the turn asked for (`model/rerouted`): the last reroute of the turn. */
  modelRerouted?: ModelReroute | undefined;
  /**
   * Images Codex generated in the turn and saved (its image-generation items with a `savedPath`), in order: OpenClaw
   * forwards exactly these files as the reply's media, even when the turn has no assistant text.
   */
  generatedImages?: GeneratedImage[] | undefined;
  /**
   * The plan Codex proposed in Plan mode (the text of the turn's last completed `plan` item: what the model wrote in
   * its `<proposed_plan>` block, which Codex takes out of the assistant message). Absent when the turn proposed none.
   */
  proposedPlan?: string | undefined;
}

/** One image Codex generated and saved during a turn. */
export interface GeneratedImage {
  /** The image-generation item's id (also the tool call id in the transcript). */
  itemId: string;
  /** Where Codex saved the file. */
  path: string;
}

/** A `model/rerouted` notification: the model asked for, the model that answered, and Codex's reason. */
export interface ModelReroute {
  fromModel: string;
  toModel: string;
  /** e.g. `highRiskCyberActivity`. */
  reason: string;
}

export interface MirrorOutput {
  /** Entries appended by this call (0 when a retried mirror found them already written). */
  appended: number;
  /** Entries in the file after the write. */
  entryCount?: number | undefined;
}

/** Input of `finalizeEngine`: the session snapshot the machine chose, and this turn's record. */
export interface FinalizeInput {
  record: TurnRecord;
  /** The session as the engine's afterTurn expects it: history up to and including this turn. */
  messages: AgentMessage[];
  source: FinalizeSnapshotSource;
  prePromptMessageCount: number;
}

/**
 * Input of `commitEngineTurn`: the turn. Its advancement key is derived from the session and the turn
 * (`durableTurnAdvancementKey`), the same key the pending record holds for a retry after a crash.
 */
export interface CommitTurnInput {
  record: TurnRecord;
}

/** What `commitEngineTurn` did: the engine's answer, the key and the anchors' positions (ids and counts only). */
export interface CommitTurnOutput {
  status: "committed" | "duplicate";
  advancementKey: string;
  /** Messages from the admission (the turn's user entry) through the terminal entry. */
  messages: number;
  admissionEntryId: string;
  terminalEntryId: string;
  admissionSeq: number;
  terminalSeq: number;
}

export interface FinalizeOutput {
  /** Which engine method took the turn, or "skipped:<reason>". */
  mode: "afterTurn" | "ingestBatch" | "ingest" | "commitTurn" | `skipped:${string}`;
  /** The mirror re-read did not contain this turn, so history + snapshot was used. */
  usedFallback: boolean;
}

export interface MaintainOutput {
  changed: boolean;
}

/** Input handed to the `runTurn` callback actor. */
/** An image of an earlier user message sent with a turn (base64 `data`), after the text item `label`. */
export interface ContextImageInput {
  label: string;
  data: string;
  mimeType: string;
}

export interface RunTurnInput {
  threadId: string;
  promptText: string;
  /** See {@link ProjectionOutput.contextImages}. */
  contextImages?: ContextImageInput[] | undefined;
  /** The original prompt, recorded in the mirror instead of the projected text. */
  originalPrompt: string;
  additionalContext?: Record<string, AdditionalContextEntry> | undefined;
  /** What the thread was started or resumed with (for the `llmInput` observation). */
  developerInstructions?: string | undefined;
  /** The model a `beforeModelResolve` hook chose (absent: the turn's `model` parameter). */
  model?: string | undefined;
  /** The mirrored history before this turn (for the `llmInput` observation; read-only). */
  historyMessages?: readonly AgentMessage[] | undefined;
}

/** Events the `runTurn` actor sends back to the machine. */
export type RunTurnEmitted =
  | { type: "TURN.ACCEPTED"; turnId: string }
  | { type: "TURN.START_FAILED"; error: TurnError }
  /** `images[i]`: the images of `texts[i]` (absent: none). */
  | { type: "TURN.STEER_REJECTED"; texts: string[]; images?: SteerImage[][] | undefined }
  /** `preTurn`: it completed before this turn's user message started (Codex's pre-turn compaction). */
  | { type: "TURN.COMPACTION"; compaction: NativeCompactionRecord; preTurn?: boolean | undefined }
  | { type: "TURN.ENDED"; record: TurnRecord };

/** Events the machine forwards to the `runTurn` actor. */
export type RunTurnReceived = { type: "TURN.STEER"; text: string; images?: SteerImage[] | undefined } | { type: "TURN.INTERRUPT"; reason: "abort" | "yield" };

/** An image steered into a running turn (checked at the handle: base64 bytes of a supported type; `path` for a file). */
export interface SteerImage {
  data: string;
  mimeType: string;
  path?: string | undefined;
}

/** External events a host (or the turn handle) sends to the machine. */
export type TurnExternalEvent =
  | { type: "ABORT"; reason?: string | undefined }
  | { type: "YIELD" }
  | { type: "STEER"; text: string; images?: SteerImage[] | undefined };

export type TurnEvent = TurnExternalEvent | RunTurnEmitted;

/** Outcome labels reported in `CodexTurnResult.engine`. */
export interface EngineOutcomes {
  bootstrap: string;
  assemble: string;
  finalize: string;
  maintenance: string;
}

/** The machine's output (its final state's output). The host turns it into a `CodexTurnResult`. */
export interface TurnMachineOutput {
  status: TurnStatus;
  threadId?: string | undefined;
  turnId?: string | undefined;
  record?: TurnRecord | undefined;
  engine: EngineOutcomes;
  trace: string[];
  warnings: string[];
  /** Steer texts Codex did not take (or that arrived when no turn was running): run them after this turn. */
  followUps: string[];
  /** The images of each follow-up (`followUpImages[i]` belongs to `followUps[i]`; empty when it had none). */
  followUpImages: SteerImage[][];
  projection?: (Pick<ProjectionOutput, "mode" | "reason" | "entriesSent" | "bytes" | "staleTokens"> & { native?: NativeProjectionSummary | undefined }) | undefined;
  /** Background maintenance was scheduled (tracked by the host) rather than run in the machine. */
  backgroundMaintenance: boolean;
  error?: TurnError | undefined;
  /** Status `blocked`: who refused the turn, the text the user is told, and the redacted message recorded for it. */
  blocked?: TurnBlock & { userMessage?: AgentMessage | undefined } | undefined;
  /** A turn an earlier attempt left in flight, handled before this one (see `recoverCutTurn`). */
  cutTurn?: CutTurnOutput | undefined;
  /** With `requestId`: the id, and whether this output is an earlier attempt's recorded outcome (Codex did not run). */
  request?: { id: string; replayed: boolean; cut?: boolean | undefined } | undefined;
}
