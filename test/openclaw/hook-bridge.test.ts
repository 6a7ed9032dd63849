import { describe, expect, it } from "vitest";
import { createPluginApi } from "../../src/openclaw/api.js";
import { createPluginTurnHooks, resolveModelOverride } from "../../src/openclaw/hook-bridge.js";
import { createCodexLlm } from "../../src/openclaw/llm.js";
import { createPluginRegistry } from "../../src/openclaw/registry.js";
import { silentLogger } from "../../src/log/logger.js";

function pluginWith(register: (api: ReturnType<typeof createPluginApi>) => void) {
  const registry = createPluginRegistry();
  const api = createPluginApi({
    id: "p",
    name: "P",
    source: "/plugins/p/index.js",
    rootDir: "/plugins/p",
    config: { plugins: { entries: { p: { enabled: true } } } },
    llm: createCodexLlm({}),
    logger: silentLogger,
    registry,
  });
  register(api);
  return createPluginTurnHooks(registry, "p", () => ({ modelProviderId: "codex", modelId: "gpt-test", workspaceDir: "/work" }));
}

const base = { sessionId: "s1", runId: "run-1", threadId: "th", turnId: "tu" };

describe("plugin hooks as turn hooks", () => {
  it("folds before_prompt_build results into prompt and developer instructions, in priority order", async () => {
    const hooks = pluginWith((api) => {
      api.on("before_prompt_build", () => ({ appendSystemContext: "second" }));
      api.on("before_prompt_build", () => ({ prependSystemContext: "first", prependContext: "ctx" }), { priority: 10 });
    });
    const out = await hooks.beforePromptBuild!({ sessionId: "s1", runId: "run-1", prompt: "question", developerInstructions: "base", messages: [] });
    expect(out).toEqual({ prompt: "ctx\n\nquestion", developerInstructions: "first\n\nbase\n\nsecond" });
    const none = pluginWith((api) => api.on("before_prompt_build", () => undefined));
    expect(await none.beforePromptBuild!({ sessionId: "s1", runId: "run-1", prompt: "q", messages: [] })).toBeUndefined();
  });

  it("maps our events to OpenClaw's shapes", async () => {
    const seen: Array<[string, unknown, unknown]> = [];
    const hooks = pluginWith((api) => {
      for (const name of ["llm_input", "llm_output", "agent_end", "after_tool_call", "before_compaction", "after_compaction"]) {
        api.on(name, ((event: unknown, ctx: unknown) => void seen.push([name, event, ctx])) as never);
      }
    });
    // The history as the host hands it (frozen), 130 messages: the plugin gets the last 100, copies it may change.
    const history = Object.freeze(Array.from({ length: 130 }, (_, i) => Object.freeze({ role: "user", content: `m${i}`, timestamp: i })));
    const schema = { type: "object", properties: { q: { type: "string" } } };
    await hooks.llmInput!({ sessionId: "s1", runId: "run-1", threadId: "th", prompt: "p", developerInstructions: "d", contextEntries: 0, imagesCount: 2, historyMessages: history, tools: [{ name: "lookup", description: "Look up.", inputSchema: schema }] });
    await hooks.llmOutput!({ ...base, assistantText: "a", lastAssistant: { role: "assistant", content: [{ type: "text", text: "a" }], timestamp: 5 } as never, codexStatus: "completed", usage: { inputTokens: 9, cachedInputTokens: 1, outputTokens: 2, reasoningOutputTokens: 0, totalTokens: 11, lastCallInputTokens: 5 } });
    await hooks.agentEnd!({ ...base, status: "failed", error: { phase: "turn", message: "boom" }, messages: [] });
    await hooks.agentEnd!({ ...base, status: "completed", messages: [{ role: "assistant", content: "now", timestamp: 200 }] as never, historyMessages: history });
    await hooks.afterToolCall!({ ...base, callId: "c", toolName: "t", native: false, params: { a: 1 }, result: "r", durationMs: 3 });
    const session = history.slice(0, 2);
    await hooks.beforeCompaction!({ sessionId: "s1", runId: "run-1", backend: "context-engine", trigger: "accordion", ownsCompaction: true, sessionFile: "/d/s1.jsonl", messageCount: 2, messages: session });
    await hooks.afterCompaction!({ sessionId: "s1", runId: "run-1", backend: "codex-app-server", trigger: "native", ownsCompaction: false, compacted: true, sessionFile: "/d/s1.jsonl", messageCount: 2 });
    await hooks.afterCompaction!({ sessionId: "s1", runId: "run-1", backend: "context-engine", trigger: "accordion", ownsCompaction: true, compacted: false });
    expect(seen.map(([n, e]) => [n, e])).toEqual([
      ["llm_input", { runId: "run-1", sessionId: "s1", provider: "codex", model: "gpt-test", systemPrompt: "d", prompt: "p", historyMessages: history.slice(30), imagesCount: 2, tools: [{ name: "lookup", description: "Look up.", parameters: schema }] }],
      ["llm_output", { runId: "run-1", sessionId: "s1", provider: "codex", model: "gpt-test", resolvedRef: "codex/gpt-test", harnessId: "codex", assistantTexts: ["a"], lastAssistant: { role: "assistant", content: [{ type: "text", text: "a" }], timestamp: 5 }, usage: { input: 5, output: 2, cacheRead: 1, total: 11 } }],
      ["agent_end", { runId: "run-1", messages: [], success: false, error: "boom" }],
      ["agent_end", { runId: "run-1", messages: [...history.slice(30), { role: "assistant", content: "now", timestamp: 200 }], success: true }],
      ["after_tool_call", { toolName: "t", params: { a: 1 }, runId: "run-1", toolCallId: "c", result: "r", durationMs: 3 }],
      // OpenClaw's shapes: the session's message count, its messages (copies), the transcript; the compacted count is
      // unknown to this host (-1, as OpenClaw's Codex harness reports native compaction), 0 when nothing was compacted.
      ["before_compaction", { messageCount: 2, sessionFile: "/d/s1.jsonl", messages: session, backend: "context-engine", trigger: "accordion" }],
      ["after_compaction", { messageCount: 2, sessionFile: "/d/s1.jsonl", compactedCount: -1, backend: "codex-app-server", trigger: "native" }],
      ["after_compaction", { messageCount: -1, compactedCount: 0, backend: "context-engine", trigger: "accordion" }],
    ]);
    expect(seen[0]![2]).toMatchObject({ sessionId: "s1", runId: "run-1", modelProviderId: "codex", modelId: "gpt-test", workspaceDir: "/work" });
    // One run id in every event and context of the attempt (OpenClaw's runId), so a plugin can pair llm_input with llm_output.
    expect(seen.map(([, , ctx]) => (ctx as { runId?: string }).runId)).toEqual(Array(seen.length).fill("run-1"));
    const compacting = (seen.find(([n]) => n === "before_compaction")![1] as { messages: object[] }).messages;
    expect(Object.isFrozen(compacting[0])).toBe(false);
    expect(compacting[0]).not.toBe(session[0]);
    const handed = (seen[0]![1] as { historyMessages: Array<{ content: string }> }).historyMessages;
    expect(Object.isFrozen(handed[0])).toBe(false);
    handed[0]!.content = "changed by the plugin";
    expect(history[30]!.content).toBe("m30");
  });

  it("before_agent_finalize can ask for one more model pass; the reasons of all handlers asking join (OpenClaw's rule)", async () => {
    const events: unknown[] = [];
    const revise = pluginWith((api) => {
      api.on("before_agent_finalize", ((e: unknown) => (events.push(e), undefined)) as never);
      api.on("before_agent_finalize", (() => ({ action: "revise", reason: "cite the file" })) as never);
      api.on("before_agent_finalize", (() => ({ action: "revise", reason: "second" })) as never);
    });
    const event = { sessionId: "s1", runId: "run-1", sessionKey: "agent:main:s1", threadId: "th", turnId: "tu", assistantText: "done", codexStatus: "inProgress", stopHookActive: true };
    expect(await revise.beforeAgentFinalize!(event)).toEqual({ action: "revise", reason: "cite the file\n\nsecond" });
    expect(events).toEqual([{ runId: "run-1", sessionId: "s1", sessionKey: "agent:main:s1", turnId: "tu", provider: "codex", model: "gpt-test", cwd: "/work", stopHookActive: true, lastAssistantMessage: "done" }]);
    // Through the relay, Codex's rollout path goes on as OpenClaw's transcriptPath.
    events.length = 0;
    await revise.beforeAgentFinalize!({ ...event, transcriptPath: "/codex/sessions/rollout-th.jsonl" });
    expect(events).toEqual([expect.objectContaining({ transcriptPath: "/codex/sessions/rollout-th.jsonl" })]);
    const pass = pluginWith((api) => api.on("before_agent_finalize", (() => ({ action: "revise", reason: "  " })) as never));
    expect(await pass.beforeAgentFinalize!(event)).toBeUndefined();
  });

  it("Codex's native shell reaches plugins as OpenClaw's exec tool; other names are unchanged", async () => {
    const names: string[] = [];
    const hooks = pluginWith((api) => {
      api.on("before_tool_call", ((e: { toolName: string }) => void names.push(e.toolName)) as never);
      api.on("after_tool_call", ((e: { toolName: string }) => void names.push(`after:${e.toolName}`)) as never);
    });
    await hooks.beforeToolCall!({ ...base, callId: "c1", toolName: "shell", native: true, params: { command: "ls" } });
    await hooks.afterToolCall!({ ...base, callId: "c1", toolName: "shell", native: true, params: { command: "ls" }, result: "ok" });
    await hooks.beforeToolCall!({ ...base, callId: "c2", toolName: "shell", native: false, params: {} });
    await hooks.beforeToolCall!({ ...base, callId: "c3", toolName: "apply_patch", native: true, params: {} });
    expect(names).toEqual(["exec", "after:exec", "shell", "apply_patch"]);
  });

  it("a tool hook's context says where the call runs: a native command's own cwd, else the workspace (as OpenClaw's)", async () => {
    const cwds: unknown[] = [];
    const hooks = pluginWith((api) => {
      api.on("before_tool_call", ((_e: unknown, ctx: { cwd?: string; toolCallId?: string }) => void cwds.push([ctx.toolCallId, ctx.cwd])) as never);
      api.on("after_tool_call", ((_e: unknown, ctx: { cwd?: string; toolCallId?: string }) => void cwds.push([`after:${ctx.toolCallId}`, ctx.cwd])) as never);
    });
    await hooks.beforeToolCall!({ ...base, callId: "c1", toolName: "shell", native: true, params: { command: "make", cwd: "/srv/app/pkg" } });
    await hooks.afterToolCall!({ ...base, callId: "c1", toolName: "shell", native: true, params: { command: "make", cwd: "/srv/app/pkg" }, result: "ok" });
    await hooks.beforeToolCall!({ ...base, callId: "c2", toolName: "shell", native: true, params: { command: "ls" } });
    // Through the relay Codex names the directory beside the tool input.
    await hooks.beforeToolCall!({ ...base, callId: "c4", toolName: "shell", native: true, params: { command: "ls" }, cwd: "/srv/app/sub" });
    // A dynamic tool's own `cwd` argument is the model's, not where anything runs.
    await hooks.beforeToolCall!({ ...base, callId: "c3", toolName: "search", native: false, params: { cwd: "/etc" } });
    expect(cwds).toEqual([
      ["c1", "/srv/app/pkg"],
      ["after:c1", "/srv/app/pkg"],
      ["c2", "/work"],
      ["c4", "/srv/app/sub"],
      ["c3", "/work"],
    ]);
  });

  it("before_tool_call can block or rewrite a call", async () => {
    const block = pluginWith((api) => api.on("before_tool_call", (() => ({ block: true, blockReason: "not here" })) as never));
    expect(await block.beforeToolCall!({ ...base, callId: "c", toolName: "rm", native: false, params: {} })).toEqual({ block: true, blockReason: "not here" });
    const rewrite = pluginWith((api) => api.on("before_tool_call", (() => ({ params: { safe: true } })) as never));
    expect(await rewrite.beforeToolCall!({ ...base, callId: "c", toolName: "t", native: false, params: {} })).toEqual({ params: { safe: true } });
  });

  it("a throwing handler does not stop the others; the hook rejects with the plugin's own text", async () => {
    const ran: string[] = [];
    const hooks = pluginWith((api) => {
      api.on("agent_end", () => {
        throw new Error("database is locked");
      });
      api.on("agent_end", () => void ran.push("second"));
    });
    await expect(hooks.agentEnd!({ ...base, status: "completed", messages: [] })).rejects.toThrow("plugin p agent_end hook failed: database is locked");
    expect(ran).toEqual(["second"]);
  });

  it("defines only the hooks the plugin listens to", () => {
    expect(pluginWith(() => undefined)).toEqual({});
  });
});

