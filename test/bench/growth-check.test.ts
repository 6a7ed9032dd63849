/**
 * The pure helpers behind the growth benchmark's "outgrows" target (bench/growth.ts): request composition, the
 * request-content measure, the limit and the check itself, on synthetic Responses request bodies. Proves the check
 * can fail as well as pass. No app-server.
 */
import { describe, expect, it } from "vitest";
import {
  BYTES_PER_TOKEN,
  ITEM_OVERHEAD_BYTES,
  composition,
  largestIncrease,
  outgrowLimit,
  outgrowsCheck,
  rawLargestInfo,
  recallLowerBound,
  recallRevertBound,
  requestContentBytes,
} from "../../bench/growth.js";
import { OFFLINE_BASE_INSTRUCTIONS } from "../../src/codex/config.js";

const msg = (role: string, text: string, id = `msg_${role}_${text.length}`) => ({
  type: "message",
  id,
  role,
  content: [{ type: role === "assistant" ? "output_text" : "input_text", text }],
});
const FRAMING = [
  msg("developer", OFFLINE_BASE_INSTRUCTIONS),
  msg("developer", "<skills_instructions>\n## Skills\nA skill is a set of local instructions."),
  msg("developer", "<permissions instructions>sandbox: read-only</permissions instructions>"),
  msg("user", "<environment_context>\n  <cwd>/tmp/x</cwd>\n</environment_context>"),
];
const body = (...conversation: object[]) => ({ model: "fake-model", input: [...FRAMING, ...conversation] });
const bytes = (x: unknown) => Buffer.byteLength(JSON.stringify(x));
const text = (n: number, ch = "a") => ch.repeat(n);

describe("composition", () => {
  it("splits framing, conversation text and envelopes, and counts content as text + 16 B per item", () => {
    const conversation = [msg("user", text(100)), msg("assistant", text(250)), msg("developer", `<openclaw.context.000>${text(40)}`)];
    const c = composition(body(...conversation));
    expect(c.items).toBe(7);
    expect(c.framingItems).toBe(4);
    expect(c.conversationItems).toBe(3);
    expect(c.framingBytes).toBe(FRAMING.reduce((a, f) => a + bytes(f), 0));
    const textBytes = 100 + 250 + Buffer.byteLength(`<openclaw.context.000>${text(40)}`);
    expect(c.conversationTextBytes).toBe(textBytes);
    expect(c.envelopeBytes).toBe(conversation.reduce((a, m) => a + bytes(m), 0) - textBytes);
    expect(c.framingBytes + c.conversationTextBytes + c.envelopeBytes).toBe(FRAMING.concat(conversation as never).reduce((a, m) => a + bytes(m), 0));
    expect(ITEM_OVERHEAD_BYTES).toBe(16);
    expect(c.contentBytes).toBe(textBytes + 3 * ITEM_OVERHEAD_BYTES);
    expect(requestContentBytes(body(...conversation))).toBe(c.contentBytes);
  });

  it("counts multi-byte text in bytes, an item without text as overhead only, and a missing body as empty", () => {
    expect(requestContentBytes(body(msg("user", "é€")))).toBe(2 + 3 + ITEM_OVERHEAD_BYTES);
    expect(requestContentBytes(body({ type: "reasoning", id: "r1", summary: [] }))).toBe(ITEM_OVERHEAD_BYTES);
    expect(composition(null)).toMatchObject({ items: 0, contentBytes: 0, framingBytes: 0 });
    expect(requestContentBytes(body())).toBe(0);
  });

  it("treats only Codex's fixed blocks as framing (a user message that merely mentions them is content)", () => {
    const c = composition(body(msg("user", "see <environment_context> above"), msg("developer", "You are a helpful assistant.")));
    expect(c.framingItems).toBe(4);
    expect(c.conversationItems).toBe(2);
  });
});

