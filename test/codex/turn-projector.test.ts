import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { validateNotification } from "../../src/codex/rpc.js";
import type { IncomingNotification } from "../../src/codex/schemas.js";
import {
  TurnProjector,
  capToolOutput,
  codexErrorInfoName,
  planText,
  toolCallView,
  UNFINISHED_TOOL_RESULT,
  type CodexTurnEvent,
  type ProjectedItem,
} from "../../src/codex/turn-projector.js";

const fixtures = path.join(import.meta.dirname, "fixtures");

/** Recorded wire notifications of one real turn (codex 0.171.0 against the fake Responses server). */
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

  it("Codex's warnings for the thread, its own and its approvals reviewer's (guardianWarning), are the turn's warnings", () => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    const warning = n("warning", { threadId, message: "Exceeded skills context budget." });
    const guardian = n("guardianWarning", { threadId, message: "The reviewer could not assess the command." });
    expect(p.matches(warning) && p.matches(guardian)).toBe(true);
    expect(p.apply(warning)).toEqual([{ type: "warning", threadId, turnId, message: "Exceeded skills context budget." }]);
    expect(p.apply(guardian)).toEqual([{ type: "warning", threadId, turnId, message: "The reviewer could not assess the command." }]);
    expect(p.matches(n("guardianWarning", { threadId: "another-thread", message: "not ours" }))).toBe(false);
    expect(validateNotification({ method: "guardianWarning", params: { message: "no thread" } }).kind).not.toBe("ok");
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

describe("TurnProjector on recorded native-tool turns (codex 0.171.0: update_plan, exec_command, apply_patch, web search)", () => {
  it("records each native tool as a toolCall part plus a toolResult message, in the order Codex produced them", () => {
    const { record } = project("native-tools-accepted");
    expect(record.codexStatus).toBe("completed");
    expect(record.messagesSnapshot.map((m) => m.role)).toEqual([
      "user",
      "custom",
      "assistant",
      "toolResult",
      "assistant",
      "toolResult",
      "assistant",
      "toolResult",
    ]);
    const [, plan, shellCall, shellResult, patchCall, patchResult, finalMsg, searchResult] = record.messagesSnapshot;
    expect(plan).toEqual({
      role: "custom",
      customType: "codex.plan",
      content: "Plan: starting\n- [>] write file\n- [ ] patch it",
      display: true,
      timestamp: expect.any(Number),
    });
    expect(shellCall).toMatchObject({
      role: "assistant",
      stopReason: "toolUse",
      content: [
        { type: "text", text: "running it" },
        { type: "toolCall", id: "call_1_0", name: "shell", arguments: { command: "/bin/bash -c 'echo hello > out.txt && echo done'", cwd: "/workspace" } },
      ],
    });
    expect(shellResult).toEqual({
      role: "toolResult",
      toolCallId: "call_1_0",
      toolName: "shell",
      content: [{ type: "text", text: "Exit code: 0\nOutput:\ndone\n" }],
      isError: false,
      timestamp: shellCall!.timestamp,
    });
    expect(patchCall).toMatchObject({
      stopReason: "toolUse",
      content: [
        {
          type: "toolCall",
          id: "call_2_0",
          name: "apply_patch",
          arguments: { changes: [{ path: "/workspace/added.txt", kind: "add" }, { path: "/workspace/out.txt", kind: "update" }] },
        },
      ],
    });
    expect(patchResult).toMatchObject({ role: "toolResult", toolCallId: "call_2_0", toolName: "apply_patch", isError: false });
    expect((patchResult as { content: Array<{ text: string }> }).content[0]!.text).toBe(
      [
        "Patch applied.",
        "A /workspace/added.txt",
        "M /workspace/out.txt",
        "",
        "--- /dev/null",
        "+++ /workspace/added.txt",
        "+one",
        "+two",
        "--- /workspace/out.txt",
        "+++ /workspace/out.txt",
        "@@ -1 +1 @@",
        "-hello",
        "+hello patched",
        "",
      ].join("\n"),
    );
    // A hosted web search does not make the model wait for output: the final response keeps stopReason "stop".
    expect(finalMsg).toMatchObject({
      stopReason: "stop",
      content: [{ type: "text", text: "all done" }, { type: "toolCall", id: "ws_3_0", name: "web_search", arguments: { query: "codex sandbox" } }],
    });
    expect(searchResult).toMatchObject({ toolName: "web_search", content: [{ type: "text", text: "Web search (search): codex sandbox" }], isError: false });
    expect(record.assistantText).toBe("all done");
  });

  // Codex reports a unified-exec command's end from a task of its own that waits for the process to exit, racing the
  // tool's output going back to the model: the end can come after the usage that closes the response, even after the
  // next response's items (seen once on a loaded CI machine). The record must not depend on where it lands.
  it.each([
    ["after the usage that closes its response", "usage:1153", 0],
    ["after the next response's call started", "started:call_2_0", 0],
    ["after the next response ended", "usage:1302", 0],
    ["after the next response ended (its end first)", "usage:1302", -1],
  ] as const)("a command whose end is reported late (%s) is recorded as if reported in time", (_label, after, shift) => {
    const { notifications, threadId, turnId } = load("native-tools-accepted");
    const key = (n: IncomingNotification): string => {
      const params = n.params as { item?: { id?: string }; tokenUsage?: { last: { inputTokens: number } } };
      if (n.method === "thread/tokenUsage/updated") return `usage:${params.tokenUsage!.last.inputTokens}`;
      return n.method === "item/started" ? `started:${params.item?.id}` : n.method === "item/completed" ? `completed:${params.item?.id}` : n.method;
    };
    const late = [...notifications];
    const [end] = late.splice(late.findIndex((n) => key(n) === "completed:call_1_0"), 1);
    late.splice(late.findIndex((n) => key(n) === after) + 1 + shift, 0, end!);
    expect(late.map(key)).not.toEqual(notifications.map(key));
    const run = (ns: IncomingNotification[]) => {
      const p = new TurnProjector({ threadId, turnId, originalPrompt: "ORIGINAL PROMPT", model: "fake-model", provider: "fakeresp" });
      for (const n of ns) p.apply(n);
      return p.finish();
    };
    const inTime = run(notifications);
    expect(run(late).messagesSnapshot).toEqual(inTime.messagesSnapshot);
  });

  it("two commands of one response whose ends come late go back into it in the order they ended, each result before the next response", () => {
    const { notifications, threadId, turnId } = load("native-tools-accepted");
    const keyOf = (n: IncomingNotification) => (n.params as { item?: { id?: string } }).item?.id;
    const command = notifications.find((n) => n.method === "item/completed" && keyOf(n) === "call_1_0")!;
    const started = notifications.find((n) => n.method === "item/started" && keyOf(n) === "call_1_0")!;
    const withId = (n: IncomingNotification, id: string): IncomingNotification => {
      const params = n.params as { item: Record<string, unknown> };
      return { ...n, params: { ...params, item: { ...params.item, id } } } as IncomingNotification;
    };
    // call_1_0 and call_1_1 start in the first response; both ends arrive after the fileChange started, call_1_1's first.
    const ns = notifications.filter((n) => n !== command);
    ns.splice(ns.indexOf(started) + 1, 0, withId(started, "call_1_1"));
    const patchStart = ns.findIndex((n) => n.method === "item/started" && keyOf(n) === "call_2_0");
    ns.splice(patchStart + 1, 0, withId(command, "call_1_1"), command);
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "P", model: "m", provider: "p" });
    for (const n of ns) p.apply(n);
    const shape = p.finish().messagesSnapshot.map((m) =>
      m.role === "assistant"
        ? (m.content as Array<{ type: string; id?: string }>).map((c) => c.id ?? c.type).join(",")
        : m.role === "toolResult"
          ? `result:${(m as { toolCallId: string }).toolCallId}`
          : m.role,
    );
    expect(shape).toEqual(["user", "custom", "text,call_1_1,call_1_0", "result:call_1_1", "result:call_1_0", "call_2_0", "result:call_2_0", "text,ws_3_0", "result:ws_3_0"]);
  });

  it("emits itemStarted/itemCompleted with typed native items and a planUpdated event", () => {
    const { events, record } = project("native-tools-accepted");
    const started = events.filter((e) => e.type === "itemStarted").map((e) => (e as { item: ProjectedItem }).item.kind);
    expect(started).toEqual(["userMessage", "agentMessage", "commandExecution", "fileChange", "agentMessage", "webSearch"]);
    const command = events.find((e) => e.type === "itemCompleted" && e.item.kind === "commandExecution");
    expect(command).toMatchObject({
      item: { kind: "commandExecution", id: "call_1_0", cwd: "/workspace", status: "completed", exitCode: 0, aggregatedOutput: "done\n", completed: true },
    });
    const startedCommand = events.find((e) => e.type === "itemStarted" && e.item.kind === "commandExecution") as { item: ProjectedItem };
    expect(startedCommand.item).toMatchObject({ status: "inProgress", exitCode: null, completed: false });
    expect(toolCallView(startedCommand.item)).toMatchObject({ toolName: "shell", resultText: null, awaitsOutput: true });
    expect(events.find((e) => e.type === "planUpdated")).toMatchObject({
      update: { explanation: "starting", plan: [{ step: "write file", status: "inProgress" }, { step: "patch it", status: "pending" }] },
    });
    expect(record.items.find((i) => i.kind === "fileChange")).toMatchObject({
      status: "completed",
      changes: [
        { path: "/workspace/added.txt", kind: "add", movePath: null, diff: "one\ntwo\n" },
        { path: "/workspace/out.txt", kind: "update", movePath: null, diff: "@@ -1 +1 @@\n-hello\n+hello patched\n" },
      ],
    });
  });

  it("marks declined commands and patches as errors that say so", () => {
    const { record } = project("native-tools-declined");
    const results = record.messagesSnapshot.filter((m) => m.role === "toolResult") as Array<{ toolName: string; isError: boolean; content: Array<{ text: string }> }>;
    expect(results.map((r) => [r.toolName, r.isError])).toEqual([
      ["shell", true],
      ["apply_patch", true],
      ["web_search", false],
    ]);
    expect(results[0]!.content[0]!.text).toBe("Command declined: it was not run.");
    expect(results[1]!.content[0]!.text).toMatch(/^Patch declined: no file was changed\.\nA \/workspace\/added\.txt\n/);
    expect(record.items.find((i) => i.kind === "commandExecution")).toMatchObject({ status: "declined", exitCode: null });
  });

  it("is deterministic for native items: the same notifications give byte-identical snapshots", () => {
    const a = JSON.stringify(project("native-tools-accepted").record);
    const b = JSON.stringify(project("native-tools-accepted").record);
    expect(a).toBe(b);
    const { p } = project("native-tools-accepted");
    expect(JSON.stringify(p.finish())).toBe(JSON.stringify(p.finish()));
  });
});

