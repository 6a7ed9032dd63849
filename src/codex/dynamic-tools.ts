/**
 * Dispatch of one dynamic tool call (`item/tool/call`): the host's `beforeToolCall` interceptor (may block the call
 * or rewrite its arguments), the handler bounded by `toolCallTimeoutMs`, a string check on its result, then
 * `afterToolCall`. Whatever goes wrong, Codex gets a tool result and the turn goes on; misbehaviour is a warning.
 */
import type { DynamicToolCallResponse } from "./protocol/v2/DynamicToolCallResponse.js";
import { withTimeout } from "./timeouts.js";
import type { CodexTurnWarning } from "./warnings.js";

/** Context handed to a dynamic tool handler. */
export interface DynamicToolContext {
  threadId: string;
  turnId: string;
  callId: string;
  tool: string;
  namespace: string | null;
  /**
   * The session of the turn that made the call, set by `runCodexTurn` (a plugin host binds plugin tools to it, as
   * OpenClaw does); absent on a thread driven directly through `CodexAppServer`.
   */
  sessionId?: string | undefined;
  sessionKey?: string | undefined;
  /** Aborted when the call timed out (`toolCallTimeoutMs`): stop working, the result is no longer wanted. */
  signal?: AbortSignal | undefined;
}

/** A client-side tool Codex may call (`dynamicTools` on thread/start; calls arrive as `item/tool/call`). */
export interface DynamicToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  inputSchema: Record<string, unknown>;
  /**
   * Returns the text result. A throw is reported to the model as a failed call (`success: false`); so is a result
   * that is not a string (with a `toolResultNotString` warning) and no answer within `toolCallTimeoutMs`.
   */
  handler: (args: unknown, ctx: DynamicToolContext) => Promise<string> | string;
}

/** A tool call as the interceptors see it: a dynamic tool, or (`native: true`) one of Codex's own through the hook relay. */
export interface ToolCallInfo {
  callId: string;
  tool: string;
  arguments: unknown;
  /** A native tool (shell, apply_patch, MCP) Codex asked about through the hook relay (`nativeToolHooks`). */
  native?: boolean | undefined;
  /** The thread the call runs on (a sub-agent's, for its calls), when known. */
  threadId?: string | undefined;
  /** Where a native call runs, when Codex said (its hook input's `cwd`, an approval request's `cwd`). */
  cwd?: string | undefined;
  /**
   * Set when Codex asked the host to approve this native call (`item/commandExecution/requestApproval`, ...): the
   * decision is then the approval's first word (OpenClaw's tool policy for approval requests).
   */
  approvalMethod?: string | undefined;
}

/** What `beforeToolCall` may decide: block (Codex gets `blockReason` as the failed result), or replace the arguments. */
export interface BeforeToolCallDecision {
  block?: boolean | undefined;
  blockReason?: string | undefined;
  arguments?: unknown;
  /**
   * The interceptor already obtained the user's approval for this call (an OpenClaw plugin's `requireApproval`
   * answered allow): an approval request Codex sends for it is granted once without asking `onApproval`.
   */
  approved?: boolean | undefined;
}

/** Runs before the handler; `undefined` lets the call through unchanged. Bounded; a throw or timeout is ignored. */
export type BeforeToolCall = (call: ToolCallInfo) => Promise<BeforeToolCallDecision | undefined> | BeforeToolCallDecision | undefined;

/** Runs after the call with its outcome (`result` on success, `error` otherwise) and the arguments used. Bounded; a throw is ignored. */
export type AfterToolCall = (call: ToolCallInfo & { result?: string | undefined; error?: string | undefined; durationMs: number }) => Promise<void> | void;

/** Per-turn settings of dispatch. */
export interface ToolDispatchOptions {
  toolCallTimeoutMs: number;
  interceptorTimeoutMs: number;
  beforeToolCall?: BeforeToolCall | undefined;
  afterToolCall?: AfterToolCall | undefined;
  warn: (w: Omit<CodexTurnWarning, "threadId">) => void;
}

