/**
 * OpenClaw's `before_agent_run` gate over a plugin registry, as OpenClaw's hook runner and agent harness run it
 * (`runBeforeAgentRun`, `runAgentHarnessBeforeAgentRunHook`): handlers in priority order, one at a time; the first
 * `block` decides and the rest do not run; returning nothing passes; `null` or anything that is not a decision
 * (`{ outcome: "pass" | "block" }`) blocks ("invalid decision"); a handler that throws or outlives its timeout (default
 * 15 s) fails the whole gate, which blocks too (fail-closed), attributed to `before_agent_run`. The user-facing text
 * is the decision's `message`, never its internal `reason`.
 */
import type { BeforeAgentRunResult } from "../hooks/types.js";
import { errorText } from "./errors.js";
import { withinHandlerTimeout } from "./handler-timeout.js";
import { boundedHookHistory } from "./hook-history.js";
import { hookHandlers, type PluginRegistry } from "./registry.js";

/** OpenClaw's default bound on one `before_agent_run` handler (a registration's own `timeoutMs` wins). */
export const BEFORE_AGENT_RUN_TIMEOUT_MS = 15_000;

/** Who a block is attributed to when the gate itself failed (OpenClaw's `BEFORE_AGENT_RUN_FAILURE_ATTRIBUTION`). */
export const GATE_FAILED_ATTRIBUTION = "before_agent_run";

/** OpenClaw's `PluginHookBeforeAgentRunEvent`, as this host fills it. */
export interface BeforeAgentRunPluginEvent {
  prompt: string;
  messages: unknown[];
  systemPrompt?: string | undefined;
  channelId?: string | undefined;
}

function isDecision(value: unknown): value is { outcome: "pass" } | { outcome: "block"; message?: unknown } {
  if (typeof value !== "object" || value === null) return false;
  const outcome = (value as { outcome?: unknown }).outcome;
  return outcome === "pass" || outcome === "block";
}

/**
 * The gate's decision for one turn. `history` is bounded to the last 100 messages and cloned (a handler cannot change
 * the session through it).
 *
 * @example
 * ```ts
 * await runBeforeAgentRunGate(registry, "guard", { prompt: "rm -rf /", history: [] }, ctx);
 * // { block: true, message: "no destructive requests", blockedBy: "guard" }
 * ```
 */
export async function runBeforeAgentRunGate(
  registry: PluginRegistry,
  pluginId: string,
  turn: { prompt: string; history: readonly unknown[]; systemPrompt?: string | undefined; channelId?: string | undefined },
  ctx: unknown,
): Promise<BeforeAgentRunResult | undefined> {
  const handlers = hookHandlers(registry, "before_agent_run");
  if (handlers.length === 0) return undefined;
  const event: BeforeAgentRunPluginEvent = {
    prompt: turn.prompt,
    messages: boundedHookHistory(turn.history),
    ...(turn.systemPrompt !== undefined ? { systemPrompt: turn.systemPrompt } : {}),
    ...(turn.channelId !== undefined ? { channelId: turn.channelId } : {}),
  };
  for (const { handler, pluginId: owner, timeoutMs } of handlers) {
    const who = owner ?? pluginId;
    let result: unknown;
    try {
      result = await withinHandlerTimeout(
        Promise.resolve().then(() => (handler as (e: unknown, c: unknown) => unknown)(event, ctx)),
        timeoutMs ?? BEFORE_AGENT_RUN_TIMEOUT_MS,
      );
    } catch (error) {
      return { block: true, blockedBy: GATE_FAILED_ATTRIBUTION, warnings: [`plugin ${who} before_agent_run hook failed: ${errorText(error)}`] };
    }
    if (result === undefined) continue;
    if (!isDecision(result)) return { block: true, blockedBy: who, warnings: [`plugin ${who} before_agent_run hook returned an invalid decision`] };
    if (result.outcome === "block") {
      const message = typeof result.message === "string" ? result.message : undefined;
      return { block: true, blockedBy: who, ...(message !== undefined ? { message } : {}) };
    }
  }
  return { block: false };
}
