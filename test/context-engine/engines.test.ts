import v8 from "node:v8";
import vm from "node:vm";
import { describe, expect, it } from "vitest";
import { createRecordingEngine, createWindowEngine, legacyEngine, messageTokens } from "../../src/context-engine/engines/index.js";
import { MAX_VIEWED_SESSIONS } from "../../src/context-engine/engines/window.js";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { markDeepFrozen } from "../../src/transcript/freeze.js";

const msg = (i: number): AgentMessage => ({ role: i % 2 ? "assistant" : "user", content: `message ${i} ${"x".repeat(40)}`, timestamp: i });
/** Equal-sized messages, so window arithmetic is exact. */
const same = (i: number): AgentMessage => ({ role: "user", content: `m${String(i).padStart(3, "0")} ${"x".repeat(40)}`, timestamp: i });
const PER_MESSAGE = messageTokens(same(0));

describe("window engine", () => {
  it("keeps the newest messages within budget and moves its window in steps", async () => {
    const engine = createWindowEngine({ tokenBudget: 100, threadBootstrap: true });
    const history: AgentMessage[] = [];
    const starts: number[] = [];
    for (let i = 0; i < 40; i++) {
      history.push(msg(i));
      const out = await engine.assemble({ sessionId: "s", messages: history });
      expect(out.estimatedTokens).toBeLessThanOrEqual(100);
      expect(out.messages.at(-1)).toEqual(msg(i));
      expect(out.messages).toEqual(history.slice(engine.windowStart("s")));
      expect(out.contextProjection).toEqual({ mode: "thread_bootstrap", epoch: `w${engine.windowStart("s")}` });
      starts.push(engine.windowStart("s"));
    }
    // The start never moves back, and moves in jumps of several messages (down to the low-water mark), not by one.
    const moves = starts.map((s, i) => s - (starts[i - 1] ?? 0)).filter((d) => d !== 0);
    expect(starts).toEqual([...starts].sort((a, b) => a - b));
    expect(moves.length).toBeGreaterThan(2);
    expect(moves.length).toBeLessThan(starts.length / 3);
    expect(moves.slice(1).every((d) => d > 1)).toBe(true);
  });

  it("stays put while the view fits, so the epoch is stable between steps", async () => {
    const engine = createWindowEngine({ tokenBudget: PER_MESSAGE * 10, threadBootstrap: true, lowWaterFraction: 0.5 });
    const history = Array.from({ length: 20 }, (_, i) => same(i));
    const first = await engine.assemble({ sessionId: "s", messages: history.slice(0, 11) });
    // 11 messages overflow a 10-message budget: drop to the low-water mark (5 messages).
    expect(first.messages).toHaveLength(5);
    const epoch = first.contextProjection?.epoch;
    for (let n = 12; n <= 16; n++) {
      const out = await engine.assemble({ sessionId: "s", messages: history.slice(0, n) });
      expect(out.contextProjection?.epoch).toBe(epoch);
    }
    const stepped = await engine.assemble({ sessionId: "s", messages: history.slice(0, 17) });
    expect(stepped.contextProjection?.epoch).not.toBe(epoch);
  });

  it("counts a message the history cache froze once, and recounts anything it cannot trust", async () => {
    const engine = createWindowEngine({ tokenBudget: 1_000_000 });
    let reads = 0;
    /** A message marked as the history cache marks its own, whose content getter counts how often it is rendered. */
    const watched = (i: number): AgentMessage =>
      markDeepFrozen(
        Object.freeze(
          Object.defineProperties({ role: "user", timestamp: i } as unknown as AgentMessage, {
            content: { enumerable: true, get: () => (reads++, `w${i} ${"x".repeat(40)}`) },
          }),
        ),
      );
    const history = Array.from({ length: 5 }, (_, i) => watched(i));
    const first = await engine.assemble({ sessionId: "s", messages: history });
    const firstReads = reads;
    expect(firstReads).toBeGreaterThanOrEqual(5);
    // The same frozen objects plus one new message, appended to the very array passed before: only the new one is
    // rendered.
    history.push(watched(5));
    const second = await engine.assemble({ sessionId: "s", messages: history });
    expect(reads - firstReads).toBe(firstReads / 5);
    expect(second.estimatedTokens).toBe(first.estimatedTokens + first.estimatedTokens / 5);

    // A mutable message is recounted every time: a change between turns shows in the estimate.
    const mutable = same(0);
    const before = await engine.assemble({ sessionId: "m", messages: [mutable] });
    mutable.content = `${String(mutable.content)} ${"y".repeat(400)}`;
    const after = await engine.assemble({ sessionId: "m", messages: [mutable] });
    expect(after.estimatedTokens).toBeGreaterThan(before.estimatedTokens + 50);

    // Frozen by someone else is not enough: Object.freeze is shallow, and the content array still changes.
    const shallow = Object.freeze({ role: "user", content: [{ type: "text", text: "short" }], timestamp: 1 }) as unknown as AgentMessage & {
      content: Array<{ type: string; text: string }>;
    };
    const shallowBefore = await engine.assemble({ sessionId: "f", messages: [shallow] });
    shallow.content.push({ type: "text", text: "z".repeat(400) });
    const shallowAfter = await engine.assemble({ sessionId: "f", messages: [shallow] });
    expect(shallowAfter.estimatedTokens).toBeGreaterThan(shallowBefore.estimatedTokens + 50);
  });

  it("tracks the window per session and omits contextProjection without threadBootstrap", async () => {
    const engine = createWindowEngine({ tokenBudget: 60 });
    const long = Array.from({ length: 12 }, (_, i) => msg(i));
    const a = await engine.assemble({ sessionId: "a", messages: long });
    const b = await engine.assemble({ sessionId: "b", messages: long.slice(0, 1) });
    expect(a.messages.length).toBeLessThan(long.length);
    expect(b.messages).toEqual(long.slice(0, 1));
    expect(engine.windowStart("b")).toBe(0);
    expect(a.contextProjection).toBeUndefined();
  });

  it("uses the turn's token budget when it has none of its own", async () => {
    const engine = createWindowEngine();
    const long = Array.from({ length: 12 }, (_, i) => msg(i));
    const out = await engine.assemble({ sessionId: "s", messages: long, tokenBudget: 50 });
    expect(out.estimatedTokens).toBeLessThanOrEqual(50);
    expect(out.messages.length).toBeLessThan(long.length);
  });

  it("compacts down to the target fraction and reports tokens before and after", async () => {
    const engine = createWindowEngine({ tokenBudget: 200, ownsCompaction: true });
    expect(engine.info.ownsCompaction).toBe(true);
    const history = Array.from({ length: 12 }, (_, i) => msg(i));
    const before = await engine.assemble({ sessionId: "s", messages: history });
    const result = await engine.compact({ sessionId: "s", sessionFile: "f", compactionTargetFraction: 0.35 });
    expect(result).toMatchObject({ ok: true, compacted: true });
    expect(result.result?.tokensBefore).toBe(before.estimatedTokens);
    expect(result.result?.tokensAfter).toBeLessThanOrEqual(70);
    const after = await engine.assemble({ sessionId: "s", messages: history });
    expect(after.estimatedTokens).toBe(result.result?.tokensAfter);
    expect(after.messages.length).toBeLessThan(before.messages.length);
  });

  it("applies a compaction requested before it saw any messages at the next assemble", async () => {
    const engine = createWindowEngine({ tokenBudget: 200 });
    const result = await engine.compact({ sessionId: "s", sessionFile: "f", currentTokenCount: 1234 });
    expect(result.result).toMatchObject({ tokensBefore: 1234, tokensAfter: 120 });
    const out = await engine.assemble({ sessionId: "s", messages: Array.from({ length: 12 }, (_, i) => msg(i)) });
    expect(out.estimatedTokens).toBeLessThanOrEqual(120);
  });

  it("keeps the views of the last MAX_VIEWED_SESSIONS sessions only; a session it let go of gets the same window", async () => {
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc") as () => void;
    const engine = createWindowEngine({ tokenBudget: PER_MESSAGE * 10, lowWaterFraction: 0.5, threadBootstrap: true, ownsCompaction: true });
    // The first session's history exists only in this function once it returns: the engine is its one other holder.
    const firstSession = async () => {
      const history = Array.from({ length: 14 }, (_, i) => same(i));
      const out = await engine.assemble({ sessionId: "first", messages: history });
      return { refs: history.map((m) => new WeakRef(m)), epoch: out.contextProjection?.epoch, view: out.messages.map((m) => m.content) };
    };
    const first = await firstSession();
    for (let k = 0; k < MAX_VIEWED_SESSIONS; k++) await engine.assemble({ sessionId: `other-${k}`, messages: [same(k)] });
    for (let i = 0; i < 5 && first.refs.some((r) => r.deref() !== undefined); i++) {
      await new Promise((r) => setTimeout(r, 10));
      gc();
    }
    expect(first.refs.filter((r) => r.deref() !== undefined)).toHaveLength(0);
    // Its window start is still known: the same history gives the same view and epoch.
    const again = await engine.assemble({ sessionId: "first", messages: Array.from({ length: 14 }, (_, i) => same(i)) });
    expect(again.contextProjection?.epoch).toBe(first.epoch);
    expect(again.messages.map((m) => m.content)).toEqual(first.view);
  });

  it("has a no-op maintain and validates its options", async () => {
    const engine = createWindowEngine();
    expect(await engine.maintain!({ sessionId: "s", sessionFile: "f" })).toEqual({ changed: false, bytesFreed: 0, rewrittenEntries: 0 });
    expect(() => createWindowEngine({ lowWaterFraction: 1 })).toThrow(RangeError);
    expect(() => createWindowEngine({ lowWaterFraction: 0 })).toThrow(/lowWaterFraction/);
  });
});

