import { describe, expect, it } from "vitest";
import { AssembleResultInvalidError, EngineResultInvalidError } from "../../src/context-engine/contract.js";
import {
  assembleHarnessContextEngine,
  bootstrapHarnessContextEngine,
  buildHarnessContextEngineRuntimeContext,
  buildHarnessContextEngineRuntimeSettings,
  callEngine,
  describeEngineError,
  EngineCallAbortedError,
  EngineCallTimeoutError,
  finalizeHarnessContextEngineTurn,
  runHarnessContextEngineMaintenance,
} from "../../src/context-engine/lifecycle.js";
import { createRecordingEngine, createWindowEngine } from "../../src/context-engine/engines/index.js";
import type { AgentMessage, ContextEngine } from "../../src/context-engine/types.js";
import type { TurnUsage } from "../../machines/turn.contract.js";
import { mirrorKeysForTurn } from "../../src/transcript/mirror.js";

const msg = (i: number): AgentMessage => ({ role: i % 2 ? "assistant" : "user", content: `message ${i} ${"x".repeat(40)}`, timestamp: i });
const ids = { sessionId: "s1", sessionFile: "/sessions/s1.jsonl" };
const never = () => new Promise<never>(() => undefined);

describe("assembleHarnessContextEngine", () => {
  it("passes history, budget, tool names, model and prompt to assemble", async () => {
    let seen: Record<string, unknown> = {};
    const engine = {
      ...createWindowEngine(),
      assemble: async (p: Record<string, unknown>) => ((seen = p), { messages: [], estimatedTokens: 0 }),
    } as unknown as ContextEngine;
    await assembleHarnessContextEngine({
      engine,
      sessionId: "s",
      sessionKey: "k",
      messages: [msg(0)],
      tokenBudget: 100,
      availableTools: new Set(["t"]),
      model: "m",
      prompt: "p",
    });
    expect(seen).toMatchObject({ sessionId: "s", sessionKey: "k", messages: [msg(0)], tokenBudget: 100, model: "m", prompt: "p" });
    expect([...(seen["availableTools"] as Set<string>)]).toEqual(["t"]);
    // Unknown optional parameters are omitted, not passed as undefined.
    await assembleHarnessContextEngine({ engine, sessionId: "s", messages: [] });
    expect(Object.keys(seen).sort()).toEqual(["messages", "sessionId"]);
  });

  it("rejects a malformed assemble result with a typed error naming the field", async () => {
    const engine = { ...createWindowEngine(), assemble: async () => ({ messages: "nope", estimatedTokens: 1 }) } as unknown as ContextEngine;
    const failure = assembleHarnessContextEngine({ engine, sessionId: "s", messages: [] });
    await expect(failure).rejects.toBeInstanceOf(AssembleResultInvalidError);
    await expect(failure).rejects.toThrow(/messages/);
    const negative = { ...createWindowEngine(), assemble: async () => ({ messages: [], estimatedTokens: -1 }) } as unknown as ContextEngine;
    await expect(assembleHarnessContextEngine({ engine: negative, sessionId: "s", messages: [] })).rejects.toThrow(/estimatedTokens/);
    const noRole = { ...createWindowEngine(), assemble: async () => ({ messages: [{}], estimatedTokens: 0 }) } as unknown as ContextEngine;
    await expect(assembleHarnessContextEngine({ engine: noRole, sessionId: "s", messages: [] })).rejects.toThrow(/messages\.0\.role/);
    const nothing = { ...createWindowEngine(), assemble: async () => undefined } as unknown as ContextEngine;
    await expect(assembleHarnessContextEngine({ engine: nothing, sessionId: "s", messages: [] })).rejects.toBeInstanceOf(AssembleResultInvalidError);
  });

  it("propagates an engine's own error and bounds a hanging assemble", async () => {
    const throws = { ...createWindowEngine(), assemble: async () => Promise.reject(new Error("engine down")) } as unknown as ContextEngine;
    await expect(assembleHarnessContextEngine({ engine: throws, sessionId: "s", messages: [] })).rejects.toThrow("engine down");
    const hangs = { ...createWindowEngine(), assemble: never } as unknown as ContextEngine;
    const failure = assembleHarnessContextEngine({ engine: hangs, sessionId: "s", messages: [], timeoutMs: 10 });
    await expect(failure).rejects.toBeInstanceOf(EngineCallTimeoutError);
    await expect(failure).rejects.toThrow(/assemble\(\) did not settle within 10 ms/);
  });
});

