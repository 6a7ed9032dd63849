/**
 * `turnRunning`: starts the Codex turn and reports what happens to the machine as events (accepted, steer rejected,
 * native compaction, ended). Steers and interrupts arrive from the machine. The machine decides what follows.
 */
import type { RunTurnEmitted, RunTurnInput, RunTurnReceived, SteerImage, TurnRecord } from "../../../machines/turn.contract.js";
import type { CodexTurn } from "../../codex/app-server.js";
import type { FinalizeRequest } from "../../codex/options.js";
import { toolCallView, type CodexTurnEvent } from "../../codex/turn-projector.js";
import { nativeCallKey, sameParams } from "../../codex/approval-policy.js";
import type { BeforeToolCallResult, ToolCallHookEvent } from "../../hooks/types.js";
import { errorCode } from "../../log/error-label.js";
import type { TurnDeps } from "../deps.js";

/** A steer the machine forwarded: its text and images (checked at the handle). */
type Steer = { text: string; images?: SteerImage[] | undefined };

/** How much longer the client waits for an interceptor than the hook runner waits for the hook. */
const INTERCEPTOR_MARGIN_MS = 5_000;

interface Channel {
  sendBack(event: RunTurnEmitted): void;
  stopped(): boolean;
}

/** What the turn's callbacks share: the memo of native decisions, whether finalize was asked, the end signal. */
interface TurnState {
  userMessageStarted: boolean;
  nativeDecisions: NativeDecisions;
  finalizeAsked: boolean;
  turnOver: AbortSignal;
}

/** `beforeToolCall`'s answer on one call, with the params it was asked with. */
type NativeDecision = Promise<{ result: BeforeToolCallResult | undefined; params: unknown }>;
type NativeDecisions = Map<string, NativeDecision>;

function askHook(deps: TurnDeps, event: ToolCallHookEvent, turnOver: AbortSignal): NativeDecision {
  return deps.hooks.beforeToolCall(event, turnOver).then((result) => ({ result, params: event.params }));
}

/**
 * The reason `turnOver` aborts with, made once: `abort()` without one builds a DOMException (and its stack) on every call,
 * including the no-op second call at cleanup, about 0.1 ms per turn on the overhead benchmark.
 */
const TURN_OVER = new DOMException("the Codex turn is over", "AbortError");

/** The callback actor's body: start the turn, forward steers/interrupts, report events. Returns the cleanup. */
export function runTurn(
  deps: TurnDeps,
  input: RunTurnInput,
  sendBack: (event: RunTurnEmitted) => void,
  receive: (listener: (event: RunTurnReceived) => void) => void,
): () => void {
  let stopped = false;
  const channel: Channel = { sendBack: (e) => !stopped && sendBack(e), stopped: () => stopped };
  // Aborts once the Codex turn ended (or the actor stopped): a `beforeToolCall` still asking someone is withdrawn.
  const turnOver = new AbortController();
  const state = {
    turnOver: turnOver.signal,
    turn: undefined as CodexTurn | undefined,
    interruptRequested: false,
    pendingSteers: [] as Steer[],
    userMessageStarted: false,
    // `beforeToolCall`'s decision on each native call (by thread and call id), asked once: through the relay, as the
    // item started, or at its approval request, whichever came first; the later ones use it.
    nativeDecisions: new Map() as NativeDecisions,
    // The relay's Stop hook already put the final answer to `beforeAgentFinalize` (not again after the turn).
    finalizeAsked: false,
  };
  const steer = async (turn: CodexTurn, steers: Steer[]) => {
    for (const { text, images } of steers) {
      const outcome = await turn.steer(text, images ? { images } : undefined).catch((error: unknown) => ({
        accepted: false as const,
        followUp: [text],
        ...(images ? { images } : {}),
        reason: error instanceof Error ? error.message : String(error),
      }));
      if (!outcome.accepted) {
        channel.sendBack({ type: "TURN.STEER_REJECTED", texts: outcome.followUp, ...(outcome.images ? { images: [outcome.images] } : {}) });
      }
    }
  };
  receive((event) => {
    if (event.type === "TURN.STEER") {
      const item: Steer = { text: event.text, ...(event.images ? { images: event.images } : {}) };
      if (state.turn) void steer(state.turn, [item]);
      else state.pendingSteers.push(item);
    } else {
      state.interruptRequested = true;
      if (state.turn) void state.turn.interrupt().catch(() => undefined);
    }
  });
  void (async () => {
    const turn = await startCodexTurn(deps, input, channel, state);
    if (!turn) return;
    state.turn = turn;
    channel.sendBack({ type: "TURN.ACCEPTED", turnId: turn.turnId });
    if (state.interruptRequested) void turn.interrupt().catch(() => undefined);
    if (state.pendingSteers.length > 0) void steer(turn, state.pendingSteers.splice(0));
    const record = await turn.completion;
    state.turn = undefined;
    turnOver.abort(TURN_OVER);
    await observeTurnEnd(deps, record, state.finalizeAsked, input.model ?? deps.params.model);
    channel.sendBack({ type: "TURN.ENDED", record });
  })();
  return () => {
    stopped = true;
    turnOver.abort(TURN_OVER);
  };
}

