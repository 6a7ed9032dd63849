/** Issue 14's end-to-end target as the overhead benchmark evaluates it (bench/overhead.ts): passes and fails on the figures. */
import { describe, expect, it } from "vitest";
import { endToEndTarget } from "../../bench/overhead.js";

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
