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
  cost?: { input: number; output: number; cacheRead: number; cacheWrite: number; total: number };
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
  model?: string;
  api?: string;
  provider?: string;
  usage?: MessageUsage;
  stopReason?: string;
  errorMessage?: string;
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
  display?: boolean;
  timestamp?: number;
  [key: string]: unknown;
}
export interface CompactionSummaryMessage {
  role: "compactionSummary";
  summary: string;
  tokensBefore: number;
  timestamp?: number;
  [key: string]: unknown;
}
export interface BranchSummaryMessage {
  role: "branchSummary";
  summary: string;
  fromId: string;
  timestamp?: number;
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
  version?: string;
  /** The engine owns compaction policy (lossless-claw#850). */
  ownsCompaction?: boolean;
  /**
   * `"background"` runs turn maintenance off the turn's critical path; any other value (OpenClaw types it as a string,
   * e.g. `"inline"`) runs it in the foreground.
   */
  turnMaintenanceMode?: "foreground" | "background" | (string & {});
  /** Host capabilities the engine needs per operation; the plugin host refuses to load it when one is missing. */
  hostRequirements?: Partial<Record<ContextEngineOperation, ContextEngineHostRequirements>>;
  /** Host parameters the engine reads (informational, as in OpenClaw). */
  acceptedHostParams?: string[];
  /** Proposed upstream (openclaw#81164). `interceptCompaction` is used whenever the engine has it; `false` opts out. */
  interceptsCompaction?: boolean;
}

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
  unsupportedMessage?: string;
}

export interface PromptCacheInfo {
  lastCallUsage?: { input?: number; output?: number; cacheRead?: number; cacheWrite?: number; total?: number };
}

