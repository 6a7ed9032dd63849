/**
 * Idle threads are released, against the real app-server: Codex 0.169 keeps every thread a client loaded in memory
 * until the client unsubscribes (about 1 MiB per short thread), then unloads it about 60 s later (`thread/closed`).
 * A released thread's next turn resumes it, on the same thread and with its whole history, whether Codex has unloaded it
 * yet or not. A sub-agent's thread, which Codex keeps loaded after its parent is unloaded, is released with it. A
 * released thread lets go of the session's tool handlers (and what they hold); its next turn brings its own.
 */
import v8 from "node:v8";
import vm from "node:vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { defaultTurnReply, inputMessageTexts, startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";
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

/** A turn on `file` runs on `threadId` again, with no warning, and the model gets the earlier prompt once and this one. */
async function expectResumedTurn(file: string, prompt: string, threadId: string, earlierPrompt: string): Promise<void> {
  const before = env.fake.requests.length;
  const result = await runCodexTurn(turnParams(env, file, prompt));
  expect(result.status).toBe("completed");
  expect(result.threadId).toBe(threadId);
  expect(result.warnings).toEqual([]);
  const request = env.fake.requests.slice(before).find((r) => requestThreadId(r) === threadId)!;
  const texts = inputMessageTexts(request.body);
  expect(texts.filter((t) => t.includes(earlierPrompt))).toHaveLength(1);
  expect(texts.some((t) => t.includes(prompt))).toBe(true);
}

describe("idle threads are released and resumed", () => {
  it("released, unloaded by Codex, and resumed by the next turn with the whole conversation", async () => {
    // A session whose turn delegates to a sub-agent (spawn_agent, wait_agent): Codex loads a second thread for it.
    const inputOf = (r: RecordedRequest) => ((r.body as { input?: Array<{ type?: string; output?: unknown }> } | null)?.input ?? []);
    env.fake.setDefault((req) => {
      const input = inputOf(req);
      if (!JSON.stringify(input).includes("Delegate the counting")) return JSON.stringify(input).includes("count to three") ? { text: "one two three" } : defaultTurnReply(req);
      const outputs = input.filter((i) => i.type === "function_call_output");
      if (outputs.length === 0) return { functionCall: { name: "spawn_agent", namespace: "multi_agent_v1", arguments: { message: "count to three" } } };
      if (outputs.length === 1) {
        const agentId = (JSON.parse(String(outputs[0]!.output)) as { agent_id: string }).agent_id;
        return { functionCall: { name: "wait_agent", namespace: "multi_agent_v1", arguments: { targets: [agentId], timeout_ms: 30_000 } } };
      }
      return { text: "The sub-agent counted to three." };
    });
    const delegating = await runCodexTurn(turnParams(env, sessions.file("delegating"), "Delegate the counting.", { cwd: sessions.dir }));
    env.fake.setDefault(defaultTurnReply);
    expect(delegating.status).toBe("completed");
    const subAgentThread = (await loadedThreads()).find((id) => id !== delegating.threadId && !released(id).length)!;
    expect(subAgentThread).toBeDefined();

    const early = sessions.file("early");
    const late = sessions.file("late");
    const first = { early: await runCodexTurn(turnParams(env, early, "early one")), late: await runCodexTurn(turnParams(env, late, "late one")) };
    expect([first.early.status, first.late.status]).toEqual(["completed", "completed"]);
    const [earlyThread, lateThread] = [first.early.threadId!, first.late.threadId!];

    // Both go idle: the client unsubscribes them, and Codex confirms.
    await until(() => released(earlyThread).length > 0 && released(lateThread).length > 0, 10_000, "both threads to be released");
    expect(released(earlyThread)[0]!.status).toBe("unsubscribed");

    // Used again at once (Codex has not unloaded it yet): resumed, same thread, the model sees the first turn.
    await expectResumedTurn(early, "early two", earlyThread, "early one");
    expect(log.events.some((e) => e.event === "codex.thread.resumed" && e.threadId === earlyThread)).toBe(true);

    // Left alone, the other one is unloaded by Codex (observed about 60 s after the release); so are the delegating
    // session's thread and its sub-agent's, released with it.
    await until(() => closed.has(lateThread) && closed.has(delegating.threadId!) && closed.has(subAgentThread), 120_000, "Codex to unload the released threads");
    expect(released(subAgentThread)).toHaveLength(1);
    const loaded = await loadedThreads();
    for (const id of [lateThread, delegating.threadId!, subAgentThread]) expect(loaded).not.toContain(id);

    // Its next turn resumes it from its rollout: same thread, the first turn is in what the model gets.
    await expectResumedTurn(late, "late two", lateThread, "late one");
  }, 180_000);

  it("a released thread lets go of its session's tool handlers, and the next turn's handlers answer its calls", async () => {
    // Collected only once nothing holds it: the handler of the session's tool is the one reference this test leaves.
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc") as () => void;
    const file = sessions.file("tools");
    const turnWithTool = async (prompt: string, answer: string) => {
      const sessionState = { rows: Array.from({ length: 1_000 }, (_, i) => `row ${i}`), answer };
      const lookup = { name: "lookup_rows", description: "Look up the session's rows", inputSchema: { type: "object", properties: {} }, handler: () => sessionState.answer };
      const result = await runCodexTurn(turnParams(env, file, prompt, { dynamicTools: [lookup] }));
      expect(result.status).toBe("completed");
      return { result, state: new WeakRef(sessionState) };
    };
    const first = await turnWithTool("Count the rows.", "1000 rows");
    const threadId = first.result.threadId!;
    await until(() => released(threadId).length > 0, 10_000, "the thread to be released");
    for (let i = 0; i < 5 && first.state.deref() !== undefined; i++) {
      await new Promise((r) => setTimeout(r, 20));
      gc();
    }
    expect(first.state.deref()).toBeUndefined();

    // The next turn resumes the thread with its own handler; the model's call reaches it.
    env.fake.enqueue([{ functionCall: { name: "lookup_rows", arguments: {}, callId: "call_rows_2" } }, { text: "Found them." }]);
    const second = await turnWithTool("Count them again.", "TOOL-ANSWER: 2000 rows");
    expect(second.result.threadId).toBe(threadId);
    const toolResult = second.result.messagesSnapshot.find((m) => m.role === "toolResult") as { content: Array<{ text?: string }> } | undefined;
    expect(toolResult?.content[0]?.text).toBe("TOOL-ANSWER: 2000 rows");
  }, 60_000);
});
