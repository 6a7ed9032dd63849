/**
 * The pending-finalize record and the transcript append share one commit: `recordPending` writes the record (visible,
 * safe from a process crash) without fsync, and the next `appendTurn` fsyncs the record, its directory and the
 * transcript at the same moment, returning only when all three are durable. Removing the record is not fsynced.
 */
import fs, { promises as fsp } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createJsonlSessionStore, type SessionStore } from "../../src/store/session-store.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { listPendingFinalize, pendingFinalizeExists } from "../../src/transcript/pending.js";
import { invalidateSessionIndex } from "../../src/transcript/session-file.js";
import { trackFsyncs, type FsyncEvent } from "../helpers/fsync-tracker.js";
import { tempDir } from "../transcript/helpers.js";
import { turnMessages } from "../transcript/fixtures/turn-messages.js";

let dir: string;
let file: string;
let store: SessionStore;
let restore: (() => void) | undefined;
beforeEach(async () => {
  dir = await tempDir("ctm-pending-commit-");
  file = path.join(dir, "s.jsonl");
  invalidateSessionIndex();
  store = createJsonlSessionStore({ sessionFile: file, sessionId: "s1", cwd: dir });
});
afterEach(async () => {
  restore?.();
  restore = undefined;
  await fsp.rm(dir, { recursive: true, force: true });
});

const count = (events: FsyncEvent[], kind: FsyncEvent["kind"], f: string) => events.filter((e) => e.kind === kind && e.file === f).length;

