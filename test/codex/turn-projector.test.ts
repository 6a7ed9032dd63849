import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { validateNotification } from "../../src/codex/rpc.js";
import type { IncomingNotification } from "../../src/codex/schemas.js";
import { TurnProjector, codexErrorInfoName, type CodexTurnEvent } from "../../src/codex/turn-projector.js";

const fixtures = path.join(import.meta.dirname, "fixtures");

/** Recorded wire notifications of one real turn (codex 0.169.0 against the fake Responses server). */
function load(name: string): { notifications: IncomingNotification[]; threadId: string; turnId: string } {
  const notifications = readFileSync(path.join(fixtures, `${name}.jsonl`), "utf8")
    .split("\n")
    .filter((l) => l.trim().length > 0)
    .map((l) => {
      const c = validateNotification(JSON.parse(l));
      if (c.kind !== "ok") throw new Error(`fixture line not ok: ${c.kind}`);
      return c.notification;
    });
  const started = notifications.find((n) => n.consumed && n.method === "turn/started");
  if (!started || !started.consumed || started.method !== "turn/started") throw new Error("no turn/started");
  return { notifications, threadId: started.params.threadId, turnId: started.params.turn.id };
}

function project(name: string, originalPrompt = "ORIGINAL PROMPT") {
  const { notifications, threadId, turnId } = load(name);
  const p = new TurnProjector({ threadId, turnId, originalPrompt, model: "fake-model", provider: "fakeresp" });
  const events: CodexTurnEvent[] = [];
  for (const n of notifications) events.push(...p.apply(n));
  return { p, events, record: p.finish(), notifications, threadId, turnId };
}

