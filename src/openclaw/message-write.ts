/**
 * OpenClaw's message write hooks over a plugin registry, as OpenClaw applies them to what it persists: for a tool
 * result, `tool_result_persist` first (each handler may return `{ message }`, handed to the next), then
 * `before_message_write` for every message (`{ message }` replaces it for the next handler and the write,
 * `{ block: true }` keeps it out and stops). Both are synchronous in OpenClaw: a handler that returns a Promise is
 * ignored with a warning, and a handler that throws is skipped with a warning (the message goes on as it was).
 */
import type { AgentMessage } from "../context-engine/types.js";
import type { BeforeMessageWriteEvent, BeforeMessageWriteResult } from "../hooks/types.js";
import { errorText } from "./errors.js";
import { hookHandlers, type PluginRegistry } from "./registry.js";

function isPromiseLike(value: unknown): boolean {
  return typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function";
}

/**
 * The message as the plugins would have OpenClaw persist it; undefined when none changed or blocked it.
 *
 * @example
 * ```ts
 * runMessageWriteHooks(registry, "redactor", { sessionId: "s", message }, ctx); // { message: redacted } | { block: true } | undefined
 * ```
 */
export function runMessageWriteHooks(registry: PluginRegistry, pluginId: string, e: BeforeMessageWriteEvent, ctx: Record<string, unknown>): BeforeMessageWriteResult | undefined {
  const warnings: string[] = [];
  let message: AgentMessage = e.message;
  const call = (name: string, owner: string, run: () => unknown): { message?: unknown; block?: unknown } | undefined => {
    try {
      const out = run();
      if (isPromiseLike(out)) {
        warnings.push(`plugin ${owner} ${name} handler returned a Promise; this hook is synchronous and the result was ignored`);
        return undefined;
      }
      return typeof out === "object" && out !== null ? (out as { message?: unknown; block?: unknown }) : undefined;
    } catch (error) {
      warnings.push(`plugin ${owner} ${name} hook failed: ${errorText(error)}`);
      return undefined;
    }
  };
  const isMessage = (m: unknown): m is AgentMessage => typeof m === "object" && m !== null && typeof (m as { role?: unknown }).role === "string";
  if ((message as { role?: string | undefined }).role === "toolResult") {
    for (const { handler, pluginId: owner } of hookHandlers(registry, "tool_result_persist")) {
      const who = owner ?? pluginId;
      const event = { toolName: e.toolName, toolCallId: e.toolCallId, message, isSynthetic: false };
      const out = call("tool_result_persist", who, () => (handler as (ev: unknown, c: unknown) => unknown)(event, { ...ctx, toolName: e.toolName, toolCallId: e.toolCallId }));
      if (isMessage(out?.message)) message = out.message;
    }
  }
  for (const { handler, pluginId: owner } of hookHandlers(registry, "before_message_write")) {
    const who = owner ?? pluginId;
    const out = call("before_message_write", who, () => (handler as (ev: unknown, c: unknown) => unknown)({ message, ...(ctx.sessionKey !== undefined ? { sessionKey: ctx.sessionKey } : {}) }, ctx));
    if (out?.block === true) return { block: true, ...(warnings.length > 0 ? { warnings } : {}) };
    if (isMessage(out?.message)) message = out.message;
  }
  if (message === e.message && warnings.length === 0) return undefined;
  return { ...(message !== e.message ? { message } : {}), ...(warnings.length > 0 ? { warnings } : {}) };
}
