import { describe, expect, it } from "vitest";
import {
  AssembleResultInvalidError,
  assembleResultSchema,
  CompactResultInvalidError,
  assertContextEngine,
  bootstrapResultSchema,
  compactResultSchema,
  ContextEngineContractError,
  EngineResultInvalidError,
  engineFacts,
  ingestBatchResultSchema,
  isLegacyEngine,
  maintainResultSchema,
  validateAssembleResult,
  validateCompactResult,
  validateEngineResult,
} from "../../src/context-engine/contract.js";
import { createRecordingEngine, createWindowEngine, legacyEngine } from "../../src/context-engine/engines/index.js";
import type { ContextEngine } from "../../src/context-engine/types.js";

const minimal = () => ({
  info: { id: "mine", name: "Mine" },
  async ingest() {
    return { ingested: true };
  },
  async assemble() {
    return { messages: [], estimatedTokens: 0 };
  },
  async compact() {
    return { ok: true, compacted: false };
  },
});


/** What `fn` throws (undefined when it does not). */
function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe("assertContextEngine", () => {
  it("accepts a minimal engine and the reference engines", () => {
    expect(assertContextEngine(minimal()).info.id).toBe("mine");
    expect(assertContextEngine(createWindowEngine()).info.id).toBe("window");
    expect(assertContextEngine(legacyEngine).info.id).toBe("legacy");
    expect(assertContextEngine(createRecordingEngine()).info.id).toBe("window");
  });

  it.each([
    ["(engine)", 42],
    ["(engine)", null],
    ["info", { ...minimal(), info: undefined }],
    ["info.id", { ...minimal(), info: { name: "x" } }],
    ["info.id", { ...minimal(), info: { id: "", name: "x" } }],
    ["info.name", { ...minimal(), info: { id: "x" } }],
    ["info.turnMaintenanceMode", { ...minimal(), info: { id: "x", name: "x", turnMaintenanceMode: 1 } }],
    ["info.hostRequirements", { ...minimal(), info: { id: "x", name: "x", hostRequirements: "all" } }],
    ["info.interceptsCompaction", { ...minimal(), info: { id: "x", name: "x", interceptsCompaction: "false" } }],
    ["ingest", { ...minimal(), ingest: undefined }],
    ["assemble", { ...minimal(), assemble: "not a function" }],
    ["compact", { ...minimal(), compact: undefined }],
    ["afterTurn", { ...minimal(), afterTurn: 1 }],
    ["maintain", { ...minimal(), maintain: {} }],
  ])("names the invalid member %s", (member, value) => {
    const caught = thrownBy(() => assertContextEngine(value));
    expect(caught).toBeInstanceOf(ContextEngineContractError);
    expect((caught as ContextEngineContractError).member).toBe(member);
    expect((caught as ContextEngineContractError).code).toBe("ENGINE_CONTRACT_VIOLATION");
    expect((caught as Error).message).toContain(member);
  });
});

describe("legacy detection and engine facts", () => {
  it("treats no engine and info.id legacy as legacy", () => {
    expect(isLegacyEngine(undefined)).toBe(true);
    expect(isLegacyEngine(legacyEngine)).toBe(true);
    expect(isLegacyEngine(minimal() as ContextEngine)).toBe(false);
    expect(engineFacts(undefined)).toEqual({
      active: false,
      id: "legacy",
      hasBootstrap: false,
      hasMaintain: false,
      hasAfterTurn: false,
      hasIngestBatch: false,
      ownsCompaction: false,
      turnMaintenanceMode: "foreground",
    });
    expect(engineFacts(legacyEngine).active).toBe(false);
  });

  it("reports which optional methods an engine has", () => {
    expect(engineFacts(minimal() as ContextEngine)).toEqual({
      active: true,
      id: "mine",
      hasBootstrap: false,
      hasMaintain: false,
      hasAfterTurn: false,
      hasIngestBatch: false,
      ownsCompaction: false,
      turnMaintenanceMode: "foreground",
      durableTurns: false,
    });
    const full = createRecordingEngine(createWindowEngine({ ownsCompaction: true }));
    full.info.turnMaintenanceMode = "background";
    expect(engineFacts(full)).toEqual({
      active: true,
      id: "window",
      hasBootstrap: true,
      hasMaintain: true,
      hasAfterTurn: true,
      hasIngestBatch: true,
      ownsCompaction: true,
      turnMaintenanceMode: "background",
      durableTurns: false,
    });
  });
});