describe("pending record commit", () => {
  it("fsyncs the record, its directory and the transcript together in appendTurn, not before", async () => {
    const pending = sessionSidecarPaths(file).pendingFinalize;
    const t = await trackFsyncs((f) => f === file || f === pending || f === dir || f.startsWith(`${pending}.`), dir);
    restore = t.restore;
    const messages = turnMessages("thr_1", "turn_1");
    const lock = await store.acquireLock();
    try {
      await store.recordPending({ threadId: "thr_1", turnId: "turn_1", prePromptMessageCount: 0, messageCount: messages.length, status: "completed", messages });
      // Written and visible, not yet fsynced.
      expect((await listPendingFinalize(file)).map((r) => r.turnId)).toEqual(["turn_1"]);
      expect(t.events.filter((e) => e.kind.startsWith("fsync"))).toEqual([]);

      await store.appendTurn({ threadId: "thr_1", turnId: "turn_1", messages });
      expect(count(t.events, "fsync-end", pending)).toBe(1);
      expect(count(t.events, "fsync-end", dir)).toBeGreaterThanOrEqual(1);
      expect(count(t.events, "fsync-end", file)).toBe(1);
      // Together: the record's fsync is issued before the transcript's completes (one journal commit, not two in a row).
      const recordStart = t.events.findIndex((e) => e.kind === "fsync-start" && e.file === pending);
      const transcriptEnd = t.events.findIndex((e) => e.kind === "fsync-end" && e.file === file);
      expect(recordStart).toBeGreaterThanOrEqual(0);
      expect(recordStart).toBeLessThan(transcriptEnd);

      const before = t.events.length;
      expect(await store.completePending("turn_1")).toBe(true);
      expect(t.events.slice(before).filter((e) => e.kind.startsWith("fsync"))).toEqual([]);
      expect(await listPendingFinalize(file)).toEqual([]);
    } finally {
      await lock.release();
    }
  });

  it("a second append without a new record commits nothing extra", async () => {
    const pending = sessionSidecarPaths(file).pendingFinalize;
    const t = await trackFsyncs((f) => f === pending, dir);
    restore = t.restore;
    const lock = await store.acquireLock();
    try {
      const messages = turnMessages("thr_1", "turn_1");
      await store.recordPending({ threadId: "thr_1", turnId: "turn_1", prePromptMessageCount: 0, messageCount: messages.length, status: "completed", messages });
      await store.appendTurn({ threadId: "thr_1", turnId: "turn_1", messages });
      await store.appendTurn({ threadId: "thr_1", turnId: "turn_2", messages: turnMessages("thr_1", "turn_2") });
      expect(count(t.events, "fsync-end", pending)).toBe(1);
    } finally {
      await lock.release();
    }
  });

  it("hasPending: none, a record, an unreadable one; none under the lock lets the record be removed unread", async () => {
    const pending = sessionSidecarPaths(file).pendingFinalize;
    expect(await store.hasPending()).toBe(false);
    await store.recordPending({ threadId: "thr_1", turnId: "turn_A", prePromptMessageCount: 0, messageCount: 0, status: "completed" });
    expect(await store.hasPending()).toBe(true);
    await fsp.writeFile(pending, "{not json");
    expect(await store.hasPending()).toBe(true); // unreadable still counts: recovery must look at it
    await fsp.rm(pending);
    // Only a missing record is none (also under a file, on every Node: 22+ does not throw ENOTDIR there, 20 does); a
    // path that cannot be looked at (here a symlink loop, ELOOP) says "maybe", so recovery looks.
    const notADir = path.join(path.dirname(file), "not-a-dir");
    await fsp.writeFile(notADir, "");
    expect(pendingFinalizeExists(path.join(notADir, "s.jsonl"))).toBe(false);
    expect(pendingFinalizeExists(path.join(path.dirname(file), "other.jsonl"))).toBe(false);
    const loop = path.join(path.dirname(file), "loop");
    await fsp.symlink(loop, loop);
    expect(pendingFinalizeExists(path.join(loop, "s.jsonl"))).toBe(true);

    const reads = vi.spyOn(fs, "readFileSync");
    try {
      const pendingReads = () => reads.mock.calls.filter(([f]) => f === pending).length;
      // Without knowing the record set, completing a turn reads the record first (another turn may be in it) ...
      let lock = await store.acquireLock();
      await store.recordPending({ threadId: "thr_1", turnId: "turn_B", prePromptMessageCount: 0, messageCount: 0, status: "completed" });
      expect(await store.completePending("turn_B")).toBe(true);
      expect(pendingReads()).toBeGreaterThan(0);
      await lock.release();
      // ... while "none" under the lock means the record holds only this turn: removed without a read.
      reads.mockClear();
      lock = await store.acquireLock();
      expect(await store.hasPending()).toBe(false);
      await store.recordPending({ threadId: "thr_1", turnId: "turn_C", prePromptMessageCount: 0, messageCount: 0, status: "completed" });
      expect(await store.completePending("turn_C")).toBe(true);
      expect(pendingReads()).toBe(0);
      await lock.release();
      expect(await store.hasPending()).toBe(false);
    } finally {
      reads.mockRestore();
    }
  });

  it("a store reused for a later lock forgets what it knew of the record set (another process may have written it)", async () => {
    let lock = await store.acquireLock();
    expect(await store.listPending()).toEqual([]); // known empty under this lock
    await lock.release();
    // Another writer, between the two locks.
    const other = createJsonlSessionStore({ sessionFile: file, sessionId: "s1", cwd: dir });
    const otherLock = await other.acquireLock();
    await other.recordPending({ threadId: "thr_1", turnId: "turn_A", prePromptMessageCount: 0, messageCount: 0, status: "completed" });
    await otherLock.release();
    lock = await store.acquireLock();
    try {
      await store.recordPending({ threadId: "thr_1", turnId: "turn_B", prePromptMessageCount: 0, messageCount: 0, status: "completed" });
      expect((await listPendingFinalize(file)).map((r) => r.turnId)).toEqual(["turn_A", "turn_B"]);
      expect(await store.completePending("turn_B")).toBe(true);
      expect((await listPendingFinalize(file)).map((r) => r.turnId)).toEqual(["turn_A"]);
    } finally {
      await lock.release();
    }
  });
});