/** `llmInput`, then `turn/start`; a rejection is reported as TURN.START_FAILED. */
async function startCodexTurn(
  deps: TurnDeps,
  input: RunTurnInput,
  channel: Channel,
  state: TurnState,
): Promise<CodexTurn | undefined> {
  const p = deps.params;
  // Not awaited (OpenClaw's harness fires llm_input and sends turn/start): settle waits for it.
  deps.hooks.observeInBackground("llmInput", {
    ...deps.hookIds,
    threadId: input.threadId,
    ...((input.model ?? p.model) !== undefined ? { model: input.model ?? p.model } : {}),
    prompt: input.promptText,
    ...(input.developerInstructions !== undefined ? { developerInstructions: input.developerInstructions } : {}),
    contextEntries: Object.keys(input.additionalContext ?? {}).length,
    imagesCount: (p.images?.length ?? 0) + (input.contextImages?.length ?? 0),
    historyMessages: input.historyMessages ?? [],
    tools: (p.dynamicTools ?? []).map(({ name, description, inputSchema }) => ({ name, description, inputSchema })),
  });
  try {
    // The turn id is known once Codex accepted the turn; interceptor calls come after that.
    const ids = { turnId: "" };
    const turn = await deps.appServer.startTurn({
      threadId: input.threadId,
      text: input.promptText,
      originalPrompt: input.originalPrompt,
      ...(p.images && p.images.length > 0 ? { images: p.images } : {}),
      ...(input.contextImages && input.contextImages.length > 0 ? { contextImages: input.contextImages } : {}),
      additionalContext: input.additionalContext,
      model: input.model ?? p.model,
      ...(p.collaborationMode ? { collaborationMode: p.collaborationMode } : {}),
      steerQuietWindowMs: p.steerQuietWindowMs,
      idleTimeoutMs: p.timeouts?.turnIdleMs,
      ...(p.timeouts?.toolCallMs !== undefined ? { toolCallTimeoutMs: p.timeouts.toolCallMs } : {}),
      ...(p.timeouts?.approvalMs !== undefined ? { approvalTimeoutMs: p.timeouts.approvalMs, userInputTimeoutMs: p.timeouts.approvalMs } : {}),
      ...(p.timeouts?.retryWithoutProgressMs !== undefined ? { retryWithoutProgressMs: p.timeouts.retryWithoutProgressMs } : {}),
      // A little over the hook runner's own bound, so the runner's decision (fail-closed hosts block) comes first.
      toolInterceptorTimeoutMs: Math.max(deps.engineCallMs, p.hooks?.beforeToolCallTimeoutMs ?? 0) + INTERCEPTOR_MARGIN_MS,
      // Codex-side warnings (a tool handler that timed out or returned a non-string): ids and names only.
      onWarning: (w: { message?: string | undefined; code?: string | undefined }) => deps.hostWarnings.push(w.message ?? String(w.code)),
      ...(p.onApproval ? { onApproval: p.onApproval } : {}),
      ...(p.onUserInput ? { onUserInput: p.onUserInput } : {}),
      ...hostInterceptors(deps, input, state, ids),
      onEvent: (event: CodexTurnEvent) => handleStreamEvent(deps, input, channel, state, event),
    } as never);
    ids.turnId = turn.turnId;
    return turn;
  } catch (error) {
    channel.sendBack({
      type: "TURN.START_FAILED",
      error: { phase: "turnRunning", message: error instanceof Error ? error.message : String(error), code: errorCode(error) ?? "turnStartRejected" },
    });
    return undefined;
  }
}

