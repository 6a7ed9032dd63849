import { promises as fsp } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  applyBindingUpdate,
  clearThreadBinding,
  inspectThreadBinding,
  markNativeCompaction,
  readThreadBinding,
  withContextOverflow,
  threadBindingSchema,
  withLastUsage,
  writeThreadBinding,
  writeValidatedThreadBinding,
  type ThreadBinding,
} from "../../src/transcript/binding.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { captureLogger } from "./helpers.js";
import { testTempDir } from "../helpers/temp-dir.js";

const fps = { dynamicToolsFingerprint: "d", engineId: "e", policyFingerprint: "p", projectionMode: "delta" };

function sample(overrides: Partial<ThreadBinding> = {}): ThreadBinding {
  return {
    version: 1,
    threadId: "thread-1",
    dynamicToolsFingerprint: "d",
    engineId: "e",
    policyFingerprint: "p",
    projectionMode: "delta",
    heldTurnIds: ["u1"],
    ledger: ["aaaa:3"],
    ...overrides,
  };
}

async function sessionIn(dir: string): Promise<string> {
  return path.join(dir, "s.jsonl");
}

describe("thread binding sidecar I/O", () => {
  it("returns undefined when there is no sidecar", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-"));
    expect(await readThreadBinding(sessionFile)).toBeUndefined();
  });

  it("round-trips every field through an atomic write and leaves no temp files", async () => {
    const dir = await testTempDir("ctm-binding-");
    const sessionFile = await sessionIn(dir);
    const binding = sample({
      projectionEpoch: "w3",
      developerInstructionsHash: "abc",
      lastUsage: { inputTokens: 900, totalTokens: 950, modelContextWindow: 190_000 },
      nativeCompactions: 2,
      updatedBy: "turn",
    });
    await writeThreadBinding(sessionFile, binding);
    expect(await readThreadBinding(sessionFile)).toEqual(binding);
    expect(await fsp.readdir(dir)).toEqual(["s.jsonl.codex-binding.json"]);
  });

  it("keeps one valid binding when writes race in one process", async () => {
    const dir = await testTempDir("ctm-binding-");
    const sessionFile = await sessionIn(dir);
    await Promise.all(Array.from({ length: 8 }, (_, i) => writeThreadBinding(sessionFile, sample({ threadId: `thread-${i}` }))));
    const read = await readThreadBinding(sessionFile);
    expect(read?.threadId).toMatch(/^thread-[0-7]$/);
    expect((await fsp.readdir(dir)).filter((f) => f.includes(".tmp-"))).toEqual([]);
  });

  it("rejects writing an invalid binding", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-"));
    await expect(writeThreadBinding(sessionFile, { ...sample(), threadId: "" })).rejects.toThrow();
    expect(await readThreadBinding(sessionFile)).toBeUndefined();
  });

  it.each([
    ["not JSON", "{ not json"],
    ["wrong schema", JSON.stringify({ version: 1, threadId: 42 })],
    ["future version", JSON.stringify({ ...sample(), version: 2 })],
  ])("moves a corrupt sidecar (%s) aside with a warning and starts fresh", async (_label, content) => {
    const dir = await testTempDir("ctm-binding-");
    const sessionFile = await sessionIn(dir);
    const file = sessionSidecarPaths(sessionFile).binding;
    await fsp.writeFile(file, content);
    const log = captureLogger();
    expect(await readThreadBinding(sessionFile, log.logger)).toBeUndefined();
    expect(await fsp.readFile(`${file}.corrupt-1`, "utf8")).toBe(content);
    expect(await readThreadBinding(sessionFile)).toBeUndefined();
    expect(log.events()).toEqual(["thread binding corrupt"]);
    expect(log.records[0]?.["level"]).toBe(40);
    // A second corrupt file gets the next free suffix instead of overwriting the first.
    await fsp.writeFile(file, "garbage");
    await readThreadBinding(sessionFile);
    expect((await fsp.readdir(dir)).sort()).toEqual([
      "s.jsonl.codex-binding.json.corrupt-1",
      "s.jsonl.codex-binding.json.corrupt-2",
    ]);
  });

  it.each([
    ["not JSON", "{ not json", "not JSON"],
    ["wrong schema", JSON.stringify({ version: 1, threadId: 42 }), "threadId"],
  ])("read-only: reports a corrupt sidecar (%s) and leaves it in place", async (_label, content, reason) => {
    const dir = await testTempDir("ctm-binding-");
    const sessionFile = await sessionIn(dir);
    const file = sessionSidecarPaths(sessionFile).binding;
    await fsp.writeFile(file, content);
    const log = captureLogger();
    expect(await readThreadBinding(sessionFile, log.logger, { readOnly: true })).toBeUndefined();
    expect(log.events()).toEqual(["thread binding corrupt"]);
    const found = await inspectThreadBinding(sessionFile);
    expect(found.status).toBe("corrupt");
    expect(found.status === "corrupt" && found.reason).toContain(reason);
    expect(await fsp.readdir(dir)).toEqual(["s.jsonl.codex-binding.json"]);
    expect(await fsp.readFile(file, "utf8")).toBe(content);
    await writeThreadBinding(sessionFile, sample());
    expect(await inspectThreadBinding(sessionFile)).toEqual({ status: "ok", binding: sample() });
    await clearThreadBinding(sessionFile);
    expect(await inspectThreadBinding(sessionFile)).toEqual({ status: "missing" });
  });

  it("clears a binding and reports whether one existed", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-"));
    expect(await clearThreadBinding(sessionFile)).toBe(false);
    await writeThreadBinding(sessionFile, sample());
    expect(await clearThreadBinding(sessionFile)).toBe(true);
    expect(await readThreadBinding(sessionFile)).toBeUndefined();
  });
});