describe("TurnProjector on recorded turns", () => {
  it("projects a plain turn with reasoning", () => {
    const { record, events, notifications } = project("basic-turn");
    expect(record.codexStatus).toBe("completed");
    expect(record.assistantText).toBe("Hello world");
    expect(record.messagesSnapshot).toHaveLength(2);
    const userItem = notifications.find((n) => n.consumed && n.method === "item/started");
    // Timestamps come from the notifications: the prompt gets the user item's start time.
    expect(record.messagesSnapshot[0]).toEqual({
      role: "user",
      content: "ORIGINAL PROMPT",
      timestamp: (userItem?.params as { startedAtMs: number }).startedAtMs,
    });
    expect(record.messagesSnapshot[1]).toMatchObject({
      role: "assistant",
      content: [
        { type: "thinking", thinking: "thinking it over" },
        { type: "text", text: "Hello world" },
      ],
      api: "codex-app-server",
      provider: "fakeresp",
      model: "fake-model",
      usage: { input: 1200, output: 34, cacheRead: 200, totalTokens: 1234 },
      stopReason: "stop",
    });
    expect(record.usage).toEqual({
      inputTokens: 1200,
      cachedInputTokens: 200,
      outputTokens: 34,
      reasoningOutputTokens: 0,
      totalTokens: 1234,
      lastCallInputTokens: 1200,
      lastCallCachedInputTokens: 200,
      lastCallOutputTokens: 34,
      lastCallTotalTokens: 1234,
      modelContextWindow: 190_000,
    });
    expect(record.error).toBeUndefined();
    expect(record.compactions).toEqual([]);
    expect(events.filter((e) => e.type === "agentMessageDelta").map((e) => (e as { delta: string }).delta).join("")).toBe("Hello world");
    expect(events.filter((e) => e.type === "reasoningDelta")).toHaveLength(3);
    expect(events.at(-1)).toMatchObject({ type: "turnCompleted", codexStatus: "completed" });
  });

  it("is deterministic: the same notifications give the same record", () => {
    expect(project("tool-turn").record).toEqual(project("tool-turn").record);
    const { p } = project("tool-turn");
    expect(p.finish()).toEqual(p.finish());
  });

  it("projects dynamic tool calls as toolCall parts and toolResult messages", () => {
    const { record } = project("tool-turn");
    expect(record.messagesSnapshot.map((m) => m.role)).toEqual(["user", "assistant", "toolResult", "assistant"]);
    expect(record.messagesSnapshot[1]).toMatchObject({
      stopReason: "toolUse",
      usage: { input: 500, output: 20, totalTokens: 520 },
      content: [
        { type: "thinking", thinking: "need a lookup" },
        { type: "toolCall", id: "call_lookup_1", name: "lookup_fact", arguments: { q: "answer" } },
      ],
    });
    expect(record.messagesSnapshot[2]).toMatchObject({
      role: "toolResult",
      toolCallId: "call_lookup_1",
      toolName: "lookup_fact",
      content: [{ type: "text", text: "TOOL-RESULT-MARKER: 42" }],
      isError: false,
    });
    expect(record.messagesSnapshot[3]).toMatchObject({
      content: [{ type: "text", text: "The answer is 42" }],
      usage: { input: 600, output: 8, totalTokens: 608 },
      stopReason: "stop",
    });
    expect(record.items.find((i) => i.kind === "dynamicToolCall")).toMatchObject({
      arguments: { q: "answer" },
      success: true,
      resultText: "TOOL-RESULT-MARKER: 42",
      status: "completed",
    });
  });

  it("keeps an accepted steer as a user message and drops the abandoned partial answer", () => {
    const { record } = project("steer-turn");
    expect(record.messagesSnapshot.map((m) => m.role)).toEqual(["user", "user", "assistant"]);
    expect(record.messagesSnapshot[1]).toMatchObject({ role: "user", content: "STEER-A\n\nSTEER-B" });
    expect(record.assistantText).toBe("steered answer");
    const partial = record.items.filter((i) => i.kind === "agentMessage" && !i.completed);
    expect(partial).toHaveLength(1);
    // Streamed deltas of the partial message are kept on the item (not in the snapshot).
    expect(partial[0]!.kind === "agentMessage" && partial[0]!.text.length).toBeGreaterThan(0);
    expect(JSON.stringify(record.messagesSnapshot)).not.toContain("w0 ");
  });

  it("records a mid-turn native compaction and keeps compaction usage off the messages", () => {
    const { record, events, threadId, turnId } = project("midturn-compaction-turn");
    expect(record.compactions).toEqual([{ backend: "codex-app-server", threadId, turnId, itemId: expect.any(String), completed: true }]);
    expect(events.filter((e) => e.type === "compactionStarted")).toHaveLength(1);
    expect(events.find((e) => e.type === "compactionStarted")).toMatchObject({ compaction: { completed: false } });
    expect(record.messagesSnapshot[1]).toMatchObject({ role: "assistant", usage: { totalTokens: 8050 } });
    expect(record.messagesSnapshot[3]).toMatchObject({ role: "assistant", usage: { totalTokens: 910 } });
    expect(record.items.map((i) => i.kind)).toEqual(["userMessage", "dynamicToolCall", "contextCompaction", "agentMessage"]);
  });

  it("records a failed turn's error with codexErrorInfo", () => {
    const { record } = project("failed-turn", "trigger 500");
    expect(record.codexStatus).toBe("failed");
    expect(record.error).toEqual({ message: expect.stringContaining("high demand"), codexErrorInfo: "internalServerError" });
    expect(record.messagesSnapshot).toEqual([expect.objectContaining({ role: "user", content: "trigger 500" })]);
    expect(record.assistantText).toBe("");
  });

  it("records an interrupted turn", () => {
    const { record } = project("interrupted-turn");
    expect(record.codexStatus).toBe("interrupted");
    expect(record.error).toBeUndefined();
    expect(record.messagesSnapshot).toHaveLength(1);
  });
});

