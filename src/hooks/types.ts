import type { AgentMessage } from "../context-engine/types.js";
import type { NativeCompactionRecord, TurnStatus, TurnUsage } from "../../machines/turn.contract.js";

/**
 * Which session, run and key a turn's hook event belongs to; every turn-scoped event carries them.
 *
 * @example
 * ```ts
 * const hooks: CodexTurnHooks = { llmInput: (e) => spans.start(e.runId), llmOutput: (e) => spans.end(e.runId) };
 * ```
 */
export interface TurnHookIds {
  sessionId: string;
  /** The attempt's run id (`CodexTurnParams.runId`; OpenClaw's `runId`): the same in every hook of the attempt. */
  runId: string;
  /** The turn's session key (`CodexTurnParams.sessionKey`), when it has one. */
  sessionKey?: string | undefined;
}

/** What a `beforePromptBuild` hook sees: exactly what Codex will receive (after engine projection). */
export interface BeforePromptBuildContext extends TurnHookIds {
  prompt: string;
  developerInstructions?: string | undefined;
  /** The mirrored history (read-only). */
  messages: readonly AgentMessage[];
}

/** A hook may replace the prompt and/or developer instructions; returning nothing keeps them. */
export interface BeforePromptBuildResult {
  prompt?: string | undefined;
  developerInstructions?: string | undefined;
  /**
   * Problems the hook had while still returning a result (one of several plugins' handlers failed, the others'
   * changes apply, as OpenClaw runs them): each becomes a turn warning. No prompt text belongs here.
   */
  warnings?: string[] | undefined;
}

/** What a `beforeModelResolve` hook sees: the prompt as given and the model the turn would use. */
export interface BeforeModelResolveContext extends TurnHookIds {
  prompt: string;
  /** The turn's `model` parameter (absent: Codex's configured model). */
  model?: string | undefined;
  /**
   * What is attached to the prompt, for attachment-aware routing (say, images to a vision model): one entry per image
   * (`CodexTurnParams.images`), its kind and MIME type only, never its bytes or path. Absent when nothing is attached.
   */
  attachments?: Array<{ kind: "image"; mimeType: string }> | undefined;
}

/** A hook may pick this turn's model (a Codex model name); returning nothing keeps the turn's. */
export interface BeforeModelResolveResult {
  model?: string | undefined;
}

/**
 * What a `beforeAgentRun` gate sees: the turn exactly as Codex would get it (after projection and `beforePromptBuild`),
 * before any thread is started or resumed.
 */
export interface BeforeAgentRunEvent extends TurnHookIds {
  /** The final prompt text (what `turn/start` would carry). */
  prompt: string;
  developerInstructions?: string | undefined;
  /** The mirrored history before this turn (read-only). */
  messages: readonly AgentMessage[];
  /** The model the turn would run with, when named (the turn's `model`, or a `beforeModelResolve` hook's choice). */
  model?: string | undefined;
}

/**
 * A gate's decision. Returning nothing (or `{ block: false }`) admits the turn. `{ block: true }` refuses it: no Codex
 * work starts, the result's status is `blocked`, and the transcript records a user message with the user-facing text
 * ("Your message could not be sent: <message> (blocked by <blockedBy>)", OpenClaw's wording) instead of the prompt.
 */
export type BeforeAgentRunResult =
  | { block: false }
  | {
      block: true;
      /** User-facing detail (shown and recorded). Keep internal reasons out of it. */
      message?: string | undefined;
      /** Who refused (e.g. a policy or plugin id); default `beforeAgentRun`. */
      blockedBy?: string | undefined;
      /** Problems behind the decision (a plugin's gate handler failed, so the gate refused): each becomes a turn warning. */
      warnings?: string[] | undefined;
    };

/**
 * What `beforeMessageWrite` sees: one message of the turn, before it is stored (pending record, transcript, the
 * engine's finalize). Tool results carry their tool's name and call id.
 */
export interface BeforeMessageWriteEvent extends TurnHookIds {
  message: AgentMessage;
  toolName?: string | undefined;
  toolCallId?: string | undefined;
}

/**
 * `beforeMessageWrite` may replace the message (`message`) or keep it out of storage (`block: true`); returning nothing
 * stores it as it is. Problems behind a partial result go in `warnings` (turn warnings).
 */