describe("binding updates (pure)", () => {
  it("creates a binding for a fresh thread from the projection's update", () => {
    const next = applyBindingUpdate(undefined, {
      threadId: "t1",
      turnId: "u1",
      update: { reset: true, ledgerAdd: ["h1:2"], projectionEpoch: "e1", developerInstructionsHash: "dev" },
      ...fps,
      updatedBy: "turn",
    });
    expect(next).toEqual({
      version: 1,
      threadId: "t1",
      ...fps,
      heldTurnIds: ["u1"],
      ledger: ["h1:2"],
      projectionEpoch: "e1",
      developerInstructionsHash: "dev",
      updatedBy: "turn",
    });
    expect(threadBindingSchema.safeParse(next).success).toBe(true);
  });

  it("accumulates held turns and ledger on the same thread, deduplicated, keeping epoch and usage", () => {
    const first = sample({ projectionEpoch: "e1", lastUsage: { inputTokens: 10, totalTokens: 12 } });
    const next = applyBindingUpdate(first, { threadId: "thread-1", turnId: "u2", update: { reset: false, ledgerAdd: ["aaaa:3", "bbbb:4"] }, ...fps });
    expect(next).toMatchObject({ heldTurnIds: ["u1", "u2"], ledger: ["aaaa:3", "bbbb:4"], projectionEpoch: "e1", lastUsage: { inputTokens: 10 } });
    const withUsage = applyBindingUpdate(next, { threadId: "thread-1", turnId: "u3", ...fps, usage: { inputTokens: 99, totalTokens: 100 } });
    expect(withUsage.lastUsage).toEqual({ inputTokens: 99, totalTokens: 100 });
    expect(withUsage.heldTurnIds).toEqual(["u1", "u2", "u3"]);
  });

  it("forgets the old thread's state on rotation (reset or another thread id)", () => {
    const old = sample({ projectionEpoch: "e1", lastUsage: { inputTokens: 10, totalTokens: 12 }, nativeCompactions: 3 });
    const reset = applyBindingUpdate(old, { threadId: "thread-2", turnId: "u9", update: { reset: true, ledgerAdd: [] }, ...fps });
    expect(reset).toEqual({ version: 1, threadId: "thread-2", ...fps, heldTurnIds: ["u9"], ledger: [] });
    const other = applyBindingUpdate(old, { threadId: "thread-3", turnId: "u9", ...fps });
    expect(other).toMatchObject({ threadId: "thread-3", heldTurnIds: ["u9"], ledger: [] });
    expect(other.projectionEpoch).toBeUndefined();
  });

  it("ignores an update that is not a binding update", () => {
    const next = applyBindingUpdate(sample(), { threadId: "thread-1", turnId: "u2", update: { junk: true }, ...fps });
    expect(next).toMatchObject({ heldTurnIds: ["u1", "u2"], ledger: ["aaaa:3"] });
  });

  it("clears ledger and held turns after a native compaction on the bound thread only", () => {
    const binding = sample();
    const compacted = markNativeCompaction(binding, "thread-1", "turn");
    expect(compacted).toMatchObject({ ledger: [], heldTurnIds: [], nativeCompactions: 1, updatedBy: "turn" });
    expect(markNativeCompaction(compacted, "thread-1").nativeCompactions).toBe(2);
    expect(markNativeCompaction(binding, "other-thread")).toBe(binding);
    // The counter survives later turns on the same thread.
    const later = applyBindingUpdate(compacted, { threadId: "thread-1", turnId: "u2", ...fps });
    expect(later).toMatchObject({ nativeCompactions: 1, heldTurnIds: ["u2"] });
  });

  it("records a context overflow for the bound thread until a native compaction or the next accepted turn", () => {
    const binding = sample();
    const overflowed = withContextOverflow(binding, "thread-1", "t9");
    expect(overflowed.contextOverflow).toEqual({ turnId: "t9" });
    expect(threadBindingSchema.parse(overflowed)).toEqual(overflowed);
    expect(withContextOverflow(binding, "thread-2", "t9")).toBe(binding);
    expect(markNativeCompaction(overflowed, "thread-1").contextOverflow).toBeUndefined();
    expect(applyBindingUpdate(overflowed, { threadId: "thread-1", turnId: "t10", ...fps }).contextOverflow).toBeUndefined();
  });

  it("records last usage only for the bound thread", () => {
    const binding = sample();
    expect(withLastUsage(binding, "thread-1", { inputTokens: 5, totalTokens: 6 }).lastUsage).toEqual({ inputTokens: 5, totalTokens: 6 });
    expect(withLastUsage(binding, "thread-2", { inputTokens: 5, totalTokens: 6 })).toBe(binding);
  });

  it("keeps developer deliveries and the stale cost on the same thread, and starts them over on a fresh one", () => {
    const first = applyBindingUpdate(undefined, { threadId: "thread-1", turnId: "u1", ...fps, update: { reset: true, ledgerAdd: [], developerDelivery: "h1:10", staleCostTokens: 0, staleTokens: 0 } });
    expect(first).toMatchObject({ developerDeliveries: ["h1:10"], staleCostTokens: 0, staleTokens: 0 });
    const second = applyBindingUpdate(first, { threadId: "thread-1", turnId: "u2", ...fps, update: { reset: false, ledgerAdd: [], developerDelivery: "h2:12", staleCostTokens: 1.2, staleTokens: 12 } });
    expect(second).toMatchObject({ developerDeliveries: ["h1:10", "h2:12"], staleCostTokens: 1.2, staleTokens: 12 });
    const third = applyBindingUpdate(second, { threadId: "thread-1", turnId: "u3", ...fps, update: { reset: false, ledgerAdd: [] } });
    expect(third).toMatchObject({ developerDeliveries: ["h1:10", "h2:12"], staleCostTokens: 1.2 });
    const rotated = applyBindingUpdate(second, { threadId: "thread-2", turnId: "u4", ...fps, update: { reset: true, ledgerAdd: [], developerDelivery: "h3:9", staleCostTokens: 0 } });
    expect(rotated).toMatchObject({ developerDeliveries: ["h3:9"], staleCostTokens: 0 });
    expect(threadBindingSchema.parse(second)).toEqual(second);
    const compacted = markNativeCompaction(second, "thread-1");
    expect(compacted.developerDeliveries).toBeUndefined();
    expect(compacted.staleCostTokens).toBe(0);
  });
});

