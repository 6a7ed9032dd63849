/** Issue 14's end-to-end target as the overhead benchmark evaluates it (bench/overhead.ts): passes and fails on the figures. */
import { describe, expect, it } from "vitest";
import { endToEndTarget } from "../../bench/overhead.js";
import { carryoverBalancedRounds, pairedRatio } from "../../bench/lib.js";

const figures = (noEngine: number, window: number) => ({
  ratio: { noEngine, window },
  diffMs: { noEngine: 1, window: 1 },
  outsideTurnMs: { noEngine: 1, window: 1 },
  durableFloor: { ioMs: 1, shareOfWarmTurn: 0.01 },
  medianMs: { direct: 60, directResume: 61, directDurable: 61, machineNoEngine: 66, machineWindow: 66 },
});

describe("endToEndTarget", () => {
  it("passes only when both runCodexTurn variants are within 1.10x of the bare client", () => {
    expect(endToEndTarget(figures(1.1, 1.09)).pass).toBe(true);
    expect(endToEndTarget(figures(1.101, 1.0)).pass).toBe(false);
    expect(endToEndTarget(figures(1.0, 1.2)).pass).toBe(false);
    expect(endToEndTarget(figures(1.17, 1.21)).detail).toContain("1.17x no engine");
  });
});

describe("pairedRatio", () => {
  it("takes the median of per-round ratios, with a seeded bootstrap interval around it", () => {
    // Drift: both variants slow down together; the ratio within a round stays 1.1.
    const direct = Array.from({ length: 40 }, (_, i) => 50 + i);
    const machine = direct.map((d) => d * 1.1);
    const r = pairedRatio(machine, direct);
    expect(r.pairs).toBe(40);
    expect(r.median).toBeCloseTo(1.1, 10);
    expect(r.ci95[0]).toBeCloseTo(1.1, 10);
    expect(r.ci95[1]).toBeCloseTo(1.1, 10);
    // Noise widens the interval; the same samples give the same interval.
    const noisy = machine.map((m, i) => m * (i % 2 ? 1.05 : 0.97));
    const a = pairedRatio(noisy, direct);
    expect(a.ci95[0]).toBeLessThan(a.median);
    expect(a.ci95[1]).toBeGreaterThan(a.median);
    expect(pairedRatio(noisy, direct)).toEqual(a);
  });

  it("is reported next to the target's ratio of medians", () => {
    const paired = { median: 1.12, ci95: [1.09, 1.15] as [number, number], pairs: 60 };
    const t = endToEndTarget({ ...figures(1.12, 1.15), pairedRatio: { noEngine: paired, window: { ...paired, median: 1.16 } } });
    expect(t.pass).toBe(false);
    expect(t.detail).toContain("round by round 1.12x (95% CI 1.09-1.15) no engine, 1.16x (1.09-1.15) window");
  });
});

describe("carryoverBalancedRounds", () => {
  it("puts every variant right after every other one exactly once per cycle, each round running each variant once", () => {
    for (let n = 2; n <= 6; n++) {
      const rounds = carryoverBalancedRounds(n);
      expect(rounds).toHaveLength(n - 1);
      for (const round of rounds) expect([...round].sort()).toEqual(Array.from({ length: n }, (_, i) => i));
      // Two cycles back to back: the step from the last round to the first counts too.
      const sequence = [...rounds, ...rounds].flat();
      const follows = new Map<string, number>();
      for (let k = 1; k <= rounds.flat().length; k++) {
        const pair = `${sequence[k - 1]}>${sequence[k]}`;
        follows.set(pair, (follows.get(pair) ?? 0) + 1);
      }
      expect(follows.size).toBe(n * (n - 1));
      expect([...follows.values()].every((c) => c === 1)).toBe(true);
      expect([...follows.keys()].some((p) => p.split(">")[0] === p.split(">")[1])).toBe(false);
    }
  });

  it("refuses a size it does not search", () => {
    expect(() => carryoverBalancedRounds(1)).toThrow(/from 2 to 6, got 1/);
    expect(() => carryoverBalancedRounds(7)).toThrow(RangeError);
  });
});
