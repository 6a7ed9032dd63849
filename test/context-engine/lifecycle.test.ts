import { mkdtempSync, writeFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  assertContextEngine,
  ContextEngineContractError,
  EngineResultInvalidError,
  engineFacts,
  isLegacyEngine,
} from "../../src/context-engine/contract.js";
import {
  assembleHarnessContextEngine,
  bootstrapHarnessContextEngine,
  buildHarnessContextEngineRuntimeContext,
  callEngine,
  EngineCallTimeoutError,
  finalizeHarnessContextEngineTurn,
  runHarnessContextEngineMaintenance,
} from "../../src/context-engine/lifecycle.js";
import { createRecordingEngine, createWindowEngine, legacyEngine } from "../../src/context-engine/engines/index.js";
import type { AgentMessage, ContextEngine } from "../../src/context-engine/types.js";
import { applyBindingUpdate, readThreadBinding, writeThreadBinding } from "../../src/transcript/binding.js";

const msg = (i: number): AgentMessage => ({ role: i % 2 ? "assistant" : "user", content: `message ${i} ${"x".repeat(40)}`, timestamp: i });
const ids = { sessionId: "s1", sessionFile: "/sessions/s1.jsonl" };

describe("engine contract", () => {
  it("treats no engine and info.id legacy as legacy", () => {
    expect(isLegacyEngine(undefined)).toBe(true);
    expect(isLegacyEngine(legacyEngine)).toBe(true);
    expect(engineFacts(legacyEngine).active).toBe(false);
    expect(engineFacts(createRecordingEngine())).toMatchObject({ active: true, hasBootstrap: true, hasMaintain: true, hasAfterTurn: true });
  });

  it("names the member an engine module is missing", () => {
    expect(() => assertContextEngine({ info: { id: "x", name: "x" }, ingest() {}, assemble() {} })).toThrow(/compact must be a function/);
    expect(() => assertContextEngine({ info: { name: "x" } })).toThrow(ContextEngineContractError);
    expect(() => assertContextEngine(42)).toThrow(/must be an object/);
    expect(assertContextEngine(createWindowEngine()).info.id).toBe("window");
  });
});

describe("lifecycle helpers", () => {
  it("rejects a malformed assemble result with a typed error", async () => {
    const engine = { ...createWindowEngine(), assemble: async () => ({ messages: "nope", estimatedTokens: 1 }) } as unknown as ContextEngine;
    await expect(assembleHarnessContextEngine({ engine, sessionId: "s", messages: [] })).rejects.toBeInstanceOf(EngineResultInvalidError);
    const negative = { ...createWindowEngine(), assemble: async () => ({ messages: [], estimatedTokens: -1 }) } as unknown as ContextEngine;
    await expect(assembleHarnessContextEngine({ engine: negative, sessionId: "s", messages: [] })).rejects.toThrow(/estimatedTokens/);
  });

  it("passes history, budget, tool names, model and prompt to assemble", async () => {
    let seen: Record<string, unknown> = {};
    const engine = { ...createWindowEngine(), assemble: async (p: Record<string, unknown>) => ((seen = p), { messages: [], estimatedTokens: 0 }) } as unknown as ContextEngine;
    await assembleHarnessContextEngine({ engine, sessionId: "s", messages: [msg(0)], tokenBudget: 100, availableTools: new Set(["t"]), model: "m", prompt: "p" });
    expect(seen).toMatchObject({ sessionId: "s", messages: [msg(0)], tokenBudget: 100, model: "m", prompt: "p" });
    expect([...(seen["availableTools"] as Set<string>)]).toEqual(["t"]);
  });

  it("finalizes with afterTurn, else ingestBatch of the new messages, else ingest per message", async () => {
    const messages = [msg(0), msg(1), msg(2), msg(3)];
    const full = createRecordingEngine();
    expect(await finalizeHarnessContextEngineTurn({ engine: full, ...ids, messages, prePromptMessageCount: 2 })).toBe("afterTurn");
    expect(full.calls).toEqual([{ method: "afterTurn", messageCount: 4, prePromptMessageCount: 2, runtimeContextKeys: [] }]);
    const batch = createRecordingEngine(undefined, { omit: ["afterTurn"] });
    expect(await finalizeHarnessContextEngineTurn({ engine: batch, ...ids, messages, prePromptMessageCount: 2 })).toBe("ingestBatch");
    expect(batch.calls).toEqual([{ method: "ingestBatch", messageCount: 2 }]);
    const single = createRecordingEngine(undefined, { omit: ["afterTurn", "ingestBatch"] });
    expect(await finalizeHarnessContextEngineTurn({ engine: single, ...ids, messages, prePromptMessageCount: 1 })).toBe("ingest");
    expect(single.calls.map((c) => c.method)).toEqual(["ingest", "ingest", "ingest"]);
  });

  it("omits unknown usage from the runtime context instead of inventing zeros", () => {
    expect(buildHarnessContextEngineRuntimeContext({})).toEqual({});
    expect(buildHarnessContextEngineRuntimeContext({ tokenBudget: 10 })).toEqual({ tokenBudget: 10 });
    const ctx = buildHarnessContextEngineRuntimeContext({
      tokenBudget: 10,
      usage: { inputTokens: 900, cachedInputTokens: 300, outputTokens: 20, reasoningOutputTokens: 0, totalTokens: 920, lastCallInputTokens: 500 },
    });
    expect(ctx).toEqual({ tokenBudget: 10, currentTokenCount: 500, promptCache: { lastCallUsage: { input: 500, output: 20, cacheRead: 300, total: 920 } } });
  });

  it("passes allowDeferredCompactionExecution only to background maintenance", async () => {
    const engine = createRecordingEngine();
    await runHarnessContextEngineMaintenance({ engine, ...ids, reason: "turn", background: true });
    await runHarnessContextEngineMaintenance({ engine, ...ids, reason: "turn", background: false });
    expect(engine.calls.map((c) => c.runtimeContextKeys)).toEqual([["allowDeferredCompactionExecution"], []]);
  });

  it("bootstraps, runs bootstrap maintenance, then re-reads history", async () => {
    const engine = createRecordingEngine();
    let reads = 0;
    const out = await bootstrapHarnessContextEngine({ engine, ...ids, readHistory: async () => ({ messages: [msg(reads++)] }) });
    expect(engine.calls.map((c) => c.method)).toEqual(["bootstrap", "maintain"]);
    expect(out).toMatchObject({ bootstrapped: true, messages: [msg(0)] });
  });

  it("bounds a hanging engine call and honours abort", async () => {
    await expect(callEngine("assemble", () => new Promise(() => undefined), { timeoutMs: 20 })).rejects.toBeInstanceOf(EngineCallTimeoutError);
    const controller = new AbortController();
    const pending = callEngine("assemble", () => new Promise(() => undefined), { timeoutMs: 10_000, signal: controller.signal });
    controller.abort();
    await expect(pending).rejects.toThrow(/aborted/);
  });
});

