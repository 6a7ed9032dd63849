/**
 * Logs must never carry prompt text, assistant text, tool results or transcript contents: run a full offline session
 * with a debug-level logger writing to a buffer and grep it for every content string.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import pino, { type Logger } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexCompaction, createBindingStore } from "../../src/compaction/index.js";
import { createWindowEngine } from "../../src/context-engine/engines/index.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { readThreadBinding, writeThreadBinding } from "../../src/transcript/binding.js";
import { withSessionLock } from "../../src/transcript/lock.js";
import { runCodexTurn } from "../../src/turn.js";

let env: OfflineCodex;
let dir: string;
beforeAll(async () => {
  env = await startOfflineCodex({ offline: { lean: true } });
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-logs-"));
});
afterAll(async () => {
  await env?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A debug-level pino logger whose lines are kept in memory. */
function captureLogs(): { logger: Logger; text: () => string } {
  let logs = "";
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs += chunk.toString("utf8");
      cb();
    },
  });
  return { logger: pino({ level: "debug" }, sink), text: () => logs };
}

describe("log content", () => {
  it("a 3-turn session with a tool call and a compaction logs no prompt, reply, tool result or transcript text", async () => {
    const captured = captureLogs();
    const logger = captured.logger;
    const sessionFile = path.join(dir, "logs.jsonl");
    const engine = createWindowEngine({ tokenBudget: 16_000, ownsCompaction: true });
    const secrets = {
      prompts: ["PROMPT-ALPHA-quokka", "PROMPT-BETA-narwhal", "PROMPT-GAMMA-axolotl"],
      replies: ["REPLY-ONE-pangolin", "REPLY-TWO-tapir", "REPLY-THREE-okapi"],
      toolResult: "TOOLRESULT-capybara",
      toolArg: "TOOLARG-wombat",
    };
    const tool = {
      name: "lookup",
      description: "Looks something up.",
      inputSchema: { type: "object", properties: { q: { type: "string" } } },
      handler: () => secrets.toolResult,
    };
    env.fake.enqueue({ text: secrets.replies[0]! });
    env.fake.enqueue([{ functionCall: { name: "lookup", arguments: { q: secrets.toolArg } } }, { text: secrets.replies[1]! }]);
    env.fake.enqueue({ text: secrets.replies[2]! });
    for (const prompt of secrets.prompts) {
      const r = await runCodexTurn({
        appServer: env.codex,
        sessionId: "logs",
        sessionFile,
        prompt,
        contextEngine: engine,
        contextTokenBudget: 16_000,
        dynamicTools: [tool],
        logger,
      });
      expect(r.status).toBe("completed");
      await r.backgroundMaintenance;
    }
    env.fake.enqueue({ compaction: true }, { kind: "compaction" });
    const c = await runCodexCompaction({
      appServer: env.codex,
      bindingStore: createBindingStore({ read: readThreadBinding, write: writeThreadBinding, logger }),
      sessionId: "logs",
      sessionFile,
      contextEngine: engine,
      trigger: "manual",
      logger,
      withLock: (fn) => withSessionLock(sessionFile, fn),
    });
    expect(c.ok).toBe(true);

    // The session really contains the strings (so their absence from the logs means something).
    const transcript = await readFile(sessionFile, "utf8");
    const all = [...secrets.prompts, ...secrets.replies, secrets.toolResult];
    for (const s of all) expect(transcript, s).toContain(s);
    // The logger really was used at debug level.
    expect(captured.text().split("\n").filter(Boolean).length).toBeGreaterThan(10);
    for (const s of [...all, secrets.toolArg]) expect(captured.text(), `logs leak ${s}`).not.toContain(s);
    // No transcript line (a whole JSON entry) is echoed either.
    for (const line of transcript.split("\n").filter((l) => l.length > 40)) expect(captured.text()).not.toContain(line);
  }, 30_000);

  it("a Plan-mode question (request_user_input) and its answer: logged as ids and counts, never as text", async () => {
    const captured = captureLogs();
    const logger = captured.logger;
    // The app-server logs the request's handling (its own logger), the turn the rest: both at debug.
    const planEnv = await startOfflineCodex({ codex: { logger } });
    try {
      const secrets = { header: "HEADER-quetzal", question: "QUESTION-ibis", label: "OPTION-kakapo", description: "DESCRIPTION-dugong", answer: "ANSWER-saola" };
      const question = { id: "q1", header: secrets.header, question: secrets.question, options: [{ label: secrets.label, description: secrets.description }] };
      planEnv.fake.enqueue([{ functionCall: { name: "request_user_input", arguments: { questions: [question] } } }, { text: "REPLY-after-question" }]);
      const sessionFile = path.join(dir, "plan-logs.jsonl");
      const asked: string[] = [];
      const r = await runCodexTurn({
        appServer: planEnv.codex,
        sessionId: "plan-logs",
        sessionFile,
        prompt: "PROMPT-plan-serval",
        collaborationMode: "plan",
        onUserInput: (req) => (asked.push(req.questions[0]!.question), { q1: { answers: [secrets.answer] } }),
        logger,
      });
      expect(r.status).toBe("completed");
      expect(asked).toEqual([secrets.question]);
      // The question and the answer are in the transcript, and the handling was logged.
      const transcript = await readFile(sessionFile, "utf8");
      for (const s of Object.values(secrets)) expect(transcript, s).toContain(s);
      expect(captured.text()).toContain('"event":"codex.userInput.answered"');
      for (const s of [...Object.values(secrets), "PROMPT-plan-serval", "REPLY-after-question"]) expect(captured.text(), `logs leak ${s}`).not.toContain(s);
    } finally {
      await planEnv.dispose();
    }
  }, 60_000);
});
