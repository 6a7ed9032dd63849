/**
 * Plugin hook handlers (`api.on(name, handler)`) as the turn host's {@link CodexTurnHooks}, plus the session and
 * gateway events the host fires itself. Events are translated to OpenClaw's shapes; handlers run in OpenClaw's order
 * (priority, then registration). When handlers throw, the others still run and the hook rejects with an error whose
 * message carries each plugin's own text, so the turn host's warning shows it.
 */
import type { TurnHookIds, AgentEndEvent, AfterToolCallEvent, BeforeAgentFinalizeEvent, BeforeAgentRunEvent, BeforeModelResolveContext, BeforePromptBuildContext, BeforePromptBuildResult, BeforeToolCallResult, CodexTurnHooks, CompactionHookEvent, LlmInputEvent, LlmOutputEvent, ToolCallHookEvent } from "../hooks/types.js";
import { BEFORE_TOOL_CALL_FAILURE_REASON } from "../turn/hook-runner.js";
import { runBeforeAgentRunGate } from "./admission-gate.js";
import { runMessageWriteHooks } from "./message-write.js";
import { errorText } from "./errors.js";
import { withinHandlerTimeout } from "./handler-timeout.js";
import { boundedHookHistory as boundedHistory } from "./hook-history.js";
import { CODEX_LLM_PROVIDER } from "./llm.js";
import { decideFinalize, type FinalizeRetryBudget } from "./finalize-decision.js";
import { DEFAULT_PLUGIN_APPROVAL_TIMEOUT_MS, decidePluginApproval, type ApprovalOutcome, type PluginApprovalCallback, type RememberedApprovals } from "./tool-approval.js";

/** Which session, key and run a hook event belongs to (a compaction outside a turn has no run). */
type HookIds = Partial<TurnHookIds>;
import { hookHandlers, type PluginRegistry } from "./registry.js";

/** What every hook context carries (OpenClaw's `PluginHookAgentContext` fields this host knows). */
export interface HookContextBase {
  sessionId?: string | undefined;
  sessionKey?: string | undefined;
  modelId?: string | undefined;
  modelProviderId: string;
  contextTokenBudget?: number | undefined;
  workspaceDir: string;
}

/** Every handler of `name` run in OpenClaw's order: the results of those that returned, the failures by plugin. */
export async function settlePluginHook(
  registry: PluginRegistry,
  pluginId: string,
  name: string,
  event: unknown,
  ctx: unknown,
): Promise<{ results: unknown[]; owners: string[]; failures: string[] }> {
  const results: unknown[] = [];
  const owners: string[] = [];
  const byPlugin = new Map<string, string[]>();
  for (const { handler, pluginId: owner, timeoutMs } of hookHandlers(registry, name)) {
    try {
      const call = Promise.resolve().then(() => (handler as (e: unknown, c: unknown) => unknown)(event, ctx));
      results.push(timeoutMs !== undefined ? await withinHandlerTimeout(call, timeoutMs) : await call);
      owners.push(owner ?? pluginId);
    } catch (error) {
      const who = owner ?? pluginId;
      byPlugin.set(who, [...(byPlugin.get(who) ?? []), errorText(error)]);
    }
  }
  return { results, owners, failures: [...byPlugin].map(([who, texts]) => `plugin ${who} ${name} hook failed: ${texts.join("; ")}`) };
}

/**
 * Run every handler of `name`; results in order. Throws after all ran if any threw, naming each failing plugin (the
 * handler's own plugin when several plugins are loaded together, else `pluginId`).
 */
export async function runPluginHook(registry: PluginRegistry, pluginId: string, name: string, event: unknown, ctx: unknown): Promise<unknown[]> {
  const { results, failures } = await settlePluginHook(registry, pluginId, name, event, ctx);
  if (failures.length > 0) throw new Error(failures.join("; "));
  return results;
}

function joinText(...parts: Array<string | undefined>): string {
  return parts.filter((p): p is string => typeof p === "string" && p.trim() !== "").join("\n\n");
}