const reply = (text: string, success: boolean): DynamicToolCallResponse => ({
  contentItems: [{ type: "inputText", text }],
  success,
});

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/** Ask `beforeToolCall`; a throw, a timeout or a malformed answer lets the call through unchanged, with a warning. */
export async function interceptBefore(
  call: ToolCallInfo,
  o: Pick<ToolDispatchOptions, "beforeToolCall" | "interceptorTimeoutMs" | "warn">,
): Promise<BeforeToolCallDecision> {
  if (!o.beforeToolCall) return {};
  const hook = o.beforeToolCall;
  const r = await withTimeout(() => hook(call), o.interceptorTimeoutMs);
  const value = r.ok ? r.value : undefined;
  const wellFormed = value === undefined || (typeof value === "object" && value !== null && !Array.isArray(value));
  if (!r.ok || !wellFormed) {
    const why = !r.ok ? (r.reason === "timeout" ? `did not answer within ${o.interceptorTimeoutMs} ms` : "threw") : "returned a malformed decision";
    o.warn({ code: "toolInterceptorFailed", message: `beforeToolCall ${why}; the call went ahead unchanged`, tool: call.tool, callId: call.callId });
    return {};
  }
  return value ?? {};
}

/** Run the handler bounded; map every outcome to a tool result. */
async function runHandler(
  spec: DynamicToolSpec,
  args: unknown,
  ctx: Omit<DynamicToolContext, "signal">,
  o: ToolDispatchOptions,
): Promise<{ response: DynamicToolCallResponse; result?: string | undefined; error?: string | undefined }> {
  const controller = new AbortController();
  const r = await withTimeout(() => spec.handler(args, { ...ctx, signal: controller.signal }), o.toolCallTimeoutMs);
  if (r.ok && typeof r.value === "string") return { response: reply(r.value, true), result: r.value };
  if (r.ok) {
    const error = `tool ${spec.name} returned ${typeName(r.value)}, expected a string`;
    o.warn({ code: "toolResultNotString", message: error, tool: spec.name, callId: ctx.callId });
    return { response: reply(`tool failed: ${error}`, false), error };
  }
  if (r.reason === "timeout") {
    controller.abort();
    const error = `tool ${spec.name} timed out after ${o.toolCallTimeoutMs} ms`;
    o.warn({ code: "toolCallTimeout", message: error, tool: spec.name, callId: ctx.callId });
    return { response: reply(`tool failed: ${error}`, false), error };
  }
  const error = r.error instanceof Error ? r.error.message : String(r.error);
  return { response: reply(`tool failed: ${error}`, false), error };
}

/**
 * Answer one dynamic tool call: interceptors, bounded handler, string check; `respond` gets the result as soon as it
 * is known, `afterToolCall` runs after that (an observer must not hold up the model). Never throws.
 *
 * @example
 * ```ts
 * const { response } = await dispatchToolCall(spec, { callId, tool, arguments: args }, ctx, options, (r) => rpc.respond(req.id, r));
 * ```
 */
export async function dispatchToolCall(
  spec: DynamicToolSpec | undefined,
  call: ToolCallInfo,
  ctx: Omit<DynamicToolContext, "signal">,
  o: ToolDispatchOptions,
  respond: (response: DynamicToolCallResponse) => void,
): Promise<{ response: DynamicToolCallResponse; durationMs: number }> {
  const t0 = Date.now();
  if (!spec) {
    const response = reply(`unknown tool: ${call.tool}`, false);
    respond(response);
    return { response, durationMs: 0 };
  }
  const decision = await interceptBefore(call, o);
  const args = decision.arguments !== undefined ? decision.arguments : call.arguments;
  let outcome: { response: DynamicToolCallResponse; result?: string | undefined; error?: string | undefined };
  if (decision.block === true) {
    const error = typeof decision.blockReason === "string" && decision.blockReason !== "" ? decision.blockReason : `tool ${call.tool} was blocked`;
    outcome = { response: reply(error, false), error };
  } else {
    outcome = await runHandler(spec, args, ctx, o);
  }
  const durationMs = Date.now() - t0;
  respond(outcome.response);
  if (o.afterToolCall) {
    const after = o.afterToolCall;
    const payload = { ...call, arguments: args, durationMs, ...(outcome.result !== undefined ? { result: outcome.result } : {}), ...(outcome.error !== undefined ? { error: outcome.error } : {}) };
    const r = await withTimeout(() => after(payload), o.interceptorTimeoutMs);
    if (!r.ok) {
      const why = r.reason === "timeout" ? `did not return within ${o.interceptorTimeoutMs} ms` : "threw";
      o.warn({ code: "toolInterceptorFailed", message: `afterToolCall ${why}; ignored`, tool: call.tool, callId: call.callId });
    }
  }
  return { response: outcome.response, durationMs };
}
