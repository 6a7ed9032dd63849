/**
 * `SessionStore.rewriteEntries` and the engine-facing `rewriteTranscriptEntries` helper built on it: the rewrite runs
 * only under the session lock, later reads and appends see the rewritten file, and the helper never throws.
 */
import { promises as fsp } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { createTranscriptRewriter } from "../../src/context-engine/transcript-rewriter.js";
import { createJsonlSessionStore, type SessionStore, type SessionStoreLock } from "../../src/store/session-store.js";
import { withSessionLock } from "../../src/transcript/lock.js";
import { recoverCodexSession } from "../../src/recovery.js";
import type { ContextEngine } from "../../src/context-engine/types.js";
import { invalidateSessionIndex, readSessionTranscript } from "../../src/transcript/session-file.js";
import { captureLogger, tempDir } from "../transcript/helpers.js";
import { turnMessages } from "../transcript/fixtures/turn-messages.js";

let dir: string;
let file: string;
beforeEach(async () => {
  dir = await tempDir("ctm-rewrite-store-");
  file = path.join(dir, "s.jsonl");
  invalidateSessionIndex();
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

const SECRET = "sk-live-SECRET-TOOL-OUTPUT";
const stubbed = { role: "toolResult", toolCallId: "call_t1", toolName: "lookup", content: [{ type: "text", text: "[collected]" }], isError: false } as unknown as AgentMessage;

/** A session with two mirrored turns, written through a store under its lock; t1's tool result carries SECRET. */
async function session(): Promise<{ store: SessionStore; toolResultId: string }> {
  const store = createJsonlSessionStore({ sessionFile: file, sessionId: "s1", cwd: dir });
  const lock = await store.acquireLock();
  const t1 = turnMessages("thr", "t1");
  (t1[3] as { content: unknown }).content = [{ type: "text", text: `${SECRET} `.repeat(50) }];
  await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1 });
  await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
  await lock.release();
  const toolResultId = (await readSessionTranscript(file)).entries[3]!.id;
  return { store, toolResultId };
}

describe("SessionStore.rewriteEntries", () => {
  it("rewrites under the lock; the cached history and the writer's index follow the new file", async () => {
    const { store, toolResultId } = await session();
    const lock = await store.acquireLock();
    try {
      const before = await store.readHistory(); // warms the history cache
      const result = await store.rewriteEntries({ replacements: [{ entryId: toolResultId, message: stubbed }] });
      expect(result).toMatchObject({ changed: true, rewrittenEntries: 1 });
      expect(result.bytesFreed).toBeGreaterThan(1000);
      const after = await store.readHistory();
      expect(after.messages[3]).toEqual(stubbed);
      expect(after.messages.filter((_, i) => i !== 3)).toEqual(before.messages.filter((_, i) => i !== 3));
      expect(after.origins).toEqual(before.origins);
      // The mirror of an already mirrored turn is still a no-op (its keys survived the rewrite)...
      const again = await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
      expect(again).toMatchObject({ appended: 0, skipped: 5 });
      // ...and a new turn chains after the rewritten leaf.
      const leaf = (await readSessionTranscript(file)).leafId;
      await store.appendTurn({ threadId: "thr", turnId: "t3", messages: turnMessages("thr", "t3") });
      const entries = (await readSessionTranscript(file)).entries;
      expect(entries).toHaveLength(15);
      expect(entries[10]!.parentId).toBe(leaf);
      expect((await store.readHistory()).messages).toHaveLength(15);
    } finally {
      await lock.release();
    }
    expect(await fsp.readFile(file, "utf8")).not.toContain(SECRET);
  });

  it("is refused once the store's lock was released, and writes nothing", async () => {
    const { store, toolResultId } = await session();
    const lock = await store.acquireLock();
    await lock.release();
    const original = await fsp.readFile(file, "utf8");
    const error = await store.rewriteEntries({ replacements: [{ entryId: toolResultId, message: stubbed }] }).catch((e: unknown) => e);
    expect((error as { code?: string }).code).toBe("SESSION_LOCK_COMPROMISED");
    expect(await fsp.readFile(file, "utf8")).toBe(original);
  });
});