export interface BeforeMessageWriteResult {
  block?: boolean | undefined;
  message?: AgentMessage | undefined;
  warnings?: string[] | undefined;
}

/** Which compaction path ran: Codex's own (`codex-app-server`) or the context engine's. */
export type CompactionBackend = "codex-app-server" | "context-engine";

/** What started a compaction. */
export type CompactionHookTrigger = "native" | "manual" | "accordion" | "budget";

/**
 * Details of a compaction, for `beforeCompaction` / `afterCompaction`. Every compaction path fires them: Codex native
 * compaction seen during a turn (`backend: "codex-app-server"`, `trigger: "native"`, with the Codex item fields),
 * explicit compaction (`trigger: "manual"` or `"budget"`) and the accordion (`trigger: "accordion"`).
 */
export interface CompactionHookEvent extends Partial<Omit<NativeCompactionRecord, "backend">> {
  sessionId?: string | undefined;
  /** The run id of the attempt the compaction ran in (absent for a compaction outside a turn). */
  runId?: string | undefined;
  sessionKey?: string | undefined;
  backend: CompactionBackend;
  trigger: CompactionHookTrigger;
  ownsCompaction: boolean;
  /** The session's transcript (OpenClaw's `sessionFile`). */
  sessionFile?: string | undefined;
  /** How many messages the session held when the compaction started (OpenClaw's `messageCount`). */
  messageCount?: number | undefined;
  /** beforeCompaction only: those messages (read-only), as OpenClaw hands them to `before_compaction`. */
  messages?: readonly AgentMessage[] | undefined;
  /** afterCompaction only: whether it compacted. */
  compacted?: boolean | undefined;
}

/** `llmInput`: what this turn sends to Codex (an adapter-level observation, not Codex's byte-exact request). */
export interface LlmInputEvent extends TurnHookIds {
  threadId: string;
  model?: string | undefined;
  /** The prompt text sent with `turn/start` (after projection and `beforePromptBuild`). */
  prompt: string;
  developerInstructions?: string | undefined;
  /** Number of additional-context entries sent with the turn. */
  contextEntries: number;
  /** Number of images sent with the turn: the prompt's (`CodexTurnParams.images`) and those of earlier messages in the projected context. */
  imagesCount: number;
  /** The mirrored history before this turn (read-only): what the session held when the turn was sent. */
  historyMessages: readonly AgentMessage[];
  /** The client-side tools the model may call in this turn (`CodexTurnParams.dynamicTools`), without their handlers. */
  tools: ReadonlyArray<{ name: string; description: string; inputSchema: unknown }>;
}

/** `llmOutput`: what Codex answered in this turn. */
export interface LlmOutputEvent extends TurnHookIds {
  threadId: string;
  turnId: string;
  assistantText: string;
  usage?: TurnUsage | undefined;
  codexStatus: string;
  /** The model the turn ran with when named (the turn's `model`, or a `beforeModelResolve` hook's choice). */
  model?: string | undefined;
  /** The turn's last assistant message as the transcript records it (absent when the model answered nothing). */
  lastAssistant?: AgentMessage | undefined;
}

/** `agentEnd`: the attempt settled. */
export interface AgentEndEvent extends TurnHookIds {
  threadId?: string | undefined;
  turnId?: string | undefined;
  status: TurnStatus;
  error?: { phase: string; message: string; code?: string | undefined } | undefined;
  /** This turn's messages (empty when the turn never started). */
  messages: readonly AgentMessage[];
  /** The session's history before this turn (read-only; empty when the attempt ended before it was read). */
  historyMessages?: readonly AgentMessage[] | undefined;
  /** Wall time of the attempt, ms (from `runCodexTurn` to settling); always set by the turn host. */
  durationMs?: number | undefined;
}

/** What `beforeToolCall` gets beside its event. */
export interface ToolCallHookContext {
  /** Aborts when the answer is no longer waited for (the turn ended). */
  signal: AbortSignal;
}

