/**
 * A turn an attempt left in flight, recovered from Codex's own record of the thread, against the real app-server:
 * Codex accepted the turn (the binding's `turnInFlight` marker names it, with the original prompt) and the attempt
 * died before it recorded the turn. The next attempt rebuilds it with `thread/read` and mirrors and finalizes it before
 * its own turn. (The real crash, a SIGKILLed worker mid-turn, is in test/reliability/crash-finalize.test.ts; here the
 * dead attempt is stood in for by a turn run on the bound thread with the client alone, which records nothing.)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CUT_TURN_NOTICE, readThreadTurn } from "../../src/codex/thread-turn.js";
import { createWindowEngine } from "../../src/context-engine/engines/index.js";
import type { AgentMessage, ContextEngine } from "../../src/context-engine/types.js";
import { recoverCodexSession } from "../../src/recovery.js";
import { readThreadBinding, writeThreadBinding } from "../../src/transcript/binding.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { runCodexTurn } from "../../src/turn.js";
import { applyPatchCall, execCommandCall, startOfflineCodex, updatePlanCall, type OfflineCodex } from "../../src/testing/index.js";
import { disposeChecked, tempSessions, turnParams } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("cut-turn-");
const workspaces: string[] = [];

beforeAll(async () => {
  // A HOME of its own keeps the machine's shell startup files out of the commands' output.
  env = await startOfflineCodex({ codex: { config: { tools: { update_plan: { enabled: true } } }, env: { HOME: workspace() } } });
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
  for (const ws of workspaces) rmSync(ws, { recursive: true, force: true });
});

function workspace(): string {
  const ws = mkdtempSync(path.join(tmpdir(), "ctm-cut-turn-ws-"));
  workspaces.push(ws);
  return ws;
}

/** The model's work in the cut turn: text and a shell command, a patch, then the final answer. */
function scriptWork(ws: string): void {
  env.fake.enqueue([
    { text: "running it", functionCall: execCommandCall("echo hello > out.txt && echo WROTE-OUT", { workdir: ws }) },
    { customToolCall: applyPatchCall([{ kind: "add", path: "added.txt", content: "one\n" }]) },
    { text: "all done" },
  ]);
}

/** An engine that records what each finalize handed it (the turn's own messages). */
function recordingEngine(): { engine: ContextEngine; finalized: AgentMessage[][] } {
  const finalized: AgentMessage[][] = [];
  const engine: ContextEngine = {
    info: { id: "recorder", name: "Recorder" },
    async ingest() {
      return { ingested: true };
    },
    async afterTurn({ messages, prePromptMessageCount }) {
      finalized.push(messages.slice(prePromptMessageCount));
    },
    async assemble({ messages }) {
      return { messages, estimatedTokens: 0 };
    },
    async compact() {
      return { ok: true, compacted: false };
    },
  };
  return { engine, finalized };
}

const textOf = (m: AgentMessage): string => {
  const c = (m as { content?: unknown }).content;
  if (typeof c === "string") return c;
  return Array.isArray(c) ? c.map((p: { type: string; text?: string }) => (p.type === "text" ? (p.text ?? "") : `[${p.type}]`)).join("|") : "";
};
const shape = (messages: readonly AgentMessage[]) =>
  messages.map((m) => `${m.role}:${m.role === "toolResult" ? (m as { toolName: string }).toolName : textOf(m)}`);

/**
 * Stand in for an attempt that died mid-turn: run a turn on the session's bound thread with the client alone (nothing
 * mirrored, no pending record) and leave the marker the dead attempt's accept would have written.
 */
async function cutTurn(file: string, ws: string, originalPrompt: string, sentText: string): Promise<{ threadId: string; turnId: string }> {
  const binding = await readThreadBinding(file);
  expect(binding).toBeDefined();
  scriptWork(ws);
  const turn = await env.codex.startTurn({ threadId: binding!.threadId, text: sentText });
  const record = await turn.completion;
  expect(record.codexStatus).toBe("completed");
  await writeThreadBinding(file, { ...binding!, heldTurnIds: [...binding!.heldTurnIds, turn.turnId], turnInFlight: { turnId: turn.turnId, prompt: originalPrompt } });
  return { threadId: binding!.threadId, turnId: turn.turnId };
}

