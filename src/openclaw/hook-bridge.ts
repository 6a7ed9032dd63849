/**
 * Plugin hook handlers (`api.on(name, handler)`) as the turn host's {@link CodexTurnHooks}, plus the session and
 * gateway events the host fires itself. Events are translated to OpenClaw's shapes; handlers run in OpenClaw's order
 * (priority, then registration). When handlers throw, the others still run and the hook rejects with an error whose
 * message carries each plugin's own text, so the turn host's warning shows it.
 */
import type { AgentEndEvent, AfterToolCallEvent, BeforeAgentFinalizeEvent, BeforePromptBuildContext, BeforePromptBuildResult, BeforeToolCallResult, CodexTurnHooks, CompactionHookEvent, LlmInputEvent, LlmOutputEvent, ToolCallHookEvent } from "../hooks/types.js";
import { errorText } from "./errors.js";
import { hookHandlers, type PluginRegistry } from "./registry.js";

/** What every hook context carries (OpenClaw's `PluginHookAgentContext` fields this host knows). */
export interface HookContextBase {
  sessionId?: string;
  sessionKey?: string;
  modelId?: string;
  modelProviderId: string;
  contextTokenBudget?: number;
  workspaceDir: string;
}

/** Run every handler of `name`; results in order. Throws after all ran if any threw. */
export async function runPluginHook(registry: PluginRegistry, pluginId: string, name: string, event: unknown, ctx: unknown): Promise<unknown[]> {
  const results: unknown[] = [];
  const failures: string[] = [];
  for (const { handler } of hookHandlers(registry, name)) {
    try {
      results.push(await (handler as (e: unknown, c: unknown) => unknown)(event, ctx));
    } catch (error) {
      failures.push(errorText(error));
    }
  }
  if (failures.length > 0) throw new Error(`plugin ${pluginId} ${name} hook failed: ${failures.join("; ")}`);
  return results;
}

function joinText(...parts: Array<string | undefined>): string {
  return parts.filter((p): p is string => typeof p === "string" && p.trim() !== "").join("\n\n");
}

/** OpenClaw's `before_prompt_build` results folded into our prompt / developer-instructions change. */
export function foldPromptBuildResults(ctx: BeforePromptBuildContext, results: readonly unknown[]): BeforePromptBuildResult | undefined {
  let prompt = ctx.prompt;
  let instructions = ctx.developerInstructions;
  let changed = false;
  for (const raw of results) {
    if (typeof raw !== "object" || raw === null) continue;
    const r = raw as { systemPrompt?: unknown; prependContext?: unknown; appendContext?: unknown; prependSystemContext?: unknown; appendSystemContext?: unknown };
    const str = (v: unknown) => (typeof v === "string" ? v : undefined);
    if (str(r.systemPrompt) !== undefined) instructions = str(r.systemPrompt);
    const prepend = str(r.prependSystemContext);
    const append = str(r.appendSystemContext);
    if (prepend || append) instructions = joinText(prepend, instructions, append);
    const before = str(r.prependContext);
    const after = str(r.appendContext);
    if (before || after) prompt = joinText(before, prompt, after);
    changed ||= [r.systemPrompt, prepend, append, before, after].some((v) => typeof v === "string");
  }
  if (!changed) return undefined;
  return { prompt, ...(instructions !== undefined ? { developerInstructions: instructions } : {}) };
}

function toolParams(params: unknown): Record<string, unknown> {
  return typeof params === "object" && params !== null && !Array.isArray(params) ? (params as Record<string, unknown>) : {};
}

function compactionEvent(e: CompactionHookEvent, after: boolean): Record<string, unknown> {
  // OpenClaw's events count messages; this host does not know them at these points, so it reports 0 and says where
  // the compaction came from in the extra fields.
  return after
    ? { messageCount: 0, compactedCount: e.compacted ? 1 : 0, backend: e.backend, trigger: e.trigger }
    : { messageCount: 0, backend: e.backend, trigger: e.trigger };
}

/**
 * Build the turn hooks for a plugin's registrations. Only hooks the plugin listens to are defined.
 *
 * @example
 * ```ts
 * const hooks = createPluginTurnHooks(registry, "summarizer", () => ({ modelProviderId: "codex", workspaceDir: cwd }));
 * await runCodexTurn({ ...params, hooks });
 * ```
 */