type InterceptedCall = { callId: string; tool: string; arguments?: unknown; native?: boolean | undefined; threadId?: string | undefined; approvalMethod?: string | undefined; cwd?: string | undefined };

/**
 * The turn's hooks as the client's interceptors: `beforeToolCall` (dynamic tools; native ones through the hook relay),
 * `afterToolCall`, and `beforeFinalize` (the agent's natural final answer through the relay's Stop hook: the hook may
 * ask for one more model pass; without the relay Codex never calls it, and the hook runs after the turn instead).
 * Only the hooks the host has are passed, so Codex is not asked about what nobody decides.
 */
function hostInterceptors(deps: TurnDeps, input: RunTurnInput, state: TurnState, ids: { turnId: string }) {
  const p = deps.params;
  const toolEvent = (call: InterceptedCall): ToolCallHookEvent => ({
    ...deps.hookIds,
    threadId: call.threadId ?? input.threadId,
    turnId: ids.turnId,
    callId: call.callId,
    toolName: call.tool,
    native: call.native === true,
    params: call.arguments,
    ...(call.approvalMethod !== undefined ? { approvalMethod: call.approvalMethod } : {}),
    ...(call.cwd !== undefined ? { cwd: call.cwd } : {}),
  });
  const beforeToolCall = async (call: InterceptedCall) => {
    let asked: NativeDecision;
    if (call.native) {
      const key = nativeCallKey(call, input.threadId);
      asked = state.nativeDecisions.get(key) ?? askHook(deps, toolEvent(call), state.turnOver);
      state.nativeDecisions.set(key, asked);
    } else {
      asked = askHook(deps, toolEvent(call), state.turnOver);
    }
    const { result: out, params } = await asked;
    if (!out) return undefined;
    // Params handed back as they were asked are no rewrite (an approval request asked later compares with its own).
    const rewritten = out.params !== undefined && !sameParams(out.params, params) ? out.params : undefined;
    return {
      ...(out.block ? { block: true, blockReason: out.blockReason ?? "blocked by a beforeToolCall hook" } : {}),
      ...(rewritten !== undefined ? { arguments: rewritten } : {}),
      ...(out.approved === true ? { approved: true } : {}),
    };
  };
  const afterToolCall = (call: InterceptedCall & { result?: string | undefined; error?: string | undefined; durationMs?: number | undefined }) =>
    deps.hooks.observe("afterToolCall", { ...toolEvent(call), ...pick(call) });
  const beforeFinalize = async (request: FinalizeRequest) => {
    state.finalizeAsked = true;
    const out = await deps.hooks.beforeAgentFinalize({
      ...deps.hookIds,
      threadId: request.threadId,
      turnId: request.turnId,
      assistantText: request.assistantText,
      codexStatus: "inProgress",
      stopHookActive: request.stopHookActive,
      ...(request.transcriptPath !== undefined ? { transcriptPath: request.transcriptPath } : {}),
    });
    return out?.action === "revise" ? { action: "revise" as const, reason: out.reason } : undefined;
  };
  return {
    ...(deps.hooks.has("beforeToolCall") ? { beforeToolCall } : {}),
    ...(deps.hooks.has("afterToolCall") ? { afterToolCall } : {}),
    ...(deps.hooks.has("beforeAgentFinalize") ? { beforeFinalize } : {}),
  };
}

function pick(call: { result?: string | undefined; error?: string | undefined; durationMs?: number | undefined }) {
  return {
    ...(call.result !== undefined ? { result: call.result } : {}),
    ...(call.error !== undefined ? { error: call.error } : {}),
    ...(call.durationMs !== undefined ? { durationMs: call.durationMs } : {}),
  };
}

/** `llmOutput` and `beforeAgentFinalize`: the turn ended; the mirror and the engine's finalize come next. */
async function observeTurnEnd(deps: TurnDeps, record: TurnRecord, finalizeAsked: boolean, model: string | undefined): Promise<void> {
  const base = { ...deps.hookIds, threadId: record.threadId, turnId: record.turnId, assistantText: record.assistantText, codexStatus: record.codexStatus };
  // Not awaited (as OpenClaw's harness): the mirror goes on while it runs; settle waits for it.
  const lastAssistant = record.messagesSnapshot.findLast((m) => m.role === "assistant");
  deps.hooks.observeInBackground("llmOutput", {
    ...base,
    ...(record.usage ? { usage: record.usage } : {}),
    ...(model !== undefined ? { model } : {}),
    ...(lastAssistant ? { lastAssistant } : {}),
  });
  if (!finalizeAsked) await deps.hooks.beforeAgentFinalize({ ...base, stopHookActive: false });
}

