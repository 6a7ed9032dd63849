import fs, { promises as fsp } from "node:fs";
import path from "node:path";
import { SessionManager } from "@mariozechner/pi-coding-agent";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { createJsonlSessionStore, type SessionStore } from "../../src/store/session-store.js";
import { SessionFileError } from "../../src/transcript/errors.js";
import { mirrorKeysForTurn } from "../../src/transcript/mirror.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { setTranscriptFaultHook } from "../../src/transcript/fault.js";
import { inOneAppendChain, isDeepFrozenByHost, startsWithArray } from "../../src/transcript/freeze.js";
import { cachedHistoryPaths, invalidateHistoryCache } from "../../src/transcript/history-cache.js";
import { historyFromTranscript, invalidateSessionIndex, readSessionTranscript } from "../../src/transcript/session-file.js";
import { captureLogger, tempDir } from "../transcript/helpers.js";
import { turnMessages } from "../transcript/fixtures/turn-messages.js";

let dir: string;
let file: string;
let store: SessionStore;
beforeEach(async () => {
  dir = await tempDir("ctm-store-");
  file = path.join(dir, "s.jsonl");
  invalidateSessionIndex();
  store = createJsonlSessionStore({ sessionFile: file, sessionId: "s1", cwd: dir });
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

async function rejection(p: Promise<unknown>): Promise<SessionFileError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SessionFileError);
  return err as SessionFileError;
}

/** A v3 file written by hand: header, then entries given as objects. */
async function writeFile(entries: Array<Record<string, unknown>>, header: Record<string, unknown> = { type: "session", version: 3, id: "s1", timestamp: "2026-01-01T00:00:00.000Z", cwd: dir }): Promise<void> {
  await fsp.writeFile(file, [header, ...entries].map((e) => JSON.stringify(e)).join("\n") + "\n");
}

function msgEntry(id: string, parentId: string | null, text: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: "message", id, parentId, timestamp: "2026-01-01T00:00:01.000Z", message: { role: "user", content: text, timestamp: 1 }, ...extra };
}

