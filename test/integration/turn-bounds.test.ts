/**
 * Every wait a default configuration can enter is bounded: a model stream that stays open sending only SSE keep-alive
 * comments (Codex sees no event, so nothing is notified) ends the turn at the app-server's idle bound with no turn
 * option set, and `timeouts.turnIdleMs: 0` switches the bound off. Real `codex app-server`, fake model on loopback; the
 * app-server's idle bound is shortened here from its 120 s default (the defaults themselves are checked below).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { spawnOptionsSchema, startTurnSchema } from "../../src/codex/options.js";
import { parseCodexTurnParams } from "../../src/params.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { disposeChecked, tempSessions, turnParams } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("turn-bounds-");
const IDLE_MS = 1_500;

beforeAll(async () => {
  env = await startOfflineCodex({ codex: { turnIdleTimeoutMs: IDLE_MS } });
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

describe("default bounds", () => {
  it("are 120 s without a notification and 90 s of retries without progress; 0 is accepted as no bound", () => {
    expect(spawnOptionsSchema.parse({}).turnIdleTimeoutMs).toBe(120_000);
    expect(startTurnSchema.parse({ threadId: "t", text: "x" }).retryWithoutProgressMs).toBe(90_000);
    expect(spawnOptionsSchema.parse({ turnIdleTimeoutMs: 0 }).turnIdleTimeoutMs).toBe(0);
    const parsed = parseCodexTurnParams({ ...turnParams(env, sessions.file(), "x"), timeouts: { turnIdleMs: 0, retryWithoutProgressMs: 0 } });
    expect(parsed.timeouts).toMatchObject({ turnIdleMs: 0, retryWithoutProgressMs: 0 });
  });

  it("a stream of keep-alives only ends the turn at the app-server's idle bound, with no turn option set", async () => {
    env.fake.enqueue({ keepAliveMs: 60_000, text: "never reached" });
    const started = Date.now();
    const result = await runCodexTurn(turnParams(env, sessions.file(), "hello"));
    const tookMs = Date.now() - started;
    expect(result.status).toBe("failed");
    expect(result.error?.code).toBe("idleTimeout");
    expect(tookMs).toBeGreaterThanOrEqual(IDLE_MS);
    // Far below the keep-alive stream's 60 s: the bound, not the stream, ended it.
    expect(tookMs).toBeLessThan(30_000);
  });

  it("timeouts.turnIdleMs: 0 waits through a quiet stream longer than the app-server's bound", async () => {
    env.fake.enqueue({ keepAliveMs: IDLE_MS + 1_500, text: "late but complete" });
    const result = await runCodexTurn({ ...turnParams(env, sessions.file(), "hello"), timeouts: { turnIdleMs: 0 } });
    expect(result.status).toBe("completed");
    expect(result.assistantText).toBe("late but complete");
  });
});