/** Providers whose models Codex runs (OpenClaw names Codex's models under `openai`; this host under `codex`). */
const CODEX_MODEL_PROVIDERS: ReadonlySet<string> = new Set([CODEX_LLM_PROVIDER, "openai", "openai-codex"]);

/**
 * The model `before_model_resolve` handlers chose, as OpenClaw merges them: the first `modelOverride` wins (the
 * highest-priority handler's). An override for a provider other than Codex's (`codex`, `openai`, `openai-codex`) is
 * skipped: this host runs Codex models only; `codex/<model>` or `openai/<model>` names the Codex model `<model>`.
 *
 * @example
 * ```ts
 * resolveModelOverride([{ modelOverride: "anthropic/x", providerOverride: "anthropic" }, { modelOverride: "codex/gpt-5.4-mini" }]);
 * // => "gpt-5.4-mini"
 * ```
 */
export function resolveModelOverride(results: readonly unknown[]): string | undefined {
  for (const raw of results) {
    if (typeof raw !== "object" || raw === null) continue;
    const r = raw as { modelOverride?: unknown; providerOverride?: unknown };
    if (typeof r.modelOverride !== "string" || r.modelOverride.trim() === "") continue;
    const [provider, name] = r.modelOverride.includes("/") ? [r.modelOverride.slice(0, r.modelOverride.indexOf("/")), r.modelOverride.slice(r.modelOverride.indexOf("/") + 1)] : [undefined, r.modelOverride];
    const chosenProvider = typeof r.providerOverride === "string" && r.providerOverride !== "" ? r.providerOverride : provider;
    if (chosenProvider !== undefined && !CODEX_MODEL_PROVIDERS.has(chosenProvider)) continue;
    return name!.trim();
  }
  return undefined;
}

/** OpenClaw's prompt-build result (`before_prompt_build`, and the legacy `before_agent_start`'s prompt fields). */
export interface PromptBuildResult {
  systemPrompt?: string | undefined;
  prependContext?: string | undefined;
  appendContext?: string | undefined;
  prependSystemContext?: string | undefined;
  appendSystemContext?: string | undefined;
}

const SEGMENT_FIELDS = ["prependContext", "appendContext", "prependSystemContext", "appendSystemContext"] as const;

/**
 * The handlers' results of one hook merged as OpenClaw's hook runner merges them: the first `systemPrompt` wins (the
 * highest-priority handler's), text segments are concatenated in handler order with a blank line between.
 *
 * @example
 * ```ts
 * mergePromptBuildResults([{ systemPrompt: "A", prependContext: "x" }, { systemPrompt: "B", prependContext: "y" }]);
 * // => { systemPrompt: "A", prependContext: "x\n\ny" }
 * ```
 */
export function mergePromptBuildResults(results: readonly unknown[]): PromptBuildResult | undefined {
  let merged: PromptBuildResult | undefined;
  for (const raw of results) {
    if (typeof raw !== "object" || raw === null) continue;
    const r = raw as Record<string, unknown>;
    const next: PromptBuildResult = { ...merged };
    if (next.systemPrompt === undefined && typeof r.systemPrompt === "string") next.systemPrompt = r.systemPrompt;
    for (const field of SEGMENT_FIELDS) {
      const value = r[field];
      if (typeof value === "string") next[field] = joinText(next[field], value) || value;
    }
    merged = next;
  }
  return merged;
}

/**
 * The prompt-build phase as OpenClaw resolves it: `before_prompt_build`'s merged result, then the legacy
 * `before_agent_start`'s (memory plugins' auto-recall, e.g. memory-lancedb's `prependContext`); the new hook's
 * `systemPrompt` wins, text segments are joined (the new hook's first). Applied to the turn's prompt and developer
 * instructions: `systemPrompt` replaces them, system context goes around them, context around the prompt.
 *
 * @example
 * ```ts
 * foldPromptBuildResults({ prompt: "hi", developerInstructions: "base", messages: [], sessionId: "s" }, [{ prependContext: "<m>" }], []);
 * // => { prompt: "<m>\n\nhi", developerInstructions: "base" }
 * ```
 */
