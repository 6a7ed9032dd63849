/**
 * The app-server and the model failing under a running session: the app-server killed before the thread starts,
 * during a turn and between turns; the model answering 500, dropping the stream, or sending garbage SSE. Each turn
 * either completes or fails with a typed error, is mirrored exactly once when Codex accepted it, runs no
 * maintenance after a failure, and the next turn works. No child process outlives dispose.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn, startCodexTurn } from "../../src/turn.js";
import { createRecordingEngine } from "../../src/context-engine/engines/index.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { startOfflineCodex, type FakeReply, type OfflineCodex } from "../../src/testing/index.js";
import { captureLogger, messageText, mirrorKeyCounts, processAlive, tempSessions, turnParams, until } from "../helpers/turn-env.js";
import { recordCases } from "./case-count.js";

let env: OfflineCodex;
const sessions = tempSessions("app-server-faults-");
const pids = new Set<number>();

beforeAll(async () => {
  env = await startOfflineCodex();
  pids.add(env.codex.pid!);
});
afterAll(async () => {
  if (env?.codex.pid) pids.add(env.codex.pid);
  await env?.dispose();
  sessions.cleanup();
  // No leaked child: every codex process this suite saw is gone after dispose.
  await until(() => [...pids].every((p) => !processAlive(p)), 5_000, "codex processes to exit");
});

async function killCodex(): Promise<number> {
  const pid = env.codex.pid!;
  pids.add(pid);
  process.kill(pid, "SIGKILL");
  await until(() => !env.codex.alive && !processAlive(pid), 5_000, "codex to die");
  return pid;
}

const MODEL_FAULTS: Array<[string, FakeReply, string | undefined]> = [
  ["HTTP 500", { httpStatus: 500 }, "internalServerError"],
  ["a dropped stream", { text: "partial answer here", dropStream: true }, undefined],
  ["garbage SSE", { garbage: true }, undefined],
  // Silent longer than timeouts.turnIdleMs: the client interrupts and the turn ends timed out.
  ["a stalled stream", { text: ["slow ", "reply"], delayMs: 2_500 }, undefined],
];
recordCases("model-faults", MODEL_FAULTS.length);
recordCases("app-server-kill", 3);

describe("model failures", () => {
  it.each(MODEL_FAULTS)("%s: failed, mirrored once, finalized, no maintenance; the next turn works", async (_name, reply, code) => {
    const file = sessions.file();
    const engine = createRecordingEngine();
    const log = captureLogger();
    env.fake.enqueue(reply);
    const r = await runCodexTurn(
      turnParams(env, file, "model fault", { contextEngine: engine, logger: log.logger, timeouts: { turnIdleMs: 600, interruptGraceMs: 3_000 } }),
    );
    expect(r.status).toBe("failed");
    expect(r.error?.phase).toBe("turnRunning");
    if (code) expect(r.error?.code).toBe(code);
    expect(r.engine.finalize).toBe("afterTurn");
    expect(r.engine.maintenance).toBe("skipped:promptError");
    expect(engine.calls.some((c) => c.method === "maintain")).toBe(false);
    expect(log.events.find((e) => e.event === "turn settled")).toMatchObject({ status: "failed" });
    expect(log.events.some((e) => e.event === "mirror written")).toBe(true);
    const keys = await mirrorKeyCounts(file);
    expect(keys.duplicates).toEqual([]);
    expect([...keys.byTurn.keys()]).toEqual([r.turnId]);

    if (_name === "a stalled stream") expect(r.messagesSnapshot[0]).toMatchObject({ role: "user", content: "model fault" });
    const next = await runCodexTurn(turnParams(env, file, "after model fault", { contextEngine: engine }));
    expect(next.status).toBe("completed");
    expect(next.assistantText).toBe("reply to: after model fault");
    expect((await mirrorKeyCounts(file)).byTurn.size).toBe(2);
  });
});

describe("app-server killed", () => {
  // Measured once the app-server runs (its temporary CODEX_HOME registers one process 'exit' cleanup hook).
  let exitListeners = 0;
  beforeAll(() => {
    exitListeners = process.listenerCount("exit");
  });
  afterAll(() => {
    // Restarted processes do not pile up process-level listeners.
    expect(process.listenerCount("exit")).toBeLessThanOrEqual(exitListeners);
  });

  it("before the thread starts: the client restarts Codex and the turn completes", async () => {
    const file = sessions.file();
    const log = captureLogger();
    const restartsBefore = env.codex.stats().restarts;
    const r = await runCodexTurn(
      turnParams(env, file, "kill before thread", {
        logger: log.logger,
        hooks: { beforePromptBuild: async () => void (await killCodex()) },
      }),
    );
    expect(r.status).toBe("completed");
    expect(r.trace).toEqual(["loadHistory", "project", "hooks", "threadStart", "turnRunning", "mirror", "finalize", "completed"]);
    expect(env.codex.stats().restarts).toBe(restartsBefore + 1);
    pids.add(env.codex.pid!);
    expect((await mirrorKeyCounts(file)).byTurn.size).toBe(1);
  });

  it("during a turn: failed in turnRunning, mirrored once; the next turn resumes the thread", async () => {
    const file = sessions.file();
    const engine = createRecordingEngine();
    const log = captureLogger();
    const first = await runCodexTurn(turnParams(env, file, "before the kill", { contextEngine: engine }));
    expect(first.status).toBe("completed");
    env.fake.enqueue({ text: Array.from({ length: 80 }, (_, i) => `w${i} `), delayMs: 30 });
    let deltas = 0;
    const handle = startCodexTurn(
      turnParams(env, file, "killed mid turn", {
        contextEngine: engine,
        logger: log.logger,
        onEvent: (e) => {
          if (e.type === "agentMessageDelta") deltas++;
        },
      }),
    );
    await until(() => deltas > 0, 10_000, "the first delta");
    await killCodex();
    const r = await handle.result;
    expect(r.status).toBe("failed");
    expect(r.error?.phase).toBe("turnRunning");
    expect(r.error?.message).toMatch(/exited/);
    expect(log.events.find((e) => e.event === "turn settled")).toMatchObject({ status: "failed" });
    expect(r.engine.maintenance).toBe("skipped:promptError");
    expect(r.trace).toContain("mirror");
    const keys = await mirrorKeyCounts(file);
    expect(keys.duplicates).toEqual([]);
    expect([...keys.byTurn.keys()]).toEqual([first.turnId, r.turnId]);

    const before = env.fake.requests.length;
    const next = await runCodexTurn(turnParams(env, file, "after the kill", { contextEngine: engine }));
    pids.add(env.codex.pid!);
    expect(next.status).toBe("completed");
    expect(next.threadId).toBe(first.threadId);
    expect(env.fake.requests[before]?.turnMetadata?.history_initialization).toBe("cold_resume");
    const history = await readSessionHistory(file);
    expect(history.messages.filter((m) => m.role === "user").map(messageText)).toEqual(["before the kill", "killed mid turn", "after the kill"]);
  });

  it("between turns: the next turn restarts Codex and resumes the bound thread", async () => {
    const file = sessions.file();
    const first = await runCodexTurn(turnParams(env, file, "turn before idle kill"));
    expect(first.status).toBe("completed");
    const dead = await killCodex();
    const log = captureLogger();
    const r = await runCodexTurn(turnParams(env, file, "turn after idle kill", { logger: log.logger }));
    pids.add(env.codex.pid!);
    expect(r.status).toBe("completed");
    expect(env.codex.pid).not.toBe(dead);
    expect(r.threadId).toBe(first.threadId);
    expect(log.events.some((e) => e.event === "thread resumed")).toBe(true);
    expect((await mirrorKeyCounts(file)).byTurn.size).toBe(2);
  });
});
