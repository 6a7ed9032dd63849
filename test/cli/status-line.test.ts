import { describe, expect, it } from "vitest";
import { DEFAULT_COLUMNS, fitStatusLine, terminalColumns } from "../../src/cli/status-line.js";

describe("fitStatusLine", () => {
  it("keeps a line that fits, and cuts a long one to the newest parts under the width", () => {
    expect(fitStatusLine("turn 1: ", ["a", "b"], 80)).toBe("turn 1: a > b");
    const states = Array.from({ length: 30 }, (_, i) => `state${i}`);
    const line = fitStatusLine("turn 3: ", states, 80);
    expect(line.length).toBeLessThanOrEqual(79);
    expect(line.startsWith("turn 3: … > ")).toBe(true);
    expect(line.endsWith("state29")).toBe(true);
    expect(fitStatusLine("turn 1: ", ["a", "b", "c"], 14)).toBe("turn 1: … > c");
  });

  it("cuts a single part or prefix wider than the terminal too", () => {
    expect(fitStatusLine("| ", ["x".repeat(200)], 20).length).toBeLessThanOrEqual(19);
    expect(fitStatusLine("p".repeat(50), [], 20).length).toBeLessThanOrEqual(19);
  });

  it("reads the stream's width, else 80", () => {
    expect(terminalColumns({ columns: 120 } as unknown as NodeJS.WritableStream)).toBe(120);
    expect(terminalColumns(undefined)).toBe(DEFAULT_COLUMNS);
  });
});
