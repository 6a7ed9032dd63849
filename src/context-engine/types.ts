/**
 * The OpenClaw context-engine contract, structurally compatible with OpenClaw's
 * `src/context-engine/types.ts` (method and parameter names are the compatibility surface).
 *
 * An engine written for OpenClaw runs here unchanged: only `info`, `ingest`, `assemble` and `compact`
 * are required; everything else is optional and detected at run time.
 */

/** A text part. */
export interface TextPart {
  type: "text";
  text: string;
}
/** A reasoning ("thinking") part of an assistant message. */
export interface ThinkingPart {
  type: "thinking";
  thinking: string;
}
/** An image part (base64 data). */
export interface ImagePart {
  type: "image";
  data: string;
  mimeType: string;
}
/** A tool call made by the assistant. */
export interface ToolCallPart {
  type: "toolCall";
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}
/** Any part type we do not know (e.g. Anthropic-style `tool_use`); must survive a round trip. */
export interface UnknownPart {
  type: string;
  [key: string]: unknown;
}

export type MessagePart = TextPart | ThinkingPart | ImagePart | ToolCallPart | UnknownPart;

/** Token usage as pi-ai records it on assistant messages. */
export interface MessageUsage {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  totalTokens: number;
  cost?: { input: number; output: number; cacheRead: number; cacheWrite: number; total: number } | undefined;
}

export interface UserMessage {
  role: "user";
  content: string | MessagePart[];
  timestamp: number;
  [key: string]: unknown;
}
export interface AssistantMessage {
  role: "assistant";
  content: MessagePart[];
  model?: string | undefined;
  api?: string | undefined;
  provider?: string | undefined;
  usage?: MessageUsage | undefined;
  stopReason?: string | undefined;
  errorMessage?: string | undefined;
  timestamp: number;
  [key: string]: unknown;
}
export interface ToolResultMessage {
  role: "toolResult";
  toolCallId: string;
  toolName: string;
  content: MessagePart[];
  isError: boolean;
  timestamp: number;
  [key: string]: unknown;
}
export interface CustomMessage {
  role: "custom";
  customType: string;
  content: string | MessagePart[];
  display?: boolean | undefined;
  timestamp?: number | undefined;
  [key: string]: unknown;
}
export interface CompactionSummaryMessage {
  role: "compactionSummary";
  summary: string;
  tokensBefore: number;
  timestamp?: number | undefined;
  [key: string]: unknown;
}
export interface BranchSummaryMessage {
  role: "branchSummary";
  summary: string;
  fromId: string;
  timestamp?: number | undefined;
  [key: string]: unknown;
}
/** Roles we do not know must survive too. */
export interface UnknownRoleMessage {
  role: string;
  [key: string]: unknown;
}

/** pi-agent-core `AgentMessage`. */
export type AgentMessage =
  | UserMessage
  | AssistantMessage
  | ToolResultMessage
  | CustomMessage
  | CompactionSummaryMessage
  | BranchSummaryMessage
  | UnknownRoleMessage;

export interface ContextEngineInfo {
  id: string;
  name: string;
  version?: string | undefined;
  /** The engine owns compaction policy (lossless-claw#850). */
  ownsCompaction?: boolean | undefined;
  /**
   * `"background"` runs turn maintenance off the turn's critical path; any other value (OpenClaw types it as a string,
   * e.g. `"inline"`) runs it in the foreground.
   */
  turnMaintenanceMode?: "foreground" | "background" | (string & {}) | undefined;
  /** Host capabilities the engine needs per operation; the plugin host refuses to load it when one is missing. */
  hostRequirements?: Partial<Record<ContextEngineOperation, ContextEngineHostRequirements>> | undefined;
  /** Host parameters the engine reads (informational, as in OpenClaw). */
  acceptedHostParams?: string[] | undefined;
  /** Proposed upstream (openclaw#81164). `interceptCompaction` is used whenever the engine has it; `false` opts out. */
  interceptsCompaction?: boolean | undefined;
  /**
   * OpenClaw's durable-turn declarations (2026.8.1+). An engine that declares both and implements
   * {@link ContextEngine.commitTurn} gets `commitTurn` once per accepted turn instead of `afterTurn` (docs/engines.md,
   * "Durable turns").
   */
  transcriptSemantics?: ContextEngineTranscriptSemantics | undefined;
}

