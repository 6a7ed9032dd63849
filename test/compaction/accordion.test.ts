import { describe, expect, it, vi } from "vitest";
import { pino } from "pino";
import {
  evaluateAccordion,
  parseAccordionConfig,
  runAccordionCompaction,
  usesInterceptCompaction,
  type AccordionConfig,
} from "../../src/compaction/accordion.js";
import { CompactionError } from "../../src/compaction/errors.js";
import type { CompactResult, ContextEngine, InterceptCompactionResult } from "../../src/context-engine/types.js";
import { FAKE_SESSION_FILE } from "./harness.js";

const defaults = parseAccordionConfig({});
const usage = (totalTokens: number, modelContextWindow?: number) => ({
  inputTokens: totalTokens - 100,
  totalTokens,
  ...(modelContextWindow !== undefined ? { modelContextWindow } : {}),
});

describe("accordion config", () => {
  it("defaults: 90% trigger, 35% target, enabled follows compaction ownership", () => {
    expect(defaults).toEqual({ contextThreshold: 0.9, compactionTargetFraction: 0.35 });
    expect(parseAccordionConfig(undefined)).toEqual(defaults);
    expect(parseAccordionConfig({ enabled: false, contextThreshold: 1, compactionTargetFraction: 0.05 })).toEqual({
      enabled: false,
      contextThreshold: 1,
      compactionTargetFraction: 0.05,
    });
    expect(parseAccordionConfig({ compactionTargetFraction: 1 }).compactionTargetFraction).toBe(1);
  });

  it("rejects a target fraction below the 0.05 floor with a message naming field and value", () => {
    let caught: unknown;
    try {
      parseAccordionConfig({ compactionTargetFraction: 0.01 });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(CompactionError);
    expect(caught).toMatchObject({
      code: "INVALID_ACCORDION_CONFIG",
      field: "compactionTargetFraction",
      message: "compactionTargetFraction must be within [0.05, 1], got 0.01",
    });
  });

  it.each([
    [{ compactionTargetFraction: 0.0499 }, "compactionTargetFraction", "compactionTargetFraction must be within [0.05, 1], got 0.0499"],
    [{ compactionTargetFraction: 1.01 }, "compactionTargetFraction", "compactionTargetFraction must be within [0.05, 1], got 1.01"],
    [{ compactionTargetFraction: "0.3" }, "compactionTargetFraction", 'compactionTargetFraction must be a finite number, got "0.3"'],
    [{ compactionTargetFraction: Number.NaN }, "compactionTargetFraction", "compactionTargetFraction must be a finite number, got NaN"],
    [{ contextThreshold: 0 }, "contextThreshold", "contextThreshold must be within (0, 1], got 0"],
    [{ contextThreshold: 1.2 }, "contextThreshold", "contextThreshold must be within (0, 1], got 1.2"],
    [{ enabled: "yes" }, "enabled", 'enabled must be a boolean, got "yes"'],
    [{ threshold: 0.9 }, "threshold", "unknown accordion config key `threshold`"],
  ])("rejects %j", (input, field, message) => {
    expect(() => parseAccordionConfig(input)).toThrow(message);
    expect(() => parseAccordionConfig(input)).toThrow(expect.objectContaining({ field, code: "INVALID_ACCORDION_CONFIG" }));
  });
});

describe("evaluateAccordion", () => {
  const owning = { config: defaults, engineOwnsCompaction: true };

  it("compacts at exactly 90% of the window, not at 89.99%", () => {
    expect(evaluateAccordion({ ...owning, lastUsage: usage(8_999, 10_000) })).toEqual({
      compact: false,
      ratio: 0.8999,
      reason: "belowThreshold",
    });
    expect(evaluateAccordion({ ...owning, lastUsage: usage(9_000, 10_000) })).toEqual({
      compact: true,
      ratio: 0.9,
      reason: "thresholdReached",
    });
    // A real Codex window (200000 x 95%): exactly 90% compacts, one token less does not.
    expect(evaluateAccordion({ ...owning, lastUsage: usage(171_000, 190_000) }).compact).toBe(true);
    expect(evaluateAccordion({ ...owning, lastUsage: usage(170_999, 190_000) }).compact).toBe(false);
  });

  it("uses total tokens, not input tokens", () => {
    const lastUsage = { inputTokens: 9_500, totalTokens: 8_000, modelContextWindow: 10_000 };
    expect(evaluateAccordion({ ...owning, lastUsage }).compact).toBe(false);
  });

  it("no usage known -> no compaction; window falls back to contextWindow", () => {
    expect(evaluateAccordion({ ...owning })).toEqual({ compact: false, reason: "noUsage" });
    expect(evaluateAccordion({ ...owning, lastUsage: null })).toEqual({ compact: false, reason: "noUsage" });
    expect(evaluateAccordion({ ...owning, lastUsage: usage(9_500) })).toEqual({ compact: false, reason: "noContextWindow" });
    expect(evaluateAccordion({ ...owning, lastUsage: usage(9_500), contextWindow: 10_000 })).toMatchObject({
      compact: true,
      ratio: 0.95,
    });
    // The window Codex reports wins over the configured one.
    expect(evaluateAccordion({ ...owning, lastUsage: usage(9_500, 20_000), contextWindow: 10_000 }).compact).toBe(false);
  });

  it("is enabled by default only for engines that own compaction; an explicit setting wins", () => {
    const lastUsage = usage(9_900, 10_000);
    expect(evaluateAccordion({ config: defaults, engineOwnsCompaction: false, lastUsage })).toEqual({
      compact: false,
      reason: "disabled",
    });
    expect(evaluateAccordion({ config: { ...defaults, enabled: true }, engineOwnsCompaction: false, lastUsage }).compact).toBe(
      true,
    );
    expect(evaluateAccordion({ config: { ...defaults, enabled: false }, engineOwnsCompaction: true, lastUsage }).compact).toBe(
      false,
    );
  });

  it("honours a custom threshold", () => {
    const config: AccordionConfig = parseAccordionConfig({ contextThreshold: 0.5 });
    expect(evaluateAccordion({ config, engineOwnsCompaction: true, lastUsage: usage(5_000, 10_000) }).compact).toBe(true);
    expect(evaluateAccordion({ config, engineOwnsCompaction: true, lastUsage: usage(4_999, 10_000) }).compact).toBe(false);
  });
});

function engineWith(o: {
  intercept?: () => Promise<InterceptCompactionResult>;
  compact?: () => Promise<CompactResult>;
  interceptsCompaction?: boolean;
}) {
  const compact = vi.fn<ContextEngine["compact"]>(
    o.compact ?? (async () => ({ ok: true, compacted: true, result: { tokensBefore: 180_000, tokensAfter: 70_000 } })),
  );
  const interceptCompaction = o.intercept ? vi.fn(o.intercept) : undefined;
  const engine: ContextEngine = {
    info: {
      id: "lcm",
      name: "lossless",
      ownsCompaction: true,
      ...(o.interceptsCompaction !== undefined ? { interceptsCompaction: o.interceptsCompaction } : {}),
    },
    ingest: async () => ({ ingested: true }),
    assemble: async ({ messages }) => ({ messages, estimatedTokens: 0 }),
    compact,
    ...(interceptCompaction ? { interceptCompaction } : {}),
  };
  return { engine, compact, interceptCompaction };
}

const runBase = {
  sessionId: "s1",
  sessionKey: "agent:main",
  sessionFile: FAKE_SESSION_FILE,
  tokenBudget: 200_000,
  currentTokenCount: 180_000,
  config: defaults,
};

describe("runAccordionCompaction", () => {
  it("uses interceptCompaction when it handles the compaction", async () => {
    const { engine, compact, interceptCompaction } = engineWith({
      intercept: async () => ({ handled: true, summary: "S", firstKeptEntryId: "e1", tokensBefore: 181_000, tokensAfter: 60_000 }),
    });
    const signal = new AbortController().signal;
    const out = await runAccordionCompaction({ ...runBase, engine, signal });
    // The summary and first kept entry travel on, for the transcript's compaction entry.
    expect(out).toEqual({ compacted: true, tokensBefore: 181_000, tokensAfter: 60_000, via: "intercept", summary: "S", firstKeptEntryId: "e1" });
    expect(compact).not.toHaveBeenCalled();
    expect(interceptCompaction).toHaveBeenCalledWith({
      sessionId: "s1",
      sessionKey: "agent:main",
      sessionFile: FAKE_SESSION_FILE,
      tokenBudget: 200_000,
      currentTokenCount: 180_000,
      firstKeptEntryId: "",
      tokensBefore: 180_000,
      trigger: "in-attempt-auto",
      signal,
    });
  });

  it.each([
    ["declines", async (): Promise<InterceptCompactionResult> => ({ handled: false, reason: "no-target-fraction" })],
    [
      "throws",
      async (): Promise<InterceptCompactionResult> => {
        throw new Error("contract violation");
      },
    ],
  ])("falls back to compact() with the accordion target when interceptCompaction %s", async (_label, intercept) => {
    const { engine, compact, interceptCompaction } = engineWith({ intercept });
    const out = await runAccordionCompaction({ ...runBase, engine, config: parseAccordionConfig({ compactionTargetFraction: 0.4 }) });
    expect(interceptCompaction).toHaveBeenCalledTimes(1);
    expect(compact).toHaveBeenCalledTimes(1);
    expect(compact.mock.calls[0]![0]).toMatchObject({
      sessionId: "s1",
      sessionFile: FAKE_SESSION_FILE,
      force: true,
      compactionTarget: "threshold",
      compactionTargetFraction: 0.4,
      tokenBudget: 200_000,
      currentTokenCount: 180_000,
    });
    expect(out).toEqual({ compacted: true, tokensBefore: 180_000, tokensAfter: 70_000, via: "compact" });
  });

  it("lossless-claw's { ok: false, compacted: true } ('compacted, still over target') counts as compacted, with its reason kept", async () => {
    const { engine, compact } = engineWith({
      compact: async () => ({ ok: false, compacted: true, reason: "compacted but still over target", result: { tokensBefore: 4_645, tokensAfter: 4_552 } }),
    });
    const runtimeContext = { provider: "codex", model: "gpt-test" };
    const sessionTarget = { sessionId: "s1", sessionKey: "agent:main", storePath: FAKE_SESSION_FILE };
    const out = await runAccordionCompaction({ ...runBase, engine, runtimeContext, sessionTarget });
    expect(out).toEqual({ compacted: true, stillOverTarget: true, reason: "compacted but still over target", tokensBefore: 4_645, tokensAfter: 4_552, via: "compact" });
    // What lossless-claw 1.x needs to summarize in compact(): the session target and the runtime's parameters.
    expect(compact.mock.calls[0]![0]).toMatchObject({ sessionTarget, legacyParams: { provider: "codex", model: "gpt-test", tokenBudget: 200_000, currentTokenCount: 180_000 } });
  });

  it("calls compact() directly when the engine has no interceptCompaction", async () => {
    const { engine, compact } = engineWith({});
    const out = await runAccordionCompaction({ ...runBase, engine });
    expect(out.via).toBe("compact");
    expect(compact.mock.calls[0]![0]).toMatchObject({ compactionTargetFraction: 0.35, force: true });
  });

  it("never throws for engine failures", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "info" }, { write: (s: string) => void lines.push(s) });
    const { engine } = engineWith({
      compact: async () => {
        throw new Error("SECRET-TRANSCRIPT-TEXT");
      },
    });
    const out = await runAccordionCompaction({ ...runBase, engine, logger });
    expect(out).toEqual({ compacted: false, tokensBefore: 180_000, via: "compact", reason: "compactFailed" });
    expect(lines.join("")).not.toContain("SECRET-TRANSCRIPT-TEXT");
    expect(lines.map((l) => JSON.parse(l).event)).toEqual(["accordion compaction failed"]);
  });

  it("bounds each engine call: a hanging interceptCompaction is declined, a hanging compact() fails", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
    const never = () => new Promise<never>(() => undefined);
    const { engine, compact, interceptCompaction } = engineWith({ intercept: never, compact: never });
    const started = Date.now();
    const out = await runAccordionCompaction({ ...runBase, engine, logger, timeoutMs: 50 });
    expect(out).toEqual({ compacted: false, tokensBefore: 180_000, via: "compact", reason: "compactFailed" });
    expect(interceptCompaction).toHaveBeenCalledTimes(1);
    expect(compact).toHaveBeenCalledTimes(1);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(lines.find((l) => l.event === "accordion intercept declined")).toMatchObject({ interceptReason: "threw: ENGINE_CALL_TIMEOUT" });
    expect(lines.find((l) => l.event === "accordion compaction failed")).toMatchObject({ err: "ENGINE_CALL_TIMEOUT" });
  });

  it.each([
    ["null", null, "(result): Invalid input: expected object, received null"],
    ['{ ok: "yes" }', { ok: "yes" }, "ok: Invalid input: expected boolean, received string"],
    ["compacted not a boolean", { ok: true, compacted: "yes", result: { tokensBefore: 1 } }, "compacted: Invalid input: expected boolean, received string"],
    ["tokensBefore not a number", { ok: true, compacted: true, result: { tokensBefore: "many" } }, "result.tokensBefore: Invalid input: expected number, received string"],
  ])("a malformed compact() result (%s) is a typed failure with a warning, never a crash", async (_label, bad, detail) => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
    const { engine } = engineWith({ compact: (async () => bad) as unknown as () => Promise<CompactResult> });
    const out = await runAccordionCompaction({ ...runBase, engine, logger });
    expect(out).toEqual({
      compacted: false,
      tokensBefore: 180_000,
      via: "compact",
      reason: "compactResultInvalid",
      error: { code: "COMPACT_RESULT_INVALID", message: `context engine compact() returned an invalid result: ${detail}` },
    });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, event: "accordion compaction failed", err: "COMPACT_RESULT_INVALID", detail });
  });

  describe("info.interceptsCompaction", () => {
    const handled = async (): Promise<InterceptCompactionResult> => ({ handled: true, summary: "S", firstKeptEntryId: "e1", tokensBefore: 181_000, tokensAfter: 60_000 });

    it.each([[undefined], [true]])("interceptsCompaction %s: interceptCompaction is called (it exists)", async (flag) => {
      const { engine, compact, interceptCompaction } = engineWith({ intercept: handled, ...(flag !== undefined ? { interceptsCompaction: flag } : {}) });
      expect(usesInterceptCompaction(engine)).toBe(true);
      const out = await runAccordionCompaction({ ...runBase, engine });
      expect(interceptCompaction).toHaveBeenCalledTimes(1);
      expect(compact).not.toHaveBeenCalled();
      expect(out.via).toBe("intercept");
    });

    it("interceptsCompaction: false opts out: interceptCompaction is never called, compact() runs", async () => {
      const lines: Array<Record<string, unknown>> = [];
      const logger = pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
      const { engine, compact, interceptCompaction } = engineWith({ intercept: handled, interceptsCompaction: false });
      expect(usesInterceptCompaction(engine)).toBe(false);
      const out = await runAccordionCompaction({ ...runBase, engine, logger });
      expect(interceptCompaction).not.toHaveBeenCalled();
      expect(compact).toHaveBeenCalledTimes(1);
      expect(out).toEqual({ compacted: true, tokensBefore: 180_000, tokensAfter: 70_000, via: "compact" });
      expect(lines.map((l) => l.event)).toEqual(["accordion intercept skipped", "accordion compaction completed"]);
    });

    it("without an interceptCompaction method the flag changes nothing: compact() runs", async () => {
      for (const flag of [undefined, true, false]) {
        const { engine, compact } = engineWith({ ...(flag !== undefined ? { interceptsCompaction: flag } : {}) });
        expect(usesInterceptCompaction(engine)).toBe(false);
        expect((await runAccordionCompaction({ ...runBase, engine })).via).toBe("compact");
        expect(compact).toHaveBeenCalledTimes(1);
      }
    });
  });

  it("reports a compact() that did not compact", async () => {
    const { engine } = engineWith({ compact: async () => ({ ok: true, compacted: false, reason: "below target" }) });
    expect(await runAccordionCompaction({ ...runBase, engine })).toEqual({
      compacted: false,
      tokensBefore: 180_000,
      via: "compact",
      reason: "below target",
    });
  });

  it("does nothing when already aborted", async () => {
    const { engine, compact } = engineWith({ intercept: async () => ({ handled: false, reason: "x" }) });
    const out = await runAccordionCompaction({ ...runBase, engine, signal: AbortSignal.abort() });
    expect(out).toEqual({ compacted: false, tokensBefore: 180_000, via: "none", reason: "aborted" });
    expect(compact).not.toHaveBeenCalled();
  });

  it("rejects invalid parameters and configs with typed errors", async () => {
    const { engine } = engineWith({});
    await expect(runAccordionCompaction({ ...runBase, engine, tokenBudget: -5 })).rejects.toMatchObject({
      code: "INVALID_COMPACTION_PARAMS",
      field: "tokenBudget",
    });
    await expect(
      runAccordionCompaction({ ...runBase, engine: {} as ContextEngine }),
    ).rejects.toMatchObject({ field: "engine" });
    await expect(
      runAccordionCompaction({ ...runBase, engine, config: { compactionTargetFraction: 0.01 } }),
    ).rejects.toThrow("compactionTargetFraction must be within [0.05, 1], got 0.01");
  });
});
