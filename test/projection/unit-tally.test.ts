/**
 * The units of a view (and of what the thread lacks) tallied and kept from turn to turn: exactly what renderUnits gives
 * (per hash counts, ids, token sum), while a moving window costs only what it dropped and gained.
 */
import { describe, expect, it } from "vitest";
import { prng } from "../../bench/lib.js";
import type { AgentMessage } from "../../src/context-engine/types.js";
import {
  absentUnitTokens,
  injectedRuns,
  ledgerUnitId,
  ledgerUnitsByHash,
  ledgerUnitTokens,
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

describe("answers kept with a kept tally", () => {
  /** A ledger as the binding keeps it: unit strings, some repeated, some naming occurrences or ids no view has. */
  function randomLedger(ids: readonly string[], next: (n: number) => number): string[] {
    const ledger: string[] = [];
    for (const id of ids) if (next(3) === 0) ledger.push(`${id}:${1 + next(50)}`);
    const hash = ids[next(ids.length)]!.split("#")[0]!;
    if (next(2) === 0) ledger.push(`${hash}#${2 + next(4)}:${1 + next(9)}`); // a later occurrence
    if (next(3) === 0 && ledger.length > 0) ledger.push(ledger[next(ledger.length)]!); // listed twice
    if (next(4) === 0) ledger.push(`${hash}#0:5`, "nothing#x:3"); // ids no unit can have
    return ledger;
  }

  /** What the old per-unit loop gave: the tokens of each ledger unit the list does not have. */
  function absentByLoop(ledger: readonly string[], list: readonly AgentMessage[]): number {
    const ids = reference(list).ids;
    let sum = 0;
    for (const unit of ledger) {
      const split = splitUnitId(ledgerUnitId(unit));
      if (split === undefined || !ids.has(ledgerUnitId(unit))) sum += ledgerUnitTokens(unit);
    }
    return sum;
  }

  it("equal a fresh answer over a moving window, asked every update, after skipped updates, and against a new ledger", () => {
    const texts = ["ok", "Done. The change is in place.", "again", "a longer reply with more to say about it", "fine"];
    const pool = Array.from({ length: 500 }, (_, i) => (i % 19 === 4 ? own([], "assistant") : own(texts[(i * 7) % 11 % texts.length], i % 2 ? "assistant" : "user")));
    const session = own("the session's first message");
    const allIds = [...reference(pool).ids];
    const next = rng(11);
    let ledger: string[] = [];
    let units = ledgerUnitsByHash([], []);
    let runs = injectedRuns(new Set());
    // The host groups a ledger once and asks of that grouping until the ledger changes.
    const useLedger = (next: string[]) => {
      ledger = next;
      units = ledgerUnitsByHash(ledger.map((u) => splitUnitId(ledgerUnitId(u))), ledger.map(ledgerUnitTokens));
      runs = injectedRuns(new Set(ledger.map(ledgerUnitId)));
    };
    useLedger(randomLedger(allIds, next));
    let start = 0;
    let end = 40;
    let asked = 0;
    let carried = 0;
    let previous: UnitTally | undefined;
    for (let step = 0; step < 400; step++) {
      const r = next(12);
      if (r < 8) {
        end = Math.min(pool.length, end + next(4));
        start = Math.min(end, start + next(3));
      } else if (r === 8) start = Math.max(0, start - next(5)); // not a slide
      else if (r === 9) useLedger(randomLedger(allIds, next)); // something was injected
      else if (r === 10) useLedger([]); // a native compaction cleared the ledger
      const list = pool.slice(start, end);
      const tally = tallyUnits(list, undefined, undefined, session, "view");
      if (tally === previous) carried++;
      previous = tally;
      // Some updates go unasked: the next answer is then more than one update old.
      if (next(4) === 0) continue;
      asked++;
      expect(units.unsplitTokens + absentUnitTokens(units, tally)).toBe(absentByLoop(ledger, list));
      // Asked again before the next update: the same answer.
      expect(units.unsplitTokens + absentUnitTokens(units, tally)).toBe(absentByLoop(ledger, list));
      expect(tallyAllInjected(tally, runs)).toBe(planEntries(renderUnits(list), new Set(ledger.map(ledgerUnitId))).entriesSent === 0);
    }
    expect(asked).toBeGreaterThan(200);
    expect(carried).toBeGreaterThan(200);
  });

  it("bring one ledger's answers forward across updates of the kept tally", () => {
    // One ledger for the whole walk (as between injections): every answer after the first is brought forward.
    // Repeated texts, and now and then one of its own past the injected part: the thread lacks that one while the
    // window shows it, and lacks nothing again once the window has moved past it.
    const texts = ["ok", "yes", "ok", "no", "a reply", "ok"];
    const pool = Array.from({ length: 300 }, (_, i) =>
      own(i > 110 && i % 23 === 0 ? `a note of its own, ${i}` : texts[(i * 5) % 13 % texts.length], i % 2 ? "assistant" : "user"),
    );
    const session = own("the session's first message");
    const ledger = [...reference(pool.slice(0, 60)).units.map((u) => u.unit), ...reference(pool.slice(100, 110)).units.map((u) => u.unit)];
    const units = ledgerUnitsByHash(ledger.map((u) => splitUnitId(ledgerUnitId(u))), ledger.map(ledgerUnitTokens));
    const ids = new Set(ledger.map(ledgerUnitId));
    const runs = injectedRuns(ids);
    const next = rng(5);
    let start = 0;
    let end = 12;
    let changes = 0;
    let last: boolean | undefined;
    for (let step = 0; step < 250; step++) {
      // A window of about 8 to 16 messages moving on.
      end = Math.min(pool.length, end + next(3));
      start = Math.max(start, end - 8 - next(9));
      const view = pool.slice(start, end);
      const missing = view.filter((_, i) => (start + i) % 4 !== 1);
      expect(absentUnitTokens(units, tallyUnits(view, undefined, undefined, session, "view"))).toBe(absentByLoop(ledger, view));
      const allInjected = tallyAllInjected(tallyUnits(missing, undefined, undefined, session, "missing"), runs);
      expect(allInjected).toBe(planEntries(renderUnits(missing), ids).entriesSent === 0);
      if (last !== undefined && allInjected !== last) changes++;
      last = allInjected;
    }
    // The answer turned both ways many times, each time brought forward (a check that only ever says one thing, or
    // only when worked out afresh, proves nothing).
    expect(changes).toBeGreaterThanOrEqual(8);
  });
});