/**
 * OpenClaw's `info.transcriptSemantics`: how the engine reads the transcript around the current turn and how it
 * advances its store per turn.
 *
 * @example
 * ```ts
 * const semantics: ContextEngineTranscriptSemantics = { currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1" };
 * ```
 */
export interface ContextEngineTranscriptSemantics {
  currentTurnFence?: "before-current-turn-entry-v1" | undefined;
  turnAdvancementIdempotency?: "atomic-idempotent-v1" | undefined;
}

/**
 * OpenClaw's `TranscriptEntryAnchor`: one transcript entry as the store issued it. Here `entryId`, `rawSeq` (its position
 * among the store's entries), `effectiveParentId` and `idempotencyKey` come from the session store's visible entries,
 * `activeMessagePosition` is its index among them, `storePath` is the store's address and `agentId` is
 * {@link DURABLE_TURN_AGENT_ID}.
 *
 * @example
 * ```ts
 * const a: TranscriptEntryAnchor = { agentId: "codex-turn", sessionId: "s1", sessionKey: "s1", storePath: "/data/s1.jsonl",
 *   generation: "0", entryId: "a1b2c3d4", rawSeq: 4, effectiveParentId: "99aa00bb", activeMessagePosition: 4 };
 * ```
 */
export interface TranscriptEntryAnchor {
  readonly agentId: string;
  readonly sessionId: string;
  readonly sessionKey: string;
  readonly storePath: string;
  readonly generation: string;
  readonly entryId: string;
  readonly rawSeq: number;
  readonly effectiveParentId: string | null;
  readonly activeMessagePosition: number;
  readonly idempotencyKey?: string | undefined;
}

/** OpenClaw's `TranscriptTurnAdmission`: the turn's user entry, bound to its logical turn (the advancement key). */
export interface TranscriptTurnAdmission extends TranscriptEntryAnchor {
  readonly logicalTurnId: string;
  readonly role: "user";
}

/** The `agentId` of the anchors this host issues (it serves no OpenClaw agents; the field is required by the type). */
export const DURABLE_TURN_AGENT_ID = "codex-turn";

/** Operations an engine can state host requirements for (OpenClaw's `ContextEngineOperation`). */
export type ContextEngineOperation = "agent-run" | "manual-compact" | "subagent-spawn";

/** OpenClaw's `ContextEngineHostCapability`. */
export type ContextEngineHostCapability =
  | "bootstrap"
  | "assemble-before-prompt"
  | "after-turn"
  | "maintain"
  | "compact"
  | "runtime-llm-complete"
  | "thread-bootstrap-projection";

/** What an engine needs from the host for one operation. */
export interface ContextEngineHostRequirements {
  requiredCapabilities: ContextEngineHostCapability[];
  /** The engine's own guidance, shown in the load error. */
  unsupportedMessage?: string | undefined;
}

export interface PromptCacheInfo {
  lastCallUsage?: { input?: number | undefined; output?: number | undefined; cacheRead?: number | undefined; cacheWrite?: number | undefined; total?: number | undefined } | undefined;
}

