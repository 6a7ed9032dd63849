/**
 * `runtime.llm.complete` backed by the Codex app-server the host already runs: one ephemeral thread per call, no
 * dynamic tools, read-only sandbox, approvals never, its own developer instructions, one turn, the assistant text
 * back. Offline it reaches the fake model like any turn, so a test sees each completion as a model request.
 */
import type { Logger } from "pino";
import type { CodexAppServer } from "../codex/app-server.js";
import type { ContextEngineLlm, LlmCompleteMessage, LlmCompleteRequest } from "../context-engine/types.js";
import { silentLogger } from "../log/logger.js";

export type { LlmCompleteMessage, LlmCompleteRequest, LlmCompleteResponse } from "../context-engine/types.js";

/** `runtime.llm` as plugins see it. */
export type CodexLlm = ContextEngineLlm;

/** The provider id plugins see in the runtime context and in results. */
export const CODEX_LLM_PROVIDER = "codex";
/** The model name meaning "Codex's configured model". */
export const CODEX_DEFAULT_MODEL = "default";

export const LLM_COMPLETE_INSTRUCTIONS =
  "You are a text-completion service used by a context engine. Reply with the requested text only. " +
  "Do not run commands, read or edit files, or call tools.";

/**
 * OpenClaw's `plugins.entries.<id>.llm` policy as this host applies it to `runtime.llm.complete`. Plugins read it from
 * `api.config` (lossless-claw checks it for its `summaryModel` and warns when it is missing).
 */
export interface LlmPolicy {
  /** A request may name a model other than the host's. */
  allowModelOverride: boolean;
  /** Models a request may name: `"provider/model"`, `"model"`, or `"*"` for any. */
  allowedModels: string[];
}

/** What this host does unless told otherwise: Codex runs whichever model a request names. */
export const DEFAULT_LLM_POLICY: LlmPolicy = { allowModelOverride: true, allowedModels: ["*"] };

/**
 * Why `policy` refuses a request naming `ref` on a host whose model is `hostModel`, or undefined when it may run. A
 * request without a model, or naming the default or the host's own model, is not an override.
 *
 * @example
 * ```ts
 * llmPolicyRefusal({ allowModelOverride: true, allowedModels: ["codex/gpt-5"] }, "codex/o3", undefined);
 * // "model codex/o3 is not in allowedModels (codex/gpt-5)"
 * ```
 */
export function llmPolicyRefusal(policy: LlmPolicy, ref: string | undefined, hostModel: string | undefined): string | undefined {
  const name = codexModelFor(ref, undefined);
  if (name === undefined || name === codexModelFor(hostModel, undefined)) return undefined;
  if (!policy.allowModelOverride) return `model overrides are not allowed (allowModelOverride is false; asked for ${ref})`;
  const allowed = policy.allowedModels;
  if (allowed.includes("*") || allowed.includes(ref!) || allowed.includes(name) || allowed.includes(`${CODEX_LLM_PROVIDER}/${name}`)) return undefined;
  return `model ${ref} is not in allowedModels (${allowed.join(", ") || "none"})`;
}

/** `"codex/gpt-5"` -> `"gpt-5"`; `"default"`/empty -> undefined (Codex's configured model). */
export function codexModelFor(ref: string | undefined, fallback: string | undefined): string | undefined {
  const name = ref?.includes("/") ? ref.slice(ref.indexOf("/") + 1) : ref;
  const chosen = name && name !== CODEX_DEFAULT_MODEL ? name : fallback;
  return chosen && chosen !== CODEX_DEFAULT_MODEL ? chosen : undefined;
}

/** The turn text: a single user message as is; otherwise the conversation as `[role]` blocks, in order. */
export function renderCompletionInput(messages: readonly LlmCompleteMessage[]): string {
  const turns = messages.filter((m) => m.role !== "system");
  if (turns.length === 1 && turns[0]!.role === "user") return turns[0]!.content;
  return turns.map((m) => `[${m.role}]\n${m.content}`).join("\n\n");
}