describe("window engine", () => {
  it("keeps the newest messages in budget and moves its window in steps", async () => {
    const engine = createWindowEngine({ tokenBudget: 100, threadBootstrap: true });
    const history: AgentMessage[] = [];
    const epochs: string[] = [];
    for (let i = 0; i < 30; i++) {
      history.push(msg(i));
      const out = await engine.assemble({ sessionId: "s", messages: history });
      expect(out.estimatedTokens).toBeLessThanOrEqual(100);
      expect(out.messages.at(-1)).toEqual(msg(i));
      epochs.push(out.contextProjection!.epoch!);
    }
    const steps = new Set(epochs).size;
    expect(steps).toBeGreaterThan(2);
    expect(steps).toBeLessThan(15); // steps, not one change per turn
  });

  it("compacts down to the target fraction", async () => {
    const engine = createWindowEngine({ tokenBudget: 200, ownsCompaction: true });
    const history = Array.from({ length: 12 }, (_, i) => msg(i));
    const before = await engine.assemble({ sessionId: "s", messages: history });
    const result = await engine.compact({ sessionId: "s", sessionFile: "f", compactionTargetFraction: 0.35 });
    expect(result).toMatchObject({ ok: true, compacted: true });
    const after = await engine.assemble({ sessionId: "s", messages: history });
    expect(after.estimatedTokens).toBeLessThanOrEqual(70);
    expect(after.messages.length).toBeLessThan(before.messages.length);
  });
});

describe("thread binding sidecar", () => {
  it("round-trips, and moves a corrupt sidecar aside and starts fresh", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "ctm-binding-"));
    const sessionFile = path.join(dir, "s.jsonl");
    const next = applyBindingUpdate(undefined, {
      threadId: "t1",
      turnId: "u1",
      update: { reset: true, ledgerAdd: ["h1"], projectionEpoch: "e1" },
      dynamicToolsFingerprint: "d",
      engineId: "e",
      policyFingerprint: "p",
      projectionMode: "delta",
    });
    await writeThreadBinding(sessionFile, next);
    expect(await readThreadBinding(sessionFile)).toEqual(next);
    const again = applyBindingUpdate(next, { threadId: "t1", turnId: "u2", update: { reset: false, ledgerAdd: ["h2"] }, dynamicToolsFingerprint: "d", engineId: "e", policyFingerprint: "p", projectionMode: "delta" });
    expect(again).toMatchObject({ heldTurnIds: ["u1", "u2"], ledger: ["h1", "h2"], projectionEpoch: "e1" });
    const rotated = applyBindingUpdate(again, { threadId: "t2", turnId: "u3", update: { reset: true, ledgerAdd: [] }, dynamicToolsFingerprint: "d", engineId: "e", policyFingerprint: "p", projectionMode: "delta" });
    expect(rotated).toMatchObject({ threadId: "t2", heldTurnIds: ["u3"], ledger: [] });
    writeFileSync(`${sessionFile}.codex-binding.json`, "{ not json");
    expect(await readThreadBinding(sessionFile)).toBeUndefined();
    expect(readdirSync(dir).some((f) => f.includes(".codex-binding.json.corrupt-1"))).toBe(true);
  });
});