describe("a turn rebuilt from Codex's record of the thread", () => {
  it("has the live turn's messages: the same tool calls (native and dynamic), results and answers, in the same responses (not the plan, which Codex does not keep)", async () => {
    const ws = workspace();
    const lookup = {
      name: "lookup_fact",
      description: "Look a fact up.",
      inputSchema: { type: "object", properties: { q: { type: "string" } } },
      handler: () => "FACT: 42",
    };
    env.fake.enqueue([
      { functionCall: updatePlanCall([{ step: "write out.txt", status: "in_progress" }], "starting") },
      { functionCall: { name: "lookup_fact", arguments: { q: "answer" } } },
      { text: "running it", functionCall: execCommandCall("echo hello > out.txt && echo WROTE-OUT", { workdir: ws }) },
      { customToolCall: applyPatchCall([{ kind: "add", path: "added.txt", content: "one\n" }]) },
      { text: "all done" },
    ]);
    const { threadId } = await env.codex.startThread({ cwd: ws, sandbox: "workspace-write", approvalPolicy: "never", dynamicTools: [lookup] });
    const turn = await env.codex.startTurn({ threadId, text: "do the work" });
    const live = await turn.completion;
    expect(live.codexStatus).toBe("completed");

    const rebuilt = await readThreadTurn(env.codex, { threadId, turnId: turn.turnId, prompt: "do the work" });
    expect(rebuilt.found).toBe(true);
    if (!rebuilt.found) return;
    expect(rebuilt.codexStatus).toBe("completed");
    expect(rebuilt.itemsSkipped).toBe(0);
    const liveWithoutPlan = live.messagesSnapshot.filter((m) => m.role !== "custom");
    expect(live.messagesSnapshot.length - liveWithoutPlan.length).toBe(1);
    expect(shape(rebuilt.record.messagesSnapshot)).toEqual(shape(liveWithoutPlan));
    expect(shape(liveWithoutPlan)).toContain("toolResult:lookup_fact");
    expect(JSON.stringify(rebuilt.record.messagesSnapshot)).toContain("FACT: 42");
    // Tool calls and results carry the same ids, names, arguments and output; the model and provider are the thread's.
    const calls = (ms: readonly AgentMessage[]) =>
      ms.flatMap((m) => (m.role === "assistant" ? (m.content as Array<{ type: string }>).filter((p) => p.type === "toolCall") : []));
    expect(calls(rebuilt.record.messagesSnapshot)).toEqual(calls(liveWithoutPlan));
    const results = (ms: readonly AgentMessage[]) => ms.filter((m) => m.role === "toolResult").map((m) => ({ ...m, timestamp: 0 }));
    expect(results(rebuilt.record.messagesSnapshot)).toEqual(results(liveWithoutPlan));
    const last = rebuilt.record.messagesSnapshot.at(-1) as { model?: string; provider?: string };
    expect(last).toMatchObject({ model: "fake-model", provider: "fakeresp" });
    expect(rebuilt.record.assistantText).toBe(live.assistantText);
  });

  it("is not found when the thread does not hold the turn", async () => {
    const { threadId } = await env.codex.startThread({ cwd: workspace() });
    env.fake.enqueue({ text: "hi" });
    await (await env.codex.startTurn({ threadId, text: "hello" })).completion;
    expect(await readThreadTurn(env.codex, { threadId, turnId: "no-such-turn", prompt: "x" })).toEqual({ found: false, reason: "turnNotInThread" });
  });
});

