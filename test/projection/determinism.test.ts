/** Property tests: projection output is a pure function of its inputs' content, never of object key order. */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import type { AgentMessage } from "../../src/context-engine/types.js";
import type { HistoryOutput } from "../../machines/turn.contract.js";
import {
  MAX_ENTRY_CHARS,
  projectAssembledContext,
  renderPromptProjection,
  type ProjectAssembledContextParams,
} from "../../src/projection/index.js";
import type { ThreadBinding } from "../../src/transcript/binding.js";

const partArb = fc.oneof(
  fc.record({ type: fc.constant("text"), text: fc.string() }),
  fc.record({ type: fc.constant("thinking"), thinking: fc.string() }),
  fc.record({ type: fc.constant("image"), data: fc.base64String(), mimeType: fc.constant("image/png") }),
  fc.record({ type: fc.constant("toolCall"), id: fc.string(), name: fc.string(), arguments: fc.dictionary(fc.string(), fc.jsonValue()) }),
  fc.record({ type: fc.constant("tool_use"), id: fc.string(), name: fc.string(), input: fc.jsonValue() }),
  fc.record({ type: fc.constant("tool_result"), tool_use_id: fc.string(), content: fc.jsonValue() }),
  fc.record({ type: fc.string(), extra: fc.jsonValue() }),
  fc.jsonValue(),
);
const messageArb: fc.Arbitrary<AgentMessage> = fc.oneof(
  fc.record({ role: fc.constant("user"), content: fc.oneof(fc.string(), fc.array(partArb, { maxLength: 4 })), timestamp: fc.nat() }),
  fc.record({ role: fc.constant("assistant"), content: fc.array(partArb, { maxLength: 4 }), timestamp: fc.nat(), model: fc.string() }),
  fc.record({
    role: fc.constant("toolResult"),
    toolCallId: fc.string(),
    toolName: fc.string(),
    content: fc.array(partArb, { maxLength: 3 }),
    isError: fc.boolean(),
    timestamp: fc.nat(),
  }),
  fc.record({ role: fc.constant("compactionSummary"), summary: fc.string(), tokensBefore: fc.nat() }),
  fc.record({ role: fc.constant("custom"), customType: fc.string(), content: fc.oneof(fc.string(), fc.array(partArb, { maxLength: 2 })) }),
  fc.record({ role: fc.string({ minLength: 1 }), content: fc.option(fc.jsonValue(), { nil: undefined }), other: fc.jsonValue() }),
) as fc.Arbitrary<AgentMessage>;

/** A deep copy whose objects list their keys in reverse order (arrays keep their order). */
function reverseKeys<T>(value: T): T {
  if (Array.isArray(value)) return value.map(reverseKeys) as T;
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value as Record<string, unknown>).reverse()) out[key] = reverseKeys((value as Record<string, unknown>)[key]);
    return out as T;
  }
  return value;
}

const bindingArb: fc.Arbitrary<ThreadBinding | undefined> = fc.option(
  fc.record({
    version: fc.constant(1 as const),
    threadId: fc.constantFrom("thread-A", "thread-B"),
    dynamicToolsFingerprint: fc.constantFrom("tools-1", "tools-2"),
    engineId: fc.constant("engine-1"),
    policyFingerprint: fc.constant("policy-1"),
    projectionMode: fc.constant("delta"),
    projectionEpoch: fc.constantFrom("e", "f"),
    heldTurnIds: fc.subarray(["turn-1", "turn-2"]),
    ledger: fc.array(fc.string({ maxLength: 30 }), { maxLength: 3 }),
    developerInstructionsHash: fc.option(fc.constantFrom("0".repeat(20), "1".repeat(20)), { nil: undefined }),
    developerDeliveries: fc.option(fc.array(fc.constantFrom(`${"0".repeat(20)}:40`, `${"1".repeat(20)}:7`), { maxLength: 4 }), { nil: undefined }),
    staleCostTokens: fc.option(fc.double({ min: 0, max: 500, noNaN: true }), { nil: undefined }),
  }),
  { nil: undefined },
);

const scenarioArb = fc.record({
  messages: fc.array(messageArb, { maxLength: 12 }),
  historyCut: fc.nat({ max: 12 }),
  prompt: fc.string({ minLength: 1 }),
  mode: fc.constantFrom("prompt", "delta", "threadBootstrap", "auto") as fc.Arbitrary<ProjectAssembledContextParams["mode"]>,
  binding: bindingArb,
  epoch: fc.option(fc.constantFrom("e", "f"), { nil: undefined }),
  // Non-ASCII sentinels: generated strings are ASCII, so any occurrence outside the instructions is a leak.
  addition: fc.option(fc.constantFrom("§ADDITION-1§", "  §ADDITION-2§ \n"), { nil: undefined }),
  partCapChars: fc.option(fc.integer({ min: 1, max: 200 }), { nil: undefined }),
  totalCapChars: fc.option(fc.integer({ min: 1, max: 2_000 }), { nil: undefined }),
  tokenBudget: fc.option(fc.integer({ min: 1, max: 10_000 }), { nil: undefined }),
  cachedPriceRatio: fc.option(fc.constantFrom(0.1, 0.5, 1), { nil: undefined }),
});

