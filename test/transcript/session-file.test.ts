import { execFileSync } from "node:child_process";
import { promises as fsp } from "node:fs";
import path from "node:path";
import { buildSessionContext } from "@mariozechner/pi-coding-agent";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SessionFileError } from "../../src/transcript/errors.js";
import { mirrorTurnToTranscript } from "../../src/transcript/mirror.js";
import {
  buildSessionContextFromEntries,
  deriveEntryId,
  entryOrigin,
  invalidateSessionIndex,
  openSessionFile,
  parseMirrorKey,
  readSessionHistory,
  readSessionTranscript,
  type SessionEntry,
} from "../../src/transcript/session-file.js";
import { captureLogger, readLines, tempDir } from "./helpers.js";
import { turnMessages } from "./fixtures/turn-messages.js";

let dir: string;
beforeEach(async () => {
  dir = await tempDir();
  invalidateSessionIndex();
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

async function expectCode(p: Promise<unknown>, code: string, mentions: string): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SessionFileError);
  expect((err as SessionFileError).code).toBe(code);
  expect((err as SessionFileError).message).toContain(mentions);
}

describe("missing file", () => {
  it("is a new, empty session and reading does not create it", async () => {
    const file = path.join(dir, "nope", "s.jsonl");
    const t = await readSessionTranscript(file);
    expect(t.exists).toBe(false);
    expect(t.header).toBeNull();
    expect(t.buildMessages()).toEqual([]);
    expect(await readSessionHistory(file)).toEqual({ messages: [], origins: [] });
    await expect(fsp.stat(path.dirname(file))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("opening for writing creates nothing until the first append, which writes the header", async () => {
    const file = path.join(dir, "sub", "s.jsonl");
    const w = await openSessionFile(file, { sessionId: "s1", cwd: "/work" });
    expect(w.header).toBeNull();
    await expect(fsp.stat(file)).rejects.toMatchObject({ code: "ENOENT" });
    await w.append([{ type: "message", idempotencyKey: "k1", message: { role: "user", content: "x", timestamp: 5 } }]);
    const lines = (await readLines(file)).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ type: "session", version: 3, id: "s1", cwd: "/work" });
    expect(typeof lines[0]!.timestamp).toBe("string");
    expect(lines[1]).toMatchObject({ type: "message", parentId: null, idempotencyKey: "k1" });
    expect(lines[1]!.id).toMatch(/^[0-9a-f]{8}$/);
  });
});

describe("idempotency keys and ids", () => {
  it("parses codex-app-server keys and rejects others", () => {
    expect(parseMirrorKey("codex-app-server:thr:turn:tool-call-call:1")).toEqual({ threadId: "thr", turnId: "turn", kind: "tool-call-call:1" });
    expect(parseMirrorKey("codex-app-server:thr:turn:")).toBeNull();
    expect(parseMirrorKey("codex-app-server::turn:prompt")).toBeNull();
    expect(parseMirrorKey("other:thr:turn:prompt")).toBeNull();
    expect(parseMirrorKey("codex-app-server:thr")).toBeNull();
  });

  it("reads OpenClaw's message-level key as an origin too", () => {
    const e: SessionEntry = {
      type: "message",
      id: "abcd0123",
      parentId: null,
      timestamp: "2026-01-01T00:00:00.000Z",
      message: { role: "user", content: "x", timestamp: 1, idempotencyKey: "codex-app-server:T:U:user:0" },
    };
    expect(entryOrigin(e)).toEqual({ threadId: "T", turnId: "U" });
  });

  it("derives 8-hex ids from the key deterministically and steps past collisions", () => {
    const a = deriveEntryId("codex-app-server:t:u:prompt", new Set());
    expect(a).toMatch(/^[0-9a-f]{8}$/);
    expect(deriveEntryId("codex-app-server:t:u:prompt", new Set())).toBe(a);
    const b = deriveEntryId("codex-app-server:t:u:prompt", new Set([a]));
    expect(b).toMatch(/^[0-9a-f]{8}$/);
    expect(b).not.toBe(a);
  });

  it("gives the same bytes for the same turn mirrored into two fresh files (apart from the header)", async () => {
    const msgs = turnMessages("thr", "t1");
    const f1 = path.join(dir, "a.jsonl");
    const f2 = path.join(dir, "b.jsonl");
    await mirrorTurnToTranscript({ sessionFile: f1, sessionId: "s", threadId: "thr", turnId: "t1", messages: msgs });
    await mirrorTurnToTranscript({ sessionFile: f2, sessionId: "s", threadId: "thr", turnId: "t1", messages: msgs });
    expect((await readLines(f1)).slice(1)).toEqual((await readLines(f2)).slice(1));
  });
});

describe("damage", () => {
  it("ignores a torn last line when reading and does not touch the file", async () => {
    const file = path.join(dir, "s.jsonl");
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    await fsp.appendFile(file, '{"type":"message","id":"dead');
    const before = await fsp.readFile(file);
    const t = await readSessionTranscript(file);
    expect(t.damage.tornTailBytes).toBe('{"type":"message","id":"dead'.length);
    expect(t.buildMessages()).toEqual(turnMessages("thr", "t1"));
    expect(await fsp.readFile(file)).toEqual(before);
  });

  it("repairs a torn last line on the next open for writing: truncates and keeps the bytes in .torn-<n>", async () => {
    const file = path.join(dir, "s.jsonl");
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const good = await fsp.readFile(file);
    const torn = '{"type":"message","id":"0badc0de","parentId":"x","message":{"role":"assistant","content":[{"type":"te';
    await fsp.appendFile(file, torn);
    await fsp.writeFile(`${file}.torn-1`, "an earlier repair");
    const cap = captureLogger();
    const w = await openSessionFile(file, { sessionId: "s", logger: cap.logger });
    expect(await fsp.readFile(file)).toEqual(good);
    expect(await fsp.readFile(`${file}.torn-2`, "utf8")).toBe(torn);
    expect(await fsp.readFile(`${file}.torn-1`, "utf8")).toBe("an earlier repair");
    const warn = cap.records.find((r) => r.event === "transcript.torn_tail_repaired");
    expect(warn).toMatchObject({ level: 40, tornBytes: Buffer.byteLength(torn), keptBytes: good.length });
    expect(JSON.stringify(cap.records)).not.toContain("reasoning t1");
    expect(w.entryCount).toBe(5);

    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    const t = await readSessionTranscript(file);
    expect(t.damage).toEqual({ corruptLines: [], tornTailBytes: 0 });
    expect(t.buildMessages()).toEqual([...turnMessages("thr", "t1"), ...turnMessages("thr", "t2")]);
  });

  it("repairs a file that holds only a torn header", async () => {
    const file = path.join(dir, "s.jsonl");
    await fsp.writeFile(file, '{"type":"sess');
    expect((await readSessionTranscript(file)).header).toBeNull();
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    expect(await fsp.readFile(`${file}.torn-1`, "utf8")).toBe('{"type":"sess');
    const t = await readSessionTranscript(file);
    expect(t.header?.id).toBe("s");
    expect(t.buildMessages()).toHaveLength(5);
  });

  it("terminates (keeps) a complete last line that lacks its newline", async () => {
    const file = path.join(dir, "s.jsonl");
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const extra = { type: "message", id: "feedbeef", parentId: null, timestamp: "2026-01-01T00:00:00.000Z", message: { role: "user", content: "kept", timestamp: 9 } };
    const t1Last = (await readSessionTranscript(file)).leafId;
    extra.parentId = t1Last as unknown as null;
    await fsp.appendFile(file, JSON.stringify(extra));
    expect((await readSessionTranscript(file)).buildMessages().at(-1)).toEqual(extra.message);
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    const lines = await readLines(file);
    expect(lines[6]).toBe(JSON.stringify(extra));
    expect(JSON.parse(lines[7]!).parentId).toBe("feedbeef");
    await expect(fsp.stat(`${file}.torn-1`)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("skips a corrupt middle line with a warning and preserves it in place across appends", async () => {
    const file = path.join(dir, "s.jsonl");
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const lines = await readLines(file);
    lines.splice(3, 0, "{not json at all");
    await fsp.writeFile(file, `${lines.join("\n")}\n`);
    invalidateSessionIndex();
    const cap = captureLogger();
    const t = await readSessionTranscript(file, { logger: cap.logger });
    expect(t.damage.corruptLines).toEqual([4]);
    expect(t.buildMessages()).toEqual(turnMessages("thr", "t1"));
    expect(cap.records.find((r) => r.event === "transcript.damage")).toMatchObject({ level: 40, corruptLines: 1 });

    const cap2 = captureLogger();
    invalidateSessionIndex();
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2"), logger: cap2.logger });
    expect(cap2.records.find((r) => r.event === "transcript.corrupt_lines")).toMatchObject({ count: 1, lines: [4] });
    const after = await readLines(file);
    expect(after.slice(0, lines.length)).toEqual(lines);
    expect(after[3]).toBe("{not json at all");
    expect((await readSessionTranscript(file)).buildMessages()).toEqual([...turnMessages("thr", "t1"), ...turnMessages("thr", "t2")]);
  });

  it("refuses a file without a valid header (read and write) and leaves it untouched", async () => {
    const file = path.join(dir, "s.jsonl");
    const content = '{"type":"message","id":"a","parentId":null}\n';
    await fsp.writeFile(file, content);
    await expectCode(readSessionTranscript(file), "SESSION_HEADER_INVALID", file);
    await expectCode(
      mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") }),
      "SESSION_HEADER_INVALID",
      file,
    );
    await fsp.writeFile(file, "garbage\n");
    await expectCode(readSessionTranscript(file), "SESSION_HEADER_INVALID", file);
    expect(await fsp.readFile(file, "utf8")).toBe("garbage\n");
  });

  it("reads an older (v2) file with pi's in-memory migration but refuses to append to it", async () => {
    const file = path.join(dir, "s.jsonl");
    const lines = [
      { type: "session", version: 2, id: "old", timestamp: "2025-01-01T00:00:00.000Z", cwd: "/" },
      { type: "message", id: "aaaaaaaa", parentId: null, timestamp: "2025-01-01T00:00:01.000Z", message: { role: "hookMessage", customType: "x", content: "c", display: true, timestamp: 1 } },
    ];
    await fsp.writeFile(file, `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`);
    expect((await readSessionTranscript(file)).buildMessages()).toEqual([{ role: "custom", customType: "x", content: "c", display: true, timestamp: 1 }]);
    await expectCode(openSessionFile(file, { sessionId: "old" }), "SESSION_VERSION_UNSUPPORTED", file);
  });
});

describe("path errors", () => {
  it("a directory", async () => {
    const d = path.join(dir, "isdir.jsonl");
    await fsp.mkdir(d);
    await expectCode(readSessionTranscript(d), "SESSION_PATH_IS_DIRECTORY", d);
    await expectCode(openSessionFile(d, { sessionId: "s" }), "SESSION_PATH_IS_DIRECTORY", d);
    await expectCode(
      mirrorTurnToTranscript({ sessionFile: d, sessionId: "s", threadId: "a", turnId: "b", messages: turnMessages("a", "b") }),
      "SESSION_PATH_IS_DIRECTORY",
      d,
    );
  });

  it("outside the session root, by .. or by symlink", async () => {
    const root = path.join(dir, "root");
    const other = path.join(dir, "other");
    await fsp.mkdir(root);
    await fsp.mkdir(other);
    const viaDots = path.join(root, "..", "other", "s.jsonl");
    await expectCode(readSessionTranscript(viaDots, { sessionRoot: root }), "SESSION_OUTSIDE_ROOT", viaDots);
    await fsp.symlink(other, path.join(root, "link"));
    const viaLink = path.join(root, "link", "s.jsonl");
    await expectCode(
      mirrorTurnToTranscript({ sessionFile: viaLink, sessionId: "s", threadId: "a", turnId: "b", messages: turnMessages("a", "b"), sessionRoot: root }),
      "SESSION_OUTSIDE_ROOT",
      viaLink,
    );
    await expect(fsp.readdir(other)).resolves.toEqual([]);
    // Inside the root is fine, also through `..` that stays inside.
    const inside = path.join(root, "a", "..", "s.jsonl");
    await mirrorTurnToTranscript({ sessionFile: inside, sessionId: "s", threadId: "a", turnId: "b", messages: turnMessages("a", "b"), sessionRoot: root });
    expect((await readSessionHistory(path.join(root, "s.jsonl"), { sessionRoot: root })).messages).toHaveLength(5);
  });

  it("unreadable: a parent that is a file, a FIFO, a dangling symlink", async () => {
    const plain = path.join(dir, "plain");
    await fsp.writeFile(plain, "x");
    const underFile = path.join(plain, "s.jsonl");
    await expectCode(readSessionTranscript(underFile), "SESSION_UNREADABLE", underFile);

    const fifo = path.join(dir, "fifo.jsonl");
    execFileSync("mkfifo", [fifo]);
    await expectCode(readSessionTranscript(fifo), "SESSION_UNREADABLE", fifo);
    await expectCode(openSessionFile(fifo, { sessionId: "s" }), "SESSION_UNREADABLE", fifo);

    const dangling = path.join(dir, "dangling.jsonl");
    await fsp.symlink(path.join(dir, "missing-target.jsonl"), dangling);
    await expectCode(readSessionTranscript(dangling), "SESSION_UNREADABLE", dangling);
  });

  it("rejects invalid options with a typed error", async () => {
    await expectCode(openSessionFile(path.join(dir, "s.jsonl"), { sessionId: "" }), "SESSION_INVALID_ARGUMENT", "sessionId");
    await expectCode(
      mirrorTurnToTranscript({ sessionFile: path.join(dir, "s.jsonl"), sessionId: "s", threadId: "a:b", turnId: "t", messages: [] }),
      "SESSION_INVALID_ARGUMENT",
      "threadId",
    );
  });
});

describe("index", () => {
  it("picks up entries another writer appended (incremental scan) and chains after them", async () => {
    const file = path.join(dir, "s.jsonl");
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    const leaf = (await readSessionTranscript(file)).leafId!;
    const foreign = { type: "message", id: "f0f0f0f0", parentId: leaf, timestamp: "2026-01-01T00:00:00.000Z", message: { role: "user", content: "foreign", timestamp: 7 } };
    await fsp.appendFile(file, `${JSON.stringify(foreign)}\n`);
    const r = await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") });
    expect(r.appended).toBe(5);
    const lines = await readLines(file);
    expect(JSON.parse(lines[7]!).parentId).toBe("f0f0f0f0");
  });

  it("re-reads the file when it was rewritten behind its back", async () => {
    const file = path.join(dir, "s.jsonl");
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    // Rewrite: keep only the header and the prompt (as a maintenance rewrite might).
    const lines = await readLines(file);
    await fsp.writeFile(file, `${lines.slice(0, 2).join("\n")}\n`);
    const r = await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
    expect(r).toMatchObject({ appended: 4, skipped: 1 });
    expect((await readSessionTranscript(file)).buildMessages()).toEqual(turnMessages("thr", "t1"));
  });
});

// --- parity of the rebuild with pi's buildSessionContext on random entry trees ------------------------------

const ENTRY_KINDS = ["message", "compaction", "branch_summary", "custom_message", "custom", "label", "model_change"] as const;

const treeArb = fc
  .array(
    fc.record({
      kind: fc.constantFrom(...ENTRY_KINDS),
      parentPick: fc.nat(),
      rootish: fc.boolean(),
      keepPick: fc.nat(),
      text: fc.string({ maxLength: 8 }),
    }),
    { minLength: 0, maxLength: 25 },
  )
  .map((specs) => {
    const entries: SessionEntry[] = [];
    specs.forEach((s, i) => {
      const id = `e${i.toString(16).padStart(7, "0")}`;
      const parentId = i === 0 || (s.rootish && s.parentPick % 5 === 0) ? null : entries[s.parentPick % i]!.id;
      const timestamp = new Date(1_700_000_000_000 + i * 1000).toISOString();
      const base = { id, parentId, timestamp };
      switch (s.kind) {
        case "message":
          entries.push({ ...base, type: "message", message: { role: i % 2 ? "assistant" : "user", content: [{ type: "text", text: s.text }], timestamp: i, provider: "p", model: "m" } });
          break;
        case "compaction":
          entries.push({ ...base, type: "compaction", summary: s.text, firstKeptEntryId: i === 0 ? "none" : entries[s.keepPick % i]!.id, tokensBefore: i });
          break;
        case "branch_summary":
          entries.push({ ...base, type: "branch_summary", fromId: "root", summary: s.text });
          break;
        case "custom_message":
          entries.push({ ...base, type: "custom_message", customType: "ext", content: s.text, display: i % 2 === 0 });
          break;
        case "custom":
          entries.push({ ...base, type: "custom", customType: "ext", data: { i } });
          break;
        case "label":
          entries.push({ ...base, type: "label", targetId: id, label: s.text });
          break;
        case "model_change":
          entries.push({ ...base, type: "model_change", provider: "p", modelId: s.text });
          break;
      }
    });
    return entries;
  });

describe("rebuild parity with pi", () => {
  it("buildSessionContextFromEntries equals pi's buildSessionContext on random trees", () => {
    fc.assert(
      fc.property(treeArb, fc.option(fc.nat(), { nil: undefined }), (entries, leafPick) => {
        const leafId = leafPick === undefined || entries.length === 0 ? undefined : entries[leafPick % entries.length]!.id;
        const ours = buildSessionContextFromEntries(entries, leafId).messages;
        const theirs = buildSessionContext(entries as never, leafId).messages;
        expect(ours).toEqual(theirs);
      }),
      { numRuns: 300 },
    );
  });
});
