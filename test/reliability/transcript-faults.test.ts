/**
 * Transcript damage and contention: a torn last line (a crashed append) is repaired by the next turn with earlier
 * turns intact, and concurrent attempts on one session are serialized by the session lock, both mirrored, never
 * interleaved.
 */
import { appendFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn, startCodexTurn } from "../../src/turn.js";
import { createRecordingEngine } from "../../src/context-engine/engines/index.js";
import { readSessionHistory, readSessionTranscript, parseMirrorKey } from "../../src/transcript/session-file.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { captureLogger, messageText, mirrorKeyCounts, mirrorKeys, tempSessions, turnParams, until, disposeChecked } from "../helpers/turn-env.js";
import { recordCases } from "./case-count.js";

let env: OfflineCodex;
const sessions = tempSessions("transcript-faults-");

beforeAll(async () => {
  env = await startOfflineCodex();
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

recordCases("torn-transcript", 1);
recordCases("corrupt-pending-record", 1);
recordCases("concurrency", 4);

describe("a torn transcript", () => {
  it("is repaired by the next turn; earlier turns stay intact", async () => {
    const file = sessions.file();
    const engine = createRecordingEngine();
    for (const prompt of ["torn one", "torn two"]) {
      expect((await runCodexTurn(turnParams(env, file, prompt, { contextEngine: engine }))).status).toBe("completed");
    }
    const before = await readSessionHistory(file);
    // A crashed append: half an entry line, no newline.
    appendFileSync(file, '{"type":"message","id":"deadbeef","parentId":null,"message":{"role":"user","con');
    expect((await readSessionTranscript(file)).damage.tornTailBytes).toBeGreaterThan(0);

    const log = captureLogger();
    const r = await runCodexTurn(turnParams(env, file, "after the tear", { contextEngine: engine, logger: log.logger }));
    expect(r.status).toBe("completed");
    expect(log.events.some((e) => e.event === "transcript.damage")).toBe(true);
    const after = await readSessionTranscript(file);
    expect(after.damage).toEqual({ corruptLines: [], tornTailBytes: 0 });
    const history = await readSessionHistory(file);
    expect(history.messages.slice(0, 4)).toEqual(before.messages);
    expect(history.messages.map(messageText)).toEqual([
      "torn one", "reply to: torn one", "torn two", "reply to: torn two", "after the tear", "reply to: after the tear",
    ]);
    // The engine saw the repaired history (4 earlier messages), not the torn line.
    expect(engine.calls.filter((c) => c.method === "afterTurn").pop()).toMatchObject({ prePromptMessageCount: 4, messageCount: 6 });
    const keys = await mirrorKeyCounts(file);
    expect(keys.duplicates).toEqual([]);
    expect(keys.byTurn.size).toBe(3);
  });
});

describe("an unreadable pending-finalize record", () => {
  it("is moved aside with a warning and the session keeps working", async () => {
    const file = sessions.file();
    const engine = createRecordingEngine();
    expect((await runCodexTurn(turnParams(env, file, "before the damage", { contextEngine: engine }))).status).toBe("completed");
    const pendingFile = `${file}.codex-pending.json`;
    writeFileSync(pendingFile, '{"version":1,"records":[{"turnId":');
    const log = captureLogger();
    const r = await runCodexTurn(turnParams(env, file, "after the damage", { contextEngine: engine, logger: log.logger }));
    expect(r.status).toBe("completed");
    expect(log.events.find((e) => e.event === "pending record corrupt")).toMatchObject({ movedTo: path.basename(`${pendingFile}.corrupt-1`) });
    // The host hears of it in the result, not only in a log line.
    expect(r.warnings).toEqual([expect.stringMatching(/pending-finalize record .* could not be read .*moved aside to .*codex-pending\.json\.corrupt-1/)]);
    // Kept byte for byte for inspection, and no longer in the way.
    expect(readFileSync(`${pendingFile}.corrupt-1`, "utf8")).toBe('{"version":1,"records":[{"turnId":');
    expect(existsSync(pendingFile)).toBe(false);
    expect((await readSessionHistory(file)).messages.map(messageText)).toEqual([
      "before the damage", "reply to: before the damage", "after the damage", "reply to: after the damage",
    ]);
  });
});

describe("concurrent attempts on one session", () => {
  it("are serialized: both complete on one thread, both mirrored, not interleaved", async () => {
    const file = sessions.file();
    const engine = createRecordingEngine();
    const order: string[] = [];
    const params = (tag: string) =>
      turnParams(env, file, `concurrent ${tag}`, {
        contextEngine: engine,
        hooks: { onState: (s) => order.push(`${tag}:${s}`) },
      });
    env.fake.enqueue({ text: Array.from({ length: 10 }, (_, i) => `a${i} `), delayMs: 15 });
    const [a, b] = await Promise.all([runCodexTurn(params("A")), runCodexTurn(params("B"))]);
    expect(a.status).toBe("completed");
    expect(b.status).toBe("completed");
    // One attempt ran entirely before the other started.
    const firstTag = order[0]!.split(":")[0]!;
    const firstRun = order.filter((o) => o.startsWith(`${firstTag}:`));
    expect(order.slice(0, firstRun.length)).toEqual(firstRun);
    expect(firstRun[firstRun.length - 1]).toBe(`${firstTag}:completed`);
    // The second saw the first in its history and continued its thread.
    const [first, second] = firstTag === "A" ? [a, b] : [b, a];
    expect(second.threadId).toBe(first.threadId);
    const afterTurns = engine.calls.filter((c) => c.method === "afterTurn");
    expect(afterTurns.map((c) => c.prePromptMessageCount)).toEqual([0, 2]);
    // Mirror keys are grouped per turn, in run order.
    const keys = (await mirrorKeys(file)).map((k) => parseMirrorKey(k)!.turnId);
    expect(keys).toEqual([first.turnId, first.turnId, second.turnId, second.turnId]);
    const history = await readSessionHistory(file);
    expect(history.messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
  });

  it("five attempts at once all complete, each mirrored exactly once", async () => {
    const file = sessions.file();
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => runCodexTurn(turnParams(env, file, `burst ${i}`))),
    );
    expect(results.map((r) => r.status)).toEqual(Array(5).fill("completed"));
    expect(new Set(results.map((r) => r.threadId)).size).toBe(1);
    const keys = await mirrorKeyCounts(file);
    expect(keys.duplicates).toEqual([]);
    expect([...keys.byTurn.values()]).toEqual([2, 2, 2, 2, 2]);
    const users = (await readSessionHistory(file)).messages.filter((m) => m.role === "user").map(messageText).sort();
    expect(users).toEqual(["burst 0", "burst 1", "burst 2", "burst 3", "burst 4"]);
  });

  it("attempts on different sessions run in parallel on their own threads", async () => {
    const files = [sessions.file(), sessions.file()];
    const results = await Promise.all(files.map((f, i) => runCodexTurn(turnParams(env, f, `parallel ${i}`))));
    expect(results.map((r) => r.status)).toEqual(["completed", "completed"]);
    expect(results[0]!.threadId).not.toBe(results[1]!.threadId);
    for (const [i, f] of files.entries()) {
      const history = await readSessionHistory(f);
      expect(history.messages.map(messageText)).toEqual([`parallel ${i}`, `reply to: parallel ${i}`]);
    }
  });

  it("an attempt aborted while queued behind another one ends aborted without touching the transcript", async () => {
    const file = sessions.file();
    env.fake.enqueue({ text: Array.from({ length: 20 }, (_, i) => `q${i} `), delayMs: 15 });
    const first = startCodexTurn(turnParams(env, file, "holds the lock"));
    const queued = startCodexTurn(turnParams(env, file, "queued then aborted"));
    await until(() => first.actor !== undefined, 5_000, "the first attempt to start");
    // The first attempt holds the lock once it is past the session state; the second waits in it.
    await until(() => !first.actor!.getSnapshot().matches("session"), 10_000, "the first attempt to hold the lock");
    queued.abort();
    // It ends at once, without waiting for the lock holder to finish.
    const b = await queued.result;
    expect(b.status).toBe("aborted");
    // Nothing after the lock ran: no history read, no turn.
    expect(b.trace).not.toContain("loadHistory");
    expect(b.turnId).toBeUndefined();
    expect(b.warnings).toEqual(["ended while waiting for the session lock; nothing ran"]);
    expect(first.actor!.getSnapshot().status).toBe("active");
    const a = await first.result;
    expect(a.status).toBe("completed");
    const keys = await mirrorKeyCounts(file);
    expect([...keys.byTurn.keys()]).toEqual([a.turnId]);
  });
});
