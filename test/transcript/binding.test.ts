import { promises as fsp } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  applyBindingUpdate,
  BINDING_LOG_COMPACT_BYTES,
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
import { SessionFileError } from "../../src/transcript/errors.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { setTranscriptFaultHook } from "../../src/transcript/fault.js";
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
    ["a newer binding", `${JSON.stringify({ ...sample(), version: 2 })}\n`, "2"],
    ["a newer patch record", `${JSON.stringify(sample())}\n${JSON.stringify({ patch: 2, set: { x: 1 } })}\n`, "a newer patch record"],
  ])("refuses a sidecar of a newer format (%s) with SESSION_SIDECAR_VERSION_UNSUPPORTED, moving nothing", async (_label, content, version) => {
    const dir = await testTempDir("ctm-binding-");
    const sessionFile = await sessionIn(dir);
    const file = sessionSidecarPaths(sessionFile).binding;
    await fsp.writeFile(file, content);
    for (const options of [{}, { readOnly: true }]) {
      const error = await readThreadBinding(sessionFile, undefined, options).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SessionFileError);
      expect(error).toMatchObject({ code: "SESSION_SIDECAR_VERSION_UNSUPPORTED", path: file });
      expect((error as Error).message).toContain(`format version ${version}`);
    }
    expect(await fsp.readFile(file, "utf8")).toBe(content);
    expect((await fsp.readdir(dir)).sort()).toEqual(["s.jsonl.codex-binding.json"]);
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
    // Nothing injected: the ledger array itself is kept (no copy of thousands of units per turn).
    expect(withUsage.ledger).toBe(next.ledger);
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

describe("thread binding log (one record per line, the last complete line wins)", () => {
  const lines = async (file: string): Promise<string[]> => (await fsp.readFile(file, "utf8")).split("\n").filter((l) => l !== "");
  /** Read `file`'s content as another process would: a copy under a session the cache has never seen. */
  async function coldRead(content: string) {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-cold-"));
    await fsp.writeFile(sessionSidecarPaths(sessionFile).binding, content);
    return inspectThreadBinding(sessionFile);
  }

  it("non-durable writes append one line each; a durable write rewrites the log as one line", async () => {
    const dir = await testTempDir("ctm-binding-log-");
    const sessionFile = await sessionIn(dir);
    const file = sessionSidecarPaths(sessionFile).binding;
    await writeThreadBinding(sessionFile, sample());
    const inode = (await fsp.stat(file)).ino;
    for (let i = 2; i <= 4; i++) await writeValidatedThreadBinding(sessionFile, sample({ threadId: `thread-${i}` }), { durable: false });
    expect((await lines(file)).map((l) => (JSON.parse(l) as ThreadBinding).threadId)).toEqual(["thread-1", "thread-2", "thread-3", "thread-4"]);
    // Appended: the same file, no temp files.
    expect((await fsp.stat(file)).ino).toBe(inode);
    expect(await fsp.readdir(dir)).toEqual(["s.jsonl.codex-binding.json"]);
    expect(await readThreadBinding(sessionFile)).toEqual(sample({ threadId: "thread-4" }));
    expect(await coldRead(await fsp.readFile(file, "utf8"))).toEqual({ status: "ok", binding: sample({ threadId: "thread-4" }) });
    await writeThreadBinding(sessionFile, sample({ threadId: "thread-5" }));
    expect(await lines(file)).toEqual([JSON.stringify(sample({ threadId: "thread-5" }))]);
  });

  it("a non-durable write of the binding the file already holds appends nothing; a file changed since is written whole", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-log-"));
    const file = sessionSidecarPaths(sessionFile).binding;
    await writeThreadBinding(sessionFile, sample());
    const withUsage = withLastUsage(sample(), "thread-1", { inputTokens: 10, totalTokens: 20 });
    await writeValidatedThreadBinding(sessionFile, withUsage, { durable: false });
    const before = await fsp.readFile(file, "utf8");
    expect(before.split("\n").filter((l) => l !== "")).toHaveLength(2);
    // The same binding again, as a new object (what the binding keeper hands over when nothing changed).
    await writeValidatedThreadBinding(sessionFile, structuredClone(withUsage), { durable: false });
    expect(await fsp.readFile(file, "utf8")).toBe(before);
    expect(await readThreadBinding(sessionFile)).toEqual(withUsage);
    // Another writer replaced the file since: the unchanged write must not trust the cache, it writes the binding whole.
    await fsp.writeFile(file, `${JSON.stringify(sample({ threadId: "thread-other" }))}\n`);
    await writeValidatedThreadBinding(sessionFile, withUsage, { durable: false });
    expect(await lines(file)).toEqual([JSON.stringify(withUsage)]);
    expect(await coldRead(await fsp.readFile(file, "utf8"))).toEqual({ status: "ok", binding: withUsage });
  });

  it("a binding written whole by an earlier version (pretty-printed) is read, and the next write rewrites it as one line", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-log-"));
    const file = sessionSidecarPaths(sessionFile).binding;
    await fsp.writeFile(file, `${JSON.stringify(sample({ threadId: "thread-old" }), null, 2)}\n`);
    expect(await readThreadBinding(sessionFile)).toEqual(sample({ threadId: "thread-old" }));
    await writeValidatedThreadBinding(sessionFile, sample({ threadId: "thread-new" }), { durable: false });
    expect(await lines(file)).toEqual([JSON.stringify(sample({ threadId: "thread-new" }))]);
    expect(await coldRead(await fsp.readFile(file, "utf8"))).toEqual({ status: "ok", binding: sample({ threadId: "thread-new" }) });
  });

  it("an append cut short (no newline) is ignored, and the next write rewrites the file instead of appending after it", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-log-"));
    const file = sessionSidecarPaths(sessionFile).binding;
    await writeThreadBinding(sessionFile, sample({ threadId: "thread-a" }));
    await writeValidatedThreadBinding(sessionFile, sample({ threadId: "thread-b" }), { durable: false });
    await fsp.appendFile(file, JSON.stringify(sample({ threadId: "thread-torn" })).slice(0, 40));
    expect(await readThreadBinding(sessionFile)).toEqual(sample({ threadId: "thread-b" }));
    await writeValidatedThreadBinding(sessionFile, sample({ threadId: "thread-c" }), { durable: false });
    expect(await lines(file)).toEqual([JSON.stringify(sample({ threadId: "thread-c" }))]);
    expect(await coldRead(await fsp.readFile(file, "utf8"))).toEqual({ status: "ok", binding: sample({ threadId: "thread-c" }) });
  });

  it("a last line that is not JSON falls back to the record before it; one that is JSON but not a binding is corrupt", async () => {
    const a = JSON.stringify(sample({ threadId: "thread-a" }));
    expect(await coldRead(`${a}\n{"version":1,"thr\u0000\u0000\n`)).toEqual({ status: "ok", binding: sample({ threadId: "thread-a" }) });
    expect(await coldRead(`${a}\n${JSON.stringify({ version: 1, threadId: 42 })}\n`)).toMatchObject({ status: "corrupt", reason: expect.stringContaining("threadId") });
    // Only the last line may be torn: two unreadable lines in a row are a corrupt file, not an older binding.
    expect(await coldRead(`${a}\ngarbage\n{"torn\n`)).toEqual({ status: "corrupt", reason: "not JSON" });
    expect(await coldRead("")).toEqual({ status: "corrupt", reason: "not JSON" });
  });

  it("a write on the same thread appends a patch record whose size does not grow with the held turns and the ledger", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-log-"));
    const file = sessionSidecarPaths(sessionFile).binding;
    const heldTurnIds = Array.from({ length: 2_000 }, (_, i) => `0199aaaa-bbbb-7ccc-8ddd-${String(i).padStart(12, "0")}`);
    const ledger = Array.from({ length: 1_500 }, (_, i) => `${String(i).padStart(16, "0")}:${i}`);
    let binding = sample({ heldTurnIds, ledger });
    await writeThreadBinding(sessionFile, binding, { durable: false });
    const whole = (await fsp.stat(file)).size;
    expect(whole).toBeGreaterThan(100_000);
    // A turn's two writes: accepted (new held turn, in-flight marker), then the usage with the marker removed.
    binding = { ...applyBindingUpdate(binding, { threadId: "thread-1", turnId: "t-new", ...fps }), turnInFlight: { turnId: "t-new", prompt: "hello" } };
    await writeValidatedThreadBinding(sessionFile, binding, { durable: false });
    const { turnInFlight: _marker, ...settled } = withLastUsage(binding, "thread-1", { inputTokens: 10, totalTokens: 12 });
    await writeValidatedThreadBinding(sessionFile, settled, { durable: false });
    const appended = (await fsp.readFile(file, "utf8")).slice(whole).split("\n").filter((l) => l !== "");
    expect(appended.map((l) => Buffer.byteLength(l) + 1).reduce((x, y) => x + y)).toBeLessThan(600);
    expect(appended.map((l) => JSON.parse(l) as unknown)).toEqual([
      { patch: 1, set: { turnInFlight: { turnId: "t-new", prompt: "hello" } }, arrays: { heldTurnIds: [1, ["t-new"]] } },
      { patch: 1, unset: ["turnInFlight"], set: { lastUsage: { inputTokens: 10, totalTokens: 12 } } },
    ]);
    expect(await readThreadBinding(sessionFile)).toEqual(settled);
    expect(await coldRead(await fsp.readFile(file, "utf8"))).toEqual({ status: "ok", binding: settled });
  });

  it("a log of patches is rewritten as one whole record before it passes BINDING_LOG_COMPACT_BYTES", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-log-"));
    const file = sessionSidecarPaths(sessionFile).binding;
    let binding = sample();
    await writeValidatedThreadBinding(sessionFile, binding, { durable: false });
    let largest = 0;
    const inodes = new Set<number>();
    for (let i = 0; i < 1_200; i++) {
      binding = applyBindingUpdate(binding, { threadId: "thread-1", turnId: `turn-${String(i).padStart(6, "0")}`, ...fps });
      await writeValidatedThreadBinding(sessionFile, binding, { durable: false });
      const st = await fsp.stat(file);
      inodes.add(st.ino);
      largest = Math.max(largest, st.size);
    }
    expect(largest).toBeLessThanOrEqual(BINDING_LOG_COMPACT_BYTES);
    // Rewritten once the patches filled the log, and patched again after that.
    expect(inodes.size).toBeGreaterThan(1);
    const text = await fsp.readFile(file, "utf8");
    expect(text.split("\n").filter((l) => l !== "").length).toBeGreaterThan(1);
    expect(await coldRead(text)).toEqual({ status: "ok", binding });
  });

  it("every sequence of writes reads back as the binding last written, from the cache and cold (seeded random updates)", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-log-"));
    const file = sessionSidecarPaths(sessionFile).binding;
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    let binding: ThreadBinding = sample();
    await writeThreadBinding(sessionFile, binding);
    const kinds = new Map<string, number>();
    for (let step = 0; step < 400; step++) {
      const choice = rand(10);
      const thread = binding.threadId;
      if (choice <= 3) {
        const ledgerAdd = Array.from({ length: rand(4) }, () => `${rand(50)}:${rand(9) + 1}`);
        const update = { reset: rand(25) === 0, ledgerAdd, ...(rand(3) === 0 ? { developerDelivery: `dev${rand(5)}:40` } : {}), staleTokens: rand(100) };
        const next = applyBindingUpdate(binding, { threadId: rand(30) === 0 ? `thread-${step}` : thread, turnId: `turn-${rand(300)}`, update, ...fps });
        binding = rand(2) === 0 ? { ...next, turnInFlight: { turnId: `turn-${step}`, prompt: `prompt ${step}` } } : next;
      } else if (choice === 4) {
        const { turnInFlight: _gone, ...rest } = binding;
        binding = withLastUsage(rest, thread, { inputTokens: rand(1000), totalTokens: 1000 + rand(1000), ...(rand(2) ? { modelContextWindow: 200_000 } : {}) });
      } else if (choice === 5) binding = markNativeCompaction(binding, thread);
      else if (choice === 6) binding = withContextOverflow(binding, thread, `turn-${step}`);
      else if (choice === 7) binding = { ...binding, heldTurnIds: binding.heldTurnIds.slice(rand(5) + 1) };
      else if (choice === 8) binding = { ...binding, ledger: [...binding.ledger].reverse() };
      const durable = rand(15) === 0;
      await writeValidatedThreadBinding(sessionFile, binding, { durable });
      const text = await fsp.readFile(file, "utf8");
      const last = JSON.parse(text.trimEnd().split("\n").at(-1)!) as { patch?: number };
      const kind = durable ? "durable" : last.patch === 1 ? "patch" : "whole";
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      expect(await readThreadBinding(sessionFile)).toEqual(binding);
      expect(await coldRead(text)).toEqual({ status: "ok", binding });
    }
    // The sequence went through every kind of write.
    expect(Math.min(kinds.get("patch") ?? 0, kinds.get("whole") ?? 0, kinds.get("durable") ?? 0)).toBeGreaterThan(5);
  });

  it("the log is rewritten as one line before it passes BINDING_LOG_COMPACT_BYTES", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-log-"));
    const file = sessionSidecarPaths(sessionFile).binding;
    const ledger = Array.from({ length: 200 }, (_, i) => `${String(i).padStart(16, "0")}:${i}`);
    const lineBytes = JSON.stringify(sample({ ledger, threadId: "thread-00" })).length + 1;
    expect(lineBytes * 4).toBeLessThan(BINDING_LOG_COMPACT_BYTES);
    const writes = Math.ceil((3 * BINDING_LOG_COMPACT_BYTES) / lineBytes);
    let largest = 0;
    let rewrites = 0;
    let inode = -1;
    for (let i = 0; i < writes; i++) {
      await writeValidatedThreadBinding(sessionFile, sample({ ledger, threadId: `thread-${String(i).padStart(2, "0")}` }), { durable: false });
      const st = await fsp.stat(file);
      if (st.ino !== inode) rewrites++;
      inode = st.ino;
      largest = Math.max(largest, st.size);
    }
    expect(largest).toBeLessThanOrEqual(BINDING_LOG_COMPACT_BYTES);
    expect(largest).toBeGreaterThan(BINDING_LOG_COMPACT_BYTES - lineBytes);
    // The first write and one rewrite per full log; every other write appended.
    expect(rewrites).toBe(1 + Math.floor((writes - 1) / Math.floor(BINDING_LOG_COMPACT_BYTES / lineBytes)));
    const last = sample({ ledger, threadId: `thread-${String(writes - 1).padStart(2, "0")}` });
    expect(await coldRead(await fsp.readFile(file, "utf8"))).toEqual({ status: "ok", binding: last });
  });

  it("a file another writer changed (or removed) since this process saw it is rewritten, never appended to", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-log-"));
    const file = sessionSidecarPaths(sessionFile).binding;
    await writeThreadBinding(sessionFile, sample());
    await fsp.appendFile(file, `${JSON.stringify(sample({ threadId: "thread-other" }))}\n`);
    await writeValidatedThreadBinding(sessionFile, sample({ threadId: "thread-mine" }), { durable: false });
    expect(await lines(file)).toEqual([JSON.stringify(sample({ threadId: "thread-mine" }))]);
    await clearThreadBinding(sessionFile);
    await writeValidatedThreadBinding(sessionFile, sample({ threadId: "thread-after-reset" }), { durable: false });
    expect(await lines(file)).toEqual([JSON.stringify(sample({ threadId: "thread-after-reset" }))]);
  });

  it("an append that fails halfway is cut back: the previous record stays the binding and the next write starts clean", async () => {
    const sessionFile = await sessionIn(await testTempDir("ctm-binding-log-"));
    const file = sessionSidecarPaths(sessionFile).binding;
    await writeThreadBinding(sessionFile, sample({ threadId: "thread-a" }));
    const before = await fsp.readFile(file, "utf8");
    setTranscriptFaultHook((point) => {
      if (point === "binding:mid-append") throw Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" });
    });
    try {
      await expect(writeValidatedThreadBinding(sessionFile, sample({ threadId: "thread-b" }), { durable: false })).rejects.toThrow(/ENOSPC/);
    } finally {
      setTranscriptFaultHook(undefined);
    }
    expect(await fsp.readFile(file, "utf8")).toBe(before);
    expect(await readThreadBinding(sessionFile)).toEqual(sample({ threadId: "thread-a" }));
    await writeValidatedThreadBinding(sessionFile, sample({ threadId: "thread-c" }), { durable: false });
    expect(await coldRead(await fsp.readFile(file, "utf8"))).toEqual({ status: "ok", binding: sample({ threadId: "thread-c" }) });
    expect(await lines(file)).toEqual([JSON.stringify(sample({ threadId: "thread-a" })), JSON.stringify(sample({ threadId: "thread-c" }))]);
  });
});
