/** The freeze registry's helpers: what the history cache hands out, and how the host copies its frozen arrays. */
import { describe, expect, it } from "vitest";
import { copyArray, deepFreeze, frozenMessageMemo, isDeepFrozenByHost, markDeepFrozen } from "../../src/transcript/freeze.js";

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
