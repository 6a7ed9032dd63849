/**
 * Native projection's pure parts (src/projection/native.ts): how view messages become Responses items, how the sync
 * plan compares the view with the recorded thread, the three-option cost rule, and the record's updates.
 */
import { describe, expect, it } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import {
  NATIVE_REFERENCE_LABEL,
  ROTATION_OVERHEAD_BYTES,
  chooseNativeSync,
  nativeItemsOf,
  nativeViewUnits,
  planNativeSync,
  recordAcceptedTurn,
  recordInjected,
  type NativeSyncInput,
  type NativeThreadRecord,
} from "../../src/projection/native.js";
import { projectAssembledContext } from "../../src/projection/index.js";
import { applyBindingUpdate, markNativeCompaction, readThreadBinding, threadBindingSchema, writeThreadBinding } from "../../src/transcript/binding.js";
import { tempSessions } from "../helpers/turn-env.js";

const user = (text: string): AgentMessage => ({ role: "user", content: text, timestamp: 1 });
const assistant = (text: string): AgentMessage => ({ role: "assistant", content: [{ type: "text", text }], timestamp: 2 });
const summary = (text: string): AgentMessage => ({ role: "compactionSummary", summary: text, tokensBefore: 10 });

/** A history of `n` turns on thread `t` (turn ids `turn-1`...), and the record of a thread that holds all of them. */
function session(n: number, preamble: string[] = []) {
  const history: AgentMessage[] = [];
  const origins: Array<{ threadId: string; turnId: string } | null> = [];
  for (let i = 1; i <= n; i++) {
    history.push(user(`q${i}`), assistant(`a${i}`));
    origins.push({ threadId: "t", turnId: `turn-${i}` }, { threadId: "t", turnId: `turn-${i}` });
  }
  const record: NativeThreadRecord = { preamble, turns: Array.from({ length: n }, (_, i) => ({ id: `turn-${i + 1}`, units: [] })) };
  return { history, origins, record };
}

const plan = (p: Partial<NativeSyncInput> & Pick<NativeSyncInput, "view" | "history" | "origins">) =>
  planNativeSync({ developerHash: "dev", toleranceBytes: 0, cachedPriceRatio: 0.1, ...p });

const texts = (items: ReadonlyArray<Record<string, unknown>>) =>
  items.map((i) => `${String(i.role ?? i.type)}:${((i.content as Array<{ text?: string }> | undefined) ?? []).map((c) => c.text ?? "").join("")}`);