describe("finalizeHarnessContextEngineTurn", () => {
  const messages = [msg(0), msg(1), msg(2), msg(3)];

  it("prefers afterTurn with the full snapshot and prePromptMessageCount", async () => {
    const inner = createWindowEngine();
    let seen: Record<string, unknown> | undefined;
    inner.afterTurn = async (p) => void (seen = p as unknown as Record<string, unknown>);
    const engine = createRecordingEngine(inner);
    const runtimeContext = buildHarnessContextEngineRuntimeContext({ tokenBudget: 500 });
    const mode = await finalizeHarnessContextEngineTurn({ engine, ...ids, messages, prePromptMessageCount: 2, tokenBudget: 500, runtimeContext });
    expect(mode).toBe("afterTurn");
    expect(engine.calls).toEqual([{ method: "afterTurn", messageCount: 4, prePromptMessageCount: 2, runtimeContextKeys: ["tokenBudget"] }]);
    expect(seen).toMatchObject({ sessionId: "s1", sessionFile: "/sessions/s1.jsonl", messages, prePromptMessageCount: 2, tokenBudget: 500 });
  });

  it("falls back to ingestBatch of the new messages only", async () => {
    const inner = createWindowEngine();
    let batch: AgentMessage[] = [];
    inner.ingestBatch = async (p) => ((batch = p.messages), { ingestedCount: p.messages.length });
    const engine = createRecordingEngine(inner, { omit: ["afterTurn"] });
    expect(await finalizeHarnessContextEngineTurn({ engine, ...ids, messages, prePromptMessageCount: 2 })).toBe("ingestBatch");
    expect(engine.calls).toEqual([{ method: "ingestBatch", messageCount: 2 }]);
    expect(batch).toEqual([msg(2), msg(3)]);
  });

  it("falls back to ingest per new message, in order", async () => {
    const inner = createWindowEngine();
    const seen: AgentMessage[] = [];
    inner.ingest = async (p) => (seen.push(p.message), { ingested: true });
    const engine = createRecordingEngine(inner, { omit: ["afterTurn", "ingestBatch"] });
    expect(await finalizeHarnessContextEngineTurn({ engine, ...ids, messages, prePromptMessageCount: 1 })).toBe("ingest");
    expect(engine.calls.map((c) => c.method)).toEqual(["ingest", "ingest", "ingest"]);
    expect(seen).toEqual([msg(1), msg(2), msg(3)]);
  });

  it("rejects a malformed ingestBatch result and a hanging afterTurn", async () => {
    const inner = createWindowEngine();
    inner.ingestBatch = async () => ({ wrong: 1 }) as unknown as { ingestedCount: number };
    const engine = createRecordingEngine(inner, { omit: ["afterTurn"] });
    await expect(finalizeHarnessContextEngineTurn({ engine, ...ids, messages, prePromptMessageCount: 2 })).rejects.toBeInstanceOf(
      EngineResultInvalidError,
    );
    const hanging = createWindowEngine() as ContextEngine;
    hanging.afterTurn = never;
    await expect(
      finalizeHarnessContextEngineTurn({ engine: hanging, ...ids, messages, prePromptMessageCount: 2, timeoutMs: 10 }),
    ).rejects.toThrow(/afterTurn\(\) did not settle/);
  });
});