describe("OpenClaw's info types", () => {
  it("accepts any turnMaintenanceMode string (OpenClaw: \"background\" | \"inline\" | string); only background defers", () => {
    const inline = { ...minimal(), info: { id: "x", name: "x", turnMaintenanceMode: "inline" } };
    expect(assertContextEngine(inline).info.turnMaintenanceMode).toBe("inline");
    expect(engineFacts(inline as ContextEngine).turnMaintenanceMode).toBe("foreground");
  });

  it("accepts hostRequirements and acceptedHostParams as OpenClaw declares them", () => {
    const engine = {
      ...minimal(),
      info: {
        id: "x",
        name: "x",
        acceptedHostParams: ["runtimeContext"],
        hostRequirements: { "agent-run": { requiredCapabilities: ["bootstrap", "runtime-llm-complete"], unsupportedMessage: "use a full host" } },
      },
    };
    expect(assertContextEngine(engine).info.hostRequirements?.["agent-run"]?.requiredCapabilities).toEqual(["bootstrap", "runtime-llm-complete"]);
  });
});

describe("result schemas", () => {
  it("validates assemble results and throws a typed error naming the field", () => {
    expect(validateAssembleResult({ messages: [{ role: "user", content: "x" }], estimatedTokens: 3, extra: true })).toMatchObject({
      estimatedTokens: 3,
    });
    const bad: Array<[unknown, RegExp]> = [
      [{ messages: "nope", estimatedTokens: 1 }, /messages/],
      [{ messages: [{ content: "no role" }], estimatedTokens: 1 }, /messages\.0\.role/],
      [{ messages: [42], estimatedTokens: 1 }, /messages\.0/],
      [{ messages: [], estimatedTokens: -1 }, /estimatedTokens/],
      [{ messages: [], estimatedTokens: Number.POSITIVE_INFINITY }, /estimatedTokens/],
      [{ messages: [], estimatedTokens: 1, systemPromptAddition: 5 }, /systemPromptAddition/],
      [{ messages: [], estimatedTokens: 1, contextProjection: { mode: "sometimes" } }, /contextProjection\.mode/],
      [undefined, /\(result\)/],
    ];
    for (const [value, pattern] of bad) {
      const caught = thrownBy(() => validateAssembleResult(value));
      expect(caught).toBeInstanceOf(AssembleResultInvalidError);
      expect(caught).toBeInstanceOf(EngineResultInvalidError);
      expect((caught as AssembleResultInvalidError).code).toBe("ASSEMBLE_RESULT_INVALID");
      expect((caught as Error).message).toMatch(/assemble\(\) returned an invalid result/);
      expect((caught as Error).message).toMatch(pattern);
    }
    expect(assembleResultSchema.safeParse({ messages: [], estimatedTokens: 0, contextProjection: { mode: "thread_bootstrap", epoch: "e" } }).success).toBe(true);
  });

  it("accepts and rejects exactly what the schema does, keeping the engine's message objects (the fast path)", () => {
    const sparse: unknown[] = [{ role: "user" }];
    sparse[2] = { role: "assistant" };
    const withInheritedRole = Object.create({ role: "user" }) as object;
    const cases: unknown[] = [
      { messages: [{ role: "user", content: "x" }, { role: "assistant", content: [] }], estimatedTokens: 3, extra: { kept: true } },
      { messages: [], estimatedTokens: 0, contextProjection: { mode: "thread_bootstrap", epoch: "e", more: 1 } },
      { messages: [{ role: "user" }, { role: "" }], estimatedTokens: 1 },
      { messages: [{ role: "user" }, null], estimatedTokens: 1 },
      { messages: [{ role: "user" }, [{ role: "user" }]], estimatedTokens: 1 },
      { messages: [{ role: 7 }], estimatedTokens: 1 },
      { messages: sparse, estimatedTokens: 1 },
      { messages: [withInheritedRole], estimatedTokens: 1 },
      { messages: [{ role: "user" }], estimatedTokens: "1" },
      { messages: [{ role: "user" }], estimatedTokens: 1, systemPromptAddition: ["x"] },
      { messages: [{ role: "user" }], estimatedTokens: 1, contextProjection: { mode: "never" } },
      { messages: { 0: { role: "user" }, length: 1 }, estimatedTokens: 1 },
      { estimatedTokens: 1 },
      null,
      "messages",
    ];
    for (const value of cases) {
      const reference = assembleResultSchema.safeParse(value);
      const caught = thrownBy(() => validateAssembleResult(value));
      if (reference.success) {
        expect(caught).toBeUndefined();
        const result = validateAssembleResult(value);
        expect(result).toEqual({ ...reference.data, messages: (value as { messages: unknown }).messages });
        // The engine's own objects, not zod's copies: the projection recognizes history objects by reference.
        expect(result.messages).toBe((value as { messages: unknown }).messages);
      } else {
        const field = reference.error.issues[0]!.path.join(".") || "(result)";
        expect(caught).toBeInstanceOf(AssembleResultInvalidError);
        expect((caught as Error).message).toContain(field);
      }
    }
  });

  it("validates bootstrap, maintain, compact and ingestBatch results", () => {
    expect(bootstrapResultSchema.safeParse({ bootstrapped: true, importedMessages: 3 }).success).toBe(true);
    expect(bootstrapResultSchema.safeParse({ importedMessages: 3 }).success).toBe(false);
    expect(maintainResultSchema.safeParse({ changed: false, bytesFreed: 0, rewrittenEntries: 0 }).success).toBe(true);
    expect(maintainResultSchema.safeParse({ changed: "no" }).success).toBe(false);
    expect(compactResultSchema.safeParse({ ok: true, compacted: true, result: { tokensBefore: 10, tokensAfter: 4 } }).success).toBe(true);
    expect(compactResultSchema.safeParse({ ok: true, compacted: true, result: { tokensAfter: 4 } }).success).toBe(false);
    expect(ingestBatchResultSchema.safeParse({ ingestedCount: 2 }).success).toBe(true);
    expect(() => validateEngineResult("ingestBatch", ingestBatchResultSchema, { count: 2 })).toThrow(/ingestBatch\(\).*ingestedCount/);
  });

  it("validateCompactResult returns a valid result (extra fields kept) and throws a typed error naming the field", () => {
    const good = { ok: true, compacted: true, reason: "r", result: { tokensBefore: 10, tokensAfter: 4, details: { x: 1 } }, extra: 1 };
    expect(validateCompactResult(good)).toEqual(good);
    expect(validateCompactResult({ ok: false, compacted: false })).toEqual({ ok: false, compacted: false });
    for (const [bad, detail] of [
      [null, "(result): Invalid input: expected object, received null"],
      [undefined, "(result): Invalid input: expected object, received undefined"],
      [{ ok: "yes" }, "ok: Invalid input: expected boolean, received string"],
      [{ ok: true, compacted: true, reason: 5 }, "reason: Invalid input: expected string, received number"],
    ] as const) {
      const caught = thrownBy(() => validateCompactResult(bad));
      expect(caught).toBeInstanceOf(CompactResultInvalidError);
      expect(caught).toBeInstanceOf(EngineResultInvalidError);
      expect(caught).toMatchObject({ code: "COMPACT_RESULT_INVALID", method: "compact", detail });
      expect((caught as Error).message).toBe(`context engine compact() returned an invalid result: ${detail}`);
    }
  });
});
