/**
 * OpenClaw's message write hooks over plugin handlers (its hook runner's runToolResultPersist / runBeforeMessageWrite):
 * synchronous, priority order, each handler sees the previous one's message; a block stops; a Promise result is ignored
 * and a throw skipped, both with a warning naming the plugin.
 */
import { describe, expect, it } from "vitest";
import { runMessageWriteHooks } from "../../src/openclaw/message-write.js";
import { createPluginRegistry, type PluginRegistry } from "../../src/openclaw/registry.js";
import type { AgentMessage } from "../../src/context-engine/types.js";

type Handler = (event: { message: AgentMessage; toolName?: string }) => unknown;
function registryOf(handlers: Array<{ name: "before_message_write" | "tool_result_persist"; pluginId: string; priority?: number; handler: Handler }>): PluginRegistry {
  const registry = createPluginRegistry();
  handlers.forEach((h, order) => registry.hooks.push({ name: h.name, handler: h.handler as never, priority: h.priority ?? 0, order, pluginId: h.pluginId }));
  return registry;
}
const user = { role: "user", content: "hello sk-1", timestamp: 1 } as AgentMessage;
const toolResult = { role: "toolResult", toolCallId: "c1", toolName: "read", content: [{ type: "text", text: "long output" }], isError: false, timestamp: 2 } as AgentMessage;
const text = (m: AgentMessage | undefined) => JSON.stringify((m as { content: unknown }).content);

describe("message write hooks over plugin handlers", () => {
  it("chains rewrites in priority order; nothing changed is undefined", () => {
    const registry = registryOf([
      { name: "before_message_write", pluginId: "second", priority: 1, handler: (e) => ({ message: { ...e.message, content: `${String((e.message as { content: string }).content)} +second` } }) },
      { name: "before_message_write", pluginId: "first", priority: 5, handler: (e) => ({ message: { ...e.message, content: String((e.message as { content: string }).content).replace("sk-1", "[R]") } }) },
    ]);
    expect(text(runMessageWriteHooks(registry, "p", { sessionId: "s", runId: "run-1", message: user }, {})?.message)).toBe('"hello [R] +second"');
    expect(runMessageWriteHooks(registryOf([{ name: "before_message_write", pluginId: "a", handler: () => undefined }]), "p", { sessionId: "s", runId: "run-1", message: user }, {})).toBeUndefined();
  });

  it("a block stops the chain; tool_result_persist runs first and only for tool results, with the tool's name", () => {
    const seen: string[] = [];
    const registry = registryOf([
      { name: "before_message_write", pluginId: "gate", handler: (e) => (seen.push(`write:${e.message.role}`), text(e.message).includes("short") ? { block: true } : undefined) },
      { name: "before_message_write", pluginId: "never", priority: -1, handler: () => void seen.push("never") },
      { name: "tool_result_persist", pluginId: "trim", handler: (e) => (seen.push(`persist:${e.toolName}`), { message: { ...e.message, content: [{ type: "text", text: "short" }] } }) },
    ]);
    expect(runMessageWriteHooks(registry, "p", { sessionId: "s", runId: "run-1", message: toolResult, toolName: "read", toolCallId: "c1" }, {})).toEqual({ block: true });
    expect(runMessageWriteHooks(registry, "p", { sessionId: "s", runId: "run-1", message: user }, {})).toBeUndefined();
    expect(seen).toEqual(["persist:read", "write:toolResult", "write:user", "never"]);
  });

  it("a Promise result is ignored and a throw skipped, each with a warning naming the plugin; the others still apply", () => {
    const registry = registryOf([
      { name: "before_message_write", pluginId: "async", priority: 3, handler: async () => ({ block: true }) },
      { name: "before_message_write", pluginId: "broken", priority: 2, handler: () => { throw new Error("regex blew up"); } },
      { name: "before_message_write", pluginId: "ok", priority: 1, handler: (e) => ({ message: { ...e.message, content: "clean" } }) },
    ]);
    const out = runMessageWriteHooks(registry, "p", { sessionId: "s", runId: "run-1", message: user }, {});
    expect(text(out?.message)).toBe('"clean"');
    expect(out?.warnings).toEqual([
      "plugin async before_message_write handler returned a Promise; this hook is synchronous and the result was ignored",
      "plugin broken before_message_write hook failed: regex blew up",
    ]);
  });
});
