/** OpenClaw's before_agent_finalize rule over several handlers (its own test cases, plus the retry budget). */
import { describe, expect, it } from "vitest";
import { decideFinalize, type FinalizeRetryBudget } from "../../src/openclaw/finalize-decision.js";

describe("decideFinalize", () => {
  it("joins revision reasons; the first valid retry instruction is added; malformed or empty ones are skipped", () => {
    const budget: FinalizeRetryBudget = new Map();
    const results = [
      { action: "revise", reason: "empty", retry: { instruction: "   ", idempotencyKey: "empty" } },
      { action: "revise", reason: "malformed", retry: { instruction: 123, idempotencyKey: "bad" } },
      { action: "revise", reason: "artifacts", retry: { instruction: " regenerate artifacts ", idempotencyKey: "artifacts", maxAttempts: 1 } },
      { action: "revise", reason: "tests", retry: { instruction: "rerun tests", idempotencyKey: "tests", maxAttempts: 1 } },
    ];
    expect(decideFinalize(results, "turn-1", budget)).toEqual({ action: "revise", reason: "empty\n\nmalformed\n\nartifacts\n\ntests\n\nregenerate artifacts" });
    // The artifacts retry is spent for this turn: the next candidate is asked for, then none is left.
    expect(decideFinalize(results, "turn-1", budget)).toEqual({ action: "revise", reason: "empty\n\nmalformed\n\nartifacts\n\ntests\n\nrerun tests" });
    expect(decideFinalize(results, "turn-1", budget)).toEqual({ action: "continue" });
    // Another turn has its own budget.
    expect(decideFinalize(results, "turn-2", budget).action).toBe("revise");
  });

  it("lets finalize override revise decisions", () => {
    expect(decideFinalize([{ action: "revise", reason: "keep going" }, { action: "finalize", reason: "enough" }], "t", new Map())).toEqual({ action: "finalize", reason: "enough" });
  });

  it("a revision without a reason or retry is no revision; nothing asked is continue", () => {
    expect(decideFinalize([{ action: "revise", reason: "  " }], "t", new Map())).toEqual({ action: "continue" });
    expect(decideFinalize([undefined, { action: "continue" }, "x"], "t", new Map())).toEqual({ action: "continue" });
    expect(decideFinalize([{ action: "revise", reason: "cite it" }], "t", new Map())).toEqual({ action: "revise", reason: "cite it" });
  });

  it("honours maxAttempts per key and keeps at most 256 runs", () => {
    const budget: FinalizeRetryBudget = new Map();
    const r = [{ action: "revise", retry: { instruction: "again", maxAttempts: 2.7 } }];
    expect(decideFinalize(r, "t", budget)).toEqual({ action: "revise", reason: "again" });
    expect(decideFinalize(r, "t", budget)).toEqual({ action: "revise", reason: "again" });
    expect(decideFinalize(r, "t", budget)).toEqual({ action: "continue" });
    for (let i = 0; i < 300; i++) decideFinalize(r, `run-${i}`, budget);
    expect(budget.size).toBe(256);
  });
});
