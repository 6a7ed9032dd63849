/**
 * `TurnRunner`'s interrupt when Codex refuses it: codex-cli 0.171.0 answers "no active turn to interrupt" for about
 * 100 ms after accepting a turn that starts right after the thread's previous one ended. The real-binary case is in
 * test/integration/codex-basic.test.ts ("interrupting a turn the moment Codex accepted it"); this covers the retries'
 * bounds with fake timers: sent again until Codex takes it, and never once the turn ended.
 */
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { CodexAppServerError } from "../../src/codex/errors.js";
import { TurnRun } from "../../src/codex/turn-run.js";
import { TurnRunner } from "../../src/codex/turn-runner.js";

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** A runner whose turn/interrupt Codex refuses `refusals` times, then takes; and one running turn of "t". */
function setup(refusals: number) {
  const interrupts: number[] = [];
  let refused = 0;
  const runner = new TurnRunner({
    logger: pino({ level: "silent" }),
    rpcRequest: async (method) => {
      if (method !== "turn/interrupt") return {};
      interrupts.push(Date.now());
      if (refused < refusals) {
        refused++;
        throw new CodexAppServerError("RPC_ERROR", "codex app-server rejected turn/interrupt: no active turn to interrupt", { method: "turn/interrupt" });
      }
      return {};
    },
    liveGeneration: () => 1,
    requestTimeoutMs: 1_000,
    idleInterruptGraceMs: 1_000,
  });
  const run = new TurnRun({ threadId: "t", generation: 1, originalPrompt: "p", idleTimeoutMs: 60_000, model: undefined, provider: undefined, options: {} as never });
  run.state = "running";
  run.turnId = "turn-1";
  (runner as unknown as { runs: Map<string, TurnRun> }).runs.set("t", run);
  const handle = runner.running("t", "turn-1")!;
  return { runner, run, handle, interrupts };
}

describe("an interrupt Codex refuses", () => {
  it("is sent again every 100 ms until Codex takes it, then no more", async () => {
    const { handle, interrupts } = setup(2);
    const started = Date.now();
    await handle.interrupt({ graceMs: 10_000 });
    expect(interrupts).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(interrupts).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(100);
    expect(interrupts).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(interrupts.map((t) => t - started)).toEqual([0, 100, 200]);
  });

  it("is not sent again once the turn ended, nor after the grace ended it", async () => {
    const ended = setup(Number.POSITIVE_INFINITY);
    await ended.handle.interrupt({ graceMs: 10_000 });
    ended.runner.finish(ended.run);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(ended.interrupts).toHaveLength(1);

    const graced = setup(Number.POSITIVE_INFINITY);
    await graced.handle.interrupt({ graceMs: 450 });
    await vi.advanceTimersByTimeAsync(2_000);
    // 0, 100, 200, 300, 400 ms; at 450 ms the grace ends the turn as timedOut and the next try never comes.
    expect(graced.interrupts).toHaveLength(5);
    expect(graced.run.state).toBe("done");
  });

  it("a handle is only given for the thread's turn that runs", () => {
    const { runner, run } = setup(0);
    expect(runner.running("t", "another-turn")).toBeUndefined();
    expect(runner.running("other-thread", "turn-1")).toBeUndefined();
    runner.finish(run);
    expect(runner.running("t", "turn-1")).toBeUndefined();
  });
});
