/**
 * Server -> client requests: dynamic tool calls, approvals (host `onApproval`, then the spawn-level raw
 * `approvalHandler`, then DENY), `request_user_input` (host `onUserInput`, else declined as unsupported); anything else
 * is answered "unsupported". Every request gets exactly one answer.
 */
import type { Logger } from "pino";
import {
  HOST_APPROVAL_METHODS,
  approvalResponse,
  parseApprovalDecision,
  toApprovalRequest,
  type CodexApprovalDecision,
  type HostDecisionContext,
} from "./approvals.js";
import { approvalPolicyCall, approvalPolicyOutcome, nativeCallKey, type ApprovalPolicyOutcome } from "./approval-policy.js";
import { dispatchToolCall, interceptBefore, type DynamicToolSpec, type ToolCallInfo } from "./dynamic-tools.js";
import { knownServerRequestMethods } from "./known-methods.js";
import { nativeToolName, type PreToolUse, type PreToolUseDecision, type RelayedHook, type StopHookCall } from "./native-hooks.js";
import type { ApprovalHandler, CodexUserInputRequest, UserInputAnswers } from "./options.js";
import type { ServerRequestMessage } from "./rpc.js";
import { dynamicToolCallParamsSchema } from "./schemas.js";
import { withTimeout } from "./timeouts.js";
import type { TurnRun } from "./turn-run.js";
import type { CodexTurnWarning } from "./warnings.js";

/** Replies when nobody decided: DECLINE in each method's own shape. */
export const APPROVAL_DECLINES: Record<string, unknown> = {
  "item/commandExecution/requestApproval": { decision: "decline" },
  "item/fileChange/requestApproval": { decision: "decline" },
  "item/permissions/requestApproval": { permissions: {}, scope: "turn" },
  "mcpServer/elicitation/request": { action: "decline", content: null, _meta: null },
  applyPatchApproval: { decision: { denied: { rejection: "declined: no approval handler is registered" } } },
  execCommandApproval: { decision: { denied: { rejection: "declined: no approval handler is registered" } } },
};

function isApprovalMethod(method: string): boolean {
  return method in APPROVAL_DECLINES || /approval/i.test(method);
}

/** How to answer one request. */
export interface Responder {
  respond(id: string | number, result: unknown): void;
  respondError(id: string | number, code: number, message: string): void;
}

/** What the router needs from the client. */
export interface ServerRequestDeps {
  logger: Logger;
  /** The running turn a thread's requests belong to (a sub-agent's: the turn it works for). */
  activeRun(threadId: string): TurnRun | undefined;
  /** The thread's own running turn. */
  ownRun(threadId: string): TurnRun | undefined;
  /** The tool handler registered for a thread. */
  tool(threadId: string, name: string): DynamicToolSpec | undefined;
  /** Re-arm the idle watchdog of a turn (tool calls switch it off while they run). */
  armIdle(run: TurnRun): void;
  approvalHandler?: ApprovalHandler | undefined;
  counters: { toolCalls: number; approvalsDeclined: number; unsupportedServerRequests: number };
}

const errName = (err: unknown): string => (err instanceof Error ? err.name : typeof err);

/**
 * Answer one server request. Never throws.
 *
 * @example
 * ```ts
 * await answerServerRequest(deps, proc.rpc, request);
 * ```
 */
export async function answerServerRequest(deps: ServerRequestDeps, rpc: Responder, req: ServerRequestMessage): Promise<void> {
  if (req.method === "item/tool/call") return answerToolCall(deps, rpc, req);
  if (HOST_APPROVAL_METHODS.has(req.method)) return answerHostApproval(deps, rpc, req);
  if (isApprovalMethod(req.method) || req.method === "mcpServer/elicitation/request") return answerRawApproval(deps, rpc, req);
  if (req.method === "item/tool/requestUserInput") return answerUserInput(deps, rpc, req);
  unsupported(deps, rpc, req);
}

function unsupported(deps: ServerRequestDeps, rpc: Responder, req: ServerRequestMessage): void {
  deps.counters.unsupportedServerRequests++;
  deps.logger.warn(
    { event: "codex.serverRequest.unsupported", method: req.method, known: knownServerRequestMethods.has(req.method) },
    "unsupported server request",
  );
  rpc.respondError(req.id, -32601, `unsupported server request: ${req.method}`);
}

