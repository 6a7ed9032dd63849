/**
 * The binding keeper (src/turn/binding-keeper.ts): a usage report becomes a binding write on the next macrotask (when
 * the mirror waits for its fsync; one write for a burst), settle() waits for it, and reports for another thread or
 * without usage are ignored.
 */
import { describe, expect, it } from "vitest";
import type { TurnUsage } from "../../machines/turn.contract.js";
import { silentLogger } from "../../src/log/logger.js";
import type { SessionStore } from "../../src/store/session-store.js";
import type { ThreadBinding } from "../../src/transcript/binding.js";
import { createBindingKeeper } from "../../src/turn/binding-keeper.js";

const usage = (inputTokens: number, window?: number): TurnUsage => ({
  inputTokens: inputTokens * 2,
  cachedInputTokens: 0,
  outputTokens: 5,
  reasoningOutputTokens: 0,
  totalTokens: inputTokens * 2 + 5,
  lastCallInputTokens: inputTokens,
  lastCallTotalTokens: inputTokens + 5,
  ...(window ? { modelContextWindow: window } : {}),
});

const bound: ThreadBinding = {
  version: 1,
  threadId: "thread-1",
  dynamicToolsFingerprint: "t",
  engineId: "legacy",
  policyFingerprint: "p",
  projectionMode: "none",
  heldTurnIds: [],
  ledger: [],
};

function keeperWithWrites() {
  const writes: ThreadBinding[] = [];
  const store = { writeBinding: async (b: ThreadBinding) => void writes.push(structuredClone(b)) } as unknown as SessionStore;
  const keeper = createBindingKeeper({ store, logger: silentLogger, ids: {}, fingerprints: { dynamicTools: "t", engineId: "legacy", policy: "p" } });
  keeper.load(bound);
  return { keeper, writes };
}

describe("binding keeper: usage", () => {
  it("records the last call's usage; a burst of reports in one macrotask is one write of the latest", async () => {
    const { keeper, writes } = keeperWithWrites();
    keeper.usage("thread-1", usage(100));
    keeper.usage("thread-1", usage(150, 1000));
    expect(writes).toHaveLength(0); // written on the next macrotask, not inside the transition
    await keeper.settle();
    await new Promise((r) => setImmediate(r));
    await keeper.settle();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.lastUsage).toEqual({ inputTokens: 150, totalTokens: 155, modelContextWindow: 1000 });
  });

  it("ignores a report for another thread, or without usage", async () => {
    const { keeper, writes } = keeperWithWrites();
    keeper.usage("thread-2", usage(100));
    keeper.usage("thread-1", undefined);
    await keeper.settle();
    expect(writes).toHaveLength(0);
  });
});

