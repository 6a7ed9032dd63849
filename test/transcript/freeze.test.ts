/** The freeze registry's helpers: what the history cache hands out, and how the host copies its frozen arrays. */
import { describe, expect, it } from "vitest";
import {
  copyArray,
  deepFreeze,
  frozenMessageMemo,
  inOneAppendChain,
  isDeepFrozenByHost,
  markAppendedTo,
  markDeepFrozen,
  startsWithArray,
} from "../../src/transcript/freeze.js";

describe("copyArray", () => {
  it("copies a frozen array, whole or from an index, into a plain array the caller may change", () => {
    const items = Object.freeze(Array.from({ length: 7 }, (_, i) => Object.freeze({ i })));
    const whole = copyArray(items);
    expect(whole).toEqual(items);
    expect(whole).not.toBe(items);
    expect(Object.isFrozen(whole)).toBe(false);
    whole.push(Object.freeze({ i: 7 }));
    expect(items).toHaveLength(7);
    // The elements are the same objects (identity is what the caches key on).
    expect(whole[3]).toBe(items[3]);

    const tail = copyArray(items, 4);
    expect(tail).toEqual([{ i: 4 }, { i: 5 }, { i: 6 }]);
    expect(tail[0]).toBe(items[4]);
    expect(copyArray(items, 7)).toEqual([]);
    expect(copyArray(items, 99)).toEqual([]);
    expect(copyArray([])).toEqual([]);
  });
});

describe("the memo of a host-frozen message", () => {
  it("exists only for what markDeepFrozen marked, and is the same object on every look", () => {
    const marked = markDeepFrozen(deepFreeze({ role: "user", content: "hi" }));
    const memo = frozenMessageMemo(marked);
    expect(memo).toBeDefined();
    expect(frozenMessageMemo(marked)).toBe(memo);
    // Marking again keeps what was derived.
    memo!.contentKey = "k";
    markDeepFrozen(marked);
    expect(frozenMessageMemo(marked)?.contentKey).toBe("k");
    expect(isDeepFrozenByHost(marked)).toBe(true);

    const frozenElsewhere = Object.freeze({ role: "user", content: "hi" });
    expect(frozenMessageMemo(frozenElsewhere)).toBeUndefined();
    expect(frozenMessageMemo(null)).toBeUndefined();
    expect(frozenMessageMemo("text")).toBeUndefined();
  });
});

describe("chains of frozen arrays with elements appended", () => {
  const item = (i: number) => Object.freeze({ i });
  const chained = (base: readonly object[] | undefined, ...added: object[]) => {
    const array = Object.freeze([...(base ?? []), ...added]);
    markAppendedTo(array, base);
    return array;
  };

  it("answer by the chain along one line of appends, and never across a branch", () => {
    const a = chained(undefined, item(0));
    const b = chained(a, item(1), item(2));
    const c = chained(b); // nothing appended: as long as its base
    const d = chained(c, item(3));
    for (const [array, prefix] of [[b, a], [c, b], [d, a], [c, a], [b, c]] as const) {
      expect(inOneAppendChain(array, prefix)).toBe(true);
      expect(startsWithArray(array, prefix)).toBe(true);
    }
    // The shorter one never starts with the longer.
    expect(inOneAppendChain(a, d)).toBe(false);
    expect(startsWithArray(a, d)).toBe(false);
    // A second array appended to b starts a chain of its own: it and d share only b's elements.
    const branch = chained(b, item(9), item(9));
    expect(inOneAppendChain(branch, b)).toBe(false);
    expect(inOneAppendChain(branch, d)).toBe(false);
    expect(inOneAppendChain(d, branch)).toBe(false);
    expect(startsWithArray(branch, b)).toBe(true); // by its elements
    expect(startsWithArray(branch, d)).toBe(false);
    // Arrays appended to the branch chain with it.
    expect(inOneAppendChain(chained(branch, item(10)), branch)).toBe(true);
  });

  it("take the marker's word (the caller built the array from its base), and mark nothing that can still change", () => {
    const base = chained(undefined, item(0), item(1));
    // A caller that marks an array that does not start with its base is believed: the marker, not the elements,
    // answers (which is why only the history cache, which builds each array from its base, marks them).
    const other = Object.freeze([item(5), item(6), item(7)]);
    markAppendedTo(other, base);
    expect(startsWithArray(other, base)).toBe(true);
    // Not frozen: not marked (it may change after the call), compared by its elements.
    const base2 = chained(undefined, item(0), item(1));
    const plain = [...base2, item(2)];
    markAppendedTo(plain, base2);
    expect(inOneAppendChain(plain, base2)).toBe(false);
    expect(startsWithArray(plain, base2)).toBe(true);
    plain[0] = item(3);
    expect(startsWithArray(plain, base2)).toBe(false);
    // Shorter than its base: a chain of its own.
    const shorter = Object.freeze([base[0]!]);
    const fresh = chained(undefined, item(0), item(1), item(2));
    markAppendedTo(shorter, fresh);
    expect(inOneAppendChain(fresh, shorter)).toBe(false);
    // Unmarked arrays: compared by their elements.
    expect(startsWithArray([1, 2, 3], [1, 2])).toBe(true);
    expect(startsWithArray([1, 3, 3], [1, 2])).toBe(false);
    expect(startsWithArray([], [])).toBe(true);
  });
});
