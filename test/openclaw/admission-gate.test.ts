/**
 * OpenClaw's `before_agent_run` merge rules, as its hook runner tests state them: handlers by priority, one at a time;
 * the first block wins and stops the rest; void passes; null or a non-decision blocks ("invalid decision"); a throw or a
 * timeout fails the gate, which blocks, attributed to `before_agent_run`; the handler sees a bounded, cloned history.
 */
import { describe, expect, it } from "vitest";
import { BEFORE_AGENT_RUN_TIMEOUT_MS, runBeforeAgentRunGate } from "../../src/openclaw/admission-gate.js";
import { HOOK_HISTORY_MESSAGES } from "../../src/openclaw/hook-history.js";
import { createPluginRegistry, type PluginRegistry } from "../../src/openclaw/registry.js";

function registryOf(handlers: Array<{ pluginId: string; priority?: number; timeoutMs?: number; handler: (event: never) => unknown }>): PluginRegistry {
  const registry = createPluginRegistry();
  handlers.forEach((h, order) =>
    registry.hooks.push({ name: "before_agent_run", handler: h.handler as never, priority: h.priority ?? 0, order, pluginId: h.pluginId, ...(h.timeoutMs !== undefined ? { timeoutMs: h.timeoutMs } : {}) }),
  );
  return registry;
}

const turn = { prompt: "hello", history: [] as unknown[] };

describe("the before_agent_run gate over plugin handlers", () => {
  it("no handler: no decision; void and pass admit", async () => {
    expect(await runBeforeAgentRunGate(createPluginRegistry(), "p", turn, {})).toBeUndefined();
    expect(await runBeforeAgentRunGate(registryOf([{ pluginId: "a", handler: () => undefined }, { pluginId: "b", handler: () => ({ outcome: "pass" }) }]), "p", turn, {})).toEqual({ block: false });
  });

  it("runs by priority; the first block decides and the rest do not run", async () => {
    const calls: string[] = [];
    const registry = registryOf([
      { pluginId: "late", priority: 1, handler: () => void calls.push("late") },
      { pluginId: "blocker", priority: 5, handler: () => (calls.push("blocker"), { outcome: "block", reason: "internal", message: "Too long" }) },
      { pluginId: "first", priority: 10, handler: () => (calls.push("first"), { outcome: "pass" }) },
    ]);
    expect(await runBeforeAgentRunGate(registry, "p", turn, {})).toEqual({ block: true, blockedBy: "blocker", message: "Too long" });
    expect(calls).toEqual(["first", "blocker"]);
  });

  it("null or a result that is not a decision blocks (invalid decision), attributed to its plugin", async () => {
    for (const bad of [null, { outcome: "ask", title: "t" }, "yes", { block: true }]) {
      const out = await runBeforeAgentRunGate(registryOf([{ pluginId: "odd", handler: () => bad }, { pluginId: "never", handler: () => { throw new Error("must not run"); } }]), "p", turn, {});
      expect(out).toEqual({ block: true, blockedBy: "odd", warnings: ["plugin odd before_agent_run hook returned an invalid decision"] });
    }
  });

  it("a handler that throws or times out fails the gate: blocked, attributed to before_agent_run, the plugin's text a warning", async () => {
    const thrown = await runBeforeAgentRunGate(registryOf([{ pluginId: "svc", handler: () => { throw new Error("policy unavailable"); } }]), "p", turn, {});
    expect(thrown).toEqual({ block: true, blockedBy: "before_agent_run", warnings: ["plugin svc before_agent_run hook failed: policy unavailable"] });
    const slow = await runBeforeAgentRunGate(registryOf([{ pluginId: "slow", timeoutMs: 20, handler: () => new Promise(() => undefined) }]), "p", turn, {});
    expect(slow).toEqual({ block: true, blockedBy: "before_agent_run", warnings: ["plugin slow before_agent_run hook failed: timed out after 20ms"] });
    expect(BEFORE_AGENT_RUN_TIMEOUT_MS).toBe(15_000);
  });

  it("hands the handler the prompt, the instructions and the last 100 history messages, cloned", async () => {
    const history = Array.from({ length: 130 }, (_, i) => ({ role: "user", content: `m${i}`, timestamp: i }));
    let seen: { prompt: string; systemPrompt?: string; messages: Array<{ content: string }> } | undefined;
    const registry = registryOf([
      {
        pluginId: "reader",
        handler: (e: never) => {
          seen = e;
          (e as { messages: Array<{ content: string }> }).messages[0]!.content = "changed by the plugin";
        },
      },
    ]);
    await runBeforeAgentRunGate(registry, "p", { prompt: "final prompt", history, systemPrompt: "instructions" }, {});
    expect(seen?.prompt).toBe("final prompt");
    expect(seen?.systemPrompt).toBe("instructions");
    expect(seen?.messages).toHaveLength(HOOK_HISTORY_MESSAGES);
    expect(seen?.messages[1]!.content).toBe("m31");
    expect(history[30]!.content).toBe("m30");
  });
});