describe("view messages as Responses items", () => {
  it("transcript messages go as native user/assistant items, engine text as a labelled user item, never developer", () => {
    const units = nativeViewUnits([user("hi"), assistant("hello"), summary("earlier: greetings"), { role: "custom", customType: "note", content: "recalled" }]);
    const items = units.flatMap((u) => u.items);
    expect(texts(items)).toEqual([
      "user:hi",
      "assistant:hello",
      `user:${NATIVE_REFERENCE_LABEL}\n\n[compactionSummary]\nearlier: greetings`,
      `user:${NATIVE_REFERENCE_LABEL}\n\n[custom]\nrecalled`,
    ]);
    expect(items.some((i) => i.role === "developer" || i.role === "system")).toBe(false);
    expect(units.map((u) => u.kind)).toEqual(["m", "m", "e", "e"]);
    // A unit names its view message by content hash and records the items' bytes.
    expect(units[0]!.unit).toBe(`m${units[0]!.hash}:${Buffer.byteLength(JSON.stringify(units[0]!.items))}`);
  });

  it("a tool call and its result travel as a function_call pair; a half without the other as text", () => {
    const call: AgentMessage = { role: "assistant", content: [{ type: "text", text: "looking" }, { type: "toolCall", id: "call_1", name: "lookup", arguments: { q: "x" } }], timestamp: 1 };
    const result: AgentMessage = { role: "toolResult", toolCallId: "call_1", toolName: "lookup", content: [{ type: "text", text: "found" }], isError: false, timestamp: 2 };
    const paired = nativeViewUnits([call, result]).flatMap((u) => u.items);
    expect(paired).toEqual([
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "looking" }] },
      { type: "function_call", call_id: "call_1", name: "lookup", arguments: '{"q":"x"}' },
      { type: "function_call_output", call_id: "call_1", output: "found" },
    ]);
    // Codex answers an orphan call with a synthetic "aborted" output and drops an orphan output: neither is sent raw.
    expect(texts(nativeViewUnits([call]).flatMap((u) => u.items))).toEqual(["assistant:lookingtool call: lookup [input omitted]"]);
    expect(nativeItemsOf(result, new Set()).items[0]).toMatchObject({ type: "message", role: "user" });
  });

  it("a user image goes as a data-URL input_image; the items are byte-identical for the same view", () => {
    const withImage: AgentMessage = { role: "user", content: [{ type: "text", text: "see" }, { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }], timestamp: 1 };
    expect(nativeViewUnits([withImage])[0]!.items).toEqual([
      { type: "message", role: "user", content: [{ type: "input_text", text: "see" }, { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=" }] },
    ]);
    const rebuilt = { content: [{ type: "text", text: "see" }, { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }], role: "user" } as AgentMessage;
    const sent = (view: AgentMessage[]) => JSON.stringify(nativeViewUnits(view).map(({ message: _message, ...unit }) => unit));
    expect(sent([rebuilt])).toBe(sent([withImage]));
  });
});

describe("planNativeSync", () => {
  it("no record: a fresh thread gets the whole view before its first turn", () => {
    const s = session(2);
    const p = plan({ view: s.history, history: s.history, origins: s.origins });
    expect(p).toMatchObject({ action: "start", reason: "noRecord", counts: { injectedItems: 4, keptTurns: 0 } });
    expect(p.record).toEqual({ preamble: [], turns: [] });
  });

  it("the thread holds a prefix of the view: nothing is reverted, the rest is appended", () => {
    const s = session(2);
    const view = [...s.history, summary("note")];
    const p = plan({ view, history: s.history, origins: s.origins, thread: { threadId: "t", record: s.record } });
    expect(p).toMatchObject({ action: "resume", reason: "match", counts: { keptTurns: 2, revertedTurns: 0, injectedItems: 1 } });
    expect(p.revertBeforeTurnId).toBeUndefined();
    const same = plan({ view: s.history, history: s.history, origins: s.origins, thread: { threadId: "t", record: s.record } });
    expect(same.items).toEqual([]);
  });

  it("the view changes after turn 2: revert before turn 3, inject the rest (the kept turns are not sent)", () => {
    const s = session(4);
    const view = [...s.history.slice(0, 4), summary("turns 3-4")];
    const p = plan({ view, history: s.history, origins: s.origins, thread: { threadId: "t", record: s.record } });
    expect(p).toMatchObject({ action: "resume", reason: "revert", revertBeforeTurnId: "turn-3", counts: { keptTurns: 2, revertedTurns: 2, injectedItems: 1 } });
    expect(p.record.turns.map((t) => t.id)).toEqual(["turn-1", "turn-2"]);
    // Turn 2's answer is gone from the view: the cut goes before turn 2, and its question is injected again.
    const p2 = plan({ view: [...s.history.slice(0, 3), summary("x")], history: s.history, origins: s.origins, thread: { threadId: "t", record: s.record } });
    expect(p2).toMatchObject({ revertBeforeTurnId: "turn-2", counts: { keptTurns: 1, injectedItems: 2 } });
    expect(texts(p2.items)[0]).toBe("user:q2");
  });

  it("a turn message that becomes no item (thinking only) is left out of the comparison, as from the view", () => {
    const s = session(2);
    const thinking: AgentMessage = { role: "assistant", content: [{ type: "thinking", thinking: "hmm" }], timestamp: 3 };
    const history = [...s.history.slice(0, 3), thinking, s.history[3]!];
    const origins = [...s.origins.slice(0, 3), { threadId: "t", turnId: "turn-2" }, s.origins[3]!];
    const p = plan({ view: history, history, origins, thread: { threadId: "t", record: s.record } });
    expect(p).toMatchObject({ reason: "match", counts: { injectedItems: 0, viewUnits: 4 } });
  });

  it("a turn the transcript has and the record lacks (a binding one write behind) is taken as held, not sent again", () => {
    const s = session(3);
    const lagging = { ...s.record, turns: s.record.turns.slice(0, 2) };
    const p = plan({ view: s.history, history: s.history, origins: s.origins, thread: { threadId: "t", record: lagging } });
    expect(p).toMatchObject({ reason: "match", counts: { keptTurns: 3, injectedItems: 0 } });
    const cut = plan({ view: s.history.slice(0, 4), history: s.history, origins: s.origins, thread: { threadId: "t", record: lagging } });
    expect(cut).toMatchObject({ reason: "revert", revertBeforeTurnId: "turn-3" });
  });

  it("turns reverted off the thread stay out of it, although the transcript keeps their messages", () => {
    const s = session(4);
    const cutPlan = plan({ view: [...s.history.slice(0, 4), summary("3-4")], history: s.history, origins: s.origins, thread: { threadId: "t", record: s.record } });
    expect(cutPlan.record.cut).toEqual(["turn-3", "turn-4"]);
    // The turn after the sync never started: the next plan must not take turns 3-4 for held turns.
    const next = recordInjected(cutPlan.record, cutPlan.units);
    const again = plan({ view: s.history, history: s.history, origins: s.origins, thread: { threadId: "t", record: next } });
    // Turn 2 now carries the summary after it, which the view dropped: cut before it; turns 3-4 are sent, not held.
    expect(again).toMatchObject({ reason: "revert", revertBeforeTurnId: "turn-2", counts: { keptTurns: 1, injectedItems: 6 } });
    expect(again.record.cut).toEqual(["turn-3", "turn-4", "turn-2"]);
  });

  it("what was injected before the first turn cannot be reverted: a view that drops it rotates", () => {
    const s = session(2);
    const pre = nativeViewUnits([summary("old")]).map((u) => u.unit);
    const history = [summary("old"), ...s.history];
    const origins = [null, ...s.origins];
    const p = plan({ view: [summary("new"), ...s.history], history, origins, thread: { threadId: "t", record: { ...s.record, preamble: pre } } });
    expect(p).toMatchObject({ action: "start", reason: "rotate" });
    expect(p.counts.injectedItems).toBe(5);
  });

  it("a turn that carried other developer instructions than this turn's is cut", () => {
    const s = session(3);
    const record: NativeThreadRecord = { ...s.record, startDev: "dev0:3", turns: s.record.turns.map((t, i) => (i === 2 ? { ...t, dev: "old:4" } : t)) };
    const p = plan({ view: s.history, history: s.history, origins: s.origins, thread: { threadId: "t", record } });
    expect(p).toMatchObject({ reason: "revert", revertBeforeTurnId: "turn-3", heldDeveloperHash: "dev0", heldDeveloperDeliveries: ["dev0:3"] });
    const kept = plan({ view: s.history, history: s.history, origins: s.origins, thread: { threadId: "t", record: { ...record, turns: record.turns.map((t, i) => (i === 2 ? { ...t, dev: "dev:4" } : t)) } } });
    expect(kept.reason).toBe("match");
  });

  it("repairs a sync cut short: a revert intent cuts there again, an inject intent before the turn it went after", () => {
    const s = session(3);
    const view = s.history;
    const thread = (record: NativeThreadRecord) => ({ threadId: "t", record });
    const revert = plan({ view, history: s.history, origins: s.origins, thread: thread({ ...s.record, intent: { step: "revert", beforeTurnId: "turn-3" } }) });
    expect(revert).toMatchObject({ reason: "resync", revertBeforeTurnId: "turn-3", counts: { injectedItems: 2 } });
    const inject = plan({ view, history: s.history, origins: s.origins, thread: thread({ ...s.record, intent: { step: "inject", afterTurnId: "turn-2", units: [] } }) });
    expect(inject).toMatchObject({ reason: "resync", revertBeforeTurnId: "turn-2", counts: { keptTurns: 1, injectedItems: 4 } });
    const preamble = plan({ view, history: s.history, origins: s.origins, thread: thread({ ...s.record, intent: { step: "inject", afterTurnId: null, units: [] } }) });
    expect(preamble).toMatchObject({ action: "start", reason: "rotate" });
    const compacted = plan({ view, history: s.history, origins: s.origins, thread: thread({ ...s.record, unknownFrom: "turn-2" }) });
    expect(compacted).toMatchObject({ reason: "resync", revertBeforeTurnId: "turn-2" });
  });

  it("within a tolerance, stale turns are carried while their rent stays below the price of the cut", () => {
    const s = session(4);
    const view = [...s.history.slice(0, 2), ...s.history.slice(4)];
    const thread = { threadId: "t", record: s.record };
    const carry = plan({ view, history: s.history, origins: s.origins, thread, toleranceBytes: 10_000 });
    expect(carry).toMatchObject({ action: "resume", reason: "carry", counts: { keptTurns: 4, injectedItems: 0 } });
    expect(carry.record.rentBytes).toBeGreaterThan(0);
    expect(carry.counts.staleBytes).toBeGreaterThan(0);
    // The rent paid reached the price: the cut is bought.
    const paid = plan({ view, history: s.history, origins: s.origins, thread: { threadId: "t", record: { ...s.record, rentBytes: 1e9 } }, toleranceBytes: 10_000 });
    expect(paid.reason).toBe("revert");
  });
});

describe("chooseNativeSync: carry, revert or rotate", () => {
  it("picks the cheaper buy, and carries only within the tolerance while the rent is below it", () => {
    const base = { staleBytes: 0, toleranceBytes: 0, accruedRent: 0, ratio: 0.1, revertRebytes: 400, rotateRebytes: 900, overheadBytes: ROTATION_OVERHEAD_BYTES, canRevert: true };
    expect(chooseNativeSync(base)).toEqual({ option: "revert", rent: 0, revertPrice: 360, rotatePrice: 0.9 * 21_900 });
    expect(chooseNativeSync({ ...base, canRevert: false }).option).toBe("rotate");
    expect(chooseNativeSync({ ...base, revertRebytes: 30_000 }).option).toBe("rotate");
    expect(chooseNativeSync({ ...base, staleBytes: 2_000, toleranceBytes: 4_000 }).option).toBe("carry");
    expect(chooseNativeSync({ ...base, staleBytes: 2_000, toleranceBytes: 4_000, accruedRent: 200 }).option).toBe("revert");
    expect(chooseNativeSync({ ...base, staleBytes: 5_000, toleranceBytes: 4_000 }).option).toBe("revert");
  });
});

describe("the native record in the binding", () => {
  const sessions = tempSessions("native-record-");

  it("injected units go after the last kept turn (the preamble without turns); an accepted turn is appended", () => {
    const units = ["mabc:10", "e0123:20"];
    expect(recordInjected({ preamble: [], turns: [] }, units)).toEqual({ preamble: units, turns: [] });
    const r = recordInjected({ preamble: [], turns: [{ id: "a", units: [] }], intent: { step: "inject", afterTurnId: "a", units } }, units);
    expect(r).toEqual({ preamble: [], turns: [{ id: "a", units }] });
    expect(recordAcceptedTurn(r, "b", "h:3").turns).toEqual([{ id: "a", units }, { id: "b", units: [], dev: "h:3" }]);
  });

  it("applyBindingUpdate records the turn, its held turns and a fresh thread's start instructions; the log round-trips it", async () => {
    const fp = { dynamicToolsFingerprint: "d", engineId: "e", policyFingerprint: "p", projectionMode: "native" };
    const native: NativeThreadRecord = { preamble: ["mabc:10"], turns: [] };
    const first = applyBindingUpdate(undefined, { threadId: "t", turnId: "turn-1", update: { reset: true, ledgerAdd: [], native, developerDelivery: "h0:5" }, ...fp });
    expect(first.native).toEqual({ preamble: ["mabc:10"], turns: [{ id: "turn-1", units: [] }], startDev: "h0:5" });
    expect(first.heldTurnIds).toEqual(["turn-1"]);
    const kept = { ...first.native!, turns: [] };
    const second = applyBindingUpdate(first, { threadId: "t", turnId: "turn-2", update: { reset: false, ledgerAdd: [], native: kept, developerDeliveriesHeld: ["h0:5"] }, ...fp });
    expect(second.heldTurnIds).toEqual(["turn-2"]);
    expect(second.native?.turns.map((t) => t.id)).toEqual(["turn-2"]);
    const file = sessions.file("binding");
    await writeThreadBinding(file, second);
    await writeThreadBinding(file, { ...second, native: { ...second.native!, intent: { step: "revert", beforeTurnId: "turn-2" } } }, { durable: false });
    expect((await readThreadBinding(file))?.native?.intent).toEqual({ step: "revert", beforeTurnId: "turn-2" });
    expect(threadBindingSchema.safeParse({ ...second, native: { preamble: ["not a unit"], turns: [] } }).success).toBe(false);
    sessions.cleanup();
  });

  it("a turn projected otherwise on a native thread keeps its record; a compaction outside a turn marks it unknown", () => {
    const fp = { dynamicToolsFingerprint: "d", engineId: "e", policyFingerprint: "p", projectionMode: "native" };
    const native: NativeThreadRecord = { preamble: ["mabc:10"], turns: [{ id: "turn-1", units: ["e0123:20"] }] };
    const bound = { ...applyBindingUpdate(undefined, { threadId: "t", turnId: "turn-1", update: { reset: true, ledgerAdd: [] }, ...fp }), native };
    // An assemble that failed: mode none, no native update. The injected units are still on the thread.
    const next = applyBindingUpdate(bound, { threadId: "t", turnId: "turn-2", update: { reset: false, ledgerAdd: [] }, ...fp });
    expect(next.native).toEqual({ preamble: ["mabc:10"], turns: [{ id: "turn-1", units: ["e0123:20"] }, { id: "turn-2", units: [] }] });
    expect(markNativeCompaction(next, "t").native?.unknownFrom).toBe("turn-2");
    // Such a turn repairs nothing: an unfinished step's intent and an unknown stretch stay for the next sync.
    const pending = { ...next, native: { ...next.native!, intent: { step: "inject" as const, afterTurnId: "turn-1", units: [] }, unknownFrom: "turn-2" } };
    const after = applyBindingUpdate(pending, { threadId: "t", turnId: "turn-3", update: { reset: false, ledgerAdd: [] }, ...fp });
    expect(after.native).toMatchObject({ intent: { step: "inject", afterTurnId: "turn-1" }, unknownFrom: "turn-2" });
    expect(after.native?.turns.map((t) => t.id)).toEqual(["turn-1", "turn-2", "turn-3"]);
    expect(markNativeCompaction({ ...next, native: { preamble: [], turns: [] } }, "t").native?.unknownFrom).toBeNull();
    // A fresh thread forgets the old one's record.
    expect(applyBindingUpdate(next, { threadId: "t2", turnId: "turn-9", update: { reset: true, ledgerAdd: [] }, ...fp }).native).toBeUndefined();
  });
});

describe("auto adopts a thread made by delta (the auto of before) instead of rotating it", () => {
  const fingerprints = { dynamicTools: "d", engineId: "e", policy: "p" };
  const fp = { dynamicToolsFingerprint: "d", engineId: "e", policyFingerprint: "p" };
  const older = [user("o1"), assistant("oA")];

  /**
   * Two turns under `delta` on one thread: turn 1 gets the older history as context entries (the ledger), turn 2
   * resumes it. Returns the binding and the transcript as the next turn reads them.
   */
  function deltaSession(addition?: (turn: number) => string) {
    const history: AgentMessage[] = [];
    const origins: Array<{ threadId: string; turnId: string } | null> = [];
    let binding: ReturnType<typeof applyBindingUpdate> | undefined;
    for (let turn = 1; turn <= 2; turn++) {
      const prompt = `q${turn}`;
      const out = projectAssembledContext({
        mode: "delta",
        prompt,
        history: [...history],
        origins: [...origins],
        assembled: { messages: [...older, ...history, user(prompt)], estimatedTokens: 1, ...(addition ? { systemPromptAddition: addition(turn) } : {}) },
        fingerprints,
        ...(binding ? { binding } : {}),
      });
      expect(out.mode).toBe("delta");
      binding = applyBindingUpdate(binding, { threadId: "t", turnId: `turn-${turn}`, update: out.bindingUpdate, ...fp, projectionMode: out.mode });
      history.push(user(prompt), assistant(`a${turn}`));
      origins.push({ threadId: "t", turnId: `turn-${turn}` }, { threadId: "t", turnId: `turn-${turn}` });
    }
    expect(binding!.ledger).toHaveLength(2);
    return { history, origins, binding: binding! };
  }

  const autoTurn = (s: ReturnType<typeof deltaSession>, view: AgentMessage[], extra: { systemPromptAddition?: string } = {}) =>
    projectAssembledContext({ mode: "auto", prompt: "q3", history: s.history, origins: s.origins, assembled: { messages: [...view, user("q3")], estimatedTokens: 1, ...extra }, fingerprints, binding: s.binding });

  it("a view that starts with what the thread holds keeps it whole: nothing cut, nothing sent again, only the new part injected", () => {
    const s = deltaSession();
    const out = autoTurn(s, [...older, ...s.history, summary("new note")]);
    expect(out).toMatchObject({ mode: "native", reason: "match", thread: { action: "resume", threadId: "t" }, entriesSent: 0 });
    expect(out.nativeSync?.revertBeforeTurnId).toBeUndefined();
    expect(texts(out.nativeSync!.items)).toEqual([`user:${NATIVE_REFERENCE_LABEL}\n\n[compactionSummary]\nnew note`]);
    const update = out.bindingUpdate as { native: NativeThreadRecord };
    expect(update.native.adopted).toEqual({ through: "turn-2", dev: [] });
    // Later turns go on from the adopted thread: a view that keeps the note matches; the note, injected after the
    // last adopted turn, can only go with that turn, so a view that drops it cuts before the first turn.
    const next = applyBindingUpdate(s.binding, { threadId: "t", turnId: "turn-3", update: out.bindingUpdate, ...fp, projectionMode: "native" });
    const history = [...s.history, user("q3"), assistant("a3")];
    const origins = [...s.origins, { threadId: "t", turnId: "turn-3" }, { threadId: "t", turnId: "turn-3" }];
    const turn4 = (view: AgentMessage[]) =>
      projectAssembledContext({ mode: "auto", prompt: "q4", history, origins, assembled: { messages: [...view, user("q4")], estimatedTokens: 1 }, fingerprints, binding: next });
    const kept = turn4([...older, ...s.history, summary("new note"), user("q3"), assistant("a3")]);
    expect(kept).toMatchObject({ reason: "match", thread: { action: "resume", threadId: "t" } });
    expect(kept.nativeSync?.items).toEqual([]);
    expect((kept.bindingUpdate as { native: NativeThreadRecord }).native.adopted?.through).toBe("turn-2");
    const dropped = turn4([...older, ...history]);
    expect(dropped).toMatchObject({ reason: "revert", thread: { action: "resume", threadId: "t" } });
    expect(dropped.nativeSync?.revertBeforeTurnId).toBe("turn-1");
    expect(texts(dropped.nativeSync!.items)).toEqual(["user:o1", "assistant:oA", "user:q1", "assistant:a1", "user:q2", "assistant:a2", "user:q3", "assistant:a3"]);
  });

  it("a view that drops part of it cuts before the thread's first turn (same thread and cache key) and injects the view", () => {
    const s = deltaSession();
    const out = autoTurn(s, [summary("o1 and oA, folded"), ...s.history]);
    expect(out).toMatchObject({ mode: "native", reason: "revert", thread: { action: "resume", threadId: "t" } });
    expect(out.nativeSync?.revertBeforeTurnId).toBe("turn-1");
    expect(texts(out.nativeSync!.items)).toEqual([`user:${NATIVE_REFERENCE_LABEL}\n\n[compactionSummary]\no1 and oA, folded`, "user:q1", "assistant:a1", "user:q2", "assistant:a2"]);
    expect((out.bindingUpdate as { native: NativeThreadRecord }).native.adopted).toBeUndefined();
    // The same view in another order than the thread's turns is no prefix either.
    expect(autoTurn(s, [...s.history, ...older]).nativeSync?.revertBeforeTurnId).toBe("turn-1");
  });

  it("a stale developer copy among the adopted turns cuts them; a thread after a native compaction is not adopted", () => {
    const s = deltaSession((turn) => `note ${turn}`);
    expect(s.binding.developerDeliveries).toHaveLength(2);
    const out = autoTurn(s, [...older, ...s.history], { systemPromptAddition: "note 3" });
    expect(out).toMatchObject({ reason: "revert", thread: { action: "resume" } });
    expect(out.nativeSync?.revertBeforeTurnId).toBe("turn-1");
    // The copy that was current on the thread keeps it whole.
    expect(autoTurn(s, [...older, ...s.history], { systemPromptAddition: "note 2" })).toMatchObject({ reason: "match" });
    const compacted = { ...s, binding: markNativeCompaction(s.binding, "t") };
    expect(autoTurn(compacted, [...older, ...s.history])).toMatchObject({ mode: "native", reason: "noRecord", thread: { action: "start" } });
  });
});

describe("the view's engine-made tail before a thread's first turn rides with the turn", () => {
  const note = (n: number): AgentMessage => ({ role: "custom", customType: "recall", content: `note ${n}` });
  const fingerprints = { dynamicTools: "d", engineId: "e", policy: "p" };
  const fp = { dynamicToolsFingerprint: "d", engineId: "e", policyFingerprint: "p", projectionMode: "native" };

  it("goes as the turn's additionalContext, is recorded as the turn's lead, and is cut with the turn next time (no rotation)", () => {
    const first = projectAssembledContext({ mode: "auto", prompt: "q1", history: [], origins: [], assembled: { messages: [note(1)], estimatedTokens: 1 }, fingerprints });
    expect(first).toMatchObject({ mode: "native", thread: { action: "start" }, entriesSent: 1 });
    expect(first.nativeSync?.items).toEqual([]);
    const entries = Object.entries(first.additionalContext ?? {});
    expect(entries.map(([key, e]) => [key.startsWith("openclaw.context."), e.kind, e.value.endsWith("[custom]\nnote 1")])).toEqual([[true, "untrusted", true]]);
    const bound = applyBindingUpdate(undefined, { threadId: "t", turnId: "turn-1", update: first.bindingUpdate, ...fp });
    expect(bound.native?.turns).toEqual([{ id: "turn-1", units: [], lead: [expect.stringMatching(/^e/)] }]);
    expect(bound.native?.lead).toBeUndefined();
    // Turn 2: the note changed. The old one went with turn 1, so cutting turn 1 drops it: same thread, no rotation.
    const history = [user("q1"), assistant("a1")];
    const origins = [{ threadId: "t", turnId: "turn-1" }, { threadId: "t", turnId: "turn-1" }];
    const second = projectAssembledContext({ mode: "auto", prompt: "q2", history, origins, assembled: { messages: [...history, note(2)], estimatedTokens: 1 }, fingerprints, binding: bound });
    expect(second).toMatchObject({ reason: "revert", thread: { action: "resume", threadId: "t" } });
    expect(second.nativeSync?.revertBeforeTurnId).toBe("turn-1");
    expect(texts(second.nativeSync!.items)).toEqual(["user:q1", "assistant:a1"]);
    expect(Object.values(second.additionalContext ?? {}).map((e) => e.value.endsWith("[custom]\nnote 2"))).toEqual([true]);
    // The same view again matches the thread (lead, then the turn's own messages).
    const again = applyBindingUpdate(bound, { threadId: "t", turnId: "turn-2", update: second.bindingUpdate, ...fp });
    const h2 = [...history, user("q2"), assistant("a2")];
    const o2 = [...origins, { threadId: "t", turnId: "turn-2" }, { threadId: "t", turnId: "turn-2" }];
    const third = projectAssembledContext({ mode: "auto", prompt: "q3", history: h2, origins: o2, assembled: { messages: [...history, note(2), user("q2"), assistant("a2")], estimatedTokens: 1 }, fingerprints, binding: again });
    expect(third).toMatchObject({ reason: "match", entriesSent: 0 });
    expect(third.nativeSync?.items).toEqual([]);
  });
});