describe("limit and one turn", () => {
  it("largestIncrease is the largest step between neighbours, never negative", () => {
    expect(largestIncrease([])).toBe(0);
    expect(largestIncrease([5])).toBe(0);
    expect(largestIncrease([10, 30, 35, 80, 20])).toBe(45);
    expect(largestIncrease([50, 40, 30])).toBe(0);
  });

  it("outgrowLimit = budget tokens x 4 + one turn", () => {
    expect(BYTES_PER_TOKEN).toBe(4);
    expect(outgrowLimit(2_000, 790)).toBe(8_790);
  });
});

describe("outgrowsCheck", () => {
  // A floor whose content grows by at most 800 B per turn: one turn = 800 B; with a 1,000-token budget the limit is 4,800 B.
  const floor = [1_000, 1_700, 2_500, 3_100];
  const budget = 1_000;

  it("passes when every request's content is within budget + one turn, and measures content, not raw JSON", () => {
    const requests = [body(msg("user", text(2_000))), body(msg("user", text(2_000)), msg("assistant", text(2_700)))];
    const contents = requests.map(requestContentBytes);
    expect(Math.max(...contents)).toBe(4_700 + 2 * ITEM_OVERHEAD_BYTES);
    const check = outgrowsCheck("delta", contents, composition(requests[1]!), floor, budget);
    expect(check.pass).toBe(true);
    expect(check.detail).toContain("limit 4,800 B");
    // The same request in raw JSON bytes is over the limit: framing and envelopes are what the content measure drops.
    expect(bytes(requests[1]!.input)).toBeGreaterThan(4_800);
    const info = rawLargestInfo("delta", bytes(requests[1]!.input), composition(requests[1]!), budget, largestIncrease(floor));
    expect(info.info).toBe(true);
    expect(info.pass).toBe(false);
    expect(info.name.startsWith("(info)")).toBe(true);
  });

  it("fails when any single request's content exceeds budget + one turn (even if the last one is small)", () => {
    const requests = [body(msg("user", text(4_790))), body(msg("user", text(100)))];
    const contents = requests.map(requestContentBytes);
    expect(contents[0]).toBe(4_806);
    const check = outgrowsCheck("threadBootstrap", contents, composition(requests[0]!), floor, budget);
    expect(check.pass).toBe(false);
    expect(check.detail).toMatch(/^4,806 B content .* vs limit 4,800 B/);
  });

  it("is exactly inclusive at the limit and fails one byte past it", () => {
    const at = requestContentBytes(body(msg("user", text(4_800 - ITEM_OVERHEAD_BYTES))));
    expect(at).toBe(4_800);
    expect(outgrowsCheck("delta", [at], composition(null), floor, budget).pass).toBe(true);
    expect(outgrowsCheck("delta", [at + 1], composition(null), floor, budget).pass).toBe(false);
  });

  it("fails the same contents once the budget is lowered (the bench's budget constant is what it checks against)", () => {
    const contents = [7_456];
    const floorTurn = [0, 790];
    expect(outgrowsCheck("delta", contents, composition(null), floorTurn, 2_000).pass).toBe(true);
    expect(outgrowsCheck("delta", contents, composition(null), floorTurn, 1_500).pass).toBe(false);
  });
});

