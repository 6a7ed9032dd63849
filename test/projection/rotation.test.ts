/** The rent-or-buy rotation rule. */
import { describe, expect, it } from "vitest";
import { decideRotation, DEFAULT_CACHED_PRICE_RATIO } from "../../src/projection/rotation.js";

describe("decideRotation", () => {
  const base = { viewTokens: 600, toleranceTokens: 8_000 };

  it("never rotates without stale tokens", () => {
    expect(decideRotation({ ...base, staleTokens: 0, accruedStaleCost: 10_000 })).toEqual({ rotate: false, accruedStaleCost: 10_000 });
  });

  it("rents (accrues ratio x stale per turn) until the rent paid reaches the view's uncached price, then buys", () => {
    expect(DEFAULT_CACHED_PRICE_RATIO).toBe(0.1);
    let accrued = 0;
    const turns: boolean[] = [];
    for (let turn = 0; turn < 10; turn++) {
      const d = decideRotation({ ...base, staleTokens: 1_000, accruedStaleCost: accrued });
      turns.push(d.rotate);
      accrued = d.accruedStaleCost;
      if (d.rotate) expect(d).toEqual({ rotate: true, reason: "staleCost", accruedStaleCost: 0 });
    }
    // 100 per turn: 100..500 rent, the 6th turn reaches 600.
    expect(turns).toEqual([false, false, false, false, false, true, false, false, false, false]);
  });

  it("uses the configured price ratio", () => {
    expect(decideRotation({ ...base, staleTokens: 600, accruedStaleCost: 0, cachedPriceRatio: 1 }).rotate).toBe(true);
    expect(decideRotation({ ...base, staleTokens: 600, accruedStaleCost: 0, cachedPriceRatio: 0.5 })).toEqual({ rotate: false, accruedStaleCost: 300 });
    expect(() => decideRotation({ ...base, staleTokens: 1, accruedStaleCost: 0, cachedPriceRatio: 0 })).toThrow(/cachedPriceRatio/);
  });

  it("rotates at once when stale + view exceed the budget, or stale exceeds the tolerance", () => {
    expect(decideRotation({ viewTokens: 900, staleTokens: 101, accruedStaleCost: 0, tokenBudget: 1_000, toleranceTokens: 250 })).toMatchObject({
      rotate: true,
      reason: "divergence",
    });
    expect(decideRotation({ viewTokens: 900, staleTokens: 100, accruedStaleCost: 0, tokenBudget: 1_000, toleranceTokens: 250 }).rotate).toBe(false);
    expect(decideRotation({ viewTokens: 100, staleTokens: 251, accruedStaleCost: 0, tokenBudget: 1_000, toleranceTokens: 250 })).toMatchObject({ reason: "divergence" });
    expect(decideRotation({ viewTokens: 10_000, staleTokens: 301, accruedStaleCost: 0, toleranceTokens: 300 })).toMatchObject({ reason: "divergence" });
  });
});
