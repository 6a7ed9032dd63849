/**
 * Request marks in the JSONL store: `appendTurn({ request })` writes the mark on the prompt's entry only (idempotent:
 * a re-mirror changes nothing), `findRequest` finds the turn in every entry of the file (after a compaction too), a
 * pending record's mark reaches the transcript when recovery mirrors the turn from it.
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { finalizePendingTurns } from "../../src/recovery.js";
import { silentLogger } from "../../src/log/logger.js";
import { createJsonlSessionStore } from "../../src/store/jsonl-store.js";
import { readSessionTranscript } from "../../src/transcript/session-file.js";
import { testTempDir } from "../helpers/temp-dir.js";

const prompt = (text: string) => ({ role: "user" as const, content: text, timestamp: 1 });
const answer = (text: string) => ({ role: "assistant" as const, content: [{ type: "text" as const, text }], timestamp: 2 });

describe("request marks (JSONL store)", () => {
  it("are written on the prompt's entry only, once, and found again with the turn's messages, after a compaction too", async () => {
    const dir = await testTempDir("ctm-requests-");
    const store = createJsonlSessionStore({ sessionFile: path.join(dir, "s.jsonl"), sessionId: "s" });
    const lock = await store.acquireLock();
    try {
      const turn = { threadId: "thr", turnId: "t1", messages: [prompt("q1"), answer("a1")], request: { id: "req-1", status: "completed" as const } };
      await store.appendTurn(turn);
      await store.appendTurn(turn);
      await store.appendTurn({ threadId: "thr", turnId: "t2", messages: [prompt("q2"), answer("a2")] });
      const entries = (await readSessionTranscript(store.sessionFile)).entries;
      expect(entries.map((e) => e["request"] ?? null)).toEqual([{ id: "req-1", status: "completed" }, null, null, null]);
      // Compacted away from the visible branch: still found.
      await store.appendCompaction({ summary: "earlier", firstKeptEntryId: entries[2]!.id, tokensBefore: 10 });
      const found = await store.findRequest("req-1");
      expect(found).toMatchObject({ id: "req-1", status: "completed", threadId: "thr", turnId: "t1", entryId: entries[0]!.id });
      expect(found?.messages).toEqual([prompt("q1"), answer("a1")]);
      expect(await store.findRequest("req-unknown")).toBeUndefined();
    } finally {
      await lock.release();
    }
  });

  it("a pending record's mark reaches the prompt's entry when recovery mirrors the turn from it", async () => {
    const dir = await testTempDir("ctm-requests-pending-");
    const store = createJsonlSessionStore({ sessionFile: path.join(dir, "s.jsonl"), sessionId: "s" });
    const lock = await store.acquireLock();
    try {
      const messages = [prompt("q1"), answer("a1")];
      await store.recordPending({ threadId: "thr", turnId: "t1", prePromptMessageCount: 0, messageCount: 2, status: "completed", messages, request: { id: "req-p", status: "completed" } });
      const stats = await finalizePendingTurns({ params: { sessionId: "s", sessionFile: store.sessionFile }, store, engine: undefined }, silentLogger);
      expect(stats.mirroredMessages).toBe(2);
      expect(await store.findRequest("req-p")).toMatchObject({ status: "completed", turnId: "t1", messages });
    } finally {
      await lock.release();
    }
  });
});