describe("binding keeper: the turn in flight", () => {
  const keeperWith = (images?: Array<{ data: string; mimeType: string }>) => {
    const writes: ThreadBinding[] = [];
    const store = { writeBinding: async (b: ThreadBinding) => void writes.push(structuredClone(b)) } as unknown as SessionStore;
    const keeper = createBindingKeeper({
      store,
      logger: silentLogger,
      ids: {},
      fingerprints: { dynamicTools: "t", engineId: "legacy", policy: "p" },
      ...(images ? { promptImages: images } : {}),
    });
    keeper.load(bound);
    return { keeper, writes };
  };

  it("accept writes the marker with the original prompt and its images; the turn's record removes it (one more write)", async () => {
    const { keeper, writes } = keeperWith([{ data: "aGk=", mimeType: "image/png" }]);
    keeper.accept({ threadId: "thread-1", turnId: "turn-1", prompt: "fix it", freshThread: false });
    await keeper.settle();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.turnInFlight).toEqual({ turnId: "turn-1", prompt: "fix it", images: [{ type: "image", data: "aGk=", mimeType: "image/png" }] });
    expect(writes[0]!.heldTurnIds).toEqual(["turn-1"]);

    keeper.turnRecorded("turn-1");
    await new Promise((r) => setImmediate(r));
    await keeper.settle();
    expect(writes).toHaveLength(2);
    expect(writes[1]!.turnInFlight).toBeUndefined();
    expect(writes[1]!.heldTurnIds).toEqual(["turn-1"]);
  });

  it("with a requestId the marker records it (a cut turn recovered from it keeps its request)", async () => {
    const { keeper, writes } = keeperWith();
    keeper.accept({ threadId: "thread-1", turnId: "turn-1", prompt: "fix it", freshThread: false, requestId: "req-7" });
    await keeper.settle();
    expect(writes[0]!.turnInFlight).toEqual({ turnId: "turn-1", prompt: "fix it", requestId: "req-7" });
  });

  it("the usage and the record's removal in one macrotask are one write; another turn's record leaves the marker", async () => {
    const { keeper, writes } = keeperWith();
    keeper.accept({ threadId: "thread-1", turnId: "turn-1", prompt: "p", freshThread: false });
    await keeper.settle();
    keeper.turnRecorded("turn-0");
    await new Promise((r) => setImmediate(r));
    await keeper.settle();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.turnInFlight).toEqual({ turnId: "turn-1", prompt: "p" });

    keeper.usage("thread-1", usage(10));
    keeper.turnRecorded("turn-1");
    await new Promise((r) => setImmediate(r));
    await keeper.settle();
    expect(writes).toHaveLength(2);
    expect(writes[1]).toMatchObject({ lastUsage: { inputTokens: 10 } });
    expect(writes[1]!.turnInFlight).toBeUndefined();
  });
});

describe("binding keeper: native sync steps", () => {
  it("an intent is written durably on the record as it stands (a thread without one: its turns), before the step returns", async () => {
    const writes: Array<{ binding: ThreadBinding; durable: boolean | undefined }> = [];
    const store = { writeBinding: async (b: ThreadBinding, o?: { durable?: boolean }) => void writes.push({ binding: structuredClone(b), durable: o?.durable }) } as unknown as SessionStore;
    const keeper = createBindingKeeper({ store, logger: silentLogger, ids: {}, fingerprints: { dynamicTools: "t", engineId: "legacy", policy: "p" } });
    keeper.load({ ...bound, heldTurnIds: ["turn-1", "turn-2"] });
    await keeper.nativeIntent("thread-1", { step: "revert", beforeTurnId: "turn-2" });
    expect(writes).toHaveLength(1);
    expect(writes[0]).toEqual({
      binding: { ...bound, heldTurnIds: ["turn-1", "turn-2"], native: { preamble: [], turns: [{ id: "turn-1", units: [] }, { id: "turn-2", units: [] }], intent: { step: "revert", beforeTurnId: "turn-2" } } },
      durable: true,
    });
    await keeper.nativeRecord("thread-1", { preamble: [], turns: [{ id: "turn-1", units: ["mabc:10"] }] });
    expect(writes[1]!.binding.heldTurnIds).toEqual(["turn-1"]);
    // Another thread's step changes nothing.
    await keeper.nativeIntent("thread-9", { step: "revert", beforeTurnId: "turn-1" });
    expect(writes).toHaveLength(2);
  });

  it("a failed intent write rejects (the Codex call must not run), and later writes still go out", async () => {
    let fail = true;
    const writes: ThreadBinding[] = [];
    const store = {
      writeBinding: async (b: ThreadBinding) => {
        if (fail) throw new Error("ENOSPC");
        writes.push(b);
      },
    } as unknown as SessionStore;
    const keeper = createBindingKeeper({ store, logger: silentLogger, ids: {}, fingerprints: { dynamicTools: "t", engineId: "legacy", policy: "p" } });
    keeper.load(bound);
    await expect(keeper.nativeIntent("thread-1", { step: "inject", afterTurnId: null, units: [] })).rejects.toThrow("ENOSPC");
    fail = false;
    await keeper.nativeRecord("thread-1", { preamble: [], turns: [] });
    expect(writes).toHaveLength(1);
  });
});