describe("createTranscriptRewriter (runtimeContext.rewriteTranscriptEntries)", () => {
  it("held: rewrites under the caller's lock and logs counts, never content", async () => {
    const { store, toolResultId } = await session();
    const log = captureLogger();
    const rewrite = createTranscriptRewriter({ store, logger: log.logger, ids: { sessionId: "s1" }, lock: "held" });
    const lock = await store.acquireLock();
    try {
      expect(await rewrite({ replacements: [{ entryId: toolResultId, message: stubbed }] })).toMatchObject({ changed: true, rewrittenEntries: 1 });
    } finally {
      await lock.release();
    }
    const line = log.records.find((r) => r.event === "transcript rewrite")!;
    expect(line).toMatchObject({ sessionId: "s1", requested: 1, changed: true, rewrittenEntries: 1 });
    const logged = JSON.stringify(log.records);
    expect(logged).not.toContain(SECRET);
    expect(logged).not.toContain("[collected]");
  });

  it("never throws: a refused rewrite resolves changed: false with the reason", async () => {
    const { store, toolResultId } = await session();
    const log = captureLogger();
    const rewrite = createTranscriptRewriter({ store, logger: log.logger, ids: { sessionId: "s1" }, lock: "held" });
    const lock = await store.acquireLock();
    await lock.release(); // an engine calling the helper after its call returned
    const late = await rewrite({ replacements: [{ entryId: toolResultId, message: stubbed }] });
    expect(late).toMatchObject({ changed: false, bytesFreed: 0, rewrittenEntries: 0 });
    expect(late.reason).toMatch(/lock/i);
    // A store that never took the lock itself leaves the lock to its caller: the request is checked first.
    const fresh = createJsonlSessionStore({ sessionFile: file, sessionId: "s1", cwd: dir });
    const freshRewrite = createTranscriptRewriter({ store: fresh, logger: log.logger, ids: { sessionId: "s1" }, lock: "held" });
    const bad = await freshRewrite({ replacements: [{ entryId: toolResultId, message: { content: "no role" } }] } as never);
    expect(bad.changed).toBe(false);
    expect(bad.reason).toContain("replacements.0.message.role");
    expect(log.records.filter((r) => r.event === "transcript rewrite refused").map((r) => r.err)).toEqual([
      "SessionFileError:SESSION_LOCK_COMPROMISED",
      "SessionFileError:SESSION_INVALID_ARGUMENT",
    ]);
    expect(await fsp.readFile(file, "utf8")).toContain(SECRET);
  });

  it("acquire: waits for the turn holding the lock, then rewrites under its own", async () => {
    const { store, toolResultId } = await session();
    const rewrite = createTranscriptRewriter({ store, logger: captureLogger().logger, ids: { sessionId: "s1" }, lock: "acquire" });
    const turnStore = createJsonlSessionStore({ sessionFile: file, sessionId: "s1", cwd: dir });
    const turnLock = await turnStore.acquireLock();
    let settled = false;
    const pending = rewrite({ replacements: [{ entryId: toolResultId, message: stubbed }] }).then((r) => {
      settled = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 150));
    expect(settled).toBe(false);
    expect(await fsp.readFile(file, "utf8")).toContain(SECRET);
    await turnLock.release();
    expect(await pending).toMatchObject({ changed: true, rewrittenEntries: 1 });
    expect(await fsp.readFile(file, "utf8")).not.toContain(SECRET);
    // It released what it took: the lock is free again.
    const next = await turnStore.acquireLock({ timeoutMs: 1000 });
    await next.release();
  });

  it("ambient: while the caller holds the store's lock it uses it; after, it takes the lock", async () => {
    const { toolResultId } = await session();
    // As compactCodexSession builds it: the compaction holds the store's lock while compact() and maintain() run.
    const store = createJsonlSessionStore({ sessionFile: file, sessionId: "s1", cwd: dir });
    let held: SessionStoreLock | undefined;
    const rewrite = createTranscriptRewriter({ store, logger: captureLogger().logger, ids: { sessionId: "s1" }, lock: "ambient", lockTimeoutMs: 2000, heldLock: () => held });
    const lock = await store.acquireLock();
    held = lock;
    const inside = await lock.runHeld(() => rewrite({ replacements: [{ entryId: toolResultId, message: stubbed }] }));
    held = undefined;
    await lock.release();
    expect(inside).toMatchObject({ changed: true });
    const last = (await readSessionTranscript(file)).entries.at(-1)!;
    const outside = await rewrite({ replacements: [{ entryId: last.id, message: { role: "assistant", content: "[short]" } as AgentMessage }] });
    expect(outside).toMatchObject({ changed: true, rewrittenEntries: 1 });
    // Outside, it took and released the lock: another holder can have it at once.
    await withSessionLock(file, async () => undefined, { timeoutMs: 1000 });
  });
});

describe("recovery", () => {
  it("the replayed finalize of a crashed turn gets the helper, under recovery's lock", async () => {
    const { store, toolResultId } = await session();
    // A crash after t2's mirror, before its finalize: the pending record is still there.
    const lock = await store.acquireLock();
    await store.recordPending({ threadId: "thr", turnId: "t2", prePromptMessageCount: 5, messageCount: 5, status: "completed", messages: turnMessages("thr", "t2") });
    await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    await lock.release();
    const results: unknown[] = [];
    const engine: ContextEngine = {
      info: { id: "gc", name: "GC" },
      async ingest() {
        return { ingested: true };
      },
      async assemble({ messages }) {
        return { messages, estimatedTokens: 0 };
      },
      async compact() {
        return { ok: true, compacted: false };
      },
      async afterTurn({ runtimeContext }) {
        providers.push(runtimeContext?.provider);
        results.push(await runtimeContext!.rewriteTranscriptEntries!({ replacements: [{ entryId: toolResultId, message: stubbed }] }));
      },
    };
    const providers: unknown[] = [];
    // The host's runtime context (a plugin host's provider, model, llm) reaches the replayed afterTurn.
    const recovered = await recoverCodexSession({ sessionId: "s1", sessionFile: file, contextEngine: engine, runtimeContext: { provider: "codex" } });
    expect(providers).toEqual(["codex"]);
    expect(recovered).toMatchObject({ pending: 1, finalized: 1 });
    expect(results).toEqual([{ changed: true, bytesFreed: expect.any(Number), rewrittenEntries: 1 }]);
    expect(await fsp.readFile(file, "utf8")).not.toContain(SECRET);
  });
});