/** A tool call Codex asked for: a dynamic tool (ours) or a native one (command, file change, MCP, web search). */
export interface ToolCallHookEvent extends TurnHookIds {
  threadId: string;
  turnId: string;
  callId: string;
  /** Dynamic tool name, or `shell`, `apply_patch`, `mcp:<server>/<tool>`, `web_search` for native items. */
  toolName: string;
  native: boolean;
  /**
   * The call's arguments. Native calls put to `beforeToolCall` through the hook relay (`nativeToolHooks`) carry
   * Codex's hook input: `{ command }` for a shell command (as the model wrote it) and for a patch (the patch text),
   * the MCP arguments for an MCP tool. Observed native items carry what the item says (`{ command, cwd }`, ...).
   * An approval request carries OpenClaw's policy shape: `{ command, cwd, approval }` for a command (`approval`: the
   * request as Codex sent it), the request itself for a patch (`apply_patch`) or extra permissions
   * (`codex_permission_approval`), `{ approval }` for network access (`codex_network_approval`).
   */
  params: unknown;
  /**
   * Set when Codex asks the host to approve this native call (the sandbox needs an exception): the request's method,
   * e.g. `item/commandExecution/requestApproval`. The hook is asked before `onApproval`, as OpenClaw's Codex runtime
   * runs its tool policy first: a block declines the request, `approved: true` grants it once, anything else leaves it
   * to `onApproval`. A call the hook was already asked about (through the relay, or as it started) is not asked again:
   * that decision is used.
   */
  approvalMethod?: string | undefined;
  /** Where a native call runs, when Codex said (its `PreToolUse` hook input, an approval request, the item). */
  cwd?: string | undefined;
}

/**
 * `beforeToolCall` may block a dynamic tool call (the reason goes back to Codex as the tool's result) or rewrite its
 * arguments. A native call it may block only when the app-server runs with `nativeToolHooks` (Codex then tells the
 * model "blocked by PreToolUse hook: <reason>"); its arguments cannot be rewritten.
 */
export interface BeforeToolCallResult {
  block?: boolean | undefined;
  blockReason?: string | undefined;
  params?: unknown;
  /**
   * The hook already has the user's approval for this call (OpenClaw's `requireApproval`, answered allow): Codex's
   * approval request for it, if one comes, is granted once without asking `onApproval`. Ignored for dynamic tools.
   */
  approved?: boolean | undefined;
}

/** `afterToolCall`: the tool call finished. */
export interface AfterToolCallEvent extends ToolCallHookEvent {
  result?: string | undefined;
  error?: string | undefined;
  durationMs?: number | undefined;
}

/** `beforeAgentFinalize`: the turn ended; the mirror and the engine's finalize come next. */
export interface BeforeAgentFinalizeEvent extends TurnHookIds {
  threadId: string;
  turnId: string;
  assistantText: string;
  /** The turn's status; `"inProgress"` when asked at Codex's `Stop` hook (through the relay), before the turn ends. */
  codexStatus: string;
  /** Asked again after a revision this hook asked for (OpenClaw's `stopHookActive`). */
  stopHookActive: boolean;
  /** Codex's own record of the thread (its rollout file), when asked at Codex's `Stop` hook through the relay. */
  transcriptPath?: string | undefined;
}

/**
 * `beforeAgentFinalize` may ask for one more model pass before the turn ends (`reason` reaches the model as a user
 * message) when the app-server runs with `nativeToolHooks` (Codex's `Stop` hook, relayed). Without it the hook runs
 * after the turn and its result is ignored.
 */
export interface BeforeAgentFinalizeResult {
  action: "revise";
  reason: string;
}

/**
 * Harness hooks (OpenClaw's adapter-level observations). All optional. Every hook is bounded by
 * `timeouts.engineCallMs`; a hook that throws, hangs or returns a malformed result is a warning, never a failed turn
 * (`beforePromptBuild` then keeps the unmodified prompt, `beforeToolCall` lets the call run unchanged).
 *
 * `beforeAgentRun` is the exception: it is fail-closed (a gate that throws, hangs or answers something malformed refuses
 * the turn, with a warning), because a gate that cannot decide must not let the turn through.
 *
 * Order within a turn: `beforeModelResolve` -> `beforePromptBuild` -> `beforeAgentRun` -> `llmInput` ->
 * (`beforeToolCall` -> `afterToolCall`)* and `beforeCompaction` -> `afterCompaction` as they happen -> `llmOutput` ->
 * `beforeAgentFinalize` -> `beforeMessageWrite` (per message) -> `agentEnd`. A refused turn goes from `beforeAgentRun`
 * straight to `agentEnd`.
 *
 * @example
 * ```ts
 * const hooks: CodexTurnHooks = {
 *   beforePromptBuild: ({ prompt }) => ({ prompt: prompt + "\n\nAnswer in French." }),
 *   beforeToolCall: (call) => (call.toolName === "rm_rf" ? { block: true, blockReason: "not allowed" } : undefined),
 *   afterCompaction: (e) => console.log("compacted by", e.backend),
 * };
 * ```
 */
