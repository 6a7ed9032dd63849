/**
 * The bound thread's hold on the history, kept per session from turn to turn: exactly the flags of a pass over the
 * origins and the answers of a ContentSet of the held messages, whatever the history and the binding did between turns.
 */
import { describe, expect, it } from "vitest";
import { prng } from "../../bench/lib.js";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { heldMessages } from "../../src/projection/held.js";
import { ContentSet, cachedContentKey } from "../../src/projection/index.js";
import type { ThreadBinding } from "../../src/transcript/binding.js";
import { deepFreeze, markAppendedTo, markDeepFrozen } from "../../src/transcript/freeze.js";

type Origin = { threadId: string; turnId: string } | null;

const own = (text: string, role = "user"): AgentMessage =>
  markDeepFrozen(deepFreeze({ role, content: text, timestamp: 1 })) as unknown as AgentMessage;

function binding(threadId: string, heldTurnIds: string[]): ThreadBinding {
  return { version: 1, threadId, heldTurnIds, ledger: [] } as unknown as ThreadBinding;
}

/** What the kept answers must equal. */
function expectSame(history: readonly AgentMessage[], origins: readonly Origin[], b: ThreadBinding) {
  const held = heldMessages(history, origins as Origin[], b, cachedContentKey());
  // Held by turn: produced on the bound thread in a turn the binding lists (the plain definition, message by message).
  const indexes = history.map((_, i) => i).filter((i) => origins[i]?.threadId === b.threadId && b.heldTurnIds.includes(origins[i]!.turnId));
  expect([...held.flags].map((f, i) => [i, f])).toEqual(history.map((_, i) => [i, indexes.includes(i) ? 1 : 0]));
  const set = new ContentSet(indexes.map((i) => history[i]!));
  // Asked in a shuffled order, some twice: an answer must not depend on what was asked before.
  const order = history.map((_, i) => i).sort((a, b) => ((a * 7919) % 13) - ((b * 7919) % 13));
  for (const i of [...order, ...order.slice(0, 5)]) expect([i, held.heldByContent(i)]).toEqual([i, set.hasContent(history[i]!)]);
  return held;
}

/**
 * A frozen array marked as `base` with `added` appended, as the history cache builds and marks its histories' arrays
 * (without a base: a chain of its own, as after a rewrite).
 */
function chained<T>(base: readonly T[] | undefined, added: readonly T[]): readonly T[] {
  const array = Object.freeze([...(base ?? []), ...added]);
  markAppendedTo(array, base);
  return array;
}

/** A whole number below `n` from a seeded generator (a failure must replay). */
function rng(seed: number): (n: number) => number {
  const random = prng(seed);
  return (n) => Math.floor(random() * n);
}