async function answerToolCall(deps: ServerRequestDeps, rpc: Responder, req: ServerRequestMessage): Promise<void> {
  const parsed = dynamicToolCallParamsSchema.safeParse(req.params);
  if (!parsed.success) {
    rpc.respondError(req.id, -32602, "invalid item/tool/call params");
    return;
  }
  const p = parsed.data;
  deps.counters.toolCalls++;
  const run = deps.activeRun(p.threadId);
  const spec = deps.tool(p.threadId, p.tool);
  if (run && spec) {
    run.toolCallsInFlight++;
    deps.armIdle(run);
  }
  const options = {
    toolCallTimeoutMs: run?.options.toolCallTimeoutMs ?? 300_000,
    interceptorTimeoutMs: run?.options.toolInterceptorTimeoutMs ?? 60_000,
    beforeToolCall: run?.options.beforeToolCall,
    afterToolCall: run?.options.afterToolCall,
    warn: (w: Parameters<TurnRun["warn"]>[0]) => run?.warn(w),
  };
  const ctx = { threadId: p.threadId, turnId: p.turnId, callId: p.callId, tool: p.tool, namespace: p.namespace ?? null };
  const { response, durationMs } = await dispatchToolCall(spec, { callId: p.callId, tool: p.tool, arguments: p.arguments }, ctx, options, (r) => {
    if (run && spec) {
      run.toolCallsInFlight--;
      deps.armIdle(run);
    }
    rpc.respond(req.id, r);
  });
  deps.logger.info(
    { event: "codex.tool.call", threadId: p.threadId, turnId: p.turnId, callId: p.callId, tool: p.tool, success: response.success, durationMs },
    "dynamic tool call answered",
  );
}

/**
 * Run a host decision (approval, user input, a relayed hook: a native tool call or the final answer) with the turn's
 * idle watchdog off: Codex sends nothing while it waits for our answer, so silence then is the host's (a person
 * reading a command), bounded by the decision's own timeout.
 */
async function waitingOnHost<T>(deps: ServerRequestDeps, run: TurnRun, decide: () => Promise<T>): Promise<T> {
  run.hostDecisionsInFlight++;
  deps.armIdle(run);
  try {
    return await decide();
  } finally {
    run.hostDecisionsInFlight--;
    deps.armIdle(run);
  }
}

/**
 * Ask the host (bounded by `timeoutMs`) unless Codex withdraws the request first (`serverRequest/resolved`, or the turn
 * ended): the callback's `signal` then aborts and the outcome is `withdrawn`, which gets no answer.
 */
async function askHost<T>(run: TurnRun, requestId: string | number, ask: (context: HostDecisionContext) => T | Promise<T>, timeoutMs: number) {
  const controller = new AbortController();
  run.hostDecisions.set(requestId, controller);
  const withdrawn = new Promise<{ ok: false; reason: "withdrawn" }>((resolve) =>
    controller.signal.addEventListener("abort", () => resolve({ ok: false, reason: "withdrawn" }), { once: true }),
  );
  try {
    return await Promise.race([withTimeout(() => ask({ signal: controller.signal }), timeoutMs), withdrawn]);
  } finally {
    run.hostDecisions.delete(requestId);
  }
}

/** Most extra model passes `beforeFinalize` may ask for in one turn; beyond that the turn ends (with a warning). */
export const MAX_FINALIZE_REVISIONS = 3;

/** A hook call from the relay, to its decision. */
export function decideRelayedHook(deps: ServerRequestDeps, call: RelayedHook): Promise<PreToolUseDecision> {
  return call.hook_event_name === "Stop" ? decideStop(deps, call) : decidePreToolUse(deps, call);
}

/**
 * The agent's natural final answer (Codex's `Stop` hook, through the relay): the thread's own turn's `beforeFinalize`
 * may ask for one more model pass (`{ action: "revise", reason }`; Codex sends the reason as a user message), at most
 * {@link MAX_FINALIZE_REVISIONS} times per turn. No turn, no callback, a failed or malformed answer: the turn ends.
 */