describe("TurnProjector native items", () => {
  const threadId = "t-1";
  const turnId = "turn-1";
  const n = (method: string, params: Record<string, unknown>, emittedAtMs?: number): IncomingNotification => {
    const c = validateNotification({ method, params, ...(emittedAtMs !== undefined ? { emittedAtMs } : {}) });
    if (c.kind !== "ok") throw new Error(`bad test notification ${method}: ${c.kind}`);
    return c.notification;
  };
  const completedItem = (item: Record<string, unknown>, at: number) => n("item/completed", { threadId, turnId, item, completedAtMs: at });
  const done = () => n("turn/completed", { threadId, turn: { id: turnId, status: "completed", error: null } });
  const mcp = (extra: Record<string, unknown>) => ({
    type: "mcpToolCall",
    id: "mcp-1",
    server: "docs",
    tool: "lookup",
    status: "completed",
    arguments: { q: "x" },
    appContext: null,
    mcpAppUi: null,
    pluginId: null,
    readOnlyHint: true,
    result: null,
    error: null,
    durationMs: 3,
    ...extra,
  });
  const command = (output: string, extra: Record<string, unknown> = {}) => ({
    type: "commandExecution",
    id: "cmd-1",
    pluginId: null,
    scriptPath: null,
    command: "ls",
    cwd: "/w",
    processId: null,
    source: "agent",
    status: "completed",
    commandActions: [],
    aggregatedOutput: output,
    exitCode: 0,
    durationMs: 1,
    ...extra,
  });

  it("names MCP calls mcp:<server>/<tool> and records their text result or error", () => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    p.apply(completedItem(mcp({ result: { content: [{ type: "text", text: "found it" }, { type: "image", data: "AA" }], structuredContent: null, _meta: null } }), 5));
    p.apply(completedItem(mcp({ id: "mcp-2", status: "failed", error: { message: "server gone" } }), 6));
    p.apply(done());
    const r = p.finish();
    expect(r.messagesSnapshot[1]).toMatchObject({
      content: [
        { type: "toolCall", id: "mcp-1", name: "mcp:docs/lookup", arguments: { q: "x" } },
        { type: "toolCall", id: "mcp-2", name: "mcp:docs/lookup" },
      ],
    });
    expect(r.messagesSnapshot.slice(2)).toEqual([
      { role: "toolResult", toolCallId: "mcp-1", toolName: "mcp:docs/lookup", content: [{ type: "text", text: 'found it\n{"type":"image","data":"AA"}' }], isError: false, timestamp: 5 },
      { role: "toolResult", toolCallId: "mcp-2", toolName: "mcp:docs/lookup", content: [{ type: "text", text: "Error: server gone" }], isError: true, timestamp: 6 },
    ]);
  });

  it("caps long command output, keeping head and tail and naming the removed count", () => {
    const output = `HEAD${"x".repeat(100)}TAIL`;
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p", toolOutputCapChars: 40 });
    p.apply(completedItem(command(output), 5));
    p.apply(done());
    const result = p.finish().messagesSnapshot[2] as { content: Array<{ text: string }> };
    const full = `Exit code: 0\nOutput:\n${output}`;
    expect(result.content[0]!.text).toBe(`${full.slice(0, 20)}\n[... ${full.length - 40} characters truncated ...]\n${full.slice(-20)}`);
    expect(result.content[0]!.text.endsWith("TAIL")).toBe(true);
    // The typed item keeps the whole output.
    expect(p.finish().items[0]).toMatchObject({ kind: "commandExecution", aggregatedOutput: output });
  });

  it("capToolOutput leaves text within the cap unchanged and is exact at the boundary", () => {
    expect(capToolOutput("abc", 3)).toBe("abc");
    expect(capToolOutput("abcd", 3)).toBe("ab\n[... 1 characters truncated ...]\nd");
    expect(capToolOutput("a".repeat(16_000))).toBe("a".repeat(16_000));
    expect(capToolOutput("a".repeat(16_001))).toContain("[... 1 characters truncated ...]");
  });

  it("marks a non-zero exit code as an error result", () => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    p.apply(completedItem(command("boom\n", { status: "failed", exitCode: 2 }), 5));
    p.apply(done());
    expect(p.finish().messagesSnapshot[2]).toMatchObject({ isError: true, content: [{ type: "text", text: "Exit code: 2\nOutput:\nboom\n" }] });
  });

  it("keeps a native item that does not fit its shape as kind other, out of the snapshot", () => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    p.apply(completedItem({ type: "commandExecution", id: "bad", status: "completed" }, 5));
    p.apply(done());
    const r = p.finish();
    expect(r.items).toEqual([{ kind: "other", id: "bad", type: "commandExecution", completed: true }]);
    expect(r.messagesSnapshot).toHaveLength(1);
  });

  it("puts a plan update made after text behind that response's assistant message, and ignores other turns' plans", () => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    const plan = (tid: string) => n("turn/plan/updated", { threadId, turnId: tid, explanation: null, plan: [{ step: "a", status: "completed" }] }, 8);
    p.apply(completedItem({ type: "agentMessage", id: "m1", text: "planning", phase: null }, 7));
    expect(p.apply(plan("other-turn"))).toEqual([]);
    expect(p.apply(plan(turnId))).toMatchObject([{ type: "planUpdated", update: { explanation: null, plan: [{ step: "a", status: "completed" }] } }]);
    const m2 = { type: "agentMessage", id: "m2", text: "next", phase: null };
    p.apply(n("item/started", { threadId, turnId, item: m2, startedAtMs: 9 }));
    p.apply(completedItem(m2, 9));
    p.apply(done());
    const r = p.finish();
    expect(r.messagesSnapshot.map((m) => m.role)).toEqual(["user", "assistant", "custom", "assistant"]);
    expect(r.messagesSnapshot[2]).toEqual({ role: "custom", customType: "codex.plan", content: "Plan:\n- [x] a", display: true, timestamp: 8 });
  });

  it("records a Plan-mode plan item as a codex.plan message", () => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    p.apply(completedItem({ type: "plan", id: "pl-1", text: "1. do it" }, 4));
    p.apply(done());
    const r = p.finish();
    expect(r.messagesSnapshot[1]).toEqual({ role: "custom", customType: "codex.plan", content: "1. do it", display: true, timestamp: 4 });
    expect(r.proposedPlan).toBe("1. do it");
  });

  it("proposedPlan: the last completed Plan-mode plan item; a checklist update (update_plan) is not a proposed plan", () => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    p.apply(n("turn/plan/updated", { threadId, turnId, explanation: null, plan: [{ step: "a", status: "completed" }] }, 3));
    const none = new TurnProjector({ threadId, turnId, originalPrompt: "p" });
    none.apply(n("turn/plan/updated", { threadId, turnId, explanation: null, plan: [{ step: "a", status: "completed" }] }, 3));
    none.apply(done());
    expect(none.finish()).not.toHaveProperty("proposedPlan");
    p.apply(completedItem({ type: "plan", id: "pl-1", text: "first draft" }, 4));
    p.apply(n("item/started", { threadId, turnId, item: { type: "plan", id: "pl-2", text: "" }, startedAtMs: 5 }));
    p.apply(completedItem({ type: "plan", id: "pl-2", text: "second draft" }, 5));
    p.apply(done());
    expect(p.finish().proposedPlan).toBe("second draft");
  });

  it("planText renders steps as a checklist", () => {
    expect(
      planText({
        explanation: "why",
        plan: [
          { step: "done", status: "completed" },
          { step: "doing", status: "inProgress" },
          { step: "next", status: "pending" },
        ],
      }),
    ).toBe("Plan: why\n- [x] done\n- [>] doing\n- [ ] next");
  });
});