export interface CodexTurnHooks {
  /** Runs first in the `hooks` state, before `beforePromptBuild`: may choose this turn's model (OpenClaw's `before_model_resolve`). */
  beforeModelResolve?(ctx: BeforeModelResolveContext): BeforeModelResolveResult | void | Promise<BeforeModelResolveResult | void>;
  beforePromptBuild?(ctx: BeforePromptBuildContext): BeforePromptBuildResult | void | Promise<BeforePromptBuildResult | void>;
  /**
   * The admission gate (OpenClaw's `before_agent_run`): runs last in the `hooks` state, after the prompt hooks and the
   * projection, before any Codex work; may refuse the turn. Fail-closed (see above).
   */
  beforeAgentRun?(event: BeforeAgentRunEvent): BeforeAgentRunResult | void | Promise<BeforeAgentRunResult | void>;
  /**
   * Each message of the turn before it is stored (OpenClaw's `tool_result_persist` and `before_message_write`): may
   * rewrite it (a redaction, a truncated tool output) or keep it out of the transcript. What it returns is what the
   * pending record, the transcript, the engine's finalize and `result.messagesSnapshot` hold; `result.assistantText`
   * stays the model's answer. A failure keeps the message as it is, with a warning.
   */
  beforeMessageWrite?(event: BeforeMessageWriteEvent): BeforeMessageWriteResult | void | Promise<BeforeMessageWriteResult | void>;
  llmInput?(event: LlmInputEvent): void | Promise<void>;
  llmOutput?(event: LlmOutputEvent): void | Promise<void>;
  agentEnd?(event: AgentEndEvent): void | Promise<void>;
  /**
   * `context.signal` aborts when nobody waits for the answer any more (the Codex turn ended, e.g. interrupted while a
   * person was being asked): a hook that asks someone can withdraw the question then. Its answer is ignored after that.
   */
  beforeToolCall?(event: ToolCallHookEvent, context?: ToolCallHookContext): BeforeToolCallResult | void | Promise<BeforeToolCallResult | void>;
  afterToolCall?(event: AfterToolCallEvent): void | Promise<void>;
  beforeAgentFinalize?(event: BeforeAgentFinalizeEvent): BeforeAgentFinalizeResult | void | Promise<BeforeAgentFinalizeResult | void>;
  beforeCompaction?(event: CompactionHookEvent): void | Promise<void>;
  afterCompaction?(event: CompactionHookEvent): void | Promise<void>;
  /** Every lifecycle state the machine enters, in order. */
  onState?(state: string): void;
  /**
   * Warnings the host's plugins reported since the last call (a plugin host's loggers: lossless-claw says only there
   * that it skipped persisting a turn). Called when the turn settles; each string joins `result.warnings` once.
   */
  takeWarnings?(): readonly string[] | void;
  /**
   * What a `beforeToolCall` that throws, times out or answers something malformed means for the call: `"allow"` (the
   * default: it runs, with a warning) or `"block"` (it is blocked with "Tool call blocked because before_tool_call hook
   * failed": OpenClaw's fail-closed policy, which the OpenClaw plugin host sets).
   */
  beforeToolCallFailure?: "allow" | "block" | undefined;
  /**
   * Bound on one `beforeToolCall`, ms (default: the turn's `timeouts.engineCallMs`). A hook that waits for a person
   * (a plugin's `requireApproval`) needs longer; the OpenClaw plugin host sets it when it has an approver.
   */
  beforeToolCallTimeoutMs?: number | undefined;
}