describe("readHistory and appendTurn", () => {
  it("a missing transcript is an empty history and reading never creates it", async () => {
    const h = await store.readHistory();
    expect(h).toMatchObject({ messages: [], origins: [], entryCount: 0, lastEntryId: undefined, skippedEntries: 0, warnings: [] });
    await expect(fsp.stat(file)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("mirrors a turn once, and the next history is the snapshot with its origins and the file's tail", async () => {
    const t1 = turnMessages("thr", "t1");
    const first = await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1 });
    expect(first).toMatchObject({ appended: 5, skipped: 0, entryCount: 5 });
    expect(first.lastEntryId).toBe(first.entryIds[4]);
    const again = await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1 });
    expect(again).toMatchObject({ appended: 0, skipped: 5, entryIds: first.entryIds, entryCount: 5, lastEntryId: first.lastEntryId });

    const h = await store.readHistory();
    expect(h.messages).toEqual(t1);
    expect(h.origins).toEqual(t1.map(() => ({ threadId: "thr", turnId: "t1" })));
    expect(h.entryCount).toBe(5);
    expect(h.lastEntryId).toBe(first.lastEntryId);
  });

  it("chains each history's arrays to the previous history's when turns were appended, and starts a new chain after a compaction", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const h1 = await store.readHistory();
    const t2 = await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    const h2 = await store.readHistory();
    // The projection asks this every turn ("the kept history, extended?"); the markers answer without a pass.
    expect(inOneAppendChain(h2.messages, h1.messages)).toBe(true);
    expect(inOneAppendChain(h2.origins, h1.origins)).toBe(true);
    expect(h2.messages.slice(0, h1.messages.length)).toEqual(h1.messages);
    expect(inOneAppendChain(h1.messages, h2.messages)).toBe(false);
    // A compaction entry rebuilds the context: not the previous history extended, and not taken for it.
    await store.appendCompaction({ summary: "earlier work", firstKeptEntryId: t2.entryIds[0]!, tokensBefore: 5000 });
    const h3 = await store.readHistory();
    expect(inOneAppendChain(h3.messages, h2.messages)).toBe(false);
    expect(inOneAppendChain(h3.origins, h2.origins)).toBe(false);
    expect(startsWithArray(h3.messages, h2.messages)).toBe(false);
    // The next turn appended after it chains to the rebuilt history.
    await store.appendTurn({ threadId: "thr", turnId: "t3", messages: turnMessages("thr", "t3") });
    expect(inOneAppendChain((await store.readHistory()).messages, h3.messages)).toBe(true);
  });

  it("hands out deeply frozen messages: a mutation throws and the next read is unchanged", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const h = await store.readHistory();
    const toolCall = h.messages[2] as unknown as { content: Array<{ arguments: { q: string } }> };
    expect(() => {
      toolCall.content[0]!.arguments.q = "changed";
    }).toThrow(TypeError);
    expect(() => (h.messages as AgentMessage[]).push(h.messages[0]!)).toThrow(TypeError);
    expect(Object.isFrozen(h.origins[0])).toBe(true);
    expect((await store.readHistory()).messages).toEqual(turnMessages("thr", "t1"));
  });

  it("marks every message it hands out as deep-frozen by the host, on a full rebuild and on an appended read", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    invalidateSessionIndex();
    const rebuilt = await store.readHistory();
    await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    const grown = await store.readHistory();
    expect(grown.messages.length).toBe(rebuilt.messages.length * 2);
    // What the projection and the window engine cache by identity: only objects no one else can change.
    for (const m of [...rebuilt.messages, ...grown.messages]) expect(isDeepFrozenByHost(m)).toBe(true);
    expect(isDeepFrozenByHost(Object.freeze({ ...rebuilt.messages[0] }))).toBe(false);
  });

  it("gives a turn's messages one origin object, on a full rebuild and on an appended read (one comparison per turn)", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const sm = SessionManager.open(file, dir);
    sm.appendMessage({ role: "user", content: "from pi", timestamp: 7 } as Parameters<SessionManager["appendMessage"]>[0]);
    await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    await store.appendTurn({ threadId: "other", turnId: "t2", messages: turnMessages("other", "t2") });
    const grown = await store.readHistory();
    invalidateSessionIndex();
    const rebuilt = await store.readHistory();
    for (const h of [grown, rebuilt]) {
      const o = h.origins;
      expect(o.length).toBe(16);
      // Within a turn: the same object. Across turns, across threads, and around a message of no turn: new ones.
      for (let i = 1; i < 5; i++) expect(o[i]).toBe(o[0]);
      expect(o[5]).toBeNull();
      for (let i = 7; i < 11; i++) expect(o[i]).toBe(o[6]);
      expect(o[6]).not.toBe(o[0]);
      for (let i = 12; i < 16; i++) expect(o[i]).toBe(o[11]);
      expect(o[11]).not.toBe(o[6]);
      expect(o.map((x) => x && `${x.threadId}/${x.turnId}`)).toEqual([...Array(5).fill("thr/t1"), null, ...Array(5).fill("thr/t2"), ...Array(5).fill("other/t2")]);
      expect(Object.isFrozen(o[11])).toBe(true);
    }
  });

  it("parses only what was appended: an unchanged file returns the same history, a grown one reuses the earlier messages", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const a = await store.readHistory();
    expect(await store.readHistory()).toBe(a);

    // Another writer (pi) appends; the store sees it without re-reading the start (same message objects).
    const sm = SessionManager.open(file, dir);
    sm.appendMessage({ role: "user", content: "from pi", timestamp: 7 } as Parameters<SessionManager["appendMessage"]>[0]);
    await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    const b = await store.readHistory();
    expect(b.messages.length).toBe(11);
    for (let i = 0; i < 5; i++) expect(b.messages[i]).toBe(a.messages[i]);
    expect(b.origins[5]).toBeNull();

    // The incremental result equals a cold full parse.
    invalidateSessionIndex();
    const cold = await store.readHistory();
    expect(cold).not.toBe(b);
    expect(cold).toEqual(b);
    expect(b.messages).toEqual(SessionManager.open(file, dir).buildSessionContext().messages);
  });

  it("a file rewritten in place and grown (same inode, different earlier bytes) is parsed again from the start", async () => {
    await writeFile([msgEntry("aaaaaaaa", null, "one"), msgEntry("bbbbbbbb", "aaaaaaaa", "two")]);
    const ino = (await fsp.stat(file)).ino;
    expect((await store.readHistory()).messages).toMatchObject([{ content: "one" }, { content: "two" }]);
    await writeFile([msgEntry("aaaaaaaa", null, "uno"), msgEntry("bbbbbbbb", "aaaaaaaa", "dos"), msgEntry("cccccccc", "bbbbbbbb", "tres")]);
    expect((await fsp.stat(file)).ino).toBe(ino);
    expect((await store.readHistory()).messages).toMatchObject([{ content: "uno" }, { content: "dos" }, { content: "tres" }]);
  });

  it("a file replaced by another of the same size is parsed again, not served from the cache", async () => {
    await writeFile([msgEntry("aaaaaaaa", null, "one")]);
    expect((await store.readHistory()).messages).toMatchObject([{ content: "one" }]);
    await writeFile([msgEntry("aaaaaaaa", null, "two")]);
    const later = new Date(Date.now() + 5_000);
    await fsp.utimes(file, later, later);
    expect((await store.readHistory()).messages).toMatchObject([{ content: "two" }]);
  });
});