describe("model reroutes and Codex's warnings", () => {
  const wire = (method: string, params: unknown): IncomingNotification => {
    const c = validateNotification({ method, params });
    if (c.kind !== "ok") throw new Error(`not ok: ${c.kind}`);
    return c.notification;
  };
  const ids = { threadId: "thr", turnId: "turn" };

  it("a reroute of this turn is recorded and names the answering model on the answer; other turns' and process warnings are not ours", () => {
    const p = new TurnProjector({ ...ids, originalPrompt: "q", model: "gpt-5.5" });
    expect(p.apply(wire("model/rerouted", { threadId: "thr", turnId: "other", fromModel: "gpt-5.5", toModel: "x", reason: "r" }))).toEqual([]);
    expect(p.apply(wire("warning", { threadId: null, message: "bubblewrap missing" }))).toEqual([]);
    expect(p.apply(wire("warning", { threadId: "other-thread", message: "not ours" }))).toEqual([]);
    const reroute = { fromModel: "gpt-5.5", toModel: "gpt-5.2", reason: "highRiskCyberActivity" };
    expect(p.apply(wire("model/rerouted", { ...ids, ...reroute }))).toEqual([{ type: "modelRerouted", ...ids, reroute }]);
    expect(p.apply(wire("warning", { threadId: "thr", message: "routed to a fallback" }))).toEqual([{ type: "warning", ...ids, message: "routed to a fallback" }]);
    p.apply(wire("item/completed", { ...ids, item: { type: "agentMessage", id: "m1", text: "answer", phase: null } }));
    p.apply(wire("turn/completed", { threadId: "thr", turn: { id: "turn", status: "completed", items: [], error: null } }));
    const record = p.finish();
    expect(record.modelRerouted).toEqual(reroute);
    expect(record.messagesSnapshot.at(-1)).toMatchObject({ role: "assistant", model: "gpt-5.5", responseModel: "gpt-5.2" });
  });

  it("without a reroute nothing is added", () => {
    const p = new TurnProjector({ ...ids, originalPrompt: "q", model: "gpt-5.5" });
    p.apply(wire("item/completed", { ...ids, item: { type: "agentMessage", id: "m1", text: "answer", phase: null } }));
    p.apply(wire("turn/completed", { threadId: "thr", turn: { id: "turn", status: "completed", items: [], error: null } }));
    const record = p.finish();
    expect(record).not.toHaveProperty("modelRerouted");
    expect(record.messagesSnapshot.at(-1)).not.toHaveProperty("responseModel");
  });
});