function handleStreamEvent(
  deps: TurnDeps,
  input: RunTurnInput,
  channel: Channel,
  state: TurnState,
  event: CodexTurnEvent,
): void {
  switch (event.type) {
    case "agentMessageDelta":
      deps.emit({ type: "agentMessageDelta", delta: event.delta });
      return;
    case "reasoningDelta":
      deps.emit({ type: "reasoningDelta", delta: event.delta });
      return;
    case "itemStarted":
    case "itemCompleted":
      observeItem(deps, input, state, event);
      return;
    case "compactionStarted":
    case "compactionCompleted": {
      const completed = event.type === "compactionCompleted";
      const compaction = { ...event.compaction, completed };
      deps.emit({ type: "compaction", phase: completed ? "completed" : "started", itemId: compaction.itemId });
      // The session as stored before this turn (the turn itself is mirrored after it ends).
      const history = input.historyMessages ?? [];
      const hookEvent = { ...compaction, ...deps.hookIds, backend: "codex-app-server" as const, trigger: "native" as const, ownsCompaction: deps.facts.ownsCompaction, sessionFile: deps.params.sessionFile, messageCount: history.length };
      void deps.hooks.observe(completed ? "afterCompaction" : "beforeCompaction", completed ? { ...hookEvent, compacted: true } : { ...hookEvent, messages: history });
      // Native compaction is Codex's, never the engine's: logged and reported as its own backend.
      deps.logger.info(
        { ...deps.ids, event: completed ? "codex native compaction completed" : "codex native compaction started", backend: "codex-app-server", ownsCompaction: deps.facts.ownsCompaction, threadId: compaction.threadId, turnId: compaction.turnId, itemId: compaction.itemId },
        "codex native compaction",
      );
      if (completed) channel.sendBack({ type: "TURN.COMPACTION", compaction, preTurn: !state.userMessageStarted });
      else channel.sendBack({ type: "TURN.COMPACTION", compaction });
      return;
    }
    case "tokenUsage":
      deps.emit({ type: "usage", totalTokens: event.usage.totalTokens });
      return;
    default:
      return;
  }
}

/** Item starts and ends: the display stream, and the tool-call hooks for Codex's native tools (observations). */
function observeItem(
  deps: TurnDeps,
  input: RunTurnInput,
  state: TurnState,
  event: Extract<CodexTurnEvent, { type: "itemStarted" | "itemCompleted" }>,
): void {
  const item = event.item as { kind: string; id: string; tool?: string | undefined } & Record<string, unknown>;
  if (event.type === "itemStarted") {
    if (item.kind === "userMessage") state.userMessageStarted = true;
    if (item.kind === "dynamicToolCall") deps.emit({ type: "toolCall", tool: String(item.tool) });
  }
  // Native tools (commands, file changes, MCP, web search) are Codex's: the hooks observe them here; they can block
  // them only through the hook relay (`nativeToolHooks`), which asked `beforeToolCall` before the item started.
  const view = item.kind === "dynamicToolCall" ? undefined : toolCallView(event.item);
  if (!view) return;
  const hookEvent: ToolCallHookEvent = {
    ...deps.hookIds,
    threadId: input.threadId,
    turnId: event.turnId,
    callId: view.toolCallId,
    toolName: view.toolName,
    native: true,
    params: view.arguments,
  };
  if (event.type === "itemStarted") {
    deps.emit({ type: "toolCall", tool: view.toolName });
    // Observed as it starts, unless already asked; Codex's approval request for it, if one follows, uses this answer.
    const key = nativeCallKey({ threadId: event.threadId, callId: view.toolCallId }, input.threadId);
    if (!state.nativeDecisions.has(key)) state.nativeDecisions.set(key, askHook(deps, hookEvent, state.turnOver));
    return;
  }
  const durationMs = (event.item as { durationMs?: number | null | undefined }).durationMs;
  void deps.hooks.observe("afterToolCall", {
    ...hookEvent,
    ...(view.resultText != null ? { result: view.resultText } : {}),
    ...(view.isError ? { error: view.resultText ?? "failed" } : {}),
    ...(typeof durationMs === "number" ? { durationMs } : {}),
  });
}
