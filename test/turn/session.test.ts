/** `createCodexSession`: the shared parameters given once, then `run` / `start` per turn, against the real app-server. */
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCodexSession, createWindowEngine, CodexTurnParamsError, readSessionHistory } from "../../src/index.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { testTempDir } from "../helpers/temp-dir.js";

let env: OfflineCodex;
beforeAll(async () => {
  env = await startOfflineCodex({ offline: { lean: true } });
});
afterAll(async () => {
  await env?.dispose();
});

describe("createCodexSession", () => {
  it("runs turns of one session with the options given once, and start() streams a turn", async () => {
    const dir = await testTempDir("ctm-session-");
    const session = createCodexSession({
      appServer: env.codex,
      sessionFile: path.join(dir, "s1.jsonl"),
      contextEngine: createWindowEngine({ tokenBudget: 16_000 }),
      contextTokenBudget: 16_000,
      developerInstructions: "SESSION-INSTRUCTIONS",
    });
    expect(session.sessionId).toBe("s1");
    env.fake.enqueue({ text: "first answer" });
    const first = await session.run("first question");
    expect(first.status).toBe("completed");
    expect(first.assistantText).toBe("first answer");

    env.fake.enqueue({ text: "second answer, streamed" });
    const turn = session.start("second question");
    const deltas: string[] = [];
    for await (const e of turn.events) if (e.type === "agentMessageDelta") deltas.push(e.delta);
    const second = await turn.result;
    expect(second.status).toBe("completed");
    expect(deltas.join("")).toBe("second answer, streamed");
    // One thread, one transcript: the second turn continued the first.
    expect(second.threadId).toBe(first.threadId);
    const history = await readSessionHistory(path.join(dir, "s1.jsonl"));
    expect(history.messages.filter((m) => m.role === "user")).toHaveLength(2);
    // The shared instructions reached the model.
    expect(JSON.stringify(env.fake.requests.at(-1)?.body)).toContain("SESSION-INSTRUCTIONS");
  });

  it("checks the shared options at once, naming the bad one", async () => {
    const dir = await testTempDir("ctm-session-");
    const bad = () => createCodexSession({ appServer: env.codex, sessionFile: path.join(dir, "s.jsonl"), contextTokenBudget: -1 });
    expect(bad).toThrow(CodexTurnParamsError);
    expect(bad).toThrow(/contextTokenBudget/);
  });
});