describe("engine-shape measures (issue 15)", () => {
  it("effective input cost: the prefix shared with the previous request is cached at the ratio", async () => {
    const { effectiveInputCost } = await import("../../bench/lib.js");
    expect(effectiveInputCost([Buffer.from("abc"), Buffer.from("abcd")], 0.1)).toBeCloseTo(3 + 1 + 0.3);
    // A rotation shares no prefix: everything is uncached.
    expect(effectiveInputCost([Buffer.from("abc"), Buffer.from("xbcd")], 0.1)).toBeCloseTo(3 + 4);
    expect(effectiveInputCost([Buffer.from("abc"), Buffer.from("abcd")], 1)).toBeCloseTo(7);
  });

  it("counts requests that carry an earlier text in two items, and only those", async () => {
    const { requestsCarryingTwice } = await import("../../bench/lib.js");
    const known = (k: number) => ["hello there", "reply one"].slice(0, k);
    expect(requestsCarryingTwice([["hello there"], ["hello there", "reply one", "new"]], known)).toBe(0);
    expect(requestsCarryingTwice([["hello there"], ["hello there", "ctx: [user]\nhello there", "new"]], known)).toBe(1);
  });

  it("the shape targets pass and fail on the figures", async () => {
    const { shapeChecks } = await import("../../bench/growth.js");
    const run = (over: Record<string, unknown>) =>
      ({ mode: "delta", turns: 40, cumulativeTotal: 1_000, effectiveCost: 100, requestsCarryingTwice: 0, rotations: 0, staleMax: 0, staleTokens: [0], lastRequestStaleNotes: 0, noteBytes: 0, noteBytesPerTurn: [], cachedBytes: [], ...over }) as never;
    const floor = run({ mode: "floor" });
    const pass = shapeChecks([run({ shape: "rebuilding", cumulativeTotal: 1_010 }), run({ shape: "summarizing", effectiveCost: 80 }), run({ shape: "recall", effectiveCost: 110, noteBytes: 5 })], floor);
    expect(pass.filter((c) => !c.info).map((c) => c.pass)).toEqual([true, true, true, true]);
    const fail = shapeChecks(
      [run({ shape: "rebuilding", cumulativeTotal: 1_011, requestsCarryingTwice: 1 }), run({ shape: "summarizing", effectiveCost: 81 }), run({ shape: "recall", effectiveCost: 111, noteBytes: 5 })],
      floor,
    );
    expect(fail.filter((c) => !c.info).map((c) => c.pass)).toEqual([false, false, false, false]);
  });
});

describe("native-mode targets (issue 64)", () => {
  it("pass and fail on the figures, and count developer-role transcript text over all native runs", async () => {
    const { nativeShapeChecks } = await import("../../bench/growth.js");
    const run = (over: Record<string, unknown>) =>
      ({ mode: "native", turns: 40, threads: 1, cumulativeTotal: 1_000, effectiveCost: 100, requestsCarryingTwice: 0, noteBytes: 0, lastRequestStaleNotes: 0, developerTranscriptRequests: 0, projectionReasons: {}, noteBytesPerTurn: [], cachedBytes: [], turnStartBytes: [], ...over }) as never;
    const floor = run({ mode: "floor" });
    const pass = nativeShapeChecks([run({ shape: "rebuilding", cumulativeTotal: 1_010 }), run({ shape: "summarizing", effectiveCost: 80 }), run({ shape: "recall", effectiveCost: 105, noteBytes: 0 })], floor);
    expect(pass.map((c) => c.pass)).toEqual([true, true, true, true]);
    const fail = nativeShapeChecks(
      [run({ shape: "rebuilding", requestsCarryingTwice: 1 }), run({ shape: "summarizing", effectiveCost: 81 }), run({ shape: "recall", effectiveCost: 106, developerTranscriptRequests: 1 })],
      floor,
    );
    expect(fail.map((c) => c.pass)).toEqual([false, false, false, false]);
    // Runs in other modes are not native mode's targets; the new auto's are checked alike.
    expect(nativeShapeChecks([run({ shape: "summarizing", mode: "delta", effectiveCost: 200 })], floor)).toEqual([]);
    const auto = nativeShapeChecks([run({ shape: "summarizing", mode: "auto", effectiveCost: 81 }), run({ shape: "recallItem", mode: "auto", effectiveCost: 105 })], floor, "auto");
    expect(auto.map((c) => [c.name.split(":")[0], c.pass])).toEqual([
      ["summarizing engine (auto)", false],
      ["recallItem engine (auto)", true],
      ["auto", true],
    ]);
  });
});

