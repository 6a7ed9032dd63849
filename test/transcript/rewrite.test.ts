import { promises as fsp, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { SessionManager } from "@mariozechner/pi-coding-agent";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { entryIdempotencyKey, type SessionEntry } from "../../src/transcript/entries.js";
import { drainDiscards } from "../../src/transcript/discard.js";
import { setTranscriptFaultHook } from "../../src/transcript/fault.js";
import { mirrorTurnToTranscript } from "../../src/transcript/mirror.js";
import { planTranscriptRewrite, rewriteTranscriptEntriesInFile, transcriptLines } from "../../src/transcript/rewrite.js";
import { invalidateSessionIndex, readSessionHistory, readSessionTranscript } from "../../src/transcript/session-file.js";
import { SessionFileError } from "../../src/transcript/errors.js";
import { readLines, tempDir } from "./helpers.js";
import { turnMessages } from "./fixtures/turn-messages.js";

let dir: string;
beforeEach(async () => {
  dir = await tempDir("ctm-rewrite-");
  invalidateSessionIndex();
});
afterEach(async () => {
  setTranscriptFaultHook(undefined);
  await fsp.rm(dir, { recursive: true, force: true });
});

type PiMessage = Parameters<SessionManager["appendMessage"]>[0];
const SESSION = "sess-rw";
const stub = (m: AgentMessage): AgentMessage => ({ ...m, content: [{ type: "text", text: "[stub]" }] }) as AgentMessage;
const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), "utf8");

async function twoTurnSession(name = "s.jsonl"): Promise<{ file: string; messages: AgentMessage[] }> {
  const file = path.join(dir, name);
  const t1 = turnMessages("thr", "t1");
  const t2 = turnMessages("thr", "t2");
  await mirrorTurnToTranscript({ sessionFile: file, sessionId: SESSION, cwd: dir, threadId: "thr", turnId: "t1", messages: t1 });
  await mirrorTurnToTranscript({ sessionFile: file, sessionId: SESSION, cwd: dir, threadId: "thr", turnId: "t2", messages: t2 });
  return { file, messages: [...t1, ...t2] };
}

/** Write a session file from raw entry objects (header first). */
async function writeSession(name: string, entries: Array<Record<string, unknown>>): Promise<string> {
  const file = path.join(dir, name);
  const header = { type: "session", version: 3, id: SESSION, timestamp: "2026-01-01T00:00:00.000Z", cwd: dir };
  await fsp.writeFile(file, [header, ...entries].map((e) => JSON.stringify(e)).join("\n") + "\n");
  return file;
}

const msg = (id: string, parentId: string | null, role: "user" | "assistant", text: string, t = 1): Record<string, unknown> => ({
  type: "message",
  id,
  parentId,
  timestamp: new Date(1_760_000_000_000 + t).toISOString(),
  message: role === "user" ? { role, content: text, timestamp: 1_760_000_000_000 + t } : { role, content: [{ type: "text", text }], timestamp: 1_760_000_000_000 + t },
});

const texts = (messages: readonly AgentMessage[]) =>
  messages.map((m) => {
    const c = (m as { content?: unknown }).content;
    if (typeof c === "string") return c;
    if (Array.isArray(c)) return c.map((p: { text?: string; thinking?: string }) => p.text ?? p.thinking ?? "").join("");
    return (m as { summary?: string }).summary ?? "";
  });

