/** Developer instructions over a thread's life: delivery after the hook, superseded copies as stale tokens. */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { ProjectionOutput } from "../../machines/turn.contract.js";
import {
  developerInstructionsHash,
  planDeveloperInstructionsDelivery,
  projectAssembledContext,
  staleDeveloperTokens,
  withDeveloperInstructions,
  type ProjectAssembledContextParams,
} from "../../src/projection/index.js";
import { applyBindingUpdate, type BindingUpdate, type ThreadBinding } from "../../src/transcript/binding.js";

const fingerprints = { dynamicTools: "t", engineId: "e", policy: "p" };
const history = [
  { role: "user", content: "u1", timestamp: 1 },
  { role: "assistant", content: [{ type: "text" as const, text: "a1" }], timestamp: 2 },
];
const params = (binding: ThreadBinding | undefined, addition: string): ProjectAssembledContextParams => ({
  mode: "delta",
  prompt: "next",
  history,
  origins: history.map(() => ({ threadId: binding?.threadId ?? "T", turnId: "turn-1" })),
  assembled: { messages: history, estimatedTokens: 2, systemPromptAddition: addition },
  baseDeveloperInstructions: "BASE",
  fingerprints,
  ...(binding ? { binding } : {}),
});
const accept = (out: ProjectionOutput, previous: ThreadBinding | undefined, turnId: string) =>
  applyBindingUpdate(previous, {
    threadId: out.thread.threadId ?? "T",
    turnId,
    update: out.bindingUpdate,
    dynamicToolsFingerprint: "t",
    engineId: "e",
    policyFingerprint: "p",
    projectionMode: out.mode,
  });
const devKeys = (out: ProjectionOutput) => Object.keys(out.additionalContext ?? {}).filter((k) => k.startsWith("openclaw.developer."));