/** Developer instructions: ours, then the request's system prompt and system messages. */
export function completionInstructions(request: LlmCompleteRequest): string {
  const system = request.messages.filter((m) => m.role === "system").map((m) => m.content);
  return [LLM_COMPLETE_INSTRUCTIONS, request.systemPrompt, ...system].filter((s): s is string => !!s && s.trim() !== "").join("\n\n");
}

/**
 * Build `runtime.llm` over an app-server. Without one, `complete` rejects with a clear message (and a plugin that
 * declares the `runtime-llm-complete` host requirement fails at load instead).
 *
 * @example
 * ```ts
 * const llm = createCodexLlm({ appServer, pluginId: "summarizer" });
 * const { text } = await llm.complete({ messages: [{ role: "user", content: "Summarize: ..." }], purpose: "summary" });
 * ```
 */
export function createCodexLlm(opts: { appServer?: CodexAppServer | undefined; model?: string | undefined; pluginId?: string | undefined; logger?: Logger | undefined; policy?: LlmPolicy | undefined }): CodexLlm {
  const logger = opts.logger ?? silentLogger;
  return {
    async complete(request) {
      const { appServer } = opts;
      if (!appServer) throw new Error("runtime.llm.complete is unavailable: the plugin host was loaded without a Codex app-server");
      if (!Array.isArray(request?.messages) || request.messages.length === 0) {
        throw new Error("runtime.llm.complete: messages must be a non-empty array");
      }
      const refusal = llmPolicyRefusal(opts.policy ?? DEFAULT_LLM_POLICY, request.model, opts.model);
      if (refusal) throw new Error(`runtime.llm.complete: ${refusal} (the host's plugins.entries.${opts.pluginId ?? "<plugin>"}.llm policy)`);
      const model = codexModelFor(request.model, opts.model);
      const text = renderCompletionInput(request.messages);
      if (text.trim() === "") throw new Error("runtime.llm.complete: no user or assistant content to send");
      const thread = await appServer.startThread({
        ephemeral: true,
        sandbox: "read-only",
        approvalPolicy: "never",
        developerInstructions: completionInstructions(request),
        ...(model ? { model } : {}),
      });
      const turn = await appServer.startTurn({ threadId: thread.threadId, text, ...(model ? { model } : {}) });
      const onAbort = () => void turn.interrupt().catch(() => undefined);
      request.signal?.addEventListener("abort", onAbort, { once: true });
      const record = await turn.completion.finally(() => request.signal?.removeEventListener("abort", onAbort));
      logger.info(
        { event: "openclaw.llm.complete", pluginId: opts.pluginId, threadId: record.threadId, turnId: record.turnId, status: record.codexStatus, messages: request.messages.length, outputChars: record.assistantText.length },
        "plugin llm completion",
      );
      if (record.codexStatus !== "completed") {
        throw new Error(`runtime.llm.complete: the Codex turn ended ${record.codexStatus}${record.error ? `: ${record.error.message}` : ""}`);
      }
      const usage = record.usage;
      return {
        text: record.assistantText,
        provider: thread.modelProvider ?? CODEX_LLM_PROVIDER,
        model: thread.model ?? model ?? CODEX_DEFAULT_MODEL,
        agentId: "codex-turn-machine",
        usage: usage
          ? { inputTokens: usage.lastCallInputTokens ?? usage.inputTokens, outputTokens: usage.lastCallOutputTokens ?? usage.outputTokens, cacheReadTokens: usage.lastCallCachedInputTokens ?? usage.cachedInputTokens, totalTokens: usage.lastCallTotalTokens ?? usage.totalTokens }
          : {},
        execution: { mode: "direct-provider", owner: { kind: "provider", id: CODEX_LLM_PROVIDER } },
        audit: { caller: { kind: "plugin", ...(opts.pluginId ? { id: opts.pluginId } : {}) }, ...(typeof request.purpose === "string" ? { purpose: request.purpose } : {}) },
      };
    },
  };
}
