/**
 * `SessionStore.readVisibleEntries`: the visible transcript with entry identities (OpenClaw's
 * `readVisibleSessionTranscriptMessageEntries`), and its resolution from a target through
 * `openclaw/plugin-sdk/session-transcript-runtime` (src/openclaw/sdk/session-transcript-runtime.ts).
 */
import { promises as fsp } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { readVisibleSessionTranscriptMessageEntries } from "../../src/openclaw/sdk/session-transcript-runtime.js";
import { findSessionStore, forgetSessionStores, rememberSessionStore } from "../../src/store/session-directory.js";
import { createJsonlSessionStore } from "../../src/store/session-store.js";
import { testTempDir } from "../helpers/temp-dir.js";

const user = (text: string) => ({ role: "user" as const, content: text, timestamp: 1 });
const assistant = (text: string) => ({ role: "assistant" as const, content: [{ type: "text" as const, text }], timestamp: 2 });

async function twoTurns(dir: string, sessionId = "s1") {
  const store = createJsonlSessionStore({ sessionFile: path.join(dir, `${sessionId}.jsonl`), sessionId, cwd: dir });
  const lock = await store.acquireLock();
  try {
    const a = await store.appendTurn({ threadId: "thr", turnId: "t1", messages: [user("q1"), assistant("a1")] });
    const b = await store.appendTurn({ threadId: "thr", turnId: "t2", messages: [user("q2"), assistant("a2")] });
    return { store, ids: [...a.entryIds, ...b.entryIds], lock };
  } catch (error) {
    await lock.release();
    throw error;
  }
}

afterEach(() => forgetSessionStores());

describe("readVisibleEntries", () => {
  it("gives every message of the active branch with its entry id, parent, position, timestamp and mirror key", async () => {
    const dir = await testTempDir("ctm-visible-");
    const { store, ids, lock } = await twoTurns(dir);
    await lock.release();
    const entries = await store.readVisibleEntries();
    expect(entries.map((e) => e.entryId)).toEqual(ids);
    expect(entries.map((e) => e.parentId)).toEqual([null, ids[0], ids[1], ids[2]]);
    expect(entries.map((e) => e.role)).toEqual(["user", "assistant", "user", "assistant"]);
    expect(entries.map((e) => e.seq)).toEqual([0, 1, 2, 3]);
    expect(entries[2]!.message).toMatchObject({ role: "user", content: "q2" });
    for (const e of entries) expect(Date.parse(e.createdAt!)).toBeGreaterThan(0);
    expect(entries[0]!.idempotencyKey).toBe("codex-app-server:thr:t1:prompt");
  });

  it("after a compaction: the summary has no entry and the messages before the first kept one are gone", async () => {
    const dir = await testTempDir("ctm-visible-");
    const { store, ids, lock } = await twoTurns(dir);
    try {
      await store.appendCompaction({ summary: "earlier", firstKeptEntryId: ids[2]!, tokensBefore: 100 });
    } finally {
      await lock.release();
    }
    const entries = await store.readVisibleEntries();
    expect(entries.map((e) => e.entryId)).toEqual([ids[2], ids[3]]);
    expect(entries.map((e) => e.seq)).toEqual([2, 3]);
    expect(entries.some((e) => e.role === "compactionSummary")).toBe(false);
  });

  it("a missing session file has no entries", async () => {
    const dir = await testTempDir("ctm-visible-");
    expect(await createJsonlSessionStore({ sessionFile: path.join(dir, "none.jsonl"), sessionId: "none" }).readVisibleEntries()).toEqual([]);
  });
});

describe("openclaw/plugin-sdk/session-transcript-runtime", () => {
  it("resolves a target by store path, then session key, then session id, to the store a turn remembered", async () => {
    const dir = await testTempDir("ctm-visible-");
    const { store, ids, lock } = await twoTurns(dir);
    await lock.release();
    rememberSessionStore({ sessionId: "s1", sessionKey: "agent:main:s1" }, store);
    expect(findSessionStore({ storePath: store.sessionFile })).toBe(store);
    for (const target of [{ sessionId: "other", sessionKey: "agent:main:s1" }, { sessionId: "s1", sessionKey: "unknown" }, { sessionId: "s1" }]) {
      expect((await readVisibleSessionTranscriptMessageEntries(target)).map((e) => e.entryId)).toEqual(ids);
    }
  });

  it("reads a storePath no turn remembered as a pi session file", async () => {
    const dir = await testTempDir("ctm-visible-");
    const { store, lock } = await twoTurns(dir);
    await lock.release();
    forgetSessionStores();
    const entries = await readVisibleSessionTranscriptMessageEntries({ sessionId: "s1", sessionKey: "k", storePath: store.sessionFile });
    expect(entries.map((e) => e.role)).toEqual(["user", "assistant", "user", "assistant"]);
  });

  it("rejects a target naming no session it knows, or a malformed one, with an error naming it", async () => {
    await expect(readVisibleSessionTranscriptMessageEntries({ sessionId: "nobody", sessionKey: "nokey" })).rejects.toThrow(/no session .*"nobody".*"nokey"/);
    await expect(readVisibleSessionTranscriptMessageEntries({ sessionId: 42 })).rejects.toThrow(/target\.sessionId/);
    await expect(readVisibleSessionTranscriptMessageEntries({})).rejects.toThrow(/names no session/);
  });

  it("keeps what it reads: the file is not changed by a read", async () => {
    const dir = await testTempDir("ctm-visible-");
    const { store, lock } = await twoTurns(dir);
    await lock.release();
    const before = await fsp.readFile(store.sessionFile, "utf8");
    await readVisibleSessionTranscriptMessageEntries({ sessionId: "s1", storePath: store.sessionFile });
    expect(await fsp.readFile(store.sessionFile, "utf8")).toBe(before);
  });
});
