/** Plugin tools as dynamic tools: factories build each session's own tools (as OpenClaw does per run). */
import { describe, expect, it } from "vitest";
import { resolvePluginTools, type PluginToolFactoryContext } from "../../src/openclaw/tools.js";

/** A factory whose tool reports the session it was built for; records every call. */
function sessionFactory(calls: PluginToolFactoryContext[], only?: (ctx: PluginToolFactoryContext) => boolean) {
  return (ctx: PluginToolFactoryContext) => {
    calls.push(ctx);
    if (only && !only(ctx)) return null;
    return {
      name: "recall",
      description: "search this session",
      parameters: { type: "object", properties: { q: { type: "string" } } },
      execute: async (toolCallId: string, params: Record<string, unknown>, signal?: AbortSignal) =>
        `${toolCallId} ${String(params.q)} session=${ctx.sessionId ?? "none"}/${ctx.sessionKey ?? "none"} signal=${signal ? "yes" : "no"}`,
    };
  };
}

describe("resolvePluginTools", () => {
  it("builds a factory's tools per calling session, once each; the load-time session reuses the load's tools", async () => {
    const calls: PluginToolFactoryContext[] = [];
    const [tool] = resolvePluginTools([{ tool: sessionFactory(calls) }], { workspaceDir: "/w", sessionId: "s0", sessionKey: "k0" });
    expect(tool!.name).toBe("recall");
    expect(calls).toEqual([{ workspaceDir: "/w", sessionId: "s0", sessionKey: "k0" }]);
    const signal = new AbortController().signal;
    expect(await tool!.handler({ q: "a" }, { callId: "c1", sessionId: "s1", sessionKey: "k1", signal })).toBe("c1 a session=s1/k1 signal=yes");
    expect(await tool!.handler({ q: "b" }, { callId: "c2", sessionId: "s1", sessionKey: "k1" })).toBe("c2 b session=s1/k1 signal=no");
    expect(await tool!.handler({ q: "c" }, { callId: "c3", sessionId: "s0", sessionKey: "k0" })).toBe("c3 c session=s0/k0 signal=no");
    // No session on the call (a thread driven directly): the tools built at load.
    expect(await tool!.handler({ q: "d" }, { callId: "c4" })).toBe("c4 d session=s0/k0 signal=no");
    expect(await tool!.handler({ q: "e" }, { callId: "c5", sessionId: "s2" })).toBe("c5 e session=s2/none signal=no");
    // One factory call for the load, one per new session; none again for s1 or the load-time session.
    expect(calls.map((c) => `${c.sessionId}/${c.sessionKey}`)).toEqual(["s0/k0", "s1/k1", "s2/undefined"]);
    expect(calls[1]).toEqual({ workspaceDir: "/w", sessionId: "s1", sessionKey: "k1" });
  });

  it("a session whose factory builds no such tool gets an error naming the tool and the session", async () => {
    const calls: PluginToolFactoryContext[] = [];
    const [tool] = resolvePluginTools([{ tool: sessionFactory(calls, (ctx) => ctx.sessionKey !== "locked") }], {});
    await expect(tool!.handler({}, { callId: "c", sessionId: "s9", sessionKey: "locked" })).rejects.toThrow(
      "tool recall is not available in session locked: the plugin's tool factory did not build it there",
    );
  });

  it("a tool object (no factory) is the same tool for every session", async () => {
    let built = 0;
    const tool = { name: "plain", execute: async () => `plain ${++built}` };
    const [dyn] = resolvePluginTools([{ tool }], {});
    expect(await dyn!.handler({}, { sessionId: "a" })).toBe("plain 1");
    expect(await dyn!.handler({}, { sessionId: "b" })).toBe("plain 2");
  });
});