export function createPluginTurnHooks(registry: PluginRegistry, pluginId: string, base: () => HookContextBase): CodexTurnHooks {
  const has = (name: string) => registry.hooks.some((h) => h.name === name);
  const ctxFor = (sessionId: string | undefined, extra: Record<string, unknown> = {}) => ({ ...base(), ...(sessionId ? { sessionId } : {}), ...extra });
  const run = (name: string, event: unknown, ctx: unknown) => runPluginHook(registry, pluginId, name, event, ctx);
  const model = () => base().modelId ?? "default";
  const hooks: CodexTurnHooks = {};
  if (has("before_prompt_build")) {
    hooks.beforePromptBuild = async (ctx: BeforePromptBuildContext) =>
      foldPromptBuildResults(ctx, await run("before_prompt_build", { prompt: ctx.prompt, messages: [...ctx.messages] }, ctxFor(ctx.sessionId)));
  }
  if (has("llm_input")) {
    hooks.llmInput = async (e: LlmInputEvent) => {
      await run("llm_input", { runId: e.threadId, sessionId: e.sessionId, provider: base().modelProviderId, model: e.model ?? model(), ...(e.developerInstructions !== undefined ? { systemPrompt: e.developerInstructions } : {}), prompt: e.prompt, historyMessages: [], imagesCount: e.imagesCount }, ctxFor(e.sessionId, { runId: e.threadId }));
    };
  }
  if (has("llm_output")) {
    hooks.llmOutput = async (e: LlmOutputEvent) => {
      const u = e.usage;
      const usage = u ? { input: u.lastCallInputTokens ?? u.inputTokens, output: u.lastCallOutputTokens ?? u.outputTokens, cacheRead: u.lastCallCachedInputTokens ?? u.cachedInputTokens, total: u.lastCallTotalTokens ?? u.totalTokens } : undefined;
      await run("llm_output", { runId: e.turnId, sessionId: e.sessionId, provider: base().modelProviderId, model: model(), assistantTexts: [e.assistantText], ...(usage ? { usage } : {}) }, ctxFor(e.sessionId, { runId: e.turnId }));
    };
  }
  if (has("agent_end")) {
    hooks.agentEnd = async (e: AgentEndEvent) => {
      await run("agent_end", { ...(e.turnId ? { runId: e.turnId } : {}), messages: [...e.messages], success: e.status === "completed", ...(e.error ? { error: e.error.message } : {}) }, ctxFor(e.sessionId));
    };
  }
  if (has("before_agent_finalize")) {
    hooks.beforeAgentFinalize = async (e: BeforeAgentFinalizeEvent) => {
      const results = await run(
        "before_agent_finalize",
        { runId: e.turnId, sessionId: e.sessionId, turnId: e.turnId, provider: base().modelProviderId, model: model(), stopHookActive: e.stopHookActive, lastAssistantMessage: e.assistantText },
        ctxFor(e.sessionId, { runId: e.turnId }),
      );
      // The first plugin asking for a revision wins (OpenClaw: "request one more model pass").
      for (const raw of results) {
        const r = raw as { action?: unknown; reason?: unknown } | undefined;
        if (r?.action === "revise" && typeof r.reason === "string" && r.reason.trim() !== "") return { action: "revise" as const, reason: r.reason };
      }
      return undefined;
    };
  }
  if (has("before_tool_call")) hooks.beforeToolCall = (e) => beforeToolCall(e, run, ctxFor);
  if (has("after_tool_call")) {
    hooks.afterToolCall = async (e: AfterToolCallEvent) => {
      const toolName = openClawToolName(e);
      const event = { toolName, params: toolParams(e.params), runId: e.turnId, toolCallId: e.callId, ...(e.result !== undefined ? { result: e.result } : {}), ...(e.error !== undefined ? { error: e.error } : {}), ...(e.durationMs !== undefined ? { durationMs: e.durationMs } : {}) };
      await run("after_tool_call", event, ctxFor(e.sessionId, { toolName, toolCallId: e.callId, runId: e.turnId }));
    };
  }
  if (has("before_compaction")) hooks.beforeCompaction = async (e) => void (await run("before_compaction", compactionEvent(e, false), ctxFor(e.sessionId)));
  if (has("after_compaction")) hooks.afterCompaction = async (e) => void (await run("after_compaction", compactionEvent(e, true), ctxFor(e.sessionId)));
  return hooks;
}

/**
 * The tool id an OpenClaw plugin knows a call by. OpenClaw's Codex runtime maps Codex's native shell (hook name
 * `Bash`, `exec_command`) to its own `exec` tool, so a plugin guarding `exec` guards Codex's commands too; every other
 * name (dynamic tools, `apply_patch`, `view_image`, `spawn_agent`, `mcp:<server>/<tool>`, ...) is the same.
 *
 * @example
 * ```ts
 * openClawToolName({ toolName: "shell", native: true } as ToolCallHookEvent); // "exec"
 * ```
 */
export function openClawToolName(e: Pick<ToolCallHookEvent, "toolName" | "native">): string {
  return e.native && e.toolName === "shell" ? "exec" : e.toolName;
}

async function beforeToolCall(
  e: ToolCallHookEvent,
  run: (name: string, event: unknown, ctx: unknown) => Promise<unknown[]>,
  ctxFor: (sessionId: string | undefined, extra?: Record<string, unknown>) => unknown,
): Promise<BeforeToolCallResult | undefined> {
  let params = toolParams(e.params);
  const toolName = openClawToolName(e);
  const results = await run("before_tool_call", { toolName, params, runId: e.turnId, toolCallId: e.callId }, ctxFor(e.sessionId, { toolName, toolCallId: e.callId, runId: e.turnId }));
  let rewritten = false;
  for (const raw of results) {
    const r = raw as { block?: unknown; blockReason?: unknown; params?: unknown } | undefined;
    if (r?.block === true) return { block: true, ...(typeof r.blockReason === "string" ? { blockReason: r.blockReason } : {}) };
    if (typeof r?.params === "object" && r.params !== null) {
      params = r.params as Record<string, unknown>;
      rewritten = true;
    }
  }
  return rewritten ? { params } : undefined;
}