describe("runCodexTurn recovers a turn an earlier attempt left in flight", () => {
  it("mirrors it (original prompt, tool calls, results, answer) and finalizes it once, before its own turn, and clears the marker", async () => {
    const file = sessions.file("recovered");
    const ws = workspace();
    const { engine, finalized } = recordingEngine();
    const base = { contextEngine: engine, cwd: ws, sandbox: "workspace-write" as const, approvalPolicy: "never" as const };
    env.fake.enqueue({ text: "first answer" });
    expect((await runCodexTurn(turnParams(env, file, "first question", base))).status).toBe("completed");
    // Codex got a projected text; the transcript records the prompt the user gave.
    const cut = await cutTurn(file, ws, "the cut prompt", "[projected] the cut prompt");

    env.fake.enqueue({ text: "third answer" });
    const result = await runCodexTurn(turnParams(env, file, "third question", base));
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(result.warnings).toEqual([]);
    expect(result.cutTurnRecovered).toEqual({ turnId: cut.turnId, codexStatus: "completed", messages: 6 });

    const history = await readSessionHistory(file);
    expect(shape(history.messages)).toEqual([
      "user:first question",
      "assistant:first answer",
      "user:the cut prompt",
      "assistant:running it|[toolCall]",
      "toolResult:shell",
      "assistant:[toolCall]",
      "toolResult:apply_patch",
      "assistant:all done",
      "user:third question",
      "assistant:third answer",
    ]);
    expect(history.origins.filter((o) => o?.turnId === cut.turnId)).toHaveLength(6);
    // Finalized once each, the recovered turn with its own messages, in session order.
    expect(finalized.map((ms) => shape(ms)[0])).toEqual(["user:first question", "user:the cut prompt", "user:third question"]);
    expect(finalized[1]).toHaveLength(6);
    expect((await readThreadBinding(file))?.turnInFlight).toBeUndefined();
  });

  it("a cut turn that overflowed the context window: recovered with Codex's error, and the next turn's accordion compacts first", async () => {
    const file = sessions.file("overflow");
    const ws = workspace();
    const compacts: number[] = [];
    const window = createWindowEngine({ ownsCompaction: true, tokenBudget: 16_000 });
    const engine: ContextEngine = { ...window, compact: (p) => (compacts.push(p.currentTokenCount ?? -1), window.compact(p)) };
    // A threshold Codex's "full" usage does not reach: only the recovered overflow can trigger the compaction.
    const base = { contextEngine: engine, contextTokenBudget: 16_000, cwd: ws, compaction: { contextThreshold: 1 } };
    const first = await runCodexTurn(turnParams(env, file, "first question", base));
    expect(first.status).toBe("completed");
    const binding = (await readThreadBinding(file))!;
    const tooLong = { error: { message: "Your input exceeds the context window of this model.", type: "invalid_request_error", code: "context_length_exceeded" } };
    env.fake.enqueue({ httpStatus: 400, body: JSON.stringify(tooLong) });
    const cut = await env.codex.startTurn({ threadId: binding.threadId, text: "one question too many" });
    expect((await cut.completion).error).toMatchObject({ codexErrorInfo: "contextWindowExceeded" });
    await writeThreadBinding(file, { ...binding, turnInFlight: { turnId: cut.turnId, prompt: "one question too many" } });
    const read = await readThreadTurn(env.codex, { threadId: binding.threadId, turnId: cut.turnId, prompt: "one question too many" });
    expect(read.found && read.record.error).toMatchObject({ code: "turnFailed", codexErrorInfo: "contextWindowExceeded" });

    const next = await runCodexTurn(turnParams(env, file, "and now?", base));
    expect(next.status).toBe("completed");
    expect(next.cutTurnRecovered).toMatchObject({ turnId: cut.turnId, codexStatus: "failed" });
    expect(next.trace).toContain("compactBeforeTurn");
    expect(compacts).toEqual([first.usage!.modelContextWindow]);
    expect(next.threadId).not.toBe(first.threadId);
  });

  it("a marker whose turn Codex does not hold is dropped with a warning, and the turn runs", async () => {
    const file = sessions.file("lost");
    env.fake.enqueue({ text: "first answer" });
    expect((await runCodexTurn(turnParams(env, file, "first question"))).status).toBe("completed");
    const binding = (await readThreadBinding(file))!;
    await writeThreadBinding(file, { ...binding, turnInFlight: { turnId: "turn-codex-never-had", prompt: "lost prompt" } });

    env.fake.enqueue({ text: "second answer" });
    const result = await runCodexTurn(turnParams(env, file, "second question"));
    expect(result.status).toBe("completed");
    expect(result.warnings).toEqual([expect.stringContaining("turn-codex-never-had was cut short and Codex could not give it back (notInThread)")]);
    expect(result.cutTurnRecovered).toBeUndefined();
    expect(shape((await readSessionHistory(file)).messages)).toEqual(["user:first question", "assistant:first answer", "user:second question", "assistant:second answer"]);
    expect((await readThreadBinding(file))?.turnInFlight).toBeUndefined();
  });

  it("a turn that ends normally leaves no marker behind (it goes once the pending record is written)", async () => {
    const file = sessions.file("clean");
    env.fake.enqueue({ text: "answer" });
    const result = await runCodexTurn(turnParams(env, file, "question"));
    expect(result.status).toBe("completed");
    const binding = await readThreadBinding(file);
    expect(binding?.heldTurnIds).toContain(result.turnId);
    expect(binding?.turnInFlight).toBeUndefined();
  });
});