describe("developer instructions delivery", () => {
  it("records the thread/start copy, sends a changed one to a resumed thread as one application entry, and counts superseded copies as stale", () => {
    const first = projectAssembledContext(params(undefined, "note 1"));
    expect(first.thread.action).toBe("start");
    expect(devKeys(first)).toEqual([]);
    let b = accept(first, undefined, "turn-1");
    expect(b.developerDeliveries).toHaveLength(1);
    const second = projectAssembledContext(params(b, "note 2"));
    expect(second.thread.action).toBe("resume");
    const [key] = devKeys(second);
    expect(second.additionalContext![key!]).toEqual({ kind: "application", value: "BASE\n\nnote 2" });
    // The first copy ("BASE\n\nnote 1", 4 tokens) is superseded.
    expect(second.staleTokens).toBe(Math.ceil("BASE\n\nnote 1".length / 4));
    b = accept(second, b, "turn-2");
    expect(b.developerDeliveries).toHaveLength(2);
    const third = projectAssembledContext(params(b, "note 3"));
    expect(third.staleTokens).toBe(2 * Math.ceil("BASE\n\nnote 1".length / 4));
    // Unchanged instructions: nothing sent, the older copies stay stale.
    b = accept(third, b, "turn-3");
    const fourth = projectAssembledContext(params(b, "note 3"));
    expect(devKeys(fourth)).toEqual([]);
    expect(fourth.staleTokens).toBe(2 * Math.ceil("BASE\n\nnote 1".length / 4));
  });

  it("staleDeveloperTokens counts everything but a current last copy", () => {
    const h = developerInstructionsHash("x");
    expect(staleDeveloperTokens([`a:5`, `${h}:3`], h)).toBe(5);
    expect(staleDeveloperTokens([`${h}:3`, `a:5`], h)).toBe(8);
    expect(staleDeveloperTokens(undefined, h)).toBe(0);
  });

  it("decides resume or rotate with the hook's final instructions: a constant hook system context is not stale", () => {
    // lossless-claw's before_prompt_build prepends the same ~1,400-token recall policy every turn; its view is small.
    const policy = "Recall policy. ".repeat(380);
    const final = (base: string) => `${policy}\n\n${base}`;
    const smallView = (binding: ThreadBinding | undefined): ProjectAssembledContextParams => ({ ...params(binding, "note"), mode: "threadBootstrap" });
    const first = projectAssembledContext({ ...smallView(undefined), finalDeveloperInstructions: final("BASE\n\nnote") });
    expect(first.thread.action).toBe("start");
    expect(first.developerInstructions).toBe(final("BASE\n\nnote"));
    const b = accept(first, undefined, "turn-1");
    // Counted against the pre-hook text, the thread's copy of the policy is stale and outweighs the view: rotate.
    const preHook = projectAssembledContext(smallView(b));
    expect(preHook.thread).toMatchObject({ action: "start", reason: "staleCost" });
    // With the final text the thread holds exactly what this turn carries: resume, nothing stale, nothing re-sent.
    const second = projectAssembledContext({ ...smallView(b), finalDeveloperInstructions: final("BASE\n\nnote") });
    expect(second.thread).toMatchObject({ action: "resume", threadId: "T" });
    expect(second.staleTokens).toBe(0);
    expect(devKeys(second)).toEqual([]);
    expect(second.developerInstructions).toBe(final("BASE\n\nnote"));
    // A hook whose text changes is delivered once to the resumed thread, and the old copy counts as stale.
    const changed = projectAssembledContext({ ...smallView(b), finalDeveloperInstructions: "short" });
    expect(changed.thread.action).toBe("start"); // the old 1,400-token copy outweighs the small view: rotate
    const bigView = { ...smallView(b), assembled: { messages: history, estimatedTokens: 2, systemPromptAddition: "note" }, cachedPriceRatio: 0.001 };
    const kept = projectAssembledContext({ ...bigView, finalDeveloperInstructions: "short" });
    expect(kept.thread.action).toBe("resume");
    expect(devKeys(kept).map((k) => kept.additionalContext![k]!.value)).toEqual(["short"]);
    expect(kept.staleTokens).toBe(Math.ceil(final("BASE\n\nnote").length / 4));
  });

  it("after a hook changes the instructions, the delivery follows the final text (resumed threads included)", () => {
    const first = projectAssembledContext(params(undefined, "note"));
    const hookedFirst = withDeveloperInstructions(first, undefined, "HOOKED 1");
    expect(hookedFirst.developerInstructions).toBe("HOOKED 1");
    expect((hookedFirst.bindingUpdate as BindingUpdate).developerInstructionsHash).toBe(developerInstructionsHash("HOOKED 1"));
    const b = accept(hookedFirst, undefined, "turn-1");
    // Same engine output, pre-hook instructions unchanged: without the hook step nothing would be sent.
    const second = projectAssembledContext(params(b, "note"));
    expect(devKeys(second)).toHaveLength(1); // "BASE\n\nnote" differs from what the thread holds ("HOOKED 1")
    const hooked = withDeveloperInstructions(second, b, "HOOKED 2");
    const keys = devKeys(hooked);
    expect(keys).toHaveLength(1);
    expect(hooked.additionalContext![keys[0]!]).toEqual({ kind: "application", value: "HOOKED 2" });
    expect(hooked.entriesSent).toBe(second.entriesSent);
    expect(hooked.bytes).toBe(second.bytes - Buffer.byteLength("BASE\n\nnote") + Buffer.byteLength("HOOKED 2"));
    // The hook returning what the thread already holds sends nothing.
    const same = withDeveloperInstructions(second, b, "HOOKED 1");
    expect(devKeys(same)).toEqual([]);
    expect(same.entriesSent).toBe(second.entriesSent - 1);
    // Idempotent: planning twice never adds a second update entry.
    const again = planDeveloperInstructionsDelivery({ binding: b, threadAction: "resume", developerInstructions: "HOOKED 2", additionalContext: hooked.additionalContext });
    expect(Object.keys(again.additionalContext ?? {})).toEqual(keys);
  });
});

describe("developerInstructionsHash", () => {
  it("is the 20-hex sha256 prefix of the text, for texts met again after many others (its memo is bounded)", () => {
    const sha = (t: string) => createHash("sha256").update(t, "utf8").digest("hex").slice(0, 20);
    const texts = Array.from({ length: 150 }, (_, i) => `instructions ${i}\n${"x".repeat(i)}`);
    for (let round = 0; round < 3; round++) {
      for (const t of round === 1 ? [...texts].reverse() : texts) expect(developerInstructionsHash(t)).toBe(sha(t));
    }
    expect(developerInstructionsHash(undefined)).toBe(sha(""));
    expect(developerInstructionsHash("")).toBe(sha(""));
  });
});
