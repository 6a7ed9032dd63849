/**
 * Idle threads are released, against the real app-server: Codex 0.169 keeps every thread a client loaded in memory
 * until the client unsubscribes (about 1 MiB per short thread), then unloads it about 60 s later (`thread/closed`).
 * A released thread's next turn resumes it, on the same thread and with its whole history, whether Codex has unloaded it
 * yet or not.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { inputMessageTexts, startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { captureLogger, disposeChecked, requestThreadId, tempSessions, turnParams, until } from "../helpers/turn-env.js";

let env: OfflineCodex;
const log = captureLogger();
const sessions = tempSessions("thread-release-");
const closed = new Map<string, number>();

beforeAll(async () => {
  env = await startOfflineCodex({ codex: { releaseIdleThreadsAfterMs: 300, logger: log.logger } });
  env.codex.onNotification((n) => {
    if (n.method === "thread/closed") closed.set((n.params as { threadId: string }).threadId, Date.now());
  });
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

const released = (threadId: string) => log.events.filter((e) => e.event === "codex.thread.released" && e.threadId === threadId);
const loadedThreads = async () => ((await env.codex.request("thread/loaded/list", {})) as { data: string[] }).data;

describe("idle threads are released and resumed", () => {
  it("released, unloaded by Codex, and resumed by the next turn with the whole conversation", async () => {
    const early = sessions.file("early");
    const late = sessions.file("late");
    const first = { early: await runCodexTurn(turnParams(env, early, "early one")), late: await runCodexTurn(turnParams(env, late, "late one")) };
    expect([first.early.status, first.late.status]).toEqual(["completed", "completed"]);
    const [earlyThread, lateThread] = [first.early.threadId!, first.late.threadId!];

    // Both go idle: the client unsubscribes them, and Codex confirms.
    await until(() => released(earlyThread).length > 0 && released(lateThread).length > 0, 10_000, "both threads to be released");
    expect(released(earlyThread)[0]!.status).toBe("unsubscribed");

    // Used again at once (Codex has not unloaded it yet): resumed, same thread, the model sees the first turn.
    const before = env.fake.requests.length;
    const again = await runCodexTurn(turnParams(env, early, "early two"));
    expect(again.status).toBe("completed");
    expect(again.threadId).toBe(earlyThread);
    expect(again.warnings).toEqual([]);
    const request = env.fake.requests.slice(before).find((r) => requestThreadId(r) === earlyThread)!;
    expect(inputMessageTexts(request.body).filter((t) => t.includes("early one"))).toHaveLength(1);
    expect(log.events.some((e) => e.event === "codex.thread.resumed" && e.threadId === earlyThread)).toBe(true);

    // Left alone, the other one is unloaded by Codex (observed about 60 s after the release).
    await until(() => closed.has(lateThread), 120_000, "Codex to unload the released thread");
    expect(await loadedThreads()).not.toContain(lateThread);

    // Its next turn resumes it from its rollout: same thread, the first turn is in what the model gets.
    const beforeLate = env.fake.requests.length;
    const resumed = await runCodexTurn(turnParams(env, late, "late two"));
    expect(resumed.status).toBe("completed");
    expect(resumed.threadId).toBe(lateThread);
    expect(resumed.warnings).toEqual([]);
    const lateRequest = env.fake.requests.slice(beforeLate).find((r) => requestThreadId(r) === lateThread)!;
    const texts = inputMessageTexts(lateRequest.body);
    expect(texts.filter((t) => t.includes("late one"))).toHaveLength(1);
    expect(texts.some((t) => t.includes("late two"))).toBe(true);
  }, 180_000);
});
