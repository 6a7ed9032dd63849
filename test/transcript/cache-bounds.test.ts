/**
 * The per-process transcript caches stay bounded however many sessions a long-running host touches, and a session
 * whose cache entry was dropped is read and appended exactly as before (no duplicate, no broken parent chain).
 */
import fs, { promises as fsp } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { cachedHistoryPaths, readCachedHistory, setHistoryCacheLimits } from "../../src/transcript/history-cache.js";
import { mirrorTurnToTranscript } from "../../src/transcript/mirror.js";
import { invalidateSessionIndex, readSessionTranscript } from "../../src/transcript/session-file.js";
import { cachedIndexPaths } from "../../src/transcript/writer-index.js";
import { turnMessages } from "./fixtures/turn-messages.js";
import { tempDir } from "./helpers.js";

let dir: string;
beforeEach(async () => {
  dir = await tempDir();
  invalidateSessionIndex();
});
afterEach(async () => {
  invalidateSessionIndex();
  await fsp.rm(dir, { recursive: true, force: true });
});

const fileOf = (i: number) => path.join(dir, `s${i}.jsonl`);
const mirror = (i: number, turnId: string) =>
  mirrorTurnToTranscript({ sessionFile: fileOf(i), sessionId: `s${i}`, threadId: "thr", turnId, messages: turnMessages("thr", turnId) });

describe("the writer's index cache", () => {
  it("keeps at most 64 sessions; an evicted session still skips what it holds and chains what it appends", async () => {
    for (let i = 0; i < 80; i++) await mirror(i, "t1");
    expect(cachedIndexPaths()).toHaveLength(64);
    // Session 0 was dropped first: the same turn again is recognised from the file, not appended twice.
    const again = await mirror(0, "t1");
    expect(again).toMatchObject({ appended: 0, skipped: 5 });
    const next = await mirror(0, "t2");
    expect(next.appended).toBe(5);
    const t = await readSessionTranscript(fileOf(0));
    expect(t.entries).toHaveLength(10);
    // One parent chain across the eviction: each entry's parent is the one before it.
    for (let k = 1; k < t.entries.length; k++) expect(t.entries[k]!.parentId).toBe(t.entries[k - 1]!.id);
    expect(cachedIndexPaths()).toHaveLength(64);
  });

  it("a session used again is kept: the least recently used one goes", async () => {
    for (let i = 0; i < 64; i++) await mirror(i, "t1");
    // Session 0 is used again, then a new session comes: session 1 (now the oldest) is dropped, 0 stays.
    await mirror(0, "t2");
    await mirror(64, "t1");
    const cached = cachedIndexPaths().map((p) => path.basename(p));
    expect(cached).toHaveLength(64);
    expect(cached).toContain("s0.jsonl");
    expect(cached).not.toContain("s1.jsonl");
    expect(cached.at(-1)).toBe("s64.jsonl");
  });
});

describe("the history cache", () => {
  let previous: { sessions: number; bytes: number };
  beforeEach(() => {
    previous = setHistoryCacheLimits({});
  });
  afterEach(() => {
    setHistoryCacheLimits(previous);
  });

  const read = async (i: number) => readCachedHistory(fs.realpathSync(fileOf(i)), fileOf(i), { sessionId: `s${i}` });

  it("holds at most the configured number of sessions, least recently read dropped first", async () => {
    setHistoryCacheLimits({ sessions: 3 });
    for (let i = 0; i < 5; i++) await mirror(i, "t1");
    for (let i = 0; i < 5; i++) await read(i);
    expect(cachedHistoryPaths().map((p) => path.basename(p))).toEqual(["s2.jsonl", "s3.jsonl", "s4.jsonl"]);
    await read(2); // used again: now the most recent
    await read(0);
    expect(cachedHistoryPaths().map((p) => path.basename(p))).toEqual(["s4.jsonl", "s2.jsonl", "s0.jsonl"]);
  });

  it("holds at most the configured bytes between its sessions, but always the one just read", async () => {
    for (let i = 0; i < 3; i++) await mirror(i, "t1");
    const size = (await fsp.stat(fileOf(0))).size;
    setHistoryCacheLimits({ bytes: 2 * size + 10 });
    for (let i = 0; i < 3; i++) await read(i);
    expect(cachedHistoryPaths().map((p) => path.basename(p))).toEqual(["s1.jsonl", "s2.jsonl"]);
    // A session larger than the whole budget is still kept while it is the one in use.
    setHistoryCacheLimits({ bytes: 1 });
    await read(0);
    expect(cachedHistoryPaths().map((p) => path.basename(p))).toEqual(["s0.jsonl"]);
  });

  it("a dropped session reads back the same history, and grows correctly from there", async () => {
    setHistoryCacheLimits({ sessions: 1 });
    await mirror(0, "t1");
    await mirror(1, "t1");
    const first = await read(0);
    await read(1); // drops session 0
    expect(cachedHistoryPaths().map((p) => path.basename(p))).toEqual(["s1.jsonl"]);
    const again = await read(0);
    expect(again.messages).toEqual(first.messages);
    await mirror(0, "t2");
    const grown = await read(0);
    expect(grown.messages).toHaveLength(first.messages.length * 2);
    expect(grown.messages.slice(0, first.messages.length)).toEqual(first.messages);
  });
});