describe("heldMessages", () => {
  it("equals a pass over the origins and a ContentSet of the held messages over a session that grows, rotates, drops turns and is rewritten", () => {
    const next = rng(11);
    // Few texts, so contents repeat across turns (a reply the thread holds makes older copies of it held by content).
    // Two pairs of the same length ("why?"/"yes.", "again"/"nope!"): the same content signature, another content.
    const texts = ["ok", "Done. The change is in place.", "again", "why?", "a longer reply about the change", "yes.", "nope!"];
    // Frozen and chained as the history cache hands them out: an append continues the chain, a rewrite starts one.
    let history = chained<AgentMessage>(undefined, [own("the session's first message")]);
    let origins = chained<Origin>(undefined, [null]);
    let thread = "thread-1";
    let held: string[] = [];
    let turn = 0;
    const turnThread = new Map<string, string>();
    for (let step = 0; step < 600; step++) {
      const r = next(20);
      if (r < 14) {
        // A turn on the bound thread: its messages appended, its id held.
        const id = `turn-${++turn}`;
        turnThread.set(id, thread);
        const origin = Object.freeze({ threadId: thread, turnId: id });
        const count = 1 + next(3);
        history = chained(history, Array.from({ length: count }, (_, k) => own(texts[next(texts.length)]!, k % 2 ? "assistant" : "user")));
        origins = chained(origins, Array.from({ length: count }, () => origin));
        // At the cap, the oldest held turn falls out as this one comes in.
        held = next(4) === 0 ? [...held.slice(1), id] : [...held, id];
      } else if (r === 14) {
        // A message written by someone else (no origin), not held by turn.
        history = chained(history, [own(texts[next(texts.length)]!)]);
        origins = chained(origins, [null]);
      } else if (r === 15) {
        thread = `thread-${step}`; // a rotation: a fresh thread holds nothing yet
        held = [];
      } else if (r === 16) held = held.slice(1); // the oldest turn falls out
      else if (r === 17) held = []; // a native compaction
      else if (r === 18 && turn > 0) {
        // A turn id of messages already kept comes back (one of this thread's the binding no longer lists, when there is one).
        const dropped = [...turnThread].filter(([id, t]) => t === thread && !held.includes(id)).map(([id]) => id);
        held = [...held, dropped.length > 0 ? dropped[next(dropped.length)]! : `turn-${1 + next(turn)}`];
      } else if (r === 19 && history.length > 2) {
        // A rewrite, one of: the same contents as new objects (the first message too, or not); one message's content
        // changed; one message's origin changed (the lengths stay).
        const kind = next(3);
        if (kind === 0) {
          const from = next(2);
          history = chained(undefined, history.map((m, i) => (i >= from ? own((m as { content: string }).content, m.role) : m)));
        } else if (kind === 1) {
          const at = 1 + next(history.length - 1);
          history = chained(undefined, history.map((m, i) => (i === at ? own(`${texts[next(texts.length)]} (rewritten)`, m.role) : m)));
        } else {
          const moved = 1 + next(origins.length - 1);
          const to = origins[moved] === null ? origins[origins.length - 1]! : null;
          origins = chained(undefined, origins.map((o, i) => (i === moved ? to : o)));
        }
        // The rest of the session goes on from the rewritten arrays (both start a chain: the cache rebuilds both).
        if (kind === 2) history = chained(undefined, history);
        else origins = chained(undefined, origins);
      }
      expectSame(history, origins, binding(thread, [...new Set(held)]));
    }
  });

  it("extends the kept answers when the history and the held turns only grew, and starts afresh otherwise", () => {
    const first = own("the session's first message");
    const a = own("question");
    const b = own("answer", "assistant");
    const origin = Object.freeze({ threadId: "t", turnId: "u1" });
    const one = expectSame([first, a, b], [null, origin, origin], binding("t", ["u1"]));
    const c = own("question two");
    const d = own("answer", "assistant");
    const origin2 = Object.freeze({ threadId: "t", turnId: "u2" });
    const two = expectSame([first, a, b, c, d], [null, origin, origin, origin2, origin2], binding("t", ["u1", "u2"]));
    expect(two.flags.buffer).toBe(one.flags.buffer);
    // Another thread: afresh.
    const other = expectSame([first, a, b, c, d], [null, origin, origin, origin2, origin2], binding("t2", []));
    expect(other.flags.buffer).not.toBe(one.flags.buffer);
    // An array that can still change is copied: changed in place after the call, it is not taken for the kept one.
    const mutable = [first, a, b, c, d];
    const mutableOrigins: Origin[] = [null, origin, origin, origin2, origin2];
    expectSame(mutable, mutableOrigins, binding("t", ["u1", "u2"]));
    mutableOrigins[1] = null;
    expectSame(mutable, mutableOrigins, binding("t", ["u1", "u2"]));
    mutable[1] = own("answer", "assistant"); // no longer held by turn, now held by content
    expectSame(mutable, mutableOrigins, binding("t", ["u1", "u2"]));
    // A history whose messages are not the history cache's own is never kept.
    const plain = { role: "user", content: "plain", timestamp: 1 } as unknown as AgentMessage;
    const p1 = expectSame([first, plain], [null, null], binding("t", []));
    const p2 = expectSame([first, plain, a], [null, null, origin], binding("t", ["u1"]));
    expect(p2.flags.buffer).not.toBe(p1.flags.buffer);
  });

  it("keeps the answers when held turns fall out at the front (past MAX_HELD_TURNS): a content stays held while another held message carries it", () => {
    const first = own("the session's first message");
    const turn = (id: string, ...texts: string[]) => ({ origin: Object.freeze({ threadId: "t", turnId: id }), messages: texts.map((t, k) => own(t, k % 2 ? "assistant" : "user")) });
    const turns = [turn("u1", "same", "reply one"), turn("u2", "same", "reply two"), turn("u3", "next", "reply one"), turn("u4", "last", "done")];
    const upTo = (n: number) => ({
      history: [first, ...turns.slice(0, n).flatMap((t) => t.messages)],
      origins: [null, ...turns.slice(0, n).flatMap((t) => t.messages.map(() => t.origin))] as Origin[],
    });
    const a = upTo(2);
    const kept = expectSame(a.history, a.origins, binding("t", ["u1", "u2"]));
    // u1 falls out as u3 comes in: u1's "same" is still held through u2's; its "reply one" through u3's.
    const b = upTo(3);
    const afterDrop = expectSame(b.history, b.origins, binding("t", ["u2", "u3"]));
    expect(afterDrop.flags.buffer).toBe(kept.flags.buffer);
    expect([afterDrop.flags[1], afterDrop.heldByContent(1), afterDrop.heldByContent(2)]).toEqual([0, true, true]);
    // u2 falls out too: "same" is held by no turn any more, and the answers given for it change.
    const c = upTo(4);
    const afterTwo = expectSame(c.history, c.origins, binding("t", ["u3", "u4"]));
    expect(afterTwo.flags.buffer).toBe(kept.flags.buffer);
    expect([afterTwo.heldByContent(1), afterTwo.heldByContent(3), afterTwo.heldByContent(2)]).toEqual([false, false, true]);
    // Every held turn falls out (nothing listed): nothing is held.
    expect(expectSame(c.history, c.origins, binding("t", [])).flags.buffer).toBe(kept.flags.buffer);
    // A binding that lists a turn twice: a copy that falls out at the front leaves the turn held.
    expectSame(a.history, a.origins, binding("t", ["u1", "u2", "u1"]));
    expectSame(b.history, b.origins, binding("t", ["u2", "u1", "u3"]));
  });

  it("flags by the origins when they outnumber the messages (a caller's mistake), holding only the messages there are", () => {
    const first = own("the session's first message");
    const origin = Object.freeze({ threadId: "t", turnId: "u" });
    const held = heldMessages([first], [origin, origin], binding("t", ["u"]), cachedContentKey());
    expect([...held.flags]).toEqual([1, 1]);
    expect(held.heldByContent(0)).toBe(true);
  });

  it("holds nothing without a binding", () => {
    const held = heldMessages([own("x")], [Object.freeze({ threadId: "t", turnId: "u" })], undefined, cachedContentKey());
    expect([...held.flags]).toEqual([0]);
    expect(held.heldByContent(0)).toBe(false);
  });
});