export async function decideStop(deps: ServerRequestDeps, call: StopHookCall): Promise<PreToolUseDecision> {
  const run = deps.ownRun(call.session_id);
  const hook = run?.options.beforeFinalize;
  if (!run || !hook) return { decision: "allow" };
  const event = {
    threadId: run.threadId,
    turnId: run.turnId ?? String(call.turn_id ?? ""),
    assistantText: call.last_assistant_message ?? "",
    stopHookActive: call.stop_hook_active,
    revisions: run.finalizeRevisions,
    ...(call.transcript_path ? { transcriptPath: call.transcript_path } : {}),
  };
  const r = await waitingOnHost(deps, run, () => withTimeout(() => hook(event), run.options.toolInterceptorTimeoutMs));
  const value = r.ok ? r.value : undefined;
  const revise = value && typeof value === "object" && value.action === "revise" && typeof value.reason === "string" && value.reason.trim() !== "" ? value.reason : undefined;
  if (!r.ok || (value !== undefined && revise === undefined)) {
    const why = !r.ok ? (r.reason === "timeout" ? `did not answer within ${run.options.toolInterceptorTimeoutMs} ms` : "threw") : "returned a malformed decision";
    run.warn({ code: "finalizeCallbackFailed", message: `beforeFinalize ${why}; the turn ended` });
  }
  if (revise === undefined) return { decision: "allow" };
  if (run.finalizeRevisions >= MAX_FINALIZE_REVISIONS) {
    run.warn({ code: "finalizeRevisionLimit", message: `beforeFinalize asked for more than ${MAX_FINALIZE_REVISIONS} extra model passes; the turn ended` });
    return { decision: "allow" };
  }
  run.finalizeRevisions++;
  deps.logger.info({ event: "codex.finalize.revise", threadId: run.threadId, turnId: run.turnId, revisions: run.finalizeRevisions }, "beforeFinalize asked for one more model pass");
  return { decision: "block", reason: revise };
}

/**
 * A native tool call Codex asks about through the hook relay (`nativeToolHooks`): the `beforeToolCall` of the turn
 * it belongs to (a sub-agent's calls: the turn it works for) decides, bounded like a dynamic tool's; no running turn,
 * no interceptor, or an interceptor that fails lets it run. Native arguments cannot be rewritten (Codex has no input
 * replacement for these hooks): a rewrite is ignored with a warning.
 */
export async function decidePreToolUse(deps: ServerRequestDeps, call: PreToolUse): Promise<PreToolUseDecision> {
  const run = deps.activeRun(call.session_id);
  const hook = run?.options.beforeToolCall;
  if (!run || !hook) return { decision: "allow" };
  const info: ToolCallInfo = {
    callId: call.tool_use_id,
    tool: nativeToolName(call.tool_name),
    arguments: call.tool_input,
    native: true,
    threadId: call.session_id,
    ...(call.cwd ? { cwd: call.cwd } : {}),
  };
  const warn = (w: Omit<CodexTurnWarning, "threadId">) => run.warn(w);
  const asking = interceptBefore(info, { beforeToolCall: hook, interceptorTimeoutMs: run.options.toolInterceptorTimeoutMs, warn });
  // Codex may ask to approve this call next (the sandbox needs an exception): that request uses this decision.
  run.nativeDecisions.set(nativeCallKey(info, run.threadId), asking.then((decision) => ({ decision, asked: info.arguments })));
  const decision = await waitingOnHost(deps, run, () => asking);
  deps.logger.info({ event: "codex.nativeTool.decided", threadId: call.session_id, callId: info.callId, tool: info.tool, blocked: decision.block === true }, "native tool call decided by the host");
  if (decision.block) return { decision: "block", reason: decision.blockReason ?? "blocked by a beforeToolCall hook" };
  if (decision.arguments !== undefined) {
    warn({ code: "toolInterceptorFailed", message: "beforeToolCall rewrote a native tool's arguments, which Codex cannot take; the call went ahead unchanged", tool: info.tool, callId: info.callId });
  }
  return { decision: "allow" };
}

/**
 * The turn's `beforeToolCall` on an approval request, first (OpenClaw's tool policy for approvals, see
 * approval-policy.ts): the decision it already made on the call when it was asked before, else its answer now.
 * Undefined when the request is not one the policy covers or the turn has no interceptor.
 */
