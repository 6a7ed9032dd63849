/**
 * The units of a view (and of what the thread lacks) tallied and kept from turn to turn: exactly what renderUnits gives
 * (per hash counts, ids, token sum), while a moving window costs only what it dropped and gained.
 */
import { describe, expect, it } from "vitest";
import { prng } from "../../bench/lib.js";
import type { AgentMessage } from "../../src/context-engine/types.js";
import {
  injectedRuns,
  ledgerUnitId,
  planEntries,
  renderUnits,
  tallyAllInjected,
  splitUnitId,
  tallyHas,
  tallyUnits,
  type UnitTally,
} from "../../src/projection/entries.js";
import { estimateTokens } from "../../src/projection/render.js";
import { deepFreeze, markDeepFrozen } from "../../src/transcript/freeze.js";

const own = (content: unknown, role = "user"): AgentMessage =>
  markDeepFrozen(deepFreeze({ role, content, timestamp: 1 })) as unknown as AgentMessage;

/** What the tally must equal: derived from renderUnits. */
function reference(list: readonly AgentMessage[]) {
  const units = renderUnits(list);
  const counts = new Map<string, number>();
  for (const u of units) {
    const hash = u.id.split("#")[0]!;
    counts.set(hash, (counts.get(hash) ?? 0) + 1);
  }
  return { units, counts, tokens: units.reduce((n, u) => n + estimateTokens(u.block), 0), ids: new Set(units.map((u) => u.id)) };
}

/** A whole number below `n` from a seeded generator (a failure must replay). */
function rng(seed: number): (n: number) => number {
  const random = prng(seed);
  return (n) => Math.floor(random() * n);
}

/** Whether the tally has the unit with this id (as a ledger entry names it). */
function tallyHasUnitId(tally: UnitTally, id: string): boolean {
  const unit = splitUnitId(id);
  return unit !== undefined && tallyHas(tally, unit.hash, unit.occurrence);
}

function expectSame(tally: UnitTally, list: readonly AgentMessage[], probeIds: readonly string[]): void {
  const ref = reference(list);
  expect(new Map(tally.counts)).toEqual(ref.counts);
  expect(tally.tokens).toBe(ref.tokens);
  for (const id of probeIds) expect(tallyHasUnitId(tally, id)).toBe(ref.ids.has(id));
}

