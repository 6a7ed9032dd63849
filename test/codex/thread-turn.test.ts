/**
 * Rebuilding a turn from Codex's record of the thread (src/codex/thread-turn.ts), with a fake `thread/read` answer:
 * status mapping, the original prompt, items this client cannot read, malformed answers. The real binary's answer is
 * checked against a live turn in test/integration/cut-turn-recovery.test.ts.
 */
import { describe, expect, it } from "vitest";
import { CUT_TURN_NOTICE, readThreadTurn } from "../../src/codex/thread-turn.js";

const userItem = { type: "userMessage", id: "u1", content: [{ type: "text", text: "[projected] hi", text_elements: [] }], startedAtMs: 1000, completedAtMs: 1000 };
const agentItem = (id: string, text: string, at: number) => ({ type: "agentMessage", id, text, phase: null, startedAtMs: at, completedAtMs: at + 1 });

function server(answer: unknown) {
  const calls: Array<{ method: string; params: unknown }> = [];
  return {
    calls,
    appServer: {
      request: async (method: string, params: unknown) => {
        calls.push({ method, params });
        return answer;
      },
    } as never,
  };
}

const thread = (turns: unknown[]) => ({ thread: { id: "t1", model: "m1", modelProvider: "p1", turns } });

describe("readThreadTurn", () => {
  it("asks thread/read with the turns and rebuilds the turn: the original prompt first, then what Codex kept", async () => {
    const s = server(thread([{ id: "turn-0", status: "completed", items: [] }, { id: "turn-1", status: "interrupted", items: [userItem, agentItem("a1", "partial answer", 2000)] }]));
    const out = await readThreadTurn(s.appServer, { threadId: "t1", turnId: "turn-1", prompt: "hi", images: [{ type: "image", data: "aGk=", mimeType: "image/png" }] });
    expect(s.calls).toEqual([{ method: "thread/read", params: { threadId: "t1", includeTurns: true } }]);
    expect(out.found).toBe(true);
    if (!out.found) return;
    expect(out.codexStatus).toBe("interrupted");
    expect(out.record.codexStatus).toBe("interrupted");
    expect(out.record.error).toEqual({ message: "the attempt running this turn ended before the turn did", code: "attemptEnded" });
    const [prompt, answer] = out.record.messagesSnapshot;
    expect(prompt).toEqual({ role: "user", content: [{ type: "text", text: "hi" }, { type: "image", data: "aGk=", mimeType: "image/png" }], timestamp: 1000 });
    // The answer Codex kept, then the notice that the turn was cut short.
    expect(answer).toMatchObject({
      role: "assistant",
      content: [{ type: "text", text: "partial answer" }, { type: "text", text: CUT_TURN_NOTICE }],
      model: "m1",
      provider: "p1",
      stopReason: "aborted",
      errorMessage: "the attempt running this turn ended before the turn did",
    });
    expect(out.record.messagesSnapshot).toHaveLength(2);
    expect(out.record.assistantText).toBe("partial answer");
  });

  it("ends a cut turn with no answer, or one whose last message is a tool result, with an interrupted assistant entry", async () => {
    const bare = await readThreadTurn(server(thread([{ id: "turn-1", status: "interrupted", items: [userItem] }])).appServer, { threadId: "t1", turnId: "turn-1", prompt: "hi" });
    expect(bare.found && bare.record.messagesSnapshot).toEqual([
      { role: "user", content: "hi", timestamp: 1000 },
      {
        role: "assistant",
        content: [{ type: "text", text: CUT_TURN_NOTICE }],
        api: "codex-app-server",
        provider: "codex",
        model: "unknown",
        usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0 },
        stopReason: "aborted",
        errorMessage: "the attempt running this turn ended before the turn did",
        timestamp: 1000,
      },
    ]);
    // Still running when read (its app-server outlived the host): recorded as interrupted, the same way.
    const running = await readThreadTurn(server(thread([{ id: "turn-1", status: "inProgress", items: [userItem] }])).appServer, { threadId: "t1", turnId: "turn-1", prompt: "hi" });
    expect(running.found && running.record.messagesSnapshot.at(-1)).toMatchObject({ role: "assistant", stopReason: "aborted" });
    // A completed or failed turn gets no notice.
    const done = await readThreadTurn(server(thread([{ id: "turn-1", status: "completed", items: [userItem, agentItem("a1", "answer", 2000)] }])).appServer, { threadId: "t1", turnId: "turn-1", prompt: "hi" });
    expect(JSON.stringify(done.found && done.record.messagesSnapshot)).not.toContain(CUT_TURN_NOTICE);
  });

  it("keeps Codex's failed status and error message; a completed turn is completed", async () => {
    const failed = server(thread([{ id: "turn-1", status: "failed", error: { message: "stream disconnected" }, items: [userItem] }]));
    const f = await readThreadTurn(failed.appServer, { threadId: "t1", turnId: "turn-1", prompt: "hi" });
    expect(f.found && f.record).toMatchObject({ codexStatus: "failed", error: { message: "stream disconnected", code: "turnFailed" } });
    const done = server(thread([{ id: "turn-1", status: "completed", items: [userItem, agentItem("a1", "answer", 2000)] }]));
    const d = await readThreadTurn(done.appServer, { threadId: "t1", turnId: "turn-1", prompt: "hi" });
    expect(d.found && d.record).toMatchObject({ codexStatus: "completed", assistantText: "answer" });
    expect(d.found && d.record.error).toBeUndefined();
  });

  it("leaves out (and counts) an item it cannot read", async () => {
    const s = server(thread([{ id: "turn-1", status: "completed", items: [userItem, { type: "agentMessage", id: 7 }, agentItem("a2", "kept", 3000)] }]));
    const out = await readThreadTurn(s.appServer, { threadId: "t1", turnId: "turn-1", prompt: "hi" });
    expect(out.found && out.itemsSkipped).toBe(1);
    expect(out.found && out.record.assistantText).toBe("kept");
  });

  it("reports a turn the thread does not hold, and an answer that is not a thread", async () => {
    expect(await readThreadTurn(server(thread([])).appServer, { threadId: "t1", turnId: "turn-1", prompt: "hi" })).toEqual({ found: false, reason: "turnNotInThread" });
    expect(await readThreadTurn(server({ nope: true }).appServer, { threadId: "t1", turnId: "turn-1", prompt: "hi" })).toEqual({ found: false, reason: "malformedThreadRead" });
  });
});