async function askApprovalPolicy(deps: ServerRequestDeps, run: TurnRun, req: ServerRequestMessage, threadId: string): Promise<ApprovalPolicyOutcome | undefined> {
  const hook = run.options.beforeToolCall;
  const policy = approvalPolicyCall(req.method, req.params);
  if (!hook || !policy) return undefined;
  const p = req.params as { itemId?: unknown; approvalId?: unknown };
  const callId = typeof p.approvalId === "string" ? p.approvalId : typeof p.itemId === "string" ? p.itemId : "";
  const cwd = typeof policy.arguments.cwd === "string" ? policy.arguments.cwd : undefined;
  const info: ToolCallInfo = { callId, tool: policy.tool, arguments: policy.arguments, native: true, threadId, approvalMethod: req.method, ...(cwd ? { cwd } : {}) };
  const key = nativeCallKey(info, run.threadId);
  const warn = (w: Omit<CodexTurnWarning, "threadId">) => run.warn(w);
  const memo =
    run.nativeDecisions.get(key) ??
    interceptBefore(info, { beforeToolCall: hook, interceptorTimeoutMs: run.options.toolInterceptorTimeoutMs, warn }).then((decision) => ({ decision, asked: info.arguments }));
  run.nativeDecisions.set(key, memo);
  const { decision, asked } = await waitingOnHost(deps, run, () => memo);
  const outcome = approvalPolicyOutcome(decision, asked);
  if (outcome.outcome === "deny" && outcome.rewritten) warn({ code: "toolInterceptorFailed", message: outcome.reason, tool: policy.tool, callId });
  deps.logger.info({ event: "codex.approval.policy", method: req.method, tool: policy.tool, outcome: outcome.outcome }, "approval request put to beforeToolCall first");
  return outcome;
}

/**
 * The tool policy first (`beforeToolCall`: decline, approve once, or go on), then the turn's `onApproval` (bounded);
 * no callback falls back to the raw handler / decline.
 */
async function answerHostApproval(deps: ServerRequestDeps, rpc: Responder, req: ServerRequestMessage): Promise<void> {
  // v2 requests name the thread `threadId`, the legacy ones `conversationId`; toApprovalRequest reads either.
  const probe = toApprovalRequest(req, () => []);
  const run = probe ? deps.activeRun(probe.threadId) : undefined;
  if (!probe || !run) return answerRawApproval(deps, rpc, req);
  const request = toApprovalRequest(req, (itemId) => run.fileChanges.get(itemId) ?? [])!;
  const policy = await askApprovalPolicy(deps, run, req, probe.threadId);
  if (policy && policy.outcome !== "ask") {
    const decided: CodexApprovalDecision = policy.outcome === "approve" ? "approve" : "deny";
    if (decided === "deny") deps.counters.approvalsDeclined++;
    deps.logger.info({ event: "codex.approval.decided", method: req.method, kind: request.kind, decision: decided, by: "beforeToolCall" }, "approval decided by the tool policy");
    rpc.respond(req.id, approvalResponse(request, decided, policy.outcome === "deny" ? policy.reason : "declined by the host"));
    return;
  }
  const onApproval = run.options.onApproval;
  if (!onApproval) return answerRawApproval(deps, rpc, req);
  const r = await waitingOnHost(deps, run, () => askHost(run, req.id, (context) => onApproval(request, context), run.options.approvalTimeoutMs));
  if (!r.ok && r.reason === "withdrawn") {
    deps.logger.info({ event: "codex.approval.withdrawn", method: req.method, kind: request.kind }, "codex resolved the approval request itself; no answer sent");
    return;
  }
  let decision: CodexApprovalDecision = "deny";
  let denyReason = "declined by the host";
  if (r.ok && parseApprovalDecision(r.value) !== undefined) {
    decision = r.value;
  } else if (!r.ok && r.reason === "timeout") {
    denyReason = `declined: no decision within ${run.options.approvalTimeoutMs} ms`;
    run.warn({ code: "approvalTimeout", message: `onApproval did not decide within ${run.options.approvalTimeoutMs} ms; denied`, itemId: request.itemId });
  } else {
    denyReason = "declined: the approval callback failed";
    const why = r.ok ? "returned an unknown decision" : `threw (${errName(r.error)})`;
    run.warn({ code: "approvalCallbackFailed", message: `onApproval ${why}; denied`, itemId: request.itemId });
  }
  if (decision === "deny") deps.counters.approvalsDeclined++;
  deps.logger.info({ event: "codex.approval.decided", method: req.method, kind: request.kind, decision }, "approval decided by the host");
  rpc.respond(req.id, approvalResponse(request, decision, denyReason));
}