export function foldPromptBuildResults(ctx: BeforePromptBuildContext, promptBuild: readonly unknown[], beforeAgentStart: readonly unknown[] = []): BeforePromptBuildResult | undefined {
  const current = mergePromptBuildResults(promptBuild);
  const legacy = mergePromptBuildResults(beforeAgentStart);
  if (!current && !legacy) return undefined;
  const pick = (field: (typeof SEGMENT_FIELDS)[number]) => joinText(current?.[field], legacy?.[field]) || undefined;
  const systemPrompt = current?.systemPrompt ?? legacy?.systemPrompt;
  const [prepend, append, before, after] = [pick("prependSystemContext"), pick("appendSystemContext"), pick("prependContext"), pick("appendContext")];
  if (systemPrompt === undefined && [prepend, append, before, after].every((v) => v === undefined)) return undefined;
  let instructions = systemPrompt ?? ctx.developerInstructions;
  if (prepend || append) instructions = joinText(prepend, instructions, append);
  const prompt = before || after ? joinText(before, ctx.prompt, after) : ctx.prompt;
  return { prompt, ...(instructions !== undefined ? { developerInstructions: instructions } : {}) };
}

function toolParams(params: unknown): Record<string, unknown> {
  return typeof params === "object" && params !== null && !Array.isArray(params) ? (params as Record<string, unknown>) : {};
}

/** OpenClaw's `llm_input` event: the history bounded to its last 100 messages, copies. */
function llmInputEvent(e: LlmInputEvent, provider: string, model: string): Record<string, unknown> {
  return {
    runId: e.runId,
    sessionId: e.sessionId,
    provider,
    model,
    ...(e.developerInstructions !== undefined ? { systemPrompt: e.developerInstructions } : {}),
    prompt: e.prompt,
    historyMessages: boundedHistory(e.historyMessages),
    imagesCount: e.imagesCount,
    // OpenClaw hands its agent tools (`name`, `description`, `parameters`); the turn's dynamic tools are ours.
    tools: e.tools.map((t) => ({ name: t.name, description: t.description, parameters: structuredClone(t.inputSchema) })),
  };
}

/** OpenClaw's `llm_output` as its Codex harness reports it: the resolved provider/model ref, the harness, the last assistant message. */
function llmOutputEvent(e: LlmOutputEvent, provider: string, model: string): Record<string, unknown> {
  const u = e.usage;
  const usage = u ? { input: u.lastCallInputTokens ?? u.inputTokens, output: u.lastCallOutputTokens ?? u.outputTokens, cacheRead: u.lastCallCachedInputTokens ?? u.cachedInputTokens, total: u.lastCallTotalTokens ?? u.totalTokens } : undefined;
  return {
    runId: e.runId,
    sessionId: e.sessionId,
    provider,
    model,
    resolvedRef: `${provider}/${model}`,
    harnessId: "codex",
    assistantTexts: [e.assistantText],
    ...(e.lastAssistant ? { lastAssistant: structuredClone(e.lastAssistant) } : {}),
    ...(usage ? { usage } : {}),
  };
}

/**
 * OpenClaw's `agent_end`: the conversation (the last 100 messages of history, copies), then this turn, as its CLI
 * runner hands it (its pi runner hands the whole session, the published Codex harness only the turn).
 */
function agentEndEvent(e: AgentEndEvent): Record<string, unknown> {
  return {
    runId: e.runId,
    messages: [...boundedHistory(e.historyMessages ?? []), ...e.messages],
    success: e.status === "completed",
    ...(e.error ? { error: e.error.message } : {}),
    ...(e.durationMs !== undefined ? { durationMs: e.durationMs } : {}),
  };
}

