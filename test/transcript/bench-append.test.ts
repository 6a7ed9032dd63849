import { promises as fsp } from "node:fs";
import os from "node:os";
import { describe, expect, it } from "vitest";
import { measureAppendCost, measureAppendCostDetailed } from "../../bench/append-cost.js";

// Figures only (no timing assertions here: timing belongs in bench/). This checks the helper works and cleans up.
describe("measureAppendCost", () => {
  it("returns positive figures for a seeded file and leaves no temp directory behind", async () => {
    const before = (await fsp.readdir(os.tmpdir())).filter((n) => n.startsWith("ctm-bench-append-"));
    const f = await measureAppendCostDetailed(50, 3);
    expect(f.existingEntries).toBe(50);
    expect(f.samples).toBe(3);
    expect(f.medianUs).toBeGreaterThan(0);
    expect(f.p90Us).toBeGreaterThanOrEqual(f.medianUs);
    expect(f.coldUs).toBeGreaterThan(0);
    // header + 50 seeded entries + 4 mirrored turns of 3 messages, each a full JSON line.
    expect(f.fileBytes).toBeGreaterThan(50 * 100);
    expect(await measureAppendCost(10, 1)).toBeGreaterThan(0);
    const after = (await fsp.readdir(os.tmpdir())).filter((n) => n.startsWith("ctm-bench-append-"));
    expect(after).toEqual(before);
  });

  it("rejects nonsense arguments", async () => {
    await expect(measureAppendCost(-1, 3)).rejects.toThrow(RangeError);
    await expect(measureAppendCost(10, 0)).rejects.toThrow(RangeError);
  });
});
