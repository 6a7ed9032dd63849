import { describe, expect, it } from "vitest";
import { createLruMap } from "../src/lru-map.js";

describe("createLruMap", () => {
  it("holds at most its bound, dropping the least recently used (get and set both count as a use)", () => {
    const lru = createLruMap<string, number>(3);
    lru.set("a", 1);
    lru.set("b", 2);
    lru.set("c", 3);
    expect(lru.get("a")).toBe(1);
    lru.set("d", 4);
    expect(lru.keys()).toEqual(["c", "a", "d"]);
    expect(lru.get("b")).toBeUndefined();
    lru.set("c", 30);
    lru.set("e", 5);
    expect(lru.keys()).toEqual(["d", "c", "e"]);
    expect(lru.size).toBe(3);
    expect(lru.delete("c")).toBe(true);
    expect(lru.keys()).toEqual(["d", "e"]);
  });

  it("refuses a bound that is not a positive whole number", () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) expect(() => createLruMap(bad)).toThrow(RangeError);
  });
});
