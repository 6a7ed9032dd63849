/**
 * A turn whose input no longer fits the model's context window, against the real app-server. Codex 0.169 fails it
 * ("Codex ran out of room in the model's context window", `codexErrorInfo: "contextWindowExceeded"`), reports the
 * thread's usage as full (total 190,000 of a 190,000 window, last-call input 0; observed) and, left alone, compacts the
 * thread natively (lossily) at the start of the next turn (a `compaction` request before the next turn's). With an
 * engine that owns compaction (the accordion on), the binding also records the overflow, and the next turn's accordion
 * compacts in the engine first, telling it the session stands at least at the window (not the failed call's 0); that
 * turn then runs on a fresh thread from the engine's view and Codex's native compaction never runs. The recorded
 * overflow is what triggers it when the threshold is above what Codex's "full" usage reaches (contextThreshold 1).
 * Without the accordion, Codex heals the thread itself, as before.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWindowEngine } from "../../src/context-engine/engines/index.js";
import type { ContextEngine } from "../../src/context-engine/types.js";
import { readThreadBinding } from "../../src/transcript/binding.js";
import { runCodexTurn } from "../../src/turn.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { disposeChecked, tempSessions, turnParams } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("context-overflow-");
// What the Responses API answers a request that does not fit (HTTP 400, code context_length_exceeded).
const TOO_LONG = {
  httpStatus: 400,
  body: JSON.stringify({
    error: { message: "Your input exceeds the context window of this model.", type: "invalid_request_error", param: "input", code: "context_length_exceeded" },
  }),
};

beforeAll(async () => {
  env = await startOfflineCodex({ offline: { lean: true } });
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

/** A window engine that owns compaction, recording what each compact() was told. */
function owningEngine(): ContextEngine & { compacts: Array<{ force?: boolean | undefined; currentTokenCount?: number | undefined }> } {
  const inner = createWindowEngine({ ownsCompaction: true, tokenBudget: 16_000 });
  const compacts: Array<{ force?: boolean | undefined; currentTokenCount?: number | undefined }> = [];
  return {
    ...inner,
    compacts,
    async compact(p) {
      compacts.push({ force: p.force, currentTokenCount: p.currentTokenCount });
      return inner.compact(p);
    },
  };
}

const compactionRequests = () => env.fake.requests.filter((r) => r.requestKind === "compaction").length;

describe("a turn that overflows the model's context window", () => {
  /** Turn 1 completes, turn 2 overflows, turn 3 follows; returns the three results and what the engine was asked. */
  async function overflowThenNext(compaction?: { contextThreshold: number }) {
    const file = sessions.file();
    const engine = owningEngine();
    const params = (prompt: string) =>
      turnParams(env, file, prompt, { contextEngine: engine, contextTokenBudget: 16_000, ...(compaction ? { compaction } : {}) });
    const first = await runCodexTurn(params("first"));
    expect(first.status).toBe("completed");
    env.fake.enqueue(TOO_LONG);
    const overflowed = await runCodexTurn(params("second"));
    expect(overflowed.status).toBe("failed");
    expect(overflowed.error).toMatchObject({ phase: "turnRunning", code: "contextWindowExceeded" });
    expect(overflowed.threadId).toBe(first.threadId);
    expect((await readThreadBinding(file))?.contextOverflow).toEqual({ turnId: overflowed.turnId });
    expect(engine.compacts).toEqual([]);
    const nativeBefore = compactionRequests();
    const next = await runCodexTurn(params("third"));
    return { file, engine, first, next, nativeRequests: compactionRequests() - nativeBefore };
  }

  /** The engine compacted before the third turn, which ran on a fresh thread; Codex had no old thread to compact. */
  async function expectEngineCompactedFirst(run: Awaited<ReturnType<typeof overflowThenNext>>): Promise<void> {
    const { file, engine, first, next } = run;
    expect(next.status).toBe("completed");
    expect(engine.compacts).toEqual([{ force: true, currentTokenCount: first.usage?.modelContextWindow }]);
    expect(next.trace).toContain("compactBeforeTurn");
    expect(next.threadId).not.toBe(first.threadId);
    expect(run.nativeRequests).toBe(0);
    expect(next.nativeCompactions).toEqual([]);
    const binding = await readThreadBinding(file);
    expect(binding?.threadId).toBe(next.threadId);
    expect(binding?.contextOverflow).toBeUndefined();
  }

  it("with the accordion on: the next turn compacts in the engine (told the window) and starts a fresh thread", async () => {
    const run = await overflowThenNext();
    expect(run.first.usage?.modelContextWindow).toBeGreaterThan(0);
    await expectEngineCompactedFirst(run);
  }, 90_000);

  it("with a threshold Codex's full usage does not reach (1): the recorded overflow alone triggers the compaction", async () => {
    await expectEngineCompactedFirst(await overflowThenNext({ contextThreshold: 1 }));
  }, 90_000);

  it("without the accordion: nothing changes, Codex compacts the same thread natively at the next turn", async () => {
    const file = sessions.file();
    const params = (prompt: string) => turnParams(env, file, prompt, { contextEngine: createWindowEngine({ tokenBudget: 16_000 }), contextTokenBudget: 16_000 });
    const first = await runCodexTurn(params("first"));
    env.fake.enqueue(TOO_LONG);
    const overflowed = await runCodexTurn(params("second"));
    expect(overflowed.error).toMatchObject({ code: "contextWindowExceeded" });
    const nativeBefore = compactionRequests();
    const next = await runCodexTurn(params("third"));
    expect(next.status).toBe("completed");
    expect(next.threadId).toBe(first.threadId);
    expect(next.trace).not.toContain("compactBeforeTurn");
    expect(compactionRequests()).toBe(nativeBefore + 1);
    expect(next.nativeCompactions).toMatchObject([{ threadId: first.threadId, completed: true }]);
  }, 90_000);
});