/** One message of an `llm.complete` request (OpenClaw's `LlmCompleteMessage`). */
export interface LlmCompleteMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** An `llm.complete` request (OpenClaw's `LlmCompleteParams`, direct form; advisory fields a host may ignore). */
export interface LlmCompleteRequest {
  messages: LlmCompleteMessage[];
  systemPrompt?: string;
  /** A model ref (`"provider/model"` or `"model"`); absent means the host's configured model. */
  model?: string;
  maxTokens?: number;
  temperature?: number;
  purpose?: string;
  signal?: AbortSignal;
  [key: string]: unknown;
}

/** An `llm.complete` answer (OpenClaw's `LlmCompleteResult`). */
export interface LlmCompleteResponse {
  text: string;
  provider: string;
  model: string;
  agentId: string;
  usage: { inputTokens?: number; outputTokens?: number; cacheReadTokens?: number; cacheWriteTokens?: number; totalTokens?: number };
  execution: { mode: "direct-provider"; owner: { kind: "provider"; id: string } };
  audit: { caller: { kind: "plugin" | "context-engine" | "host" | "unknown"; id?: string }; purpose?: string };
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
  tokenBudget?: number;
  currentTokenCount?: number;
  promptCache?: PromptCacheInfo;
  allowDeferredCompactionExecution?: boolean;
  provider?: string;
  model?: string;
  llm?: ContextEngineLlm;
  /**
   * Rewrite transcript entries (OpenClaw's runtime helper): give `message` entries on the active branch new messages.
   * The engine decides what is safe to rewrite; the host owns how the session changes on disk (copy-on-write: the
   * branch from the first replaced entry is re-issued with new entry ids; atomic). Present in `bootstrap`, `afterTurn`,
   * `maintain` and `compact` calls; never throws (a refusal resolves `{ changed: false, reason }`).
   */
  rewriteTranscriptEntries?: (request: TranscriptRewriteRequest) => Promise<TranscriptRewriteResult>;
  [key: string]: unknown;
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
  reason?: string;
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
  epoch?: string;
  fingerprint?: string;
}

export interface AssembleResult {
  messages: AgentMessage[];
  estimatedTokens: number;
  systemPromptAddition?: string;
  contextProjection?: ContextProjectionRequest;
}

export interface CompactResult {
  ok: boolean;
  compacted: boolean;
  reason?: string;
  result?: {
    summary?: string;
    firstKeptEntryId?: string;
    tokensBefore: number;
    tokensAfter?: number;
    details?: unknown;
  };
}

export interface InterceptCompactionRequest {
  sessionId: string;
  sessionKey?: string;
  sessionFile: string;
  tokenBudget?: number;
  currentTokenCount?: number;
  firstKeptEntryId: string;
  tokensBefore: number;
  trigger?: "in-attempt-auto" | "overflow" | "timeout" | "manual";
  signal?: AbortSignal;
}
export type InterceptCompactionResult =
  | { handled: true; summary: string; firstKeptEntryId: string; tokensBefore: number; tokensAfter?: number; details?: unknown }
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
    sessionKey?: string;
    sessionFile: string;
    runtimeSettings?: ContextEngineRuntimeSettings;
    runtimeContext?: ContextEngineRuntimeContext;
  }): Promise<{
    bootstrapped: boolean;
    importedMessages?: number;
    reason?: string;
  }>;
  maintain?(p: {
    sessionId: string;
    sessionKey?: string;
    sessionFile: string;
    runtimeSettings?: ContextEngineRuntimeSettings;
    runtimeContext?: ContextEngineRuntimeContext;
    abortSignal?: AbortSignal;
  }): Promise<{ changed: boolean; bytesFreed: number; rewrittenEntries: number; reason?: string }>;
  ingest(p: {
    sessionId: string;
    sessionKey?: string;
    message: AgentMessage;
    /**
     * Stable per-message key (the transcript mirror's idempotency key, `codex-app-server:<thread>:<turn>:<kind>`): the
     * same message replayed after a failed finalize carries the same key, so an engine can skip what it already has.
     */
    messageKey?: string;
    isHeartbeat?: boolean;
  }): Promise<{
    ingested: boolean;
  }>;
  ingestBatch?(p: {
    sessionId: string;
    sessionKey?: string;
    messages: AgentMessage[];
    /** One {@link ContextEngine.ingest} `messageKey` per message, in order (when the host knows them). */
    messageKeys?: string[];
    isHeartbeat?: boolean;
  }): Promise<{ ingestedCount: number }>;
  afterTurn?(p: {
    sessionId: string;
    sessionKey?: string;
    sessionFile: string;
    messages: AgentMessage[];
    prePromptMessageCount: number;
    autoCompactionSummary?: string;
    isHeartbeat?: boolean;
    tokenBudget?: number;
    runtimeSettings?: ContextEngineRuntimeSettings;
    runtimeContext?: ContextEngineRuntimeContext;
  }): Promise<void>;
  assemble(p: {
    sessionId: string;
    sessionKey?: string;
    messages: AgentMessage[];
    tokenBudget?: number;
    availableTools?: Set<string>;
    citationsMode?: MemoryCitationsMode;
    model?: string;
    prompt?: string;
    runtimeSettings?: ContextEngineRuntimeSettings;
    runtimeContext?: ContextEngineRuntimeContext;
  }): Promise<AssembleResult>;
  compact(p: {
    sessionId: string;
    sessionKey?: string;
    sessionFile: string;
    tokenBudget?: number;
    force?: boolean;
    currentTokenCount?: number;
    compactionTarget?: "budget" | "threshold";
    /** lossless-claw accordion extension (lossless-claw#665). */
    compactionTargetFraction?: number;
    customInstructions?: string;
    runtimeSettings?: ContextEngineRuntimeSettings;
    runtimeContext?: ContextEngineRuntimeContext;
    abortSignal?: AbortSignal;
  }): Promise<CompactResult>;
  interceptCompaction?(req: InterceptCompactionRequest): Promise<InterceptCompactionResult>;
  dispose?(): Promise<void>;
}