describe("thread binding read cache", () => {
  it("a binding this process wrote or read is not read again while the file is unchanged (same frozen object)", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-cache-"));
    await writeThreadBinding(sessionFile, sample({ ledger: ["a:1", "b:2"] }), { durable: false });
    const first = await readThreadBinding(sessionFile);
    const second = await readThreadBinding(sessionFile);
    expect(first).toEqual(sample({ ledger: ["a:1", "b:2"] }));
    expect(second).toBe(first);
    expect(Object.isFrozen(first) && Object.isFrozen(first!.ledger)).toBe(true);
    // A caller that mutates what it was handed gets an error at the mutation, not a corrupted cache.
    expect(() => (first!.ledger as string[]).push("c:3")).toThrow(TypeError);
  });

  it("another writer's binding is read (the file's identity changed), whether it replaced the file or rewrote it in place", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-cache-"));
    const file = sessionSidecarPaths(sessionFile).binding;
    await writeThreadBinding(sessionFile, sample(), { durable: false });
    expect((await readThreadBinding(sessionFile))?.threadId).toBe("thread-1");
    // Replaced (temp file + rename), as another process's write does.
    await fsp.writeFile(`${file}.other`, JSON.stringify(sample({ threadId: "thread-2" })));
    await fsp.rename(`${file}.other`, file);
    expect((await readThreadBinding(sessionFile))?.threadId).toBe("thread-2");
    // Rewritten in place with another length.
    await fsp.writeFile(file, JSON.stringify(sample({ threadId: "thread-33" })));
    expect((await readThreadBinding(sessionFile))?.threadId).toBe("thread-33");
    await fsp.rm(file);
    expect(await readThreadBinding(sessionFile)).toBeUndefined();
  });

  it("an unchanged ledger keeps its frozen array from write to write; a changed one gets a new array", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-cache-"));
    const ledger = Array.from({ length: 50 }, (_, i) => `${String(i).padStart(4, "0")}:${i + 1}`);
    await writeValidatedThreadBinding(sessionFile, sample({ ledger: [...ledger] }), { durable: false });
    const first = (await readThreadBinding(sessionFile))!;
    // The turn's two writes (accept, then usage) change other fields: the ledger array stays the same object.
    await writeValidatedThreadBinding(sessionFile, sample({ ledger: [...ledger], heldTurnIds: ["u1", "u2"] }), { durable: false });
    const second = (await readThreadBinding(sessionFile))!;
    expect(second).not.toBe(first);
    expect(second.heldTurnIds).toEqual(["u1", "u2"]);
    expect(second.ledger).toBe(first.ledger);
    expect(Object.isFrozen(second.ledger)).toBe(true);
    // One unit more (or one changed) is a new array with the new content.
    await writeValidatedThreadBinding(sessionFile, sample({ ledger: [...ledger, "ffff:9"] }), { durable: false });
    const grown = (await readThreadBinding(sessionFile))!;
    expect(grown.ledger).not.toBe(first.ledger);
    expect(grown.ledger).toEqual([...ledger, "ffff:9"]);
    const changed = [...ledger];
    changed[10] = "eeee:2";
    await writeValidatedThreadBinding(sessionFile, sample({ ledger: changed }), { durable: false });
    expect((await readThreadBinding(sessionFile))!.ledger).toEqual(changed);
    // Read from disk (another process's write): the same rule against what this process last cached.
    await fsp.writeFile(`${sessionSidecarPaths(sessionFile).binding}.other`, JSON.stringify(sample({ ledger: changed, threadId: "thread-9" })));
    const cached = (await readThreadBinding(sessionFile))!;
    await fsp.rename(`${sessionSidecarPaths(sessionFile).binding}.other`, sessionSidecarPaths(sessionFile).binding);
    const reread = (await readThreadBinding(sessionFile))!;
    expect(reread.threadId).toBe("thread-9");
    expect(reread.ledger).toBe(cached.ledger);
  });

  it("the writer's own object is not frozen (the cache keeps a copy), also on the store's unvalidated write", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-cache-"));
    const mine = sample();
    await writeValidatedThreadBinding(sessionFile, mine, { durable: false });
    expect(Object.isFrozen(mine)).toBe(false);
    mine.ledger.push("z:9");
    expect((await readThreadBinding(sessionFile))?.ledger).toEqual(["aaaa:3"]);
  });
});