describe("a turn left in flight that still runs", () => {
  it("is interrupted first and recovered once Codex stopped it (the attempt ended, its app-server did not)", async () => {
    const file = sessions.file("still-running");
    const { engine, finalized } = recordingEngine();
    env.fake.enqueue({ text: "first answer" });
    expect((await runCodexTurn(turnParams(env, file, "first question", { contextEngine: engine }))).status).toBe("completed");
    const binding = (await readThreadBinding(file))!;
    // A slow answer (about 10 s, 1 s per stream event): still streaming when recovery looks, even on a loaded CI leg.
    // Recovery's interrupt ends it at once. At 200 ms per event (about 2 s) a loaded run once saw the turn end on its
    // own just as the interrupt landed (Codex's thread said interrupted, the live turn completed).
    env.fake.enqueue({ text: "a long answer that is still being written", delayMs: 1_000 });
    const running = await env.codex.startTurn({ threadId: binding.threadId, text: "the slow prompt" });
    await writeThreadBinding(file, { ...binding, heldTurnIds: [...binding.heldTurnIds, running.turnId], turnInFlight: { turnId: running.turnId, prompt: "the slow prompt" } });
    // The client's own handle of the turn it streams is what recovery stops (Codex's thread/read can call a turn that
    // starts right after the previous one "interrupted" while it runs; that race failed this test on a loaded CI leg).
    expect(env.codex.runningTurn(binding.threadId, running.turnId)?.turnId).toBe(running.turnId);
    expect(env.codex.runningTurn(binding.threadId, "another-turn")).toBeUndefined();

    const out = await recoverCodexSession({ sessionId: path.basename(file, ".jsonl"), sessionFile: file, contextEngine: engine, appServer: env.codex });
    expect(out.cutTurn).toMatchObject({ turnId: running.turnId, outcome: "recovered", codexStatus: "interrupted" });
    expect((await running.completion).codexStatus).toBe("interrupted");
    expect(env.codex.runningTurn(binding.threadId, running.turnId)).toBeUndefined();
    // The question gets its outcome: an assistant entry marked as interrupted that says the attempt died (Codex kept
    // no answer text: its agent message never completed).
    const history = await readSessionHistory(file);
    expect(shape(history.messages)).toEqual(["user:first question", "assistant:first answer", "user:the slow prompt", `assistant:${CUT_TURN_NOTICE}`]);
    expect(history.messages.at(-1)).toMatchObject({ role: "assistant", stopReason: "aborted", errorMessage: "the attempt running this turn ended before the turn did" });
    expect(history.origins.at(-1)?.turnId).toBe(running.turnId);
    // The host learns which prompt to run again.
    expect(out.cutPrompts).toEqual([{ turnId: running.turnId, prompt: "the slow prompt", reason: "interrupted" }]);
    expect(finalized.map((ms) => shape(ms)[0])).toEqual(["user:first question", "user:the slow prompt"]);
    expect(finalized[1]!.map((m) => m.role)).toEqual(["user", "assistant"]);
    env.fake.reset();
  });
});

describe("recoverCodexSession and a turn left in flight", () => {
  it("without an app-server leaves it for the next turn; with one, recovers it", async () => {
    const file = sessions.file("host-start");
    const ws = workspace();
    const { engine, finalized } = recordingEngine();
    const base = { contextEngine: engine, cwd: ws, sandbox: "workspace-write" as const, approvalPolicy: "never" as const };
    env.fake.enqueue({ text: "first answer" });
    expect((await runCodexTurn(turnParams(env, file, "first question", base))).status).toBe("completed");
    const cut = await cutTurn(file, ws, "the cut prompt", "the cut prompt");
    const params = { sessionId: path.basename(file, ".jsonl"), sessionFile: file, contextEngine: engine };

    const without = await recoverCodexSession(params);
    expect(without.cutTurn).toEqual({ turnId: cut.turnId, outcome: "noAppServer" });
    expect((await readThreadBinding(file))?.turnInFlight?.turnId).toBe(cut.turnId);

    const withServer = await recoverCodexSession({ ...params, appServer: env.codex });
    expect(withServer.cutTurn).toMatchObject({ turnId: cut.turnId, outcome: "recovered", codexStatus: "completed", messages: 6, itemsSkipped: 0 });
    // No pending record was found; the recovered turn's messages and finalize count with the rest.
    expect(withServer).toMatchObject({ pending: 0, mirroredMessages: 6, finalized: 1, dropped: 0 });
    expect((await readThreadBinding(file))?.turnInFlight).toBeUndefined();
    expect(finalized).toHaveLength(2);

    // A completed cut turn leaves no prompt to run again.
    expect(withServer.cutPrompts).toBeUndefined();
    // Once recovered, nothing is left to do.
    const again = await recoverCodexSession({ ...params, appServer: env.codex });
    expect(again).toEqual({ pending: 0, mirroredMessages: 0, finalized: 0, dropped: 0 });
  });

  it("reports a prompt whose turn Codex cannot give back as lost, so the host can run it again", async () => {
    const file = sessions.file("host-start-lost");
    env.fake.enqueue({ text: "first answer" });
    expect((await runCodexTurn(turnParams(env, file, "first question"))).status).toBe("completed");
    const binding = (await readThreadBinding(file))!;
    await writeThreadBinding(file, { ...binding, turnInFlight: { turnId: "turn-codex-never-had", prompt: "the lost prompt" } });
    const out = await recoverCodexSession({ sessionId: path.basename(file, ".jsonl"), sessionFile: file, appServer: env.codex });
    expect(out.cutTurn).toEqual({ turnId: "turn-codex-never-had", outcome: "notInThread" });
    expect(out.cutPrompts).toEqual([{ turnId: "turn-codex-never-had", prompt: "the lost prompt", reason: "lost" }]);
  });
});