describe("buildHarnessContextEngineRuntimeContext", () => {
  const usage: TurnUsage = {
    inputTokens: 9_000, // thread-cumulative in Codex: never used as the last call's figures
    cachedInputTokens: 3_000,
    outputTokens: 200,
    reasoningOutputTokens: 0,
    totalTokens: 9_200,
    lastCallInputTokens: 500,
    lastCallTotalTokens: 540,
  };

  it("omits what is unknown instead of inventing zeros", () => {
    expect(buildHarnessContextEngineRuntimeContext({})).toEqual({});
    expect(buildHarnessContextEngineRuntimeContext({ tokenBudget: 10 })).toEqual({ tokenBudget: 10 });
    const { lastCallInputTokens: _i, lastCallTotalTokens: _t, ...totalsOnly } = usage;
    expect(buildHarnessContextEngineRuntimeContext({ tokenBudget: 10, usage: totalsOnly })).toEqual({ tokenBudget: 10 });
  });

  it("uses the last call's figures when Codex reported them", () => {
    expect(buildHarnessContextEngineRuntimeContext({ tokenBudget: 10, usage })).toEqual({
      tokenBudget: 10,
      currentTokenCount: 500,
      promptCache: { lastCallUsage: { input: 500, total: 540 } },
    });
    expect(
      buildHarnessContextEngineRuntimeContext({ usage: { ...usage, lastCallOutputTokens: 40, lastCallCachedInputTokens: 300 } }),
    ).toEqual({ currentTokenCount: 500, promptCache: { lastCallUsage: { input: 500, output: 40, cacheRead: 300, total: 540 } } });
  });

  it("takes an explicit last-call usage (e.g. the last assistant message's) over the turn usage", () => {
    const ctx = buildHarnessContextEngineRuntimeContext({
      usage,
      lastCallUsage: { input: 600, output: 20, cacheRead: 100, cacheWrite: 0, total: 620 },
    });
    expect(ctx).toEqual({ currentTokenCount: 600, promptCache: { lastCallUsage: { input: 600, output: 20, cacheRead: 100, cacheWrite: 0, total: 620 } } });
  });
});

describe("maintenance and bootstrap", () => {
  it("passes allowDeferredCompactionExecution only to background maintenance", async () => {
    const engine = createRecordingEngine();
    const runtimeContext = buildHarnessContextEngineRuntimeContext({ tokenBudget: 1 });
    await runHarnessContextEngineMaintenance({ engine, ...ids, reason: "turn", background: true, runtimeContext });
    await runHarnessContextEngineMaintenance({ engine, ...ids, reason: "turn", background: false, runtimeContext });
    expect(engine.calls.map((c) => c.runtimeContextKeys)).toEqual([["allowDeferredCompactionExecution", "tokenBudget"], ["tokenBudget"]]);
    // The caller's runtime context object is not mutated.
    expect(runtimeContext).toEqual({ tokenBudget: 1 });
  });

  it("returns undefined when the engine has no maintain, and rejects a malformed maintain result", async () => {
    const plain = createRecordingEngine(undefined, { omit: ["maintain"] });
    expect(await runHarnessContextEngineMaintenance({ engine: plain, ...ids, reason: "turn", background: false })).toBeUndefined();
    const inner = createWindowEngine();
    inner.maintain = async () => ({ changed: "maybe" }) as unknown as { changed: boolean; bytesFreed: number; rewrittenEntries: number };
    await expect(runHarnessContextEngineMaintenance({ engine: inner, ...ids, reason: "turn", background: false })).rejects.toThrow(/maintain\(\).*changed/);
  });

  it("bootstraps, runs bootstrap maintenance, then re-reads history", async () => {
    const engine = createRecordingEngine();
    const order: string[] = [];
    const inner = engine.maintain!;
    engine.maintain = async (p) => (order.push("maintain"), inner(p));
    let reads = 0;
    const out = await bootstrapHarnessContextEngine({
      engine,
      ...ids,
      readHistory: async () => (order.push("read"), { messages: [msg(reads++)], origins: [null] }),
    });
    expect(engine.calls.map((c) => c.method)).toEqual(["bootstrap", "maintain"]);
    expect(order).toEqual(["maintain", "read"]);
    expect(out).toEqual({ bootstrapped: true, messages: [msg(0)], origins: [null] });
  });

  it("swallows a bootstrap-maintenance failure but rejects a bootstrap failure", async () => {
    const engine = createWindowEngine() as ContextEngine;
    engine.bootstrap = async () => ({ bootstrapped: true, importedMessages: 2, reason: "imported" });
    engine.maintain = async () => Promise.reject(new Error("maintain broke"));
    const out = await bootstrapHarnessContextEngine({ engine, ...ids, readHistory: async () => ({ messages: [] }) });
    expect(out).toEqual({ messages: [], bootstrapped: true, importedMessages: 2, reason: "imported" });
    engine.bootstrap = async () => Promise.reject(new Error("bootstrap broke"));
    await expect(bootstrapHarnessContextEngine({ engine, ...ids, readHistory: async () => ({ messages: [] }) })).rejects.toThrow("bootstrap broke");
    engine.bootstrap = async () => ({ nope: true }) as unknown as { bootstrapped: boolean };
    await expect(bootstrapHarnessContextEngine({ engine, ...ids, readHistory: async () => ({ messages: [] }) })).rejects.toThrow(/bootstrap\(\)/);
  });

  it("still reads history for an engine without bootstrap", async () => {
    const engine = createRecordingEngine(undefined, { omit: ["bootstrap"] });
    const out = await bootstrapHarnessContextEngine({ engine, ...ids, readHistory: async () => ({ messages: [msg(7)] }) });
    expect(out).toMatchObject({ bootstrapped: false, messages: [msg(7)] });
    expect(engine.calls).toEqual([]);
  });
});