describe("tallyUnits", () => {
  it("equals renderUnits over windows that move, grow, jump back and shrink, with repeated and empty messages", () => {
    // Few distinct texts, so most blocks repeat (#n occurrences shift whenever the window drops one of them).
    const texts = ["ok", "Done. The change is in place.", "again", "a longer reply with more to say about it"];
    const pool = Array.from({ length: 400 }, (_, i) => (i % 17 === 5 ? own([], "assistant") : own(texts[i % 7 === 0 ? 2 : i % texts.length], i % 2 ? "assistant" : "user")));
    const session = own("the session's first message");
    const next = rng(7);
    const hashes = [...new Set(renderUnits(pool).map((u) => u.id.split("#")[0]!))];
    const probeIds = hashes.flatMap((h) => [h, `${h}#1`, `${h}#2`, `${h}#40`, `${h}#0`, `${h}#01`, `${h}#x`, `${h}#1.0`]).concat(["", "#1", "nothing"]);
    let start = 0;
    let end = 30;
    let kept = 0;
    let previous: UnitTally | undefined;
    for (let step = 0; step < 300; step++) {
      const r = next(10);
      if (r < 6) {
        // The usual turn: the window gains a few messages and may drop some at its front.
        end = Math.min(pool.length, end + next(4));
        start = Math.min(end, start + next(4));
      } else if (r === 6) start = Math.max(0, start - next(5)); // the front moves back: not a slide
      else if (r === 7) end = Math.max(start, end - 1 - next(3)); // the back shrinks: not a slide
      else if (r === 8) [start, end] = [next(300), 0].map((x, i) => (i === 0 ? x : x + next(60)))  as [number, number]; // a jump
      else start = end; // empty
      if (end < start) end = start;
      const list = pool.slice(start, end);
      const tally = tallyUnits(list, undefined, undefined, session, "view");
      expectSame(tally, list, probeIds);
      if (previous !== undefined && tally === previous) kept++;
      previous = tally;
      // Unkeyed, and under another slot: the same figures.
      expectSame(tallyUnits(list), list, probeIds);
      expectSame(tallyUnits(list.filter((_, i) => i % 3 !== 0), undefined, undefined, session, "missing"), list.filter((_, i) => i % 3 !== 0), probeIds);
    }
    // Most steps carried the kept tally over (the same object), the others started afresh.
    expect(kept).toBeGreaterThan(100);
    expect(kept).toBeLessThan(300);
  });

  it("carries the kept tally over only for a slide of the history cache's own messages under a session key", () => {
    const [a, b, c, d] = ["one", "two", "three", "four"].map((t) => own(t));
    const session = own("the session's first message");
    const first = tallyUnits([a!, b!, c!], undefined, undefined, session);
    expect(tallyUnits([b!, c!, d!], undefined, undefined, session)).toBe(first);
    expect(tallyUnits([b!, c!, d!], undefined, undefined, session, "missing")).not.toBe(first);
    // Not a slide (c left the middle): afresh.
    expect(tallyUnits([b!, d!], undefined, undefined, session)).not.toBe(first);
    // No key, or a key that is not the history cache's own: nothing kept.
    expect(tallyUnits([a!, b!])).not.toBe(tallyUnits([a!, b!]));
    const plainKey = { role: "user", content: "plain", timestamp: 1 } as unknown as AgentMessage;
    expect(tallyUnits([a!], undefined, undefined, plainKey)).not.toBe(tallyUnits([a!], undefined, undefined, plainKey));
    // The caller's array may change after the call: the kept tally holds its own copy of the list.
    const list = [a!, b!, c!];
    tallyUnits(list, undefined, undefined, session, "copied");
    list.splice(0, 1, d!);
    expectSame(tallyUnits([b!, c!, d!], undefined, undefined, session, "copied"), [b!, c!, d!], []);
    // Another part cap: afresh.
    const capped = tallyUnits([b!, d!], 3, undefined, session);
    expect(tallyUnits([b!, d!], undefined, undefined, session)).not.toBe(capped);
  });

  it("tallies an engine's own objects afresh: a message that can change is never kept", () => {
    const a = own("kept message");
    const mutable = { role: "user", content: [{ type: "text", text: "before" }], timestamp: 1 } as unknown as AgentMessage & {
      content: Array<{ type: string; text: string }>;
    };
    const session = own("the session's first message");
    const before = tallyUnits([a, mutable], undefined, undefined, session);
    const beforeCounts = new Map(before.counts);
    mutable.content[0] = { type: "text", text: "after, and longer" };
    const after = tallyUnits([a, mutable], undefined, undefined, session);
    expect(new Map(after.counts)).not.toEqual(beforeCounts);
    expectSame(after, [a, mutable], []);
  });

  it("says whether every unit was injected exactly when planEntries would send nothing", () => {
    const texts = ["ok", "ok", "yes", "ok", "no"];
    const list = texts.map((t) => own(t));
    const ids = reference(list).units.map((u) => u.id);
    const next = rng(3);
    for (let trial = 0; trial < 200; trial++) {
      const injected = new Set(ids.filter(() => next(3) !== 0));
      if (next(4) === 0) injected.add(`${ids[0]!.split("#")[0]}#7`); // a gap further on
      const expected = planEntries(renderUnits(list), injected).entriesSent === 0;
      expect(tallyAllInjected(tallyUnits(list), injectedRuns(injected))).toBe(expected);
    }
    expect(tallyAllInjected(tallyUnits([]), new Map())).toBe(true);
  });

  it("counts each hash's run of injected occurrences from the first", () => {
    expect(injectedRuns(new Set(["ab", "ab#1", "cd#1", "ef", "ef#2"]))).toEqual(new Map([["ab", 2], ["ef", 1]]));
    expect(ledgerUnitId("ab#1:3")).toBe("ab#1");
  });
});