describe("what a turn must not append to", () => {
  for (const version of [1, 2, 4]) {
    it(`a version ${version} transcript: SESSION_VERSION_UNSUPPORTED from readHistory and appendTurn, file untouched`, async () => {
      await writeFile([msgEntry("aaaaaaaa", null, "old")], { type: "session", version, id: "s1", timestamp: "2026-01-01T00:00:00.000Z" });
      const before = await fsp.readFile(file);
      expect((await rejection(store.readHistory())).code).toBe("SESSION_VERSION_UNSUPPORTED");
      const err = await rejection(store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") }));
      expect(err.code).toBe("SESSION_VERSION_UNSUPPORTED");
      expect(await fsp.readFile(file)).toEqual(before);
    });
  }

  it("another session's transcript: SESSION_ID_MISMATCH, nothing appended", async () => {
    await writeFile([msgEntry("aaaaaaaa", null, "theirs")], { type: "session", version: 3, id: "other", timestamp: "2026-01-01T00:00:00.000Z" });
    const before = await fsp.readFile(file);
    const err = await rejection(store.readHistory());
    expect(err.code).toBe("SESSION_ID_MISMATCH");
    expect(err.message).toContain('"other"');
    expect((await rejection(store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") }))).code).toBe("SESSION_ID_MISMATCH");
    expect((await rejection(store.appendCompaction({ summary: "s", firstKeptEntryId: "aaaaaaaa", tokensBefore: 1 }))).code).toBe("SESSION_ID_MISMATCH");
    expect(await fsp.readFile(file)).toEqual(before);
  });
});

describe("validation at the boundary", () => {
  it("malformed entries are skipped and counted, the entries before them stay in the context", async () => {
    await writeFile([
      msgEntry("aaaaaaaa", null, "first"),
      { type: "message", id: "bbbbbbbb", parentId: "aaaaaaaa", timestamp: "2026-01-01T00:00:02.000Z" }, // no message
      { type: "compaction", id: "cccccccc", parentId: "bbbbbbbb", timestamp: "2026-01-01T00:00:03.000Z", summary: "x", firstKeptEntryId: "aaaaaaaa", tokensBefore: "many" },
      msgEntry("dddddddd", "cccccccc", "last"),
    ]);
    const log = captureLogger();
    const h = await createJsonlSessionStore({ sessionFile: file, sessionId: "s1", logger: log.logger }).readHistory();
    expect(h.messages).toMatchObject([{ content: "first" }, { content: "last" }]);
    expect(h.skippedEntries).toBe(2);
    expect(h.entryCount).toBe(4);
    expect(h.lastEntryId).toBe("dddddddd");
    expect(h.warnings).toEqual([expect.stringContaining("2 malformed entries skipped (lines 3, 4)")]);
    expect(h.warnings.join(" ")).not.toContain("first");
  });

  it("a mid-file parentId null starts a new root as in pi, with a warning", async () => {
    await writeFile([msgEntry("aaaaaaaa", null, "before"), msgEntry("bbbbbbbb", null, "new root"), msgEntry("cccccccc", "bbbbbbbb", "after")]);
    const h = await store.readHistory();
    expect(h.messages).toMatchObject([{ content: "new root" }, { content: "after" }]);
    expect(h.messages).toEqual(SessionManager.open(file, dir).buildSessionContext().messages);
    expect(h.warnings).toEqual([expect.stringContaining("parentId null (lines 3)")]);
  });
});

describe("compaction, custom messages and native tools", () => {
  it("custom and native-tool messages round-trip, custom ones as pi custom_message entries", async () => {
    const t = 1_770_000_000_000;
    const messages = [
      { role: "user", content: "do it", timestamp: t },
      { role: "custom", customType: "codex.plan", content: "1. look\n2. patch", display: true, timestamp: t + 1 },
      { role: "assistant", content: [{ type: "toolCall", id: "call_1", name: "shell", arguments: { command: ["ls"] } }], timestamp: t + 2 },
      { role: "toolResult", toolCallId: "call_1", toolName: "shell", content: [{ type: "text", text: "a.txt" }], isError: false, timestamp: t + 3 },
      { role: "assistant", content: [{ type: "toolCall", id: "call_2", name: "mcp:files/read", arguments: { path: "a.txt" } }], timestamp: t + 4 },
      { role: "toolResult", toolCallId: "call_2", toolName: "mcp:files/read", content: [{ type: "text", text: "hello" }], isError: true, timestamp: t + 5 },
    ] as unknown as AgentMessage[];
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages });
    const lines = (await fsp.readFile(file, "utf8")).trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => l.type)).toEqual(["session", "message", "custom_message", "message", "message", "message", "message"]);
    expect(lines[2]).toMatchObject({ customType: "codex.plan", content: "1. look\n2. patch", display: true, timestamp: new Date(t + 1).toISOString() });
    expect(lines.slice(1).map((l) => l.idempotencyKey)).toEqual(mirrorKeysForTurn("thr", "t1", messages));
    const h = await store.readHistory();
    expect(h.messages).toEqual(messages);
    expect(SessionManager.open(file, dir).buildSessionContext().messages).toEqual(h.messages);
  });

  it("appendCompaction writes a pi compaction entry the next history starts from", async () => {
    const t1 = await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const t2 = await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    const id = await store.appendCompaction({ summary: "earlier work", firstKeptEntryId: t2.entryIds[0]!, tokensBefore: 5000, details: { engine: "window" } });
    const h = await store.readHistory();
    expect(h.lastEntryId).toBe(id);
    expect(h.entryCount).toBe(11);
    expect(h.messages[0]).toMatchObject({ role: "compactionSummary", summary: "earlier work", tokensBefore: 5000 });
    expect(h.messages.slice(1)).toEqual(turnMessages("thr", "t2"));
    expect(h.origins[0]).toBeNull();
    expect(t1.entryIds).toHaveLength(5);

    const err = await rejection(store.appendCompaction({ summary: "s", firstKeptEntryId: "nope0000", tokensBefore: 1 }));
    expect(err.code).toBe("SESSION_INVALID_ARGUMENT");
    expect(err.message).toContain("firstKeptEntryId");
    expect((await rejection(store.appendCompaction({ summary: "s", firstKeptEntryId: id, tokensBefore: -1 }))).message).toContain("tokensBefore");
  });
  it("appendMessage appends one message outside any turn, once per idempotency key; bad input is a typed error", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const message = { role: "user", content: [{ type: "text", text: "Your message could not be sent: blocked by g" }], timestamp: 5 } as AgentMessage;
    const first = await store.appendMessage({ message, idempotencyKey: "hook-block:before_agent_run:user:r1" });
    expect(first.appended).toBe(true);
    expect(await store.appendMessage({ message, idempotencyKey: "hook-block:before_agent_run:user:r1" })).toEqual({ entryId: first.entryId, appended: false });
    const h = await store.readHistory();
    expect(h.entryCount).toBe(6);
    expect(h.lastEntryId).toBe(first.entryId);
    // The key travels on the message too (OpenClaw's message.idempotencyKey); no mirror origin.
    expect(h.messages.at(-1)).toEqual({ ...message, idempotencyKey: "hook-block:before_agent_run:user:r1" });
    expect(h.origins.at(-1)).toBeNull();
    const err = await rejection(store.appendMessage({ message: { role: "", content: "x" } as AgentMessage, idempotencyKey: "k" }));
    expect(err.code).toBe("SESSION_INVALID_ARGUMENT");
    expect(err.message).toContain("message.role");
    expect((await rejection(store.appendMessage({ message, idempotencyKey: "" }))).message).toContain("idempotencyKey");
    expect((await store.readHistory()).entryCount).toBe(6);
  });
});