describe("recallRevertBound (the least one Codex thread can pay for a per-turn note, carrying and reverting)", () => {
  it("carries while a cut would re-send more than the carried notes cost, cuts when the notes are dearer", () => {
    expect(recallRevertBound({ floorEffectiveCost: 1000, cachedBytes: [0, 900], turnStartBytes: [800, 850], noteBytes: [10, 10], ratio: 0.1 })).toEqual({ cost: 1021, ideal: 1020, cuts: 0 });
    // Notes of 1,000 B against turns of 10 B: cutting the previous turn at every request (0.9 x 10) beats carrying.
    const b = recallRevertBound({ floorEffectiveCost: 100, cachedBytes: [0, 110, 120, 130], turnStartBytes: [100, 110, 120, 130], noteBytes: [1000, 1000, 1000, 1000], ratio: 0.1 });
    expect(b.cuts).toBe(3);
    expect(b.cost).toBe(Math.round(100 + 4000 + 3 * 0.9 * 10));
  });

  it("is never above carrying every note nor below the ideal", () => {
    const cached = Array.from({ length: 40 }, (_, k) => (k === 0 ? 0 : 2000 + 700 * k));
    const starts = Array.from({ length: 40 }, (_, k) => 2000 + 700 * k - 300);
    const notes = Array.from({ length: 40 }, () => 180);
    const b = recallRevertBound({ floorEffectiveCost: 100_000, cachedBytes: cached, turnStartBytes: starts, noteBytes: notes, ratio: 0.1 });
    const carryAll = 100_000 + notes.reduce((a, n, k) => a + n + 0.1 * 180 * k, 0);
    expect(b.cost).toBeLessThanOrEqual(Math.round(carryAll));
    expect(b.cost).toBeGreaterThanOrEqual(b.ideal);
  });
});

describe("recallLowerBound (the least any rotation schedule can pay for a per-turn note)", () => {
  it("without notes it is the floor, and with one note per turn and no rotation it carries every older note cached", () => {
    expect(recallLowerBound({ floorEffectiveCost: 500, cachedBytes: [0, 100, 200], noteBytes: [0, 0, 0], ratio: 0.1 })).toEqual({ cost: 500, ideal: 500, rotations: [] });
    // Rotation would re-send 900 x 0.9 uncached: never worth it here. Notes: 10 + (10 + 1) + (10 + 2) = 33.
    expect(recallLowerBound({ floorEffectiveCost: 1000, cachedBytes: [0, 900, 900], noteBytes: [10, 10, 10], ratio: 0.1 })).toEqual({ cost: 1033, ideal: 1030, rotations: [] });
  });

  it("rotates where the carried notes cost more than re-sending the cached prefix", () => {
    // Big notes, a tiny cached prefix: rotating at every request (cost 0.9 x 1 each) beats carrying 0.1 x 1000.
    const b = recallLowerBound({ floorEffectiveCost: 100, cachedBytes: [0, 1, 1, 1], noteBytes: [1000, 1000, 1000, 1000], ratio: 0.1 });
    expect(b.rotations).toEqual([1, 2, 3]);
    expect(b.cost).toBe(Math.round(100 + 4000 + 3 * 0.9));
    expect(b.ideal).toBe(4100);
  });

  it("is never above the cost of the no-rotation schedule nor below the ideal", () => {
    const cached = Array.from({ length: 40 }, (_, k) => (k === 0 ? 0 : 2000 + 700 * k));
    const notes = Array.from({ length: 40 }, () => 180);
    const b = recallLowerBound({ floorEffectiveCost: 100_000, cachedBytes: cached, noteBytes: notes, ratio: 0.1 });
    const noRotation = 100_000 + notes.reduce((a, n, k) => a + n + 0.1 * 180 * k, 0);
    expect(b.cost).toBeLessThanOrEqual(Math.round(noRotation));
    expect(b.cost).toBeGreaterThanOrEqual(b.ideal);
  });
});
