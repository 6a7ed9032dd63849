import { describe, expect, it } from "vitest";
import {
  canMaintainAfterCompaction,
  compactionMaintenanceSkipReason,
  engineCompactionRequest,
  engineOwnsCompaction,
  hasThreadBinding,
  nativeStatusFromOutput,
  settleCompaction,
  type CompactionEngineFacts,
  type SettleCompactionFacts,
} from "../../machines/compaction.rules.js";

const owning: CompactionEngineFacts = { active: true, id: "lcm", ownsCompaction: true, hasMaintain: true };
const plain: CompactionEngineFacts = { active: true, id: "plain", ownsCompaction: false, hasMaintain: true };
const none: CompactionEngineFacts = { active: false, id: "none", ownsCompaction: true, hasMaintain: true };

function facts(over: Partial<SettleCompactionFacts>): SettleCompactionFacts {
  return {
    input: { sessionId: "s", sessionFile: "f", trigger: "manual", engine: owning, nativeTimeoutMs: 1000 },
    binding: { threadId: "thr", lastUsage: { inputTokens: 500, totalTokens: 600 } },
    aborted: false,
    outcomes: { engineCompact: "ran", maintenance: "ran", bindingMark: "marked" },
    trace: [],
    warnings: [],
    ...over,
  };
}

describe("compaction rules", () => {
  it("only an active engine with ownsCompaction is primary", () => {
    expect(engineOwnsCompaction(owning)).toBe(true);
    expect(engineOwnsCompaction(plain)).toBe(false);
    expect(engineOwnsCompaction(none)).toBe(false);
  });

  it("a binding needs a non-empty thread id", () => {
    expect(hasThreadBinding(null)).toBe(false);
    expect(hasThreadBinding({})).toBe(false);
    expect(hasThreadBinding({ threadId: "" })).toBe(false);
    expect(hasThreadBinding({ threadId: "t" })).toBe(true);
  });

  it("maps triggers to engine compact requests", () => {
    expect(engineCompactionRequest("manual")).toEqual({ force: true, compactionTarget: "threshold" });
    expect(engineCompactionRequest("budget", 42)).toEqual({ compactionTarget: "budget", currentTokenCount: 42 });
  });

  it("maintenance needs an engine with maintain and a successful primary", () => {
    expect(canMaintainAfterCompaction(owning, true)).toBe(true);
    expect(compactionMaintenanceSkipReason(owning, false)).toBe("skipped:compactionFailed");
    expect(compactionMaintenanceSkipReason({ ...owning, hasMaintain: false }, true)).toBe("skipped:noMaintain");
    expect(compactionMaintenanceSkipReason(none, true)).toBe("skipped:noEngine");
  });

  it("keeps only defined native fields", () => {
    expect(nativeStatusFromOutput({ ok: true, threadId: "t", turnId: "u" })).toEqual({ ok: true, threadId: "t", turnId: "u" });
  });

  it("engine result is primary; native status lands in details; non-object details are kept", () => {
    const out = settleCompaction(
      facts({
        engineResult: { ok: true, compacted: true, result: { summary: "S", tokensBefore: 10, tokensAfter: 5, details: [1, 2] } },
        native: { ok: false, reason: "timeout", threadId: "thr" },
      }),
    );
    expect(out).toMatchObject({ ok: true, compacted: true, primary: "engine" });
    expect(out.reason).toBeUndefined();
    expect(out.result).toEqual({
      summary: "S",
      tokensBefore: 10,
      tokensAfter: 5,
      details: { engineDetails: [1, 2], codexNativeCompaction: { ok: false, reason: "timeout", threadId: "thr" } },
    });
  });

  it("an engine error is reported by name; an abort wins over everything", () => {
    const failed = settleCompaction(facts({ engineError: "db locked", native: { ok: true, threadId: "thr" } }));
    expect(failed).toMatchObject({ ok: false, compacted: false, reason: "engineCompactionFailed: db locked" });
    expect(failed.result?.tokensBefore).toBe(500);
    const aborted = settleCompaction(facts({ aborted: true, engineResult: { ok: true, compacted: true } }));
    expect(aborted).toMatchObject({ ok: false, compacted: true, reason: "aborted", native: { ok: false, reason: "aborted" } });
  });

  it("without an owning engine the native round is the result", () => {
    const input = { sessionId: "s", sessionFile: "f", trigger: "manual" as const, engine: plain, nativeTimeoutMs: 1 };
    expect(settleCompaction(facts({ input, native: { ok: true, threadId: "thr" } }))).toMatchObject({
      ok: true,
      compacted: true,
      primary: "native",
      result: { tokensBefore: 500, details: { codexNativeCompaction: { ok: true, threadId: "thr" } } },
    });
    expect(settleCompaction(facts({ input, binding: null, native: { ok: false, reason: "noThreadBinding" } }))).toMatchObject({
      ok: false,
      reason: "noThreadBinding",
      result: { tokensBefore: 0 },
    });
  });
});