/** The spawn-level raw `approvalHandler`, else DECLINE in the method's shape. */
async function answerRawApproval(deps: ServerRequestDeps, rpc: Responder, req: ServerRequestMessage): Promise<void> {
  let decided: unknown;
  if (deps.approvalHandler) {
    try {
      decided = await deps.approvalHandler({ method: req.method, params: req.params });
    } catch (err) {
      deps.logger.error({ event: "codex.approval.handlerError", method: req.method, errName: errName(err) }, "approval handler threw");
    }
  }
  if (decided !== undefined) {
    deps.logger.info({ event: "codex.approval.decided", method: req.method }, "approval decided by handler");
    rpc.respond(req.id, decided);
    return;
  }
  deps.counters.approvalsDeclined++;
  deps.logger.info({ event: "codex.approval.declined", method: req.method }, "approval declined (fail closed)");
  const decline = APPROVAL_DECLINES[req.method];
  if (decline !== undefined) rpc.respond(req.id, decline);
  else rpc.respondError(req.id, -32000, `approval declined: ${req.method} is not supported by this client`);
}

function isAnswers(v: unknown): v is UserInputAnswers {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  return Object.values(v).every(
    (a) => typeof a === "object" && a !== null && Array.isArray((a as { answers?: unknown }).answers) && (a as { answers: unknown[] }).answers.every((s) => typeof s === "string"),
  );
}

/**
 * What the model reads as the tool's output when the host declines a `request_user_input` (an error response):
 * observed with Codex 0.169, the same as a request answered with nothing. The record keeps it, marked as an error.
 */
const DECLINED_USER_INPUT_OUTPUT = JSON.stringify({ answers: {} });

/** `request_user_input`: the turn's `onUserInput` (bounded), else declined as before (unsupported). */
async function answerUserInput(deps: ServerRequestDeps, rpc: Responder, req: ServerRequestMessage): Promise<void> {
  const p = (req.params ?? {}) as Partial<CodexUserInputRequest>;
  const run = typeof p.threadId === "string" ? deps.activeRun(p.threadId) : undefined;
  const onUserInput = run?.options.onUserInput;
  if (!run || typeof p.itemId !== "string" || !Array.isArray(p.questions)) return unsupported(deps, rpc, req);
  // The asking thread: the turn's own, or a sub-agent's working for it (its turn id is then the sub-agent's).
  const request: CodexUserInputRequest = { threadId: p.threadId as string, turnId: String(p.turnId ?? run.turnId ?? ""), itemId: p.itemId, questions: p.questions };
  // The turn's own question (a sub-agent's is in its own thread): the record holds the call and its answer.
  const own = p.threadId === run.threadId;
  const call = { itemId: p.itemId, tool: "request_user_input", arguments: { questions: p.questions } };
  const started = performance.now();
  const ended = (text: string, success: boolean) =>
    own && run.recordHostAnsweredTool(call, { text, success, durationMs: Math.round(performance.now() - started) });
  if (own) run.recordHostAnsweredTool(call);
  if (!onUserInput) {
    // Nobody to ask: declined, and the record says so with what the model then reads.
    ended(DECLINED_USER_INPUT_OUTPUT, false);
    return unsupported(deps, rpc, req);
  }
  const r = await waitingOnHost(deps, run, () => askHost(run, req.id, (context) => onUserInput(request, context), run.options.userInputTimeoutMs));
  if (!r.ok && r.reason === "withdrawn") {
    deps.logger.info({ event: "codex.userInput.withdrawn", itemId: p.itemId }, "codex resolved the user-input request itself; no answer sent");
    ended("request_user_input withdrawn: Codex no longer waited for the answer", false);
    return;
  }
  if (r.ok && isAnswers(r.value)) {
    deps.logger.info({ event: "codex.userInput.answered", itemId: p.itemId, answers: Object.keys(r.value).length }, "user input answered by the host");
    // What the model reads as the tool's output (observed with 0.169: the response, as JSON).
    ended(JSON.stringify({ answers: r.value }), true);
    rpc.respond(req.id, { answers: r.value });
    return;
  }
  if (!(r.ok && r.value === undefined)) {
    const why = !r.ok ? (r.reason === "timeout" ? `did not answer within ${run.options.userInputTimeoutMs} ms` : "threw") : "returned malformed answers";
    run.warn({ code: "userInputCallbackFailed", message: `onUserInput ${why}; declined`, itemId: p.itemId });
  }
  ended(DECLINED_USER_INPUT_OUTPUT, false);
  rpc.respondError(req.id, -32000, "request_user_input declined by the host");
}