describe("recording engine", () => {
  it("records every call in order with counts, never content", async () => {
    const engine = createRecordingEngine(createWindowEngine({ tokenBudget: 1_000 }));
    const messages = [msg(0), msg(1), msg(2)];
    await engine.bootstrap!({ sessionId: "s", sessionFile: "f" });
    await engine.assemble({ sessionId: "s", messages });
    await engine.afterTurn!({ sessionId: "s", sessionFile: "f", messages, prePromptMessageCount: 1, runtimeContext: { tokenBudget: 5 } });
    await engine.ingestBatch!({ sessionId: "s", messages });
    await engine.ingest({ sessionId: "s", message: msg(0) });
    await engine.maintain!({ sessionId: "s", sessionFile: "f", runtimeContext: { allowDeferredCompactionExecution: true } });
    await engine.compact({ sessionId: "s", sessionFile: "f", force: true, compactionTarget: "budget" });
    expect(engine.calls).toEqual([
      { method: "bootstrap" },
      { method: "assemble", messageCount: 3 },
      { method: "afterTurn", messageCount: 3, prePromptMessageCount: 1, runtimeContextKeys: ["tokenBudget"] },
      { method: "ingestBatch", messageCount: 3 },
      { method: "ingest", messageCount: 1 },
      { method: "maintain", hasRuntimeContext: true, runtimeContextKeys: ["allowDeferredCompactionExecution"] },
      { method: "compact", force: true, compactionTarget: "budget" },
    ]);
    expect(JSON.stringify(engine.calls)).not.toContain("message 0");
  });

  it("omits the optional methods it is told to omit", () => {
    const engine = createRecordingEngine(undefined, { omit: ["bootstrap", "maintain", "afterTurn", "ingestBatch"] });
    expect(engine.bootstrap).toBeUndefined();
    expect(engine.maintain).toBeUndefined();
    expect(engine.afterTurn).toBeUndefined();
    expect(engine.ingestBatch).toBeUndefined();
  });

  it("never reports itself as legacy", () => {
    expect(createRecordingEngine(legacyEngine).info.id).toBe("recording");
  });
});

