import { promises as fsp } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SessionFileError } from "../../src/transcript/errors.js";
import { withSessionLock } from "../../src/transcript/lock.js";
import { mirrorTurnToTranscript } from "../../src/transcript/mirror.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { completePendingFinalize, listPendingFinalize, recordPendingFinalize } from "../../src/transcript/pending.js";
import { resetCodexSession } from "../../src/transcript/reset.js";
import { invalidateSessionIndex, readSessionHistory, readSessionTranscript } from "../../src/transcript/session-file.js";
import { tempDir } from "./helpers.js";
import { turnMessages } from "./fixtures/turn-messages.js";

let dir: string;
let file: string;
beforeEach(async () => {
  dir = await tempDir();
  file = path.join(dir, "s.jsonl");
  invalidateSessionIndex();
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

const rec = (turnId: string, n = 0) => ({ threadId: "thr", turnId, prePromptMessageCount: n, messageCount: 5, status: "completed" as const });

describe("pending finalize", () => {
  it("records, lists oldest first, replaces by turnId, completes, and removes the sidecar when empty", async () => {
    expect(await listPendingFinalize(file)).toEqual([]);
    await recordPendingFinalize(file, rec("t1", 0));
    await recordPendingFinalize(file, rec("t2", 5));
    await recordPendingFinalize(file, { ...rec("t1", 0), status: "failed" });
    const list = await listPendingFinalize(file);
    expect(list.map((r) => [r.turnId, r.status, r.prePromptMessageCount])).toEqual([
      ["t1", "failed", 0],
      ["t2", "completed", 5],
    ]);
    expect(typeof list[0]!.recordedAt).toBe("string");
    expect(await completePendingFinalize(file, "t1")).toBe(true);
    expect(await completePendingFinalize(file, "t1")).toBe(false);
    expect((await listPendingFinalize(file)).map((r) => r.turnId)).toEqual(["t2"]);
    expect(await completePendingFinalize(file, "t2")).toBe(true);
    await expect(fsp.stat(sessionSidecarPaths(file).pendingFinalize)).rejects.toMatchObject({ code: "ENOENT" });
    // Atomic writes leave no temp files behind.
    expect((await fsp.readdir(dir)).filter((n) => n.includes(".tmp"))).toEqual([]);
  });

  it("works inside a caller's locked section, with takeLock standalone, and concurrently from many callers", async () => {
    await withSessionLock(file, async () => {
      await recordPendingFinalize(file, rec("in-lock"));
      // Taking the lock again from the holder's own chain is refused, not deadlocked.
      await expect(recordPendingFinalize(file, rec("nested"), { takeLock: true })).rejects.toMatchObject({ code: "SESSION_LOCK_REENTRANT" });
    });
    await recordPendingFinalize(file, rec("standalone"), { takeLock: { timeoutMs: 5000 } });
    await Promise.all(Array.from({ length: 10 }, (_, i) => recordPendingFinalize(file, rec(`c${i}`))));
    await Promise.all([completePendingFinalize(file, "c3"), completePendingFinalize(file, "c7", { takeLock: true }), recordPendingFinalize(file, rec("late"))]);
    expect((await listPendingFinalize(file)).map((r) => r.turnId).sort()).toEqual(
      ["in-lock", "standalone", "late", ...Array.from({ length: 10 }, (_, i) => `c${i}`).filter((t) => t !== "c3" && t !== "c7")].sort(),
    );
  });

  it("rejects invalid records and refuses a corrupt sidecar without overwriting it", async () => {
    const err = await recordPendingFinalize(file, { ...rec("x"), prePromptMessageCount: -1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SessionFileError);
    expect((err as SessionFileError).code).toBe("SESSION_INVALID_ARGUMENT");
    const sidecar = sessionSidecarPaths(file).pendingFinalize;
    await fsp.writeFile(sidecar, "{broken");
    const err2 = await listPendingFinalize(file).catch((e: unknown) => e);
    expect((err2 as SessionFileError).code).toBe("SESSION_PENDING_INVALID");
    expect((err2 as SessionFileError).message).toContain(sidecar);
    await expect(recordPendingFinalize(file, rec("y"))).rejects.toMatchObject({ code: "SESSION_PENDING_INVALID" });
    expect(await fsp.readFile(sidecar, "utf8")).toBe("{broken");
  });
});

describe("resetCodexSession", () => {
  it("with nextSessionId, leaves a fresh transcript whose header names it; the next turn under that id appends to it", async () => {
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const r = await resetCodexSession({ sessionFile: file, archiveTranscript: true, nextSessionId: "s-next", cwd: dir });
    expect(r).toMatchObject({ archivedTo: `${file}.archived-1.jsonl`, sessionId: "s-next" });
    const fresh = await readSessionTranscript(file);
    expect(fresh.header).toMatchObject({ type: "session", id: "s-next", cwd: dir });
    expect(fresh.entries).toEqual([]);
    // The old id is refused on the fresh transcript; the new one appends.
    await expect(mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr2", turnId: "t2", messages: turnMessages("thr2", "t2"), onSessionIdMismatch: "throw" } as never)).rejects.toMatchObject({ code: "SESSION_ID_MISMATCH" });
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s-next", threadId: "thr2", turnId: "t2", messages: turnMessages("thr2", "t2") });
    expect((await readSessionHistory(file)).messages.length).toBeGreaterThan(0);
    // Without a transcript to archive, nothing is written and no id is reported.
    const dir2 = await tempDir();
    const none = await resetCodexSession({ sessionFile: path.join(dir2, "x.jsonl"), archiveTranscript: true, nextSessionId: "x-next" });
    expect(none.sessionId).toBeUndefined();
    await fsp.rm(dir2, { recursive: true, force: true });
  });

  it("clears the binding, archives the transcript to the next free name, and keeps pending records", async () => {
    const paths = sessionSidecarPaths(file);
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    await recordPendingFinalize(file, rec("t1"));
    await fsp.writeFile(paths.binding, JSON.stringify({ threadId: "thr" }));
    await fsp.writeFile(`${file}.archived-1.jsonl`, "older archive");
    const original = await fsp.readFile(file);

    const r = await resetCodexSession({ sessionFile: file, archiveTranscript: true });
    expect(r).toEqual({ bindingCleared: true, archivedTo: `${file}.archived-2.jsonl`, pendingFinalize: 1 });
    await expect(fsp.stat(paths.binding)).rejects.toMatchObject({ code: "ENOENT" });
    await expect(fsp.stat(file)).rejects.toMatchObject({ code: "ENOENT" });
    expect(await fsp.readFile(`${file}.archived-2.jsonl`)).toEqual(original);
    expect(await fsp.readFile(`${file}.archived-1.jsonl`, "utf8")).toBe("older archive");
    expect((await listPendingFinalize(file)).map((p) => p.turnId)).toEqual(["t1"]);
    // The archived turn is still readable where it went.
    expect((await readSessionHistory(r.archivedTo!)).messages).toEqual(turnMessages("thr", "t1"));

    // A fresh session starts at the old path; its index is not confused by the archived file.
    const m = await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr2", turnId: "t1", messages: turnMessages("thr2", "t1") });
    expect(m.appended).toBe(5);
    expect((await readSessionTranscript(file)).buildMessages()).toEqual(turnMessages("thr2", "t1"));
  });

  it("without archiving: only the binding goes; a missing binding is not an error", async () => {
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const before = await fsp.readFile(file);
    expect(await resetCodexSession({ sessionFile: file })).toEqual({ bindingCleared: false, pendingFinalize: 0 });
    expect(await fsp.readFile(file)).toEqual(before);
  });

  it("takes the session lock: waits for a holder, fails fast on a re-entrant call, refuses paths outside the root", async () => {
    const binding = sessionSidecarPaths(file).binding;
    await fsp.writeFile(binding, "{}");
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const holder = withSessionLock(file, async () => {
      entered();
      await released;
      // Still here while the reset below waits: the binding must not have been touched yet.
      await fsp.stat(binding);
      return "held";
    });
    await inside;
    const reset = resetCodexSession({ sessionFile: file });
    await new Promise((r) => setTimeout(r, 50));
    release();
    expect(await holder).toBe("held");
    expect((await reset).bindingCleared).toBe(true);

    await withSessionLock(file, async () => {
      await expect(resetCodexSession({ sessionFile: file, locked: false })).rejects.toMatchObject({ code: "SESSION_LOCK_REENTRANT" });
      expect((await resetCodexSession({ sessionFile: file })).bindingCleared).toBe(false);
    });

    const root = path.join(dir, "root");
    await fsp.mkdir(root);
    await expect(resetCodexSession({ sessionFile: file, sessionRoot: root })).rejects.toMatchObject({ code: "SESSION_OUTSIDE_ROOT" });
  });
});
