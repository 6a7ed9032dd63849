/**
 * The machine-only overhead benchmark (bench/machine-only.ts) drives the real turn machine through every lifecycle
 * state with its instant actors and writes its lifecycle log lines: otherwise its figure would measure a shortcut.
 */
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { EXPECTED_TRACE, instantTurnMachine, machineInput, measureMachineOnly, runMachineTurn } from "../../bench/machine-only.js";
import { createLogger } from "../../src/log/logger.js";

describe("machine-only benchmark driver", () => {
  it("completes through every expected state and logs the lifecycle", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const logger = createLogger({ level: "info" }, sink);
    const bind = () => instantTurnMachine(logger);
    for (const kind of ["noEngine", "fullEngine"] as const) {
      lines.length = 0;
      const { output, ms } = await runMachineTurn(bind, machineInput(kind), logger);
      expect(output.status).toBe("completed");
      expect(output.trace).toEqual(EXPECTED_TRACE[kind]);
      expect(ms).toBeGreaterThan(0);
      const events = lines.map((l) => (JSON.parse(l) as { event: string }).event);
      expect(events).toContain("turn accepted");
      expect(events).toContain("finalize completed");
      expect(events[events.length - 1]).toBe("turn settled");
      if (kind === "fullEngine") expect(events).toEqual(expect.arrayContaining(["bootstrap completed", "assemble applied", "maintenance completed"]));
    }
  });

  it("measures both inputs", async () => {
    const m = await measureMachineOnly({ turns: 20, warmup: 2 });
    expect(m.noEngineMs).toBeGreaterThan(0);
    expect(m.fullEngineMs).toBeGreaterThan(0);
    // One line per lifecycle step, the session lock included.
    expect(m.logLinesPerTurn).toEqual({ noEngine: 6, fullEngine: 9 });
  });
});
