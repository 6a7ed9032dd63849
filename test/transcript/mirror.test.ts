import { promises as fsp } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { SessionFileError } from "../../src/transcript/errors.js";
import { withSessionLock } from "../../src/transcript/lock.js";
import { mirrorKeysForTurn, mirrorTurnToTranscript } from "../../src/transcript/mirror.js";
import { invalidateSessionIndex, readSessionHistory, readSessionTranscript } from "../../src/transcript/session-file.js";
import { captureLogger, readLines, tempDir } from "./helpers.js";
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

const mirror = (turnId: string, extra: Partial<Parameters<typeof mirrorTurnToTranscript>[0]> = {}) =>
  mirrorTurnToTranscript({ sessionFile: file, sessionId: "s1", threadId: "thr", turnId, messages: turnMessages("thr", turnId), ...extra });

describe("idempotency keys", () => {
  it("names each message by kind", () => {
    expect(mirrorKeysForTurn("thr", "t1", turnMessages("thr", "t1"))).toEqual([
      "codex-app-server:thr:t1:prompt",
      "codex-app-server:thr:t1:reasoning",
      "codex-app-server:thr:t1:tool-call-call_t1",
      "codex-app-server:thr:t1:tool-result-call_t1",
      "codex-app-server:thr:t1:assistant",
    ]);
  });

  it("falls back to message-<index> for repeated kinds, unknown roles and a non-user first message", () => {
    const msgs: AgentMessage[] = [
      { role: "assistant", content: [{ type: "text", text: "a" }], timestamp: 1 },
      { role: "user", content: "steer", timestamp: 2 },
      { role: "assistant", content: [{ type: "text", text: "b" }], timestamp: 3 },
      { role: "bashExecution", command: "ls", timestamp: 4 },
      { role: "assistant", content: [], timestamp: 5 },
    ];
    expect(mirrorKeysForTurn("T", "U", msgs).map((k) => k.split(":").slice(3).join(":"))).toEqual([
      "assistant",
      "message-1",
      "message-2",
      "message-3",
      "message-4",
    ]);
  });
});

describe("mirrorTurnToTranscript", () => {
  it("creates the file with a header and appends the turn as one parent chain", async () => {
    const r = await mirror("t1", { cwd: "/w" });
    expect(r.appended).toBe(5);
    expect(r.skipped).toBe(0);
    expect(r.entryIds).toHaveLength(5);
    const lines = (await readLines(file)).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ type: "session", version: 3, id: "s1", cwd: "/w" });
    expect(lines.slice(1).map((l) => l.id)).toEqual(r.entryIds);
    expect(lines.slice(1).map((l) => l.parentId)).toEqual([null, ...r.entryIds.slice(0, 4)]);
    expect(lines.slice(1).map((l) => l.message)).toEqual(turnMessages("thr", "t1"));
    expect(await readSessionHistory(file)).toEqual({
      messages: turnMessages("thr", "t1"),
      origins: Array(5).fill({ threadId: "thr", turnId: "t1" }),
    });
  });

  it("a retried mirror never duplicates: same ids, nothing appended, file bytes unchanged", async () => {
    const first = await mirror("t1");
    const bytes = await fsp.readFile(file);
    const again = await mirror("t1");
    expect(again).toEqual({ appended: 0, skipped: 5, entryIds: first.entryIds, entryCount: 5, lastEntryId: first.entryIds[4] });
    expect(await fsp.readFile(file)).toEqual(bytes);
    invalidateSessionIndex(); // also from a fresh process' point of view
    expect(await mirror("t1")).toEqual({ appended: 0, skipped: 5, entryIds: first.entryIds, entryCount: 5, lastEntryId: first.entryIds[4] });
    expect(await fsp.readFile(file)).toEqual(bytes);
  });

  it("completes a partially mirrored turn with only the missing messages", async () => {
    const msgs = turnMessages("thr", "t1");
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s1", threadId: "thr", turnId: "t1", messages: msgs.slice(0, 2) });
    const r = await mirror("t1");
    expect(r).toMatchObject({ appended: 3, skipped: 2 });
    expect((await readSessionTranscript(file)).buildMessages()).toEqual(msgs);
  });

  it("writes nothing (not even a file) for an empty turn", async () => {
    expect(await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s1", threadId: "a", turnId: "b", messages: [] })).toEqual({
      appended: 0,
      skipped: 0,
      entryIds: [],
    });
    await expect(fsp.stat(file)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("logs counts and ids, never message content", async () => {
    const cap = captureLogger();
    await mirror("t1", { logger: cap.logger });
    const ev = cap.records.find((r) => r.event === "transcript.mirror");
    expect(ev).toMatchObject({ level: 30, threadId: "thr", turnId: "t1", appended: 5, skipped: 0, messages: 5 });
    const all = JSON.stringify(cap.records);
    expect(all).not.toContain("prompt for t1");
    expect(all).not.toContain("answer for t1");
  });

  it("honours locked: true inside a held lock; locked: false there is a re-entrant call", async () => {
    await withSessionLock(file, async () => {
      expect((await mirror("t1", { locked: true })).appended).toBe(5);
      expect((await mirror("t2")).appended).toBe(5); // omitted: sees the held lock, does not deadlock
      const err = await mirror("t3", { locked: false }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SessionFileError);
      expect((err as SessionFileError).code).toBe("SESSION_LOCK_REENTRANT");
    });
    expect((await readSessionTranscript(file)).buildMessages()).toHaveLength(10);
  });

  it("concurrent mirrors from many async callers: no lost or interleaved lines, each turn once", async () => {
    const turns = Array.from({ length: 12 }, (_, i) => `t${i}`);
    // Every turn mirrored three times concurrently (retries racing the original).
    const results = await Promise.all(turns.flatMap((t) => [mirror(t), mirror(t), mirror(t)]));
    expect(results.reduce((n, r) => n + r.appended, 0)).toBe(turns.length * 5);
    const lines = await readLines(file);
    expect(lines).toHaveLength(1 + turns.length * 5);
    const entries = lines.slice(1).map((l) => JSON.parse(l) as { id: string; parentId: string | null; idempotencyKey: string });
    // One linear chain in file order.
    entries.forEach((e, i) => expect(e.parentId).toBe(i === 0 ? null : entries[i - 1]!.id));
    const keys = entries.map((e) => e.idempotencyKey);
    expect(new Set(keys).size).toBe(keys.length);
    // Each turn's five messages are contiguous (one write per turn) and complete.
    const t = await readSessionTranscript(file);
    expect(t.damage).toEqual({ corruptLines: [], tornTailBytes: 0 });
    const h = await readSessionHistory(file);
    for (let i = 0; i < h.origins.length; i += 5) {
      const turnId = h.origins[i]!.turnId;
      expect(h.origins.slice(i, i + 5)).toEqual(Array(5).fill({ threadId: "thr", turnId }));
      expect(h.messages.slice(i, i + 5)).toEqual(turnMessages("thr", turnId));
    }
    expect(new Set(h.origins.map((o) => o!.turnId))).toEqual(new Set(turns));
  });

  it("different sessions mirror independently", async () => {
    const other = path.join(dir, "other.jsonl");
    await Promise.all([mirror("t1"), mirrorTurnToTranscript({ sessionFile: other, sessionId: "s2", threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") })]);
    expect((await readSessionTranscript(file)).buildMessages()).toEqual(turnMessages("thr", "t1"));
    expect((await readSessionTranscript(other)).header?.id).toBe("s2");
  });
});