describe("legacy engine", () => {
  it("has id legacy and passes messages through", async () => {
    expect(legacyEngine.info.id).toBe("legacy");
    expect(await legacyEngine.assemble({ sessionId: "s", messages: [msg(0)] })).toEqual({ messages: [msg(0)], estimatedTokens: 0 });
    expect(await legacyEngine.compact({ sessionId: "s", sessionFile: "f" })).toMatchObject({ ok: true, compacted: false });
  });
});

describe("recording engine forwarding", () => {
  it("forwards and records interceptCompaction and dispose when the inner engine has them", async () => {
    const inner = createWindowEngine();
    let disposed = false;
    Object.assign(inner, {
      async interceptCompaction() {
        return { handled: false as const, reason: "not mine" };
      },
      async dispose() {
        disposed = true;
      },
    });
    const engine = createRecordingEngine(inner);
    expect(await engine.interceptCompaction!({ sessionId: "s", sessionFile: "f", firstKeptEntryId: "e", tokensBefore: 1 })).toEqual({
      handled: false,
      reason: "not mine",
    });
    await engine.dispose!();
    expect(disposed).toBe(true);
    expect(engine.calls.map((c) => c.method)).toEqual(["interceptCompaction", "dispose"]);
    expect(createRecordingEngine(createWindowEngine()).interceptCompaction).toBeUndefined();
  });
});