describe("before_model_resolve", () => {
  it("sees the prompt and what is attached (kind and MIME type), with the turn's session, key and run in its context", async () => {
    const seen: unknown[] = [];
    const hooks = pluginWith((api) => api.on("before_model_resolve", ((event: unknown, ctx: unknown) => void seen.push([event, ctx])) as never));
    await hooks.beforeModelResolve!({ sessionId: "s1", sessionKey: "agent:main:s1", runId: "run-1", prompt: "what is this?", attachments: [{ kind: "image", mimeType: "image/png" }] });
    await hooks.beforeModelResolve!({ sessionId: "s1", runId: "run-2", prompt: "plain" });
    expect(seen).toEqual([
      [{ prompt: "what is this?", attachments: [{ kind: "image", mimeType: "image/png" }] }, expect.objectContaining({ sessionId: "s1", sessionKey: "agent:main:s1", runId: "run-1" })],
      [{ prompt: "plain" }, expect.objectContaining({ sessionId: "s1", runId: "run-2" })],
    ]);
  });
});

describe("resolveModelOverride (before_model_resolve)", () => {
  it("the first Codex-runnable override wins; other providers are skipped; a provider prefix is stripped", () => {
    expect(resolveModelOverride([undefined, { modelOverride: "claude-x", providerOverride: "anthropic" }, { modelOverride: "openai/gpt-5.4" }, { modelOverride: "later" }])).toBe("gpt-5.4");
    expect(resolveModelOverride([{ modelOverride: "codex/gpt-5.4-mini" }])).toBe("gpt-5.4-mini");
    expect(resolveModelOverride([{ modelOverride: "fake-model", providerOverride: "codex" }])).toBe("fake-model");
    expect(resolveModelOverride([{ modelOverride: "  " }, { providerOverride: "codex" }, "x"])).toBeUndefined();
  });
});