describe("what the store checks of the turn it is handed", () => {
  // The store does not walk the turn's messages with a schema (they come typed from the turn record), but the ids that
  // form the idempotency keys and the pending record's own fields are still checked, and nothing is written on failure.
  it("appendTurn refuses a turn id or thread id that cannot form a mirror key, and writes nothing", async () => {
    const messages = [{ role: "user", content: "hi", timestamp: 1 }] as never;
    for (const bad of [{ threadId: "thr", turnId: "t:1" }, { threadId: "", turnId: "t1" }]) {
      const err = await rejection(store.appendTurn({ ...bad, messages }));
      expect(err.code).toBe("SESSION_INVALID_ARGUMENT");
      expect(err.message).toContain(bad.threadId === "" ? "threadId" : "turnId");
    }
    await expect(fsp.stat(file)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("recordPending refuses a record with an invalid field, and writes nothing", async () => {
    const lock = await store.acquireLock();
    try {
      const record = { threadId: "thr", turnId: "t1", prePromptMessageCount: -1, messageCount: 1, status: "completed" as const, messages: [] };
      const err = await rejection(store.recordPending(record));
      expect(err.code).toBe("SESSION_INVALID_ARGUMENT");
      expect(err.message).toContain("prePromptMessageCount");
      expect(await store.listPending()).toEqual([]);
    } finally {
      await lock.release();
    }
  });
});

describe("sidecars", () => {
  it("listPending: a corrupt record set is reported read-only and moved aside (with a warning) otherwise", async () => {
    const pending = sessionSidecarPaths(file).pendingFinalize;
    await fsp.writeFile(pending, "{not json");
    expect((await rejection(store.listPending({ readOnly: true }))).code).toBe("SESSION_PENDING_INVALID");
    expect(await fsp.readFile(pending, "utf8")).toBe("{not json");
    const log = captureLogger();
    const s2 = createJsonlSessionStore({ sessionFile: file, sessionId: "s1", logger: log.logger });
    expect(await s2.listPending()).toEqual([]);
    await expect(fsp.stat(pending)).rejects.toMatchObject({ code: "ENOENT" });
    expect(await fsp.readFile(`${pending}.corrupt-1`, "utf8")).toBe("{not json");
    expect(log.records.find((r) => r.event === "pending record corrupt")).toMatchObject({ movedTo: "s.jsonl.codex-pending.json.corrupt-1" });
  });

  it("readBinding readOnly leaves a corrupt binding in place", async () => {
    const binding = sessionSidecarPaths(file).binding;
    await fsp.writeFile(binding, "garbage");
    expect(await store.readBinding({ readOnly: true })).toBeUndefined();
    expect(await fsp.readFile(binding, "utf8")).toBe("garbage");
  });

  it("pending records keep their snapshot and ingest progress until completed", async () => {
    const messages = turnMessages("thr", "t1");
    await store.recordPending({ threadId: "thr", turnId: "t1", prePromptMessageCount: 0, messageCount: 5, status: "completed", messages });
    const keys = mirrorKeysForTurn("thr", "t1", messages);
    await store.markPendingIngested("t1", keys.slice(0, 2));
    await store.markPendingIngested("t1", keys.slice(1, 3));
    const [rec] = await store.listPending();
    expect(rec).toMatchObject({ turnId: "t1", messages, ingestedKeys: keys.slice(0, 3) });
    expect(await store.completePending("t1")).toBe(true);
    expect(await store.listPending()).toEqual([]);
  });

  it("writes after the store's lock was released throw SESSION_LOCK_COMPROMISED and write nothing", async () => {
    const lock = await store.acquireLock();
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    await lock.release();
    const before = await fsp.readFile(file);
    expect((await rejection(store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") }))).code).toBe("SESSION_LOCK_COMPROMISED");
    expect(await fsp.readFile(file)).toEqual(before);
  });
});

describe("agreement with the whole-file reader", () => {
  it("readHistory equals readSessionTranscript's history", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    const h = await store.readHistory();
    const full = historyFromTranscript(await readSessionTranscript(file));
    expect(h.messages).toEqual(full.messages);
    expect(h.origins).toEqual(full.origins);
  });
});

describe("the history after this process's own append", () => {
  /** The history a read from the file gives (the history cache emptied first; the writer's index is kept). */
  async function coldHistory() {
    invalidateHistoryCache();
    const cold = await store.readHistory();
    return cold;
  }
  /** The next read, with every file read it makes counted. */
  async function readCounting() {
    const reads = vi.spyOn(fs, "readSync");
    const asyncOpens = vi.spyOn(fsp, "open");
    try {
      const h = await store.readHistory();
      return { h, fileReads: reads.mock.calls.length + asyncOpens.mock.calls.length };
    } finally {
      reads.mockRestore();
      asyncOpens.mockRestore();
    }
  }

  it("is taken in from what was written, not read back, and equals a read of the file, turn after turn", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    let previous = await store.readHistory();
    const steps: Array<() => Promise<unknown>> = [
      () => store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") }),
      () => store.appendMessage({ message: { role: "user", content: "held back", timestamp: 9 } as AgentMessage, idempotencyKey: "k1" }),
      () => store.appendTurn({ threadId: "thr", turnId: "t3", messages: turnMessages("thr", "t3") }),
      async () => store.appendCompaction({ summary: "earlier", firstKeptEntryId: (await store.readHistory()).lastEntryId!, tokensBefore: 10 }),
      () => store.appendTurn({ threadId: "thr", turnId: "t4", messages: turnMessages("thr", "t4") }),
    ];
    for (const step of steps) {
      await step();
      const { h, fileReads } = await readCounting();
      expect(fileReads).toBe(0);
      expect(h).not.toBe(previous);
      expect(isDeepFrozenByHost(h.messages.at(-1))).toBe(true);
      expect(Object.isFrozen(h.messages)).toBe(true);
      const cold = await coldHistory();
      expect(cold).toEqual(h);
      previous = cold;
    }
    expect(previous.messages.length).toBeGreaterThan(0);
    expect(previous.messages).toEqual(SessionManager.open(file, dir).buildSessionContext().messages);
  });

  it("the earlier messages stay the same objects (only the appended ones are new)", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const a = await store.readHistory();
    await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    const b = await store.readHistory();
    for (let i = 0; i < a.messages.length; i++) expect(b.messages[i]).toBe(a.messages[i]);
    expect(b.messages).toHaveLength(a.messages.length * 2);
  });

  it("is read from the file when another writer appended before this one: nothing of theirs is missed", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    await store.readHistory();
    const sm = SessionManager.open(file, dir);
    sm.appendMessage({ role: "user", content: "from pi", timestamp: 7 } as Parameters<SessionManager["appendMessage"]>[0]);
    await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    const { h, fileReads } = await readCounting();
    expect(fileReads).toBeGreaterThan(0);
    expect(h.messages.map((m) => (m as { content?: unknown }).content)).toContain("from pi");
    expect(h).toEqual(await coldHistory());
  });

  it("a read made while the append waits for its fsync reads the file (the entry is not yet confirmed)", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    await store.readHistory();
    let during: Promise<Awaited<ReturnType<SessionStore["readHistory"]>>> | undefined;
    setTranscriptFaultHook((point) => {
      if (point === "transcript:after-fsync") during = store.readHistory();
    });
    try {
      await store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    } finally {
      setTranscriptFaultHook(undefined);
    }
    const seen = await during!;
    expect(seen.messages).toHaveLength(10);
    const cold = await coldHistory();
    expect(seen).toEqual(cold);
    expect(await store.readHistory()).toEqual(cold);
  });

  it("an append that fails after its write is cut back and leaves the cache without it (dropped, read again)", async () => {
    await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const before = await store.readHistory();
    const bytes = await fsp.readFile(file);
    setTranscriptFaultHook((point) => {
      if (point === "transcript:after-fsync") throw Object.assign(new Error("EIO: injected"), { code: "EIO" });
    });
    try {
      await rejection(store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") }));
    } finally {
      setTranscriptFaultHook(undefined);
    }
    expect(await fsp.readFile(file)).toEqual(bytes);
    expect(cachedHistoryPaths()).toEqual([]);
    const after = await store.readHistory();
    expect(after).toEqual(before);
    expect(after.messages).toHaveLength(5);
  });
});