describe("rewriteTranscriptEntriesInFile", () => {
  it("re-issues the branch from the first replaced entry with new ids, keeping keys, timestamps and the entries before it", async () => {
    const { file, messages } = await twoTurnSession();
    const before = await readSessionTranscript(file);
    const linesBefore = await readLines(file);
    const target = before.entries[3]!; // t1's tool result
    const replacement = stub((target as unknown as { message: AgentMessage }).message);

    const result = await rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId: target.id, message: replacement }] }, { sessionId: SESSION });

    expect(result).toEqual({ changed: true, rewrittenEntries: 1, bytesFreed: bytes(messages[3]) - bytes(replacement) });
    const linesAfter = await readLines(file);
    expect(linesAfter.slice(0, 4)).toEqual(linesBefore.slice(0, 4)); // header + the 3 entries before the target, byte for byte
    const after = await readSessionTranscript(file);
    expect(after.entries).toHaveLength(before.entries.length);
    const oldIds = new Set(before.entries.map((e) => e.id));
    const reissued = after.entries.slice(3);
    expect(reissued.every((e) => !oldIds.has(e.id))).toBe(true);
    expect(reissued[0]!.parentId).toBe(before.entries[2]!.id);
    reissued.slice(1).forEach((e, i) => expect(e.parentId).toBe(reissued[i]!.id));
    expect(after.entries.map(entryIdempotencyKey)).toEqual(before.entries.map(entryIdempotencyKey));
    expect(after.entries.map((e) => e.timestamp)).toEqual(before.entries.map((e) => e.timestamp));

    const expected = messages.map((m, i) => (i === 3 ? replacement : m));
    const history = await readSessionHistory(file, { sessionId: SESSION });
    expect(history.messages).toEqual(expected);
    expect(history.origins).toEqual(messages.map((_, i) => ({ threadId: "thr", turnId: i < 5 ? "t1" : "t2" })));

    // pi opens the result and resumes from its last entry.
    const sm = SessionManager.open(file, dir);
    expect(sm.buildSessionContext().messages).toEqual(expected);
    expect(sm.getLeafId()).toBe(after.entries.at(-1)!.id);
  });

  it("gives the same context as OpenClaw's runtime (pi branch + re-append) on the same request", async () => {
    const { file, messages } = await twoTurnSession();
    const openclawCopy = path.join(dir, "openclaw.jsonl");
    await fsp.copyFile(file, openclawCopy);
    const entries = (await readSessionTranscript(file)).entries;
    const targets = [entries[1]!, entries[8]!]; // t1's reasoning and t2's tool result
    const replacements = targets.map((e) => ({ entryId: e.id, message: stub((e as unknown as { message: AgentMessage }).message) }));

    const ours = await rewriteTranscriptEntriesInFile(file, { replacements }, { sessionId: SESSION });

    // OpenClaw's rewriteTranscriptEntriesInSessionManager: branch from the first target's parent, re-append the rest.
    const sm = SessionManager.open(openclawCopy, dir);
    const branch = sm.getBranch();
    const first = branch.findIndex((e) => e.id === targets[0]!.id);
    sm.branch(branch[first]!.parentId!);
    for (const e of branch.slice(first)) {
      const r = replacements.find((x) => x.entryId === e.id);
      sm.appendMessage((r ? r.message : (e as unknown as { message: AgentMessage }).message) as PiMessage);
    }
    expect(ours).toMatchObject({ changed: true, rewrittenEntries: 2 });
    expect((await readSessionHistory(file, { sessionId: SESSION })).messages).toEqual(sm.buildSessionContext().messages);
    expect(sm.buildSessionContext().messages).toHaveLength(messages.length);
  });

  it("is deterministic: the same rewrite of the same file gives the same bytes", async () => {
    const a = await twoTurnSession("a.jsonl");
    const b = path.join(dir, "b.jsonl");
    await fsp.copyFile(a.file, b);
    const target = (await readSessionTranscript(a.file)).entries[4]!;
    const request = { replacements: [{ entryId: target.id, message: stub(a.messages[4]!) }] };
    await rewriteTranscriptEntriesInFile(a.file, request, { sessionId: SESSION });
    await rewriteTranscriptEntriesInFile(b, request, { sessionId: SESSION });
    expect(await fsp.readFile(b, "utf8")).toBe(await fsp.readFile(a.file, "utf8"));
  });

  it("changes nothing, with OpenClaw's reasons, when nothing matches", async () => {
    const { file } = await twoTurnSession();
    const original = await fsp.readFile(file, "utf8");
    const nothing = { changed: false, bytesFreed: 0, rewrittenEntries: 0 };
    expect(await rewriteTranscriptEntriesInFile(file, { replacements: [] }, { sessionId: SESSION })).toEqual({ ...nothing, reason: "no replacements requested" });
    expect(await rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId: "  ", message: { role: "user", content: "x" } }] }, { sessionId: SESSION })).toEqual({
      ...nothing,
      reason: "no replacements requested",
    });
    expect(await rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId: "nope0000", message: { role: "user", content: "x" } }] }, { sessionId: SESSION })).toEqual({
      ...nothing,
      reason: "no matching message entries",
    });
    expect(await rewriteTranscriptEntriesInFile(path.join(dir, "missing.jsonl"), { replacements: [{ entryId: "a", message: { role: "user", content: "x" } }] }, { sessionId: SESSION })).toEqual({
      ...nothing,
      reason: "empty session",
    });
    expect(await fsp.readFile(file, "utf8")).toBe(original);
    await drainDiscards(); // the session lock's directory is removed in the background after its rename
    expect(readdirSync(dir).sort()).toEqual(["s.jsonl"]);
  });

  it("treats a replacement equal to the current message as no change (a repeated GC does not churn entry ids)", async () => {
    const { file, messages } = await twoTurnSession();
    const entries = (await readSessionTranscript(file)).entries;
    const original = await fsp.readFile(file, "utf8");
    const same = await rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId: entries[3]!.id, message: messages[3]! }] }, { sessionId: SESSION });
    expect(same).toEqual({ changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "replacements equal the current messages" });
    expect(await fsp.readFile(file, "utf8")).toBe(original);
    // Mixed: only the changed one counts, and the branch is re-issued from it (not from the earlier, equal one).
    const lines = await readLines(file);
    const mixed = await rewriteTranscriptEntriesInFile(
      file,
      { replacements: [{ entryId: entries[1]!.id, message: messages[1]! }, { entryId: entries[6]!.id, message: stub(messages[6]!) }] },
      { sessionId: SESSION },
    );
    expect(mixed).toMatchObject({ changed: true, rewrittenEntries: 1 });
    expect((await readLines(file)).slice(0, 7)).toEqual(lines.slice(0, 7));
  });

  it("keeps an abandoned entry another branch descends from, drops the rest of the old suffix", async () => {
    // a -> b -> x (an older branch) and a -> b -> c (the active one: c is last in the file).
    const file = await writeSession("branches.jsonl", [
      msg("aaaaaaaa", null, "user", "first", 1),
      msg("bbbbbbbb", "aaaaaaaa", "assistant", "reply b", 2),
      msg("xxxxxxxx", "bbbbbbbb", "user", "other branch", 3),
      msg("cccccccc", "bbbbbbbb", "user", "active follow-up", 4),
    ]);
    const lines = await readLines(file);
    const result = await rewriteTranscriptEntriesInFile(
      file,
      { replacements: [{ entryId: "bbbbbbbb", message: { role: "assistant", content: [{ type: "text", text: "[stub b]" }], timestamp: 1_760_000_000_002 } }] },
      { sessionId: SESSION },
    );
    expect(result).toMatchObject({ changed: true, rewrittenEntries: 1 });
    const after = await readLines(file);
    expect(after.slice(0, 4)).toEqual(lines.slice(0, 4)); // header, a, b (x still descends from it), x
    expect(after.some((l) => l.includes('"cccccccc"'))).toBe(false);
    expect(after).toHaveLength(6);
    const sm = SessionManager.open(file, dir);
    expect(texts(sm.buildSessionContext().messages as AgentMessage[])).toEqual(["first", "[stub b]", "active follow-up"]);
    expect(texts(sm.getBranch("xxxxxxxx").map((e) => (e as unknown as { message: AgentMessage }).message))).toEqual(["first", "reply b", "other branch"]);
  });

  it("follows re-issued entries from a compaction's firstKeptEntryId and a label's targetId", async () => {
    const file = await writeSession("compacted.jsonl", [
      msg("aaaaaaaa", null, "user", "old prompt", 1),
      msg("bbbbbbbb", "aaaaaaaa", "assistant", "old reply", 2),
      msg("cccccccc", "bbbbbbbb", "user", "kept prompt", 3),
      { type: "compaction", id: "dddddddd", parentId: "cccccccc", timestamp: "2026-01-01T00:00:01.000Z", summary: "summary of a, b", firstKeptEntryId: "cccccccc", tokensBefore: 100 },
      msg("eeeeeeee", "dddddddd", "assistant", "after compaction", 5),
      { type: "label", id: "ffffffff", parentId: "eeeeeeee", timestamp: "2026-01-01T00:00:02.000Z", targetId: "cccccccc", label: "important" },
    ]);
    await rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId: "bbbbbbbb", message: { role: "assistant", content: "[stub]", timestamp: 1_760_000_000_002 } }] }, { sessionId: SESSION });
    const entries = (await readSessionTranscript(file)).entries;
    const byOldText = (t: string) => entries.find((e) => JSON.stringify(e).includes(t))!;
    const kept = byOldText("kept prompt");
    const compaction = entries.find((e) => e.type === "compaction")!;
    expect(kept.id).not.toBe("cccccccc");
    expect(compaction["firstKeptEntryId"]).toBe(kept.id);
    expect(entries.find((e) => e.type === "label")!["targetId"]).toBe(kept.id);
    const expected = ["summary of a, b", "kept prompt", "after compaction"];
    expect(texts((await readSessionHistory(file, { sessionId: SESSION })).messages)).toEqual(expected);
    expect(texts(SessionManager.open(file, dir).buildSessionContext().messages as AgentMessage[])).toEqual(expected);
  });

  it("keeps a corrupt line where it was", async () => {
    const file = await writeSession("corrupt.jsonl", [msg("aaaaaaaa", null, "user", "first", 1), msg("bbbbbbbb", "aaaaaaaa", "assistant", "reply", 2)]);
    const lines = await readLines(file);
    await fsp.writeFile(file, [lines[0], lines[1], "{not json", lines[2]].join("\n") + "\n");
    await rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId: "bbbbbbbb", message: { role: "assistant", content: "[stub]" } }] }, { sessionId: SESSION });
    const after = await readLines(file);
    expect(after.slice(0, 3)).toEqual([lines[0], lines[1], "{not json"]);
    expect(after).toHaveLength(4);
  });

  it("refuses a malformed request with a typed error naming the field, and writes nothing", async () => {
    const { file } = await twoTurnSession();
    const original = await fsp.readFile(file, "utf8");
    const entryId = (await readSessionTranscript(file)).entries[0]!.id;
    const bad = async (request: unknown) => {
      const error = await rewriteTranscriptEntriesInFile(file, request, { sessionId: SESSION }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SessionFileError);
      expect((error as SessionFileError).code).toBe("SESSION_INVALID_ARGUMENT");
      return (error as Error).message;
    };
    expect(await bad({ replacements: [{ entryId, message: { content: "no role" } }] })).toContain("replacements.0.message.role");
    expect(await bad({ replacements: [{ entryId, message: { role: "user", content: 42 } }] })).toContain("replacements.0.message.content");
    expect(await bad({ replacements: "all" })).toContain("replacements");
    expect(await bad(undefined)).toContain("(root)");
    expect(await fsp.readFile(file, "utf8")).toBe(original);
  });

  it("leaves the transcript as it was when the replace fails before the rename", async () => {
    const { file, messages } = await twoTurnSession();
    const original = await fsp.readFile(file, "utf8");
    const entryId = (await readSessionTranscript(file)).entries[3]!.id;
    setTranscriptFaultHook((point) => {
      if (point === "rewrite:before-rename") throw Object.assign(new Error("simulated EIO"), { code: "EIO" });
    });
    const error = await rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId, message: stub(messages[3]!) }] }, { sessionId: SESSION }).catch((e: unknown) => e);
    expect((error as SessionFileError).code).toBe("SESSION_WRITE_FAILED");
    expect((error as Error).message).toContain("unchanged");
    expect(await fsp.readFile(file, "utf8")).toBe(original);
    await drainDiscards(); // the session lock's directory is removed in the background after its rename
    expect(readdirSync(dir)).toEqual(["s.jsonl"]); // no temp file left
    setTranscriptFaultHook(undefined);
    const retry = await rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId, message: stub(messages[3]!) }] }, { sessionId: SESSION });
    expect(retry.changed).toBe(true);
  });

  it("keeps the transcript's file mode", async () => {
    const { file, messages } = await twoTurnSession();
    await fsp.chmod(file, 0o600);
    const entryId = (await readSessionTranscript(file)).entries[0]!.id;
    await rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId, message: stub(messages[0]!) }] }, { sessionId: SESSION });
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it("refuses another session's transcript", async () => {
    const { file, messages } = await twoTurnSession();
    const entryId = (await readSessionTranscript(file)).entries[0]!.id;
    const error = await rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId, message: stub(messages[0]!) }] }, { sessionId: "someone-else" }).catch((e: unknown) => e);
    expect((error as SessionFileError).code).toBe("SESSION_ID_MISMATCH");
  });
});

