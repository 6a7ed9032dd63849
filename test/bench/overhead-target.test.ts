/** Issue 14's end-to-end target as the overhead benchmark evaluates it (bench/overhead.ts): passes and fails on the figures. */
import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { endToEndTarget, endToEndTargetOverRuns, formatOverheadRuns, summarizeOverheadRuns } from "../../bench/overhead.js";
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

describe("summarizeOverheadRuns and endToEndTargetOverRuns", () => {
  const run = (noEngine: number, window: number, direct = 60) => ({
    ...figures(noEngine, window),
    medianMs: { ...figures(noEngine, window).medianMs, direct },
    pairedRatio: {
      noEngine: { median: noEngine + 0.001, ci95: [1, 1.2] as [number, number], pairs: 200 },
      window: { median: window + 0.001, ci95: [1, 1.2] as [number, number], pairs: 200 },
    },
  });

  it("judges the target on each engine's median run, and counts the runs that passed on both", () => {
    // Window ratios 1.12, 1.09, 1.095: the median run (1.095) passes though one run failed.
    const s = summarizeOverheadRuns([run(1.08, 1.12, 50), run(1.11, 1.09, 55), run(1.09, 1.095, 52)]);
    expect(s.medianRatio).toEqual({ noEngine: 1.09, window: 1.095 });
    expect(s.range).toEqual({ noEngine: [1.08, 1.11], window: [1.09, 1.12] });
    expect(s.passingRuns).toBe(1);
    expect(s.runs[1]).toEqual({ directMs: 55, ratio: { noEngine: 1.11, window: 1.09 }, paired: { noEngine: 1.111, window: 1.091 } });
    const t = endToEndTargetOverRuns(s);
    expect(t.pass).toBe(true);
    expect(t.name).toContain("median of 3 runs");
    expect(t.detail).toContain("1.095x window (runs: 1.12x, 1.09x, 1.095x)");
    expect(t.detail).toContain("1 of 3 runs within the target on both");
    expect(formatOverheadRuns(s)).toContain("over 3 runs");
  });

  it("fails when either engine's median run is over 1.10x, with an even number of runs averaging the middle two", () => {
    const s = summarizeOverheadRuns([run(1.05, 1.09), run(1.06, 1.13), run(1.07, 1.12), run(1.08, 1.08)]);
    expect(s.medianRatio).toEqual({ noEngine: 1.065, window: 1.105 });
    expect(endToEndTargetOverRuns(s).pass).toBe(false);
    expect(() => summarizeOverheadRuns([])).toThrow(/no runs/);
  });

  it("bench/run.ts refuses a --repeat that is not a whole number of runs from 1 to 20, before running anything", () => {
    const runTs = fileURLToPath(new URL("../../bench/run.ts", import.meta.url));
    for (const bad of ["0", "21", "2.5", "x"]) {
      const r = spawnSync(process.execPath, ["--import", "tsx", runTs, "--only", "overhead", "--repeat", bad], { encoding: "utf8", timeout: 60_000 });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(`--repeat: expected a whole number of runs from 1 to 20, got "${bad}"`);
    }
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