type Scenario = typeof scenarioArb extends fc.Arbitrary<infer S> ? S : never;

function toParams(s: Scenario): ProjectAssembledContextParams {
  const history = s.messages.slice(0, Math.min(s.historyCut, s.messages.length));
  const origins: HistoryOutput["origins"] = history.map((_, i) => (i % 3 === 2 ? null : { threadId: "thread-A", turnId: i % 2 ? "turn-1" : "turn-2" }));
  return {
    mode: s.mode,
    prompt: s.prompt,
    history,
    origins,
    assembled: {
      messages: s.messages,
      estimatedTokens: 1,
      ...(s.addition !== undefined ? { systemPromptAddition: s.addition } : {}),
      ...(s.epoch !== undefined ? { contextProjection: { mode: "thread_bootstrap" as const, epoch: s.epoch } } : {}),
    },
    baseDeveloperInstructions: "BASE",
    ...(s.binding ? { binding: s.binding } : {}),
    fingerprints: { dynamicTools: "tools-1", engineId: "engine-1", policy: "policy-1" },
    ...(s.partCapChars !== undefined ? { partCapChars: s.partCapChars } : {}),
    ...(s.totalCapChars !== undefined ? { totalCapChars: s.totalCapChars } : {}),
    ...(s.tokenBudget !== undefined ? { tokenBudget: s.tokenBudget } : {}),
    ...(s.cachedPriceRatio !== undefined ? { cachedPriceRatio: s.cachedPriceRatio } : {}),
  };
}

describe("projection determinism (fast-check)", () => {
  it("gives byte-identical output for the same input twice, a deep clone, and a key-reordered clone", () => {
    fc.assert(
      fc.property(scenarioArb, (s) => {
        const params = toParams(s);
        const a = JSON.stringify(projectAssembledContext(params));
        const b = JSON.stringify(projectAssembledContext(params));
        const c = JSON.stringify(projectAssembledContext(structuredClone(params)));
        const d = JSON.stringify(projectAssembledContext(reverseKeys(structuredClone(params))));
        expect(b).toBe(a);
        expect(c).toBe(a);
        expect(d).toBe(a);
      }),
      { numRuns: 400 },
    );
  });

  it("keeps entries under the per-entry cap, keyed in sorted order, and the addition out of the prompt", () => {
    fc.assert(
      fc.property(scenarioArb, (s) => {
        const out = projectAssembledContext(toParams(s));
        const keys = Object.keys(out.additionalContext ?? {});
        expect([...keys].sort()).toEqual(keys);
        for (const [key, entry] of Object.entries(out.additionalContext ?? {})) {
          // Trust split: context entries are untrusted (user role); only developer updates are application.
          expect(entry.kind).toBe(key.startsWith("openclaw.developer.") ? "application" : "untrusted");
          if (key.startsWith("openclaw.context.")) expect(entry.value.length).toBeLessThanOrEqual(MAX_ENTRY_CHARS);
        }
        const addition = s.addition?.trim();
        if (addition) {
          expect(out.developerInstructions).toBe(`BASE\n\n${addition}`);
          expect(out.promptText).not.toContain(addition);
          for (const [key, entry] of Object.entries(out.additionalContext ?? {})) {
            if (key.startsWith("openclaw.context.")) expect(entry.value).not.toContain(addition);
          }
        } else {
          expect(out.developerInstructions).toBe("BASE");
        }
        expect(out.entriesSent).toBeGreaterThanOrEqual(0);
        expect(out.thread.action === "resume").toBe(out.thread.threadId !== undefined);
      }),
      { numRuns: 300 },
    );
  });

  it("sends the current prompt exactly once as the request in prompt mode", () => {
    fc.assert(
      fc.property(fc.array(messageArb, { maxLength: 6 }), fc.stringMatching(/^[a-z]{8,16}$/), (messages, prompt) => {
        const { text, renderedMessages } = renderPromptProjection([...messages, { role: "user", content: ` ${prompt} `, timestamp: 9 }], prompt);
        if (renderedMessages === 0) {
          expect(text).toBe(prompt);
          return;
        }
        expect(text.endsWith(`\n</conversation_context>\n\nCurrent user request:\n${prompt}`)).toBe(true);
        // The trailing duplicate was dropped: the context does not end with the prompt as a user block.
        expect(text).not.toContain(`[user]\n${prompt}\n</conversation_context>`);
      }),
      { numRuns: 200 },
    );
  });
});