describe("planTranscriptRewrite", () => {
  it("matches only message entries on the active branch", () => {
    const lines = transcriptLines(
      [
        JSON.stringify({ type: "session", version: 3, id: SESSION }),
        JSON.stringify(msg("aaaaaaaa", null, "user", "a")),
        JSON.stringify({ type: "custom_message", id: "cccccccc", parentId: "aaaaaaaa", timestamp: "2026-01-01T00:00:00.000Z", customType: "note", content: "n" }),
        JSON.stringify(msg("oooooooo", "aaaaaaaa", "user", "off-branch")),
        JSON.stringify(msg("bbbbbbbb", "cccccccc", "assistant", "b")),
      ].join("\n"),
    );
    const replace = (entryId: string) => planTranscriptRewrite(lines, [{ entryId, message: { role: "user", content: "x" } }]);
    expect(replace("oooooooo").result.reason).toBe("no matching message entries");
    expect(replace("cccccccc").result.reason).toBe("no matching message entries");
    const hit = replace("bbbbbbbb");
    expect(hit.result).toMatchObject({ changed: true, rewrittenEntries: 1 });
    expect(hit).toMatchObject({ reappended: 1, removed: 1 });
    const last = JSON.parse(hit.lines!.at(-1)!) as SessionEntry;
    expect(last.parentId).toBe("cccccccc");
  });
});
