/**
 * A lock that is lost mid-turn (another process took the session: here the lock directory is removed under a running
 * turn) never goes unnoticed: the attempt stops, writes nothing more to the transcript, and says why.
 */
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCodexTurn } from "../../src/turn.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { disposeChecked, messageText, tempSessions, turnParams, until } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("turn-lock-lost-");

beforeAll(async () => {
  env = await startOfflineCodex();
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

describe("a session lock lost during the turn", () => {
  it("aborts the attempt; the turn is not mirrored; the result says the lock was compromised", async () => {
    const file = sessions.file();
    env.fake.enqueue({ text: Array.from({ length: 200 }, (_, i) => `w${i} `), delayMs: 50 });
    let deltas = 0;
    const handle = startCodexTurn(turnParams(env, file, "a long turn", { onEvent: (e) => void (e.type === "agentMessageDelta" && deltas++) }));
    await until(() => deltas > 2, 20_000, "the turn to stream");
    rmSync(`${file}.lock`, { recursive: true, force: true });
    const r = await handle.result;
    expect(r.status).toBe("failed");
    expect(r.error).toMatchObject({ phase: "mirror", code: "SESSION_LOCK_COMPROMISED" });
    expect(r.warnings).toContain("the session lock was lost (another process took the session); the attempt was aborted and writes nothing more");
    expect(r.messagesSnapshot.length).toBeGreaterThan(0);
    expect((await readSessionHistory(file)).messages.map(messageText)).toEqual([]);
  });
});
