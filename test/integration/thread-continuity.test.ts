/**
 * The conversation survives a change of Codex thread, against the real app-server and the fake model, with no context
 * engine (the default):
 * - a model switch keeps the bound thread and names the new model on `turn/start` (OpenClaw's runtime contract:
 *   "switching from openai/gpt-5.5 to openai/gpt-5.2 keeps the thread binding");
 * - a change that does need a fresh thread (here: the dynamic tool catalog) gives that thread the newest history as
 *   context, as OpenClaw's Codex harness does with no engine, once: the next turn resumes it and sends nothing again.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { runCodexTurn, type CodexTurnResult } from "../../src/turn.js";
import { contextEntryOutputs, inputMessageTexts, startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";
import { disposeChecked, requestThreadId, tempSessions, turnParams } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("thread-continuity-");

beforeAll(async () => {
  env = await startOfflineCodex();
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

/** The text of the context entries the model received (`contextEntryOutputs`). */
const contextText = (req: RecordedRequest): string => contextEntryOutputs(req.body).map((e) => e.output).join("\n");

/** Everything the model received in the request, as text. */
const requestText = (req: RecordedRequest): string => JSON.stringify(req.body?.input ?? []);
const count = (text: string, needle: string): number => text.split(needle).length - 1;

async function turn(
  file: string,
  prompt: string,
  reply: string,
  extra: Partial<Parameters<typeof turnParams>[3]> = {},
): Promise<{ result: CodexTurnResult; request: RecordedRequest }> {
  const before = env.fake.requests.length;
  env.fake.enqueue({ text: reply });
  const result = await runCodexTurn(turnParams(env, file, prompt, extra));
  expect(result.status, JSON.stringify(result.error)).toBe("completed");
  const request = env.fake.requests.slice(before).find((r) => r.requestKind === "turn");
  expect(request).toBeDefined();
  return { result, request: request! };
}

const lookupTool = {
  name: "lookup",
  description: "Look a word up.",
  inputSchema: { type: "object", properties: { word: { type: "string" } } },
  handler: () => "found",
};

describe("a thread change without an engine", () => {
  it("a model switch keeps the thread: turn/start names the new model and the thread still holds the earlier turns", async () => {
    const file = sessions.file("model-switch");
    const one = await turn(file, "alpha-question-7q", "alpha-answer-7q", { model: "fake-model" });
    const two = await turn(file, "beta-question-7q", "beta-answer-7q", { model: "fake-model-mini" });
    const three = await turn(file, "gamma-question-7q", "gamma-answer-7q", { model: "fake-model" });
    expect([two.result.threadId, three.result.threadId]).toEqual([one.result.threadId, one.result.threadId]);
    expect([one.request.body?.model, two.request.body?.model, three.request.body?.model]).toEqual(["fake-model", "fake-model-mini", "fake-model"]);
    expect(two.result.projection).toMatchObject({ mode: "none", reason: "nothingAssembled", entriesSent: 0 });
    // The resumed thread carries turn 1 natively (Codex replays it), nothing was re-sent as context.
    expect(inputMessageTexts(two.request.body, "user").join("\n")).toContain("alpha-question-7q");
    expect(count(requestText(three.request), "alpha-answer-7q")).toBe(1);
    expect(contextText(two.request)).toBe("");
  }, 120_000);

  it("a fresh thread gets the conversation as context once; the next turn resumes it and sends nothing again", async () => {
    const file = sessions.file("continuity");
    const first = await turn(file, "q0-9k what is the plan", "a0-9k the plan is X");
    await turn(file, "q1-9k and the budget", "a1-9k the budget is Y");
    await turn(file, "q2-9k who signs", "a2-9k Zed signs");
    // A new tool catalog cannot run on the old thread: fresh thread.
    const fresh = await turn(file, "q3-9k summarize", "a3-9k summary", { dynamicTools: [lookupTool] });
    expect(fresh.result.threadId).not.toBe(first.result.threadId);
    expect(requestThreadId(fresh.request)).toBe(fresh.result.threadId);
    expect(fresh.result.projection).toMatchObject({ mode: "none", reason: "historyContinuity" });
    expect(fresh.result.projection!.entriesSent).toBeGreaterThan(0);
    const context = contextText(fresh.request);
    for (const marker of ["q0-9k", "a0-9k", "q1-9k", "a1-9k", "q2-9k", "a2-9k"]) expect(count(context, marker), marker).toBe(1);
    // In order, as blocks of the transcript, and the current prompt only as the user's message.
    expect(context.indexOf("[user]\nq0-9k")).toBeLessThan(context.indexOf("[assistant]\na0-9k"));
    expect(context.indexOf("a1-9k")).toBeLessThan(context.indexOf("q2-9k"));
    expect(context).not.toContain("q3-9k");
    expect(count(inputMessageTexts(fresh.request.body, "user").join("\n"), "q3-9k")).toBe(1);

    const next = await turn(file, "q4-9k anything else", "a4-9k no", { dynamicTools: [lookupTool] });
    expect(next.result.threadId).toBe(fresh.result.threadId);
    expect(next.result.projection).toMatchObject({ mode: "none", reason: "nothingAssembled", entriesSent: 0 });
    // The thread holds the context it was given: the model sees each earlier turn once, nothing new was injected.
    for (const marker of ["q0-9k", "a2-9k", "q3-9k", "a3-9k"]) expect(count(requestText(next.request), marker), marker).toBe(1);
    expect(count(contextText(next.request), "q0-9k")).toBe(1);
  }, 180_000);

  it("a resumed thread gets what was written after its last turn elsewhere (here: a turn on another thread the binding lost)", async () => {
    const file = sessions.file("newer-history");
    const onA = await turn(file, "n0-4w first on A", "n0-4w-answer");
    const bindingFile = sessionSidecarPaths(file).binding;
    const bindingA = readFileSync(bindingFile, "utf8");
    const onB = await turn(file, "n1-4w on B", "n1-4w-answer", { dynamicTools: [lookupTool] });
    expect(onB.result.threadId).not.toBe(onA.result.threadId);
    // An OS crash lost the last binding write: the binding names thread A again, which never saw turn 2.
    writeFileSync(bindingFile, bindingA);
    const back = await turn(file, "n2-4w back on A", "n2-4w-answer");
    expect(back.result.threadId).toBe(onA.result.threadId);
    expect(back.result.projection).toMatchObject({ mode: "none", reason: "newerHistory" });
    const context = contextText(back.request);
    expect(count(context, "n1-4w on B")).toBe(1);
    expect(count(context, "n1-4w-answer")).toBe(1);
    expect(context).not.toContain("n0-4w");
    // Thread A holds turn 1 natively: the model sees it once.
    expect(count(requestText(back.request), "n0-4w first on A")).toBe(1);
  }, 180_000);
});
