/**
 * Never drop a turn (issue 13 item 2): a mirror write that fails (a full disk, an I/O error) throws a typed error,
 * leaves the transcript byte-for-byte as it was (no torn line), and the pending record with its snapshot stays, so
 * the turn is mirrored later from that record, exactly once.
 *
 * The full disk is real: a 256 KiB tmpfs mounted for the test (this needs root, as the test machines run). Where the
 * mount is refused, ENOSPC is injected through the transcript fault hook half-way through the write instead.
 */
import { execFileSync } from "node:child_process";
import { promises as fsp } from "node:fs";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createJsonlSessionStore, type SessionStore } from "../../src/store/session-store.js";
import { SessionFileError } from "../../src/transcript/errors.js";
import { setTranscriptFaultHook } from "../../src/transcript/fault.js";
import { mirrorKeysForTurn } from "../../src/transcript/mirror.js";
import { invalidateSessionIndex, readSessionTranscript } from "../../src/transcript/session-file.js";
import { tempDir } from "../transcript/helpers.js";
import { fillDisk } from "../helpers/full-disk.js";
import { turnMessages } from "../transcript/fixtures/turn-messages.js";

let dir: string;
let mounted = false;

beforeAll(async () => {
  dir = await tempDir("ctm-mirror-full-");
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", dir], { stdio: "ignore" });
    mounted = true;
  } catch {
    mounted = false; // not root: the ENOSPC is injected below
  }
});
afterAll(async () => {
  if (mounted) execFileSync("umount", [dir], { stdio: "ignore" });
  await fsp.rm(dir, { recursive: true, force: true });
});
afterEach(() => setTranscriptFaultHook(undefined));

function errnoError(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: injected`), { code });
}

async function failingAppend(store: SessionStore, turnId: string): Promise<SessionFileError> {
  const err = await store.appendTurn({ threadId: "thr", turnId, messages: turnMessages("thr", turnId) }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SessionFileError);
  return err as SessionFileError;
}

describe("a mirror write that fails", () => {
  it(`on a full disk: typed error, transcript unchanged, pending record kept, mirrored once after space returns`, async () => {
    invalidateSessionIndex();
    const file = path.join(dir, "full.jsonl");
    const store = createJsonlSessionStore({ sessionFile: file, sessionId: "s-full", cwd: dir });
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const t2 = turnMessages("thr", "t2");
    await store.recordPending({ threadId: "thr", turnId: "t2", prePromptMessageCount: 5, messageCount: t2.length, status: "completed", messages: t2 });
    const before = await fsp.readFile(file);

    let filler: string | undefined;
    if (mounted) filler = await fillDisk(dir);
    else setTranscriptFaultHook((p) => {
      if (p === "transcript:mid-write") throw errnoError("ENOSPC");
    });
    const err = await failingAppend(store, "t2");
    expect(err.code).toBe("SESSION_WRITE_FAILED");
    expect(err.message).toContain("ENOSPC");
    expect((err.cause as NodeJS.ErrnoException).code).toBe("ENOSPC");
    expect(await fsp.readFile(file)).toEqual(before);
    expect((await readSessionTranscript(file)).damage).toEqual({ corruptLines: [], tornTailBytes: 0 });
    expect((await store.readHistory()).messages).toEqual(turnMessages("thr", "t1"));

    // Space returns; recovery mirrors the turn from the kept record: exactly the missing messages, once.
    if (filler) await fsp.rm(filler);
    setTranscriptFaultHook(undefined);
    const [record] = await store.listPending();
    expect(record).toMatchObject({ turnId: "t2", messages: t2 });
    const out = await store.appendTurn({ threadId: record!.threadId, turnId: record!.turnId, messages: record!.messages! });
    expect(out).toMatchObject({ appended: 5, skipped: 0, entryCount: 10 });
    const again = await store.appendTurn({ threadId: "thr", turnId: "t2", messages: t2 });
    expect(again.appended).toBe(0);
    const lines = (await fsp.readFile(file, "utf8")).trim().split("\n").slice(1);
    const keys = lines.map((l) => (JSON.parse(l) as { idempotencyKey: string }).idempotencyKey);
    expect(keys).toEqual([...mirrorKeysForTurn("thr", "t1", turnMessages("thr", "t1")), ...mirrorKeysForTurn("thr", "t2", t2)]);
    expect((await store.readHistory()).messages).toEqual([...turnMessages("thr", "t1"), ...t2]);
  });

  it("with an I/O error before fsync: typed error, the written bytes are cut back, a retry appends once", async () => {
    invalidateSessionIndex();
    const file = path.join(dir, "eio.jsonl");
    const store = createJsonlSessionStore({ sessionFile: file, sessionId: "s-eio", cwd: dir });
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const before = await fsp.readFile(file);
    setTranscriptFaultHook((p) => {
      if (p === "transcript:after-write") throw errnoError("EIO");
    });
    const err = await failingAppend(store, "t2");
    expect(err.code).toBe("SESSION_WRITE_FAILED");
    expect(err.message).toContain("EIO");
    expect(await fsp.readFile(file)).toEqual(before);
    setTranscriptFaultHook(undefined);
    expect((await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") })).appended).toBe(5);
    expect((await store.readHistory()).entryCount).toBe(10);
  });

  it("on a new transcript: the failed first write leaves no header-only or torn file behind to trip the next read", async () => {
    invalidateSessionIndex();
    const file = path.join(dir, "new.jsonl");
    const store = createJsonlSessionStore({ sessionFile: file, sessionId: "s-new", cwd: dir });
    setTranscriptFaultHook((p) => {
      if (p === "transcript:mid-write") throw errnoError("ENOSPC");
    });
    expect((await failingAppend(store, "t1")).code).toBe("SESSION_WRITE_FAILED");
    expect((await fsp.readFile(file)).length).toBe(0);
    setTranscriptFaultHook(undefined);
    expect((await store.readHistory()).messages).toEqual([]);
    expect((await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") })).appended).toBe(5);
    expect((await store.readHistory()).messages).toEqual(turnMessages("thr", "t1"));
  });
});
