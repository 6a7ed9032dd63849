/**
 * Malformed and oversized JSON-RPC lines from the app-server (the stdio fake in test/codex/fixtures, which emits a
 * non-JSON line, an unknown method, a shapeless item and a 5 kB warning mid-turn) are counted and logged, never
 * crash the client, and the turn still completes through runCodexTurn. Unknown `thread/resume` falls back to a
 * fresh thread.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CodexAppServer } from "../../src/codex/app-server.js";
import { runCodexTurn } from "../../src/turn.js";
import { captureLogger, mirrorKeyCounts, processAlive, tempSessions, turnParams, until } from "../helpers/turn-env.js";
import { recordCases } from "./case-count.js";

const FAKE = path.join(path.dirname(fileURLToPath(import.meta.url)), "../codex/fixtures/fake-app-server.mjs");
const sessions = tempSessions("rpc-lines-");
const clientLog = captureLogger();
let codex: CodexAppServer;

beforeAll(async () => {
  codex = await CodexAppServer.spawn({ codexBin: FAKE, temporaryHome: true, maxLineBytes: 4_096, logger: clientLog.logger, autoRestart: false });
});
afterAll(async () => {
  const pid = codex?.pid;
  await codex?.close();
  sessions.cleanup();
  if (pid !== undefined) await until(() => !processAlive(pid), 5_000, "the fake app-server to exit");
});

recordCases("rpc-lines", 2);

describe("malformed and oversized JSON-RPC lines", () => {
  it("are counted and logged while two turns complete", async () => {
    const file = sessions.file();
    const log = captureLogger();
    const env = { codex } as Parameters<typeof turnParams>[0];
    const r1 = await runCodexTurn(turnParams(env, file, "first over bad lines", { logger: log.logger }));
    expect(r1.status).toBe("completed");
    // Counted after the first turn: one-time process hooks (the session lock's exit cleanup) are installed by then.
    const listenersBefore = process.listenerCount("exit");
    expect(r1.threadId).toBe("thr_fake");
    const s1 = codex.stats();
    expect(s1.malformedLines).toBeGreaterThanOrEqual(1);
    expect(s1.oversizedLines).toBe(1);
    expect(clientLog.events.some((e) => e.event === "codex.rpc.malformedLine")).toBe(true);
    expect(clientLog.events.some((e) => e.event === "codex.rpc.oversizedLine")).toBe(true);
    expect(codex.alive).toBe(true);

    // Same settings: the thread this process holds is reused without a resume RPC.
    const r2 = await runCodexTurn(turnParams(env, file, "second over bad lines", { logger: log.logger }));
    expect(r2.status).toBe("completed");
    expect(log.events.some((e) => e.event === "thread resumed" && e.reusedLoaded === true)).toBe(true);
    const s2 = codex.stats();
    expect(s2.malformedLines).toBeGreaterThan(s1.malformedLines);
    expect(s2.oversizedLines).toBe(2);
    // New developer instructions need a real thread/resume, which the fake does not know: a fresh thread is started.
    const r3 = await runCodexTurn(turnParams(env, file, "third over bad lines", { logger: log.logger, developerInstructions: "changed" }));
    expect(r3.status).toBe("completed");
    expect(log.events.some((e) => e.event === "thread resume failed")).toBe(true);
    // The result reports what Codex received: the re-projection for the fresh thread, which (no engine) gets the
    // session's history as context.
    expect(r3.projection).toMatchObject({ mode: "none", reason: "historyContinuity:resumeFailed" });
    expect(log.events.filter((e) => e.event === "thread started")).toHaveLength(2);
    // The fake reuses one turn id for every turn: the idempotent mirror keeps one copy per key.
    const keys = await mirrorKeyCounts(file);
    expect(keys.duplicates).toEqual([]);
    expect(process.listenerCount("exit")).toBe(listenersBefore);
  });

  it("no log line carries the secret the fake put in an unknown notification", () => {
    expect(JSON.stringify(clientLog.events)).not.toContain("SECRET");
  });
});