function compactionEvent(e: CompactionHookEvent, after: boolean): Record<string, unknown> {
  // OpenClaw's shapes (runAgentHarnessBeforeCompactionHook / ...After...): the session's message count (-1 when not
  // known), its messages before, the transcript; how many were compacted is not known to this host (-1, as OpenClaw's
  // Codex harness reports native compaction), 0 when nothing was. Where the compaction came from goes in extra fields.
  const common = { messageCount: e.messageCount ?? -1, ...(e.sessionFile !== undefined ? { sessionFile: e.sessionFile } : {}) };
  return after
    ? { ...common, compactedCount: e.compacted ? -1 : 0, backend: e.backend, trigger: e.trigger }
    : { ...common, ...(e.messages ? { messages: structuredClone([...e.messages]) } : {}), backend: e.backend, trigger: e.trigger };
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
export function createPluginTurnHooks(
  registry: PluginRegistry,
  pluginId: string,
  base: () => HookContextBase,
  options: { onPluginApproval?: PluginApprovalCallback | undefined; pluginApprovalTimeoutMs?: number | undefined } = {},
): CodexTurnHooks {
  const has = (name: string) => registry.hooks.some((h) => h.name === name);
  // The context OpenClaw hands an agent hook: the host's base, then the turn's session, key and run.
  const ctxFor = (e: HookIds, extra: Record<string, unknown> = {}) => ({
    ...base(),
    ...(e.sessionKey ? { sessionKey: e.sessionKey } : {}),
    ...(e.sessionId ? { sessionId: e.sessionId } : {}),
    ...(e.runId ? { runId: e.runId } : {}),
    ...extra,
  });
  // A tool hook's context, as OpenClaw builds it: `cwd` is where the call runs (a native command's or patch's own
  // directory when Codex names one, as for OpenClaw's native operations), else the workspace.
  const toolCtx = (e: ToolCallHookEvent, toolName: string) => {
    const own = e.cwd ?? (e.params as { cwd?: unknown } | null | undefined)?.cwd;
    return ctxFor(e, { toolName, toolCallId: e.callId, cwd: e.native && typeof own === "string" && own !== "" ? own : base().workspaceDir });
  };
  const run = (name: string, event: unknown, ctx: unknown) => runPluginHook(registry, pluginId, name, event, ctx);
  const model = () => base().modelId ?? "default";
  const hooks: CodexTurnHooks = {};
  if (has("before_prompt_build") || has("before_agent_start")) {
    hooks.beforePromptBuild = promptBuildHook(registry, pluginId, has, ctxFor);
  }
  if (has("before_agent_run")) {
    // Fail-closed as in OpenClaw: the gate's own failures come back as a block attributed to before_agent_run.
    hooks.beforeAgentRun = (e: BeforeAgentRunEvent) =>
      runBeforeAgentRunGate(
        registry,
        pluginId,
        { prompt: e.prompt, history: e.messages, ...(e.developerInstructions !== undefined ? { systemPrompt: e.developerInstructions } : {}) },
        ctxFor(e, e.model !== undefined ? { modelId: e.model } : {}),
      );
  }
  if (has("before_message_write") || has("tool_result_persist")) {
    hooks.beforeMessageWrite = (e) => runMessageWriteHooks(registry, pluginId, e, ctxFor(e));
  }
  if (has("before_model_resolve")) {
    hooks.beforeModelResolve = async (ctx: BeforeModelResolveContext) => {
      const { results, failures } = await settlePluginHook(registry, pluginId, "before_model_resolve", { prompt: ctx.prompt, ...(ctx.attachments ? { attachments: ctx.attachments } : {}) }, ctxFor(ctx));
      if (failures.length > 0 && results.length === 0) throw new Error(failures.join("; "));
      const model = resolveModelOverride(results);
      return model !== undefined ? { model } : undefined;
    };
  }
  if (has("llm_input")) hooks.llmInput = async (e: LlmInputEvent) => void (await run("llm_input", llmInputEvent(e, base().modelProviderId, e.model ?? model()), ctxFor(e)));
  if (has("llm_output")) hooks.llmOutput = async (e: LlmOutputEvent) => void (await run("llm_output", llmOutputEvent(e, base().modelProviderId, e.model ?? model()), ctxFor(e)));
  if (has("agent_end")) hooks.agentEnd = async (e: AgentEndEvent) => void (await run("agent_end", agentEndEvent(e), ctxFor(e)));
  if (has("before_agent_finalize")) {
    hooks.beforeAgentFinalize = agentFinalizeHook(run, base, new Map(), ctxFor);
  }
  if (has("before_tool_call")) Object.assign(hooks, toolPolicyHooks(registry, pluginId, toolCtx, options));
  if (has("after_tool_call")) {
    hooks.afterToolCall = async (e: AfterToolCallEvent) => {
      const toolName = openClawToolName(e);
      const event = { toolName, params: toolParams(e.params), runId: e.runId, toolCallId: e.callId, ...(e.result !== undefined ? { result: e.result } : {}), ...(e.error !== undefined ? { error: e.error } : {}), ...(e.durationMs !== undefined ? { durationMs: e.durationMs } : {}) };
      await run("after_tool_call", event, toolCtx(e, toolName));
    };
  }
  if (has("before_compaction")) hooks.beforeCompaction = async (e) => void (await run("before_compaction", compactionEvent(e, false), ctxFor(e)));
  if (has("after_compaction")) hooks.afterCompaction = async (e) => void (await run("after_compaction", compactionEvent(e, true), ctxFor(e)));
  return hooks;
}

/** `before_prompt_build` then `before_agent_start`, folded as OpenClaw's hook runner folds them. */
function promptBuildHook(
  registry: PluginRegistry,
  pluginId: string,
  has: (name: string) => boolean,
  ctxFor: (e: HookIds) => Record<string, unknown>,
): NonNullable<CodexTurnHooks["beforePromptBuild"]> {
  return async (ctx: BeforePromptBuildContext) => {
    const event = { prompt: ctx.prompt, messages: [...ctx.messages] };
    const settle = (name: string) => (has(name) ? settlePluginHook(registry, pluginId, name, event, ctxFor(ctx)) : { results: [], owners: [], failures: [] });
    const promptBuild = await settle("before_prompt_build");
    const beforeAgentStart = await settle("before_agent_start");
    const failures = [...promptBuild.failures, ...beforeAgentStart.failures];
    // As OpenClaw's hook runner: a failing handler is skipped, the others' changes apply; all failing fails the hook.
    if (failures.length > 0 && promptBuild.results.length + beforeAgentStart.results.length === 0) throw new Error(failures.join("; "));
    const folded = foldPromptBuildResults(ctx, promptBuild.results, beforeAgentStart.results);
    return failures.length > 0 ? { ...folded, warnings: failures } : folded;
  };
}

/** `before_agent_finalize`: OpenClaw's relay event, and its rule over all handlers (finalize wins, retries bounded). */
function agentFinalizeHook(
  run: (name: string, event: unknown, ctx: unknown) => Promise<unknown[]>,
  base: () => HookContextBase,
  finalizeRetries: FinalizeRetryBudget,
  ctxFor: (e: HookIds) => Record<string, unknown>,
): NonNullable<CodexTurnHooks["beforeAgentFinalize"]> {
  return async (e: BeforeAgentFinalizeEvent) => {
    const results = await run(
      "before_agent_finalize",
      // OpenClaw's relay event (runNativeHookRelayBeforeAgentFinalize): the run, session and key, turn, model, cwd.
      { runId: e.runId, sessionId: e.sessionId, ...(e.sessionKey ? { sessionKey: e.sessionKey } : {}), turnId: e.turnId, provider: base().modelProviderId, model: base().modelId ?? "default", cwd: base().workspaceDir, ...(e.transcriptPath ? { transcriptPath: e.transcriptPath } : {}), stopHookActive: e.stopHookActive, lastAssistantMessage: e.assistantText },
      ctxFor(e),
    );
    // OpenClaw's rule over all handlers: finalize wins, reasons join, retries are bounded per run and key.
    const decision = decideFinalize(results, e.runId, finalizeRetries);
    return decision.action === "revise" ? { action: "revise" as const, reason: decision.reason } : undefined;
  };
}

/**
 * The plugins' `before_tool_call` as the turn's `beforeToolCall`, with OpenClaw's `requireApproval` flow (asked through
 * `onPluginApproval`, remembered `allow-always`, withdrawn when the turn ends) and its fail-closed policy.
 */
function toolPolicyHooks(
  registry: PluginRegistry,
  pluginId: string,
  toolCtx: (e: ToolCallHookEvent, toolName: string) => unknown,
  options: { onPluginApproval?: PluginApprovalCallback | undefined; pluginApprovalTimeoutMs?: number | undefined },
): Pick<CodexTurnHooks, "beforeToolCall" | "beforeToolCallFailure" | "beforeToolCallTimeoutMs"> {
  const approvals: RememberedApprovals = new Set();
  const settle = (event: unknown, ctx: unknown) => settlePluginHook(registry, pluginId, "before_tool_call", event, ctx);
  const approvalMs = options.pluginApprovalTimeoutMs ?? DEFAULT_PLUGIN_APPROVAL_TIMEOUT_MS;
  return {
    beforeToolCall: (e, context) =>
      beforeToolCall(e, settle, toolCtx, (raw, owner) =>
        decidePluginApproval(
          raw,
          { pluginId: owner, toolName: openClawToolName(e), toolCallId: e.callId, sessionId: e.sessionId },
          options.onPluginApproval,
          approvals,
          approvalMs,
          // The turn ended while the person was asked: the question is withdrawn, the plugin hears "cancelled".
          context?.signal,
        ),
      ),
    // OpenClaw's before_tool_call is fail-closed: a handler that throws, hangs or answers nonsense blocks the call.
    beforeToolCallFailure: "block",
    // A person deciding an approval needs longer than an engine call; the handlers' own work gets 10 s on top.
    ...(options.onPluginApproval ? { beforeToolCallTimeoutMs: approvalMs + 10_000 } : {}),
  };
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
  settle: (event: unknown, ctx: unknown) => Promise<{ results: unknown[]; owners: string[]; failures: string[] }>,
  toolCtx: (e: ToolCallHookEvent, toolName: string) => unknown,
  approve: (requireApproval: unknown, pluginId: string) => Promise<ApprovalOutcome>,
): Promise<BeforeToolCallResult | undefined> {
  let params = toolParams(e.params);
  const toolName = openClawToolName(e);
  const { results, owners, failures } = await settle({ toolName, params, runId: e.runId, toolCallId: e.callId }, toolCtx(e, toolName));
  if (failures.length > 0) return { block: true, blockReason: BEFORE_TOOL_CALL_FAILURE_REASON };
  let rewritten = false;
  let approval: { raw: unknown; owner: string } | undefined;
  for (const [i, raw] of results.entries()) {
    const r = raw as { block?: unknown; blockReason?: unknown; params?: unknown; requireApproval?: unknown } | undefined;
    if (r?.block === true) return { block: true, blockReason: typeof r.blockReason === "string" && r.blockReason !== "" ? r.blockReason : "Tool call blocked by plugin hook" };
    if (r?.requireApproval !== undefined && r.requireApproval !== null) approval ??= { raw: r.requireApproval, owner: owners[i]! };
    if (typeof r?.params === "object" && r.params !== null) {
      params = { ...params, ...(r.params as Record<string, unknown>) };
      rewritten = true;
    }
  }
  if (approval) {
    const outcome = await approve(approval.raw, approval.owner);
    if (!outcome.allow) return { block: true, blockReason: outcome.reason };
    // The person said yes to this call: Codex's own approval request for it is granted without a second question.
    return { ...(rewritten ? { params } : {}), approved: true };
  }
  return rewritten ? { params } : undefined;
}