/** One message of an `llm.complete` request (OpenClaw's `LlmCompleteMessage`). */
export interface LlmCompleteMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** An `llm.complete` request (OpenClaw's `LlmCompleteParams`, direct form; advisory fields a host may ignore). */
export interface LlmCompleteRequest {
  messages: LlmCompleteMessage[];
  systemPrompt?: string | undefined;
  /** A model ref (`"provider/model"` or `"model"`); absent means the host's configured model. */
  model?: string | undefined;
  maxTokens?: number | undefined;
  temperature?: number | undefined;
  purpose?: string | undefined;
  signal?: AbortSignal | undefined;
  [key: string]: unknown;
}

/** An `llm.complete` answer (OpenClaw's `LlmCompleteResult`). */
export interface LlmCompleteResponse {
  text: string;
  provider: string;
  model: string;
  agentId: string;
  usage: { inputTokens?: number | undefined; outputTokens?: number | undefined; cacheReadTokens?: number | undefined; cacheWriteTokens?: number | undefined; totalTokens?: number | undefined };
  execution: { mode: "direct-provider"; owner: { kind: "provider"; id: string } };
  audit: { caller: { kind: "plugin" | "context-engine" | "host" | "unknown"; id?: string | undefined }; purpose?: string | undefined };
}

/** `runtimeContext.llm` and a plugin's `runtime.llm` (OpenClaw's): a model completion, e.g. to summarize. */
export interface ContextEngineLlm {
  complete(params: LlmCompleteRequest): Promise<LlmCompleteResponse>;
}

/**
 * Runtime context handed to assemble / afterTurn / maintain / compact / bootstrap. Unknown values are omitted, never
 * zero. A plugin host adds `provider`, `model` and `llm` (see `loadContextEngine`).
 */
export interface ContextEngineRuntimeContext {
  tokenBudget?: number | undefined;
  currentTokenCount?: number | undefined;
  promptCache?: PromptCacheInfo | undefined;
  allowDeferredCompactionExecution?: boolean | undefined;
  provider?: string | undefined;
  model?: string | undefined;
  llm?: ContextEngineLlm | undefined;
  /** The session the call is about (OpenClaw's runtime `sessionTarget`); also passed as the call's own `sessionTarget`. */
  sessionTarget?: ContextEngineSessionTarget | undefined;
  /**
   * Rewrite transcript entries (OpenClaw's runtime helper): give `message` entries on the active branch new messages.
   * The engine decides what is safe to rewrite; the host owns how the session changes on disk (copy-on-write: the
   * branch from the first replaced entry is re-issued with new entry ids; atomic). Present in `bootstrap`, `afterTurn`,
   * `maintain` and `compact` calls; never throws (a refusal resolves `{ changed: false, reason }`).
   */
  rewriteTranscriptEntries?: ((request: TranscriptRewriteRequest) => Promise<TranscriptRewriteResult>) | undefined;
  [key: string]: unknown;
}

/**
 * OpenClaw's storage-neutral session target (`ContextEngineSessionTarget`): which session an engine call is about, so an
 * engine can read that session's visible transcript through `openclaw/plugin-sdk/session-transcript-runtime`. This host
 * passes `{ sessionId, sessionKey, storePath }` in every engine call and in its runtime context: the turn's session id,
 * its session key (the session id when the turn has none: OpenClaw's targets always carry a key) and the session file.
 *
 * @example
 * ```ts
 * const target: ContextEngineSessionTarget = { sessionId: "s1", sessionKey: "agent:main:s1", storePath: "/data/s1.jsonl" };
 * ```
 */
export interface ContextEngineSessionTarget {
  agentId?: string | undefined;
  sessionId?: string | undefined;
  sessionKey?: string | undefined;
  /** Where the session is stored: here the session file (SessionStore.sessionFile). */
  storePath?: string | undefined;
  threadId?: string | number | undefined;
}

/**
 * OpenClaw's `TranscriptRewriteRequest`: entries (by id) and the message each gets. `message` is an {@link AgentMessage};
 * it is typed as any object so that engines written to OpenClaw's (pi's) message types pass theirs, and it is checked
 * when the rewrite runs (a non-empty `role`, string or array `content`, numeric `timestamp`).
 */
export interface TranscriptRewriteRequest {
  replacements: Array<{ entryId: string; message: AgentMessage | object }>;
}

/** OpenClaw's `TranscriptRewriteResult`. */
export interface TranscriptRewriteResult {
  changed: boolean;
  bytesFreed: number;
  rewrittenEntries: number;
  reason?: string | undefined;
}

/**
 * OpenClaw's typed runtime settings (`ContextEngineRuntimeSettings`, schema 1): which runtime, model and execution host
 * the engine serves. A non-empty `executionHost.id` tells engines (lossless-claw) that the host adds its own prompt
 * framing. Built by `buildHarnessContextEngineRuntimeSettings`.
 */
export interface ContextEngineRuntimeSettings {
  schemaVersion: 1;
  runtime: { host: "openclaw"; mode: "normal" | "fallback" | "degraded"; harnessId: string | null; runtimeId: string | null };
  model: { requested: string | null; resolved: string | null; provider: string | null; family: string | null };
  contextEngineSelection: { selectedId: string | null; source: "configured" | "default" | "unknown" };
  executionHost: { id: string | null; label: string | null };
  limits: { promptTokenBudget: number | null; maxOutputTokens: number | null };
  diagnostics: { fallbackReason: ContextEngineRuntimeReasonCode | null; degradedReason: ContextEngineRuntimeReasonCode | null };
}

/** OpenClaw's `ContextEngineRuntimeReasonCode`. */
export type ContextEngineRuntimeReasonCode =
  | "provider_timeout"
  | "provider_unavailable"
  | "rate_limited"
  | "context_overflow"
  | "runtime_unavailable"
  | "unknown";

/** OpenClaw's memory citation mode, passed to `assemble` as `citationsMode`. */
export type MemoryCitationsMode = "auto" | "on" | "off";

export interface ContextProjectionRequest {
  mode: "per_turn" | "thread_bootstrap";
  epoch?: string | undefined;
  fingerprint?: string | undefined;
}

export interface AssembleResult {
  messages: AgentMessage[];
  estimatedTokens: number;
  systemPromptAddition?: string | undefined;
  contextProjection?: ContextProjectionRequest | undefined;
}

export interface CompactResult {
  ok: boolean;
  compacted: boolean;
  reason?: string | undefined;
  result?: {
    summary?: string | undefined;
    firstKeptEntryId?: string | undefined;
    tokensBefore: number;
    tokensAfter?: number | undefined;
    details?: unknown;
  } | undefined;
}

export interface InterceptCompactionRequest {
  sessionId: string;
  sessionKey?: string | undefined;
  sessionFile: string;
  tokenBudget?: number | undefined;
  currentTokenCount?: number | undefined;
  firstKeptEntryId: string;
  tokensBefore: number;
  trigger?: "in-attempt-auto" | "overflow" | "timeout" | "manual" | undefined;
  signal?: AbortSignal | undefined;
}
export type InterceptCompactionResult =
  | { handled: true; summary: string; firstKeptEntryId: string; tokensBefore: number; tokensAfter?: number | undefined; details?: unknown }
  | { handled: false; reason: string };

/**
 * A context engine (OpenClaw plugin contract).
 *
 * @example
 * ```ts
 * const engine: ContextEngine = {
 *   info: { id: "mine", name: "My engine" },
 *   async ingest() { return { ingested: true }; },
 *   async assemble({ messages }) { return { messages, estimatedTokens: 0 }; },
 *   async compact() { return { ok: true, compacted: false, reason: "nothing to do" }; },
 * };
 * ```
 */
export interface ContextEngine {
  info: ContextEngineInfo;
  bootstrap?(p: {
    sessionId: string;
    sessionKey?: string | undefined;
    sessionTarget?: ContextEngineSessionTarget | undefined;
    sessionFile: string;
    runtimeSettings?: ContextEngineRuntimeSettings | undefined;
    runtimeContext?: ContextEngineRuntimeContext | undefined;
  }): Promise<{
    bootstrapped: boolean;
    importedMessages?: number | undefined;
    reason?: string | undefined;
  }>;
  maintain?(p: {
    sessionId: string;
    sessionKey?: string | undefined;
    sessionTarget?: ContextEngineSessionTarget | undefined;
    sessionFile: string;
    runtimeSettings?: ContextEngineRuntimeSettings | undefined;
    runtimeContext?: ContextEngineRuntimeContext | undefined;
    abortSignal?: AbortSignal | undefined;
  }): Promise<{ changed: boolean; bytesFreed: number; rewrittenEntries: number; reason?: string | undefined }>;
  ingest(p: {
    sessionId: string;
    sessionKey?: string | undefined;
    message: AgentMessage;
    /**
     * Stable per-message key (the transcript mirror's idempotency key, `codex-app-server:<thread>:<turn>:<kind>`): the
     * same message replayed after a failed finalize carries the same key, so an engine can skip what it already has.
     */
    messageKey?: string | undefined;
    isHeartbeat?: boolean | undefined;
  }): Promise<{
    ingested: boolean;
  }>;
  ingestBatch?(p: {
    sessionId: string;
    sessionKey?: string | undefined;
    messages: AgentMessage[];
    /** One {@link ContextEngine.ingest} `messageKey` per message, in order (when the host knows them). */
    messageKeys?: string[] | undefined;
    isHeartbeat?: boolean | undefined;
  }): Promise<{ ingestedCount: number }>;
  /**
   * OpenClaw's durable turn (2026.8.1+): atomically and idempotently commit one accepted turn, `messages` spanning the
   * admitted user entry through the terminal entry. Called once per accepted turn when `info.transcriptSemantics`
   * declares both semantics (then `afterTurn` is not called); after a crash the host retries with the same
   * `advancementKey`, and `duplicate` is success.
   */
  commitTurn?(p: {
    advancementKey: string;
    admission: TranscriptTurnAdmission;
    terminal: TranscriptEntryAnchor;
    messages: AgentMessage[];
    sessionId: string;
    sessionKey?: string | undefined;
    sessionTarget?: ContextEngineSessionTarget | undefined;
    runtimeSettings?: ContextEngineRuntimeSettings | undefined;
    runtimeContext?: ContextEngineRuntimeContext | undefined;
    isHeartbeat?: boolean | undefined;
  }): Promise<{ status: "committed" | "duplicate" }>;
  afterTurn?(p: {
    sessionId: string;
    sessionKey?: string | undefined;
    sessionTarget?: ContextEngineSessionTarget | undefined;
    sessionFile: string;
    messages: AgentMessage[];
    prePromptMessageCount: number;
    autoCompactionSummary?: string | undefined;
    isHeartbeat?: boolean | undefined;
    tokenBudget?: number | undefined;
    runtimeSettings?: ContextEngineRuntimeSettings | undefined;
    runtimeContext?: ContextEngineRuntimeContext | undefined;
  }): Promise<void>;
  assemble(p: {
    sessionId: string;
    sessionKey?: string | undefined;
    sessionTarget?: ContextEngineSessionTarget | undefined;
    messages: AgentMessage[];
    tokenBudget?: number | undefined;
    availableTools?: Set<string> | undefined;
    citationsMode?: MemoryCitationsMode | undefined;
    model?: string | undefined;
    prompt?: string | undefined;
    runtimeSettings?: ContextEngineRuntimeSettings | undefined;
    runtimeContext?: ContextEngineRuntimeContext | undefined;
  }): Promise<AssembleResult>;
  compact(p: {
    sessionId: string;
    sessionKey?: string | undefined;
    sessionTarget?: ContextEngineSessionTarget | undefined;
    sessionFile: string;
    tokenBudget?: number | undefined;
    force?: boolean | undefined;
    currentTokenCount?: number | undefined;
    compactionTarget?: "budget" | "threshold" | undefined;
    /** lossless-claw accordion extension (lossless-claw#665). */
    compactionTargetFraction?: number | undefined;
    customInstructions?: string | undefined;
    runtimeSettings?: ContextEngineRuntimeSettings | undefined;
    runtimeContext?: ContextEngineRuntimeContext | undefined;
    /** OpenClaw's embedded-runtime compaction parameters; this host passes the runtime context (provider, model, llm). */
    legacyParams?: Record<string, unknown> | undefined;
    abortSignal?: AbortSignal | undefined;
  }): Promise<CompactResult>;
  interceptCompaction?(req: InterceptCompactionRequest): Promise<InterceptCompactionResult>;
  dispose?(): Promise<void>;
}