describe("TurnProjector: a tool call still running when the turn ends", () => {
  const threadId = "thr-bg";
  const turnId = "turn-bg";
  const n = (method: string, params: Record<string, unknown>): IncomingNotification => {
    const c = validateNotification({ method, params: { threadId, ...params } });
    if (c.kind !== "ok") throw new Error(`not ok: ${method}`);
    return c.notification;
  };
  const command = (id: string, cmd: string, t: number) => ({
    type: "commandExecution", id, startedAtMs: t, completedAtMs: null, command: `/bin/bash -c '${cmd}'`, cwd: "/w", processId: "1",
    source: "unifiedExecStartup", status: "inProgress", commandActions: [{ type: "unknown", command: cmd }], aggregatedOutput: null, exitCode: null, durationMs: null,
  });
  const text = (id: string, t: string, at: number) => [
    n("item/started", { turnId, item: { type: "agentMessage", id, text: "", startedAtMs: at, completedAtMs: null }, startedAtMs: at }),
    n("item/completed", { turnId, item: { type: "agentMessage", id, text: t, startedAtMs: at, completedAtMs: at } }),
  ];
  const run = (notifications: IncomingNotification[]) => {
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "start the server", model: "m", provider: "p" });
    for (const x of [n("turn/started", { turn: { id: turnId, status: "inProgress", error: null, items: [] } }), ...notifications]) p.apply(x);
    p.apply(n("turn/completed", { turn: { id: turnId, status: "completed", error: null, items: [] } }));
    return p;
  };
  const shape = (messages: unknown[]) =>
    (messages as Array<{ role: string; content: unknown }>).map((m) =>
      m.role === "assistant" ? { assistant: (m.content as Array<{ type: string; text?: string; name?: string }>).map((p) => p.text ?? p.name ?? p.type) } : m.role === "toolResult" ? { result: (m as { toolCallId?: string }).toolCallId, text: ((m.content as Array<{ text: string }>)[0]!).text } : { [m.role]: m.content },
    );

  it("records the call where the model made it, before the text that followed, with a result saying it still ran", () => {
    const p = run([n("item/started", { turnId, item: command("call_bg", "npm run dev", 10), startedAtMs: 10 }), ...text("msg_1", "The dev server is running.", 20)]);
    const record = p.finish();
    expect(shape(record.messagesSnapshot)).toEqual([
      { user: "start the server" },
      { assistant: ["shell", "The dev server is running."] },
      { result: "call_bg", text: UNFINISHED_TOOL_RESULT },
    ]);
    expect(record.assistantText).toBe("The dev server is running.");
    expect(record.messagesSnapshot[1]).toMatchObject({ stopReason: "stop" });
    // finish() is idempotent: the insertion works on copies.
    expect(p.finish().messagesSnapshot).toEqual(record.messagesSnapshot);
  });

  it("with Codex's usage reports: the response that left it running is its own message, the answer after it the next", () => {
    const usage = (input: number) =>
      n("thread/tokenUsage/updated", {
        turnId,
        tokenUsage: {
          total: { totalTokens: input + 5, inputTokens: input, cachedInputTokens: 0, outputTokens: 5, reasoningOutputTokens: 0 },
          last: { totalTokens: input + 5, inputTokens: input, cachedInputTokens: 0, outputTokens: 5, reasoningOutputTokens: 0 },
          modelContextWindow: null,
        },
      });
    const p = run([n("item/started", { turnId, item: command("call_bg", "npm run dev", 10), startedAtMs: 10 }), usage(100), ...text("msg_1", "The dev server is running.", 20), usage(130)]);
    const record = p.finish();
    expect(shape(record.messagesSnapshot)).toEqual([
      { user: "start the server" },
      { assistant: ["shell"] },
      { result: "call_bg", text: UNFINISHED_TOOL_RESULT },
      { assistant: ["The dev server is running."] },
    ]);
    expect(record.messagesSnapshot[1]).toMatchObject({ stopReason: "toolUse", usage: { input: 100 } });
    expect(record.messagesSnapshot[3]).toMatchObject({ stopReason: "stop", usage: { input: 130 } });
    expect(record.assistantText).toBe("The dev server is running.");
  });

  it("a call that ended is recorded as before; one running in a response before the last goes with that response", () => {
    const p = run([
      n("item/started", { turnId, item: command("call_bg", "npm run dev", 10), startedAtMs: 10 }),
      n("item/started", { turnId, item: command("call_ls", "ls", 11), startedAtMs: 11 }),
      n("item/completed", { turnId, item: { ...command("call_ls", "ls", 11), status: "completed", aggregatedOutput: "a.txt\n", exitCode: 0, completedAtMs: 12, durationMs: 1 } }),
      ...text("msg_2", "Both started; here is the listing.", 30),
    ]);
    expect(shape(p.finish().messagesSnapshot)).toEqual([
      { user: "start the server" },
      { assistant: ["shell", "shell"] },
      { result: "call_ls", text: expect.stringContaining("a.txt") },
      { result: "call_bg", text: UNFINISHED_TOOL_RESULT },
      { assistant: ["Both started; here is the listing."] },
    ]);
  });
});