describe("TurnProjector edge cases", () => {
  const threadId = "t-1";
  const turnId = "turn-1";
  const n = (method: string, params: Record<string, unknown>, emittedAtMs?: number): IncomingNotification => {
    const c = validateNotification({ method, params, ...(emittedAtMs !== undefined ? { emittedAtMs } : {}) });
    if (c.kind !== "ok") throw new Error(`bad test notification ${method}: ${c.kind}`);
    return c.notification;
  };
  const agent = (id: string, text: string) => ({ type: "agentMessage", id, text, phase: null });

  it("ignores notifications of other turns and threads", () => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p", fallbackTimestamp: 5 });
    expect(p.apply(n("item/completed", { threadId, turnId: "other", item: agent("m0", "nope"), completedAtMs: 1 }))).toEqual([]);
    expect(p.apply(n("item/completed", { threadId: "t-2", turnId, item: agent("m0", "nope"), completedAtMs: 1 }))).toEqual([]);
    p.apply(n("item/completed", { threadId, turnId, item: agent("m1", "yes"), completedAtMs: 7 }));
    p.apply(n("turn/completed", { threadId, turn: { id: turnId, status: "completed", error: null } }));
    const r = p.finish();
    expect(r.assistantText).toBe("yes");
    expect(r.messagesSnapshot[0]).toEqual({ role: "user", content: "p", timestamp: 5 });
    expect(r.messagesSnapshot[1]).toMatchObject({ timestamp: 7 });
    // Nothing after turn/completed is applied.
    expect(p.apply(n("item/completed", { threadId, turnId, item: agent("m2", "late"), completedAtMs: 9 }))).toEqual([]);
  });

  it("lets an override end a turn Codex never completed (process exit)", () => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    p.apply(n("item/completed", { threadId, turnId, item: agent("m1", "half"), completedAtMs: 3 }));
    expect(p.completed).toBe(false);
    const r = p.finish({ codexStatus: "failed", error: { message: "codex app-server exited", code: "processExited" } });
    expect(r.codexStatus).toBe("failed");
    expect(r.error).toEqual({ message: "codex app-server exited", code: "processExited" });
    expect(r.messagesSnapshot[1]).toMatchObject({ role: "assistant", stopReason: "error", errorMessage: "codex app-server exited" });
  });

  it("without turn/completed or override, the turn is failed with an 'incomplete' error", () => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    expect(p.finish()).toMatchObject({ codexStatus: "failed", error: { code: "incomplete" } });
  });

  it("names object-shaped codexErrorInfo by its key", () => {
    expect(codexErrorInfoName({ httpConnectionFailed: { httpStatusCode: null } })).toBe("httpConnectionFailed");
    expect(codexErrorInfoName("internalServerError")).toBe("internalServerError");
    expect(codexErrorInfoName(null)).toBeUndefined();
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    p.apply(
      n("turn/completed", {
        threadId,
        turn: { id: turnId, status: "failed", error: { message: "down", codexErrorInfo: { responseStreamDisconnected: { httpStatusCode: 502 } } } },
      }),
    );
    expect(p.finish().error).toEqual({ message: "down", codexErrorInfo: "responseStreamDisconnected" });
  });

  it("wraps non-object tool arguments and maps tool image results", () => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    p.apply(
      n("item/completed", {
        threadId,
        turnId,
        completedAtMs: 4,
        item: {
          type: "dynamicToolCall",
          id: "c1",
          namespace: null,
          tool: "t",
          arguments: "raw",
          status: "failed",
          contentItems: [{ type: "inputImage", imageUrl: "data:image/png;base64,AAAA" }],
          success: false,
          durationMs: 1,
        },
      }),
    );
    p.apply(n("turn/completed", { threadId, turn: { id: turnId, status: "completed", error: null } }));
    const r = p.finish();
    expect(r.messagesSnapshot[1]).toMatchObject({ content: [{ type: "toolCall", id: "c1", name: "t", arguments: { value: "raw" } }] });
    expect(r.messagesSnapshot[2]).toMatchObject({ role: "toolResult", isError: true, content: [{ type: "imageUrl", url: "data:image/png;base64,AAAA" }] });
  });
});