describe("callEngine", () => {
  it("resolves with the engine's value and rejects with its error", async () => {
    await expect(callEngine("assemble", async () => 7)).resolves.toBe(7);
    await expect(callEngine("ingest", async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    await expect(
      callEngine("ingest", () => {
        throw new Error("sync boom");
      }),
    ).rejects.toThrow("sync boom");
  });

  it("rejects with EngineCallTimeoutError naming the method", async () => {
    const failure = callEngine("maintain", never, { timeoutMs: 5 });
    await expect(failure).rejects.toBeInstanceOf(EngineCallTimeoutError);
    await expect(failure).rejects.toMatchObject({ code: "ENGINE_CALL_TIMEOUT", method: "maintain", timeoutMs: 5 });
  });

  it("honours an abort signal, before and during the call", async () => {
    const controller = new AbortController();
    const pending = callEngine("assemble", never, { timeoutMs: 10_000, signal: controller.signal });
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(EngineCallAbortedError);
    let called = false;
    await expect(callEngine("assemble", async () => ((called = true), 1), { signal: controller.signal })).rejects.toMatchObject({
      code: "ENGINE_CALL_ABORTED",
      method: "assemble",
    });
    expect(called).toBe(false);
  });
});

describe("OpenClaw parameters: runtime context and runtime settings", () => {
  it("passes runtimeContext and runtimeSettings to assemble, afterTurn, maintain and bootstrap", async () => {
    const seen: Record<string, Record<string, unknown>> = {};
    const inner = createWindowEngine();
    const spy = (name: string, result: unknown) => async (p: Record<string, unknown>) => ((seen[name] = p), result);
    const engine = {
      ...inner,
      assemble: spy("assemble", { messages: [], estimatedTokens: 0 }),
      afterTurn: spy("afterTurn", undefined),
      maintain: spy("maintain", { changed: false, bytesFreed: 0, rewrittenEntries: 0 }),
      bootstrap: spy("bootstrap", { bootstrapped: true }),
    } as unknown as ContextEngine;
    const llm = { complete: async () => ({ text: "x" }) };
    const runtimeContext = buildHarnessContextEngineRuntimeContext({ tokenBudget: 700, runtimeContext: { provider: "codex", model: "m", llm, tokenBudget: 1 } });
    expect(runtimeContext).toEqual({ provider: "codex", model: "m", llm, tokenBudget: 700 });
    const runtimeSettings = buildHarnessContextEngineRuntimeSettings({ engineId: "window", model: "gpt-5.1", provider: "codex", tokenBudget: 700 });
    await assembleHarnessContextEngine({ engine, sessionId: "s", messages: [], runtimeContext, runtimeSettings });
    await finalizeHarnessContextEngineTurn({ engine, ...ids, messages: [msg(0)], prePromptMessageCount: 0, runtimeContext, runtimeSettings });
    await runHarnessContextEngineMaintenance({ engine, ...ids, reason: "turn", background: false, runtimeContext, runtimeSettings });
    await bootstrapHarnessContextEngine({ engine, ...ids, readHistory: async () => ({ messages: [] }), runtimeContext, runtimeSettings });
    for (const method of ["assemble", "afterTurn", "maintain", "bootstrap"]) {
      expect(seen[method]?.runtimeSettings, method).toBe(runtimeSettings);
      expect(seen[method]?.runtimeContext, method).toMatchObject({ provider: "codex", model: "m", tokenBudget: 700 });
    }
    expect(runtimeSettings).toMatchObject({
      schemaVersion: 1,
      runtime: { host: "openclaw", harnessId: "codex-turn-machine" },
      model: { requested: "gpt-5.1", provider: "codex", family: "gpt-5.1" },
      contextEngineSelection: { selectedId: "window", source: "configured" },
      executionHost: { id: "codex-app-server" },
      limits: { promptTokenBudget: 700, maxOutputTokens: null },
    });
  });

  it("describeEngineError keeps the engine's own text for the warning", () => {
    expect(describeEngineError("compact", new Error("missing token budget in compact params"))).toBe(
      "context engine compact() failed: missing token budget in compact params",
    );
    expect(describeEngineError("assemble", new EngineCallTimeoutError("assemble", 5))).toBe("context engine assemble() did not settle within 5 ms");
    expect(describeEngineError("ingest", "plain\nstring")).toBe("context engine ingest() failed: plain string");
  });
});

describe("finalize: per-message idempotency for a replayed finalize (issue 13 item 3)", () => {
  const turn = [msg(10), msg(11), msg(12)];
  const history = [msg(0), msg(1)];
  const keys = mirrorKeysForTurn("thr", "turn-1", turn);

  function flakyIngestEngine(failAt: number) {
    const inner = createWindowEngine();
    const taken: Array<{ message: AgentMessage; messageKey?: string }> = [];
    let calls = 0;
    const engine = createRecordingEngine(inner, { omit: ["afterTurn", "ingestBatch"] });
    engine.ingest = async (p) => {
      calls += 1;
      if (calls === failAt) throw new Error("store busy");
      taken.push({ message: p.message, ...(p.messageKey !== undefined ? { messageKey: p.messageKey } : {}) });
      return { ingested: true };
    };
    return { engine, taken };
  }

  it("a replay after a failure half-way re-ingests only the messages that had not succeeded", async () => {
    const { engine, taken } = flakyIngestEngine(2);
    const progress = new Set<string>();
    const onIngested = async (key: string) => void progress.add(key);
    const params = { engine, ...ids, messages: [...history, ...turn], prePromptMessageCount: 2, threadId: "thr", turnId: "turn-1", onIngested };
    await expect(finalizeHarnessContextEngineTurn(params)).rejects.toThrow("store busy");
    expect([...progress]).toEqual([keys[0]]);
    expect(await finalizeHarnessContextEngineTurn({ ...params, alreadyIngested: progress })).toBe("ingest");
    expect(taken).toEqual([
      { message: turn[0], messageKey: keys[0] },
      { message: turn[1], messageKey: keys[1] },
      { message: turn[2], messageKey: keys[2] },
    ]);
    expect([...progress]).toEqual(keys);
  });

  it("ingestBatch gets only the pending messages with their keys; afterTurn is skipped when all were taken", async () => {
    const inner = createWindowEngine();
    let batch: { messages: AgentMessage[]; messageKeys?: string[] } | undefined;
    inner.ingestBatch = async (p) => ((batch = p), { ingestedCount: p.messages.length });
    const batchEngine = createRecordingEngine(inner, { omit: ["afterTurn"] });
    const marked: string[] = [];
    await finalizeHarnessContextEngineTurn({
      engine: batchEngine, ...ids, messages: turn, prePromptMessageCount: 0, messageKeys: ["a", "b", "c"],
      alreadyIngested: new Set(["a"]), onIngested: async (k) => void marked.push(k),
    });
    expect(batch).toMatchObject({ messages: [turn[1], turn[2]], messageKeys: ["b", "c"] });
    expect(marked).toEqual(["b", "c"]);

    const after = createRecordingEngine();
    const all = new Set(keys);
    expect(await finalizeHarnessContextEngineTurn({ engine: after, ...ids, messages: turn, prePromptMessageCount: 0, threadId: "thr", turnId: "turn-1", alreadyIngested: all })).toBe("afterTurn");
    expect(after.calls).toEqual([]);
    const marks: string[] = [];
    await finalizeHarnessContextEngineTurn({ engine: after, ...ids, messages: turn, prePromptMessageCount: 0, threadId: "thr", turnId: "turn-1", onIngested: async (k) => void marks.push(k) });
    expect(after.calls.map((c) => c.method)).toEqual(["afterTurn"]);
    expect(marks).toEqual(keys);
  });

  it("rejects messageKeys that do not match the new messages", async () => {
    await expect(
      finalizeHarnessContextEngineTurn({ engine: createRecordingEngine(), ...ids, messages: turn, prePromptMessageCount: 0, messageKeys: ["only-one"] }),
    ).rejects.toMatchObject({ code: "FINALIZE_KEYS_MISMATCH" });
  });
});
