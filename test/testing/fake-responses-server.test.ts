import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  applyPatchCall,
  applyPatchText,
  execCommandCall,
  inputMessageTexts,
  toolOutputs,
  updatePlanCall,
  lastUserText,
  startFakeResponsesServer,
  type FakeResponsesServer,
} from "../../src/testing/index.js";

let fake: FakeResponsesServer;
beforeEach(async () => {
  fake = await startFakeResponsesServer();
});
afterEach(async () => {
  await fake.close();
});

const userMsg = (text: string) => ({ type: "message", role: "user", content: [{ type: "input_text", text }] });

async function post(body: unknown, meta?: Record<string, unknown>): Promise<{ status: number; text: string }> {
  const res = await fetch(`${fake.baseUrl}/responses`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: "Bearer sk-fake-local",
      ...(meta ? { "x-codex-turn-metadata": JSON.stringify(meta) } : {}),
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

function sse(text: string): Array<{ event: string; data: Record<string, unknown> }> {
  return text
    .split("\n\n")
    .filter((b) => b.trim().length > 0)
    .map((block) => {
      const event = /^event: (.*)$/m.exec(block)?.[1] ?? "";
      const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? "null") as Record<string, unknown>;
      return { event, data };
    });
}

describe("fake Responses server", () => {
  it("listens on 127.0.0.1 and echoes the last user input by default", async () => {
    expect(fake.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    const r = await post({ model: "m", input: [userMsg("<environment_context>x</environment_context>"), userMsg("hello there")] });
    expect(r.status).toBe(200);
    const events = sse(r.text);
    expect(events.map((e) => e.event)).toEqual([
      "response.created",
      "response.output_item.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.every((e) => e.data.type === e.event)).toBe(true);
    const done = events.find((e) => e.event === "response.output_item.done")!.data.item as { content: Array<{ text: string }> };
    expect(done.content[0]!.text).toBe("reply to: hello there");
    // Streamed word by word.
    expect(events.filter((e) => e.event === "response.output_text.delta").map((e) => e.data.delta)).toEqual(["reply ", "to: ", "hello ", "there"]);
  });

  it("streams a scripted reasoning + text + function call reply with the given usage", async () => {
    fake.enqueue({
      reasoning: "let me think",
      text: ["Hel", "lo"],
      functionCall: { name: "lookup", arguments: { q: 1 }, callId: "call_x" },
      usage: { input_tokens: 10, output_tokens: 5, total_tokens: 9000, cached: 3 },
    });
    const events = sse((await post({ input: [userMsg("x")] })).text);
    const types = events.map((e) => e.event);
    expect(types).toContain("response.reasoning_summary_part.added");
    expect(types).toContain("response.reasoning_summary_text.delta");
    expect(events.filter((e) => e.event === "response.output_text.delta").map((e) => e.data.delta)).toEqual(["Hel", "lo"]);
    const items = events.filter((e) => e.event === "response.output_item.done").map((e) => e.data.item as Record<string, unknown>);
    expect(items.map((i) => i.type)).toEqual(["reasoning", "message", "function_call"]);
    expect(items[2]).toMatchObject({ name: "lookup", call_id: "call_x", arguments: '{"q":1}' });
    expect(events.at(-1)!.data.response).toMatchObject({
      status: "completed",
      usage: { input_tokens: 10, output_tokens: 5, total_tokens: 9000, input_tokens_details: { cached_tokens: 3 } },
    });
  });

  it("records requests with headers, turn metadata, request kind and input size", async () => {
    const body = { model: "m", input: [userMsg("abc")] };
    await post(body, { request_kind: "turn", turn_id: "t1", window_number: 0 });
    const [req] = await fake.waitForRequests(1);
    expect(req).toMatchObject({
      index: 0,
      method: "POST",
      path: "/v1/responses",
      requestKind: "turn",
      turnMetadata: { turn_id: "t1", window_number: 0 },
      inputBytes: Buffer.byteLength(JSON.stringify(body.input)),
      replySource: "default",
      remoteAddress: expect.stringContaining("127.0.0.1"),
    });
    expect(req!.headers.authorization).toBe("Bearer sk-fake-local");
    expect(lastUserText(req!.body)).toBe("abc");
    expect(inputMessageTexts(req!.body, "developer")).toEqual([]);
  });

  it("answers compaction requests from their own queue, with a summary message by default", async () => {
    fake.enqueue({ text: "turn reply" });
    const c = sse((await post({ input: [userMsg("a"), userMsg("b")] }, { request_kind: "compaction" })).text);
    const item = c.find((e) => e.event === "response.output_item.done")!.data.item as { content: Array<{ text: string }> };
    expect(item.content[0]!.text).toBe("FAKE-SUMMARY: 2 input items were summarized.");
    // The queued turn reply was not consumed by the compaction request.
    expect(fake.queued("turn")).toBe(1);
    fake.enqueue({ text: "custom summary" }, { kind: "compaction" });
    const c2 = sse((await post({ input: [] }, { request_kind: "compaction" })).text);
    expect(JSON.stringify(c2)).toContain("custom summary");
    expect(fake.requests.map((r) => [r.requestKind, r.replySource])).toEqual([
      ["compaction", "default"],
      ["compaction", "queue"],
    ]);
  });

  it("answers remote compaction (compaction_trigger) with a compaction item", async () => {
    const c = sse((await post({ input: [userMsg("a"), { type: "compaction_trigger" }] }, { request_kind: "compaction" })).text);
    const items = c.filter((e) => e.event === "response.output_item.done").map((e) => e.data.item as Record<string, unknown>);
    expect(items).toEqual([{ type: "compaction", id: "cmp_0", encrypted_content: "FAKE-COMPACTION-BLOB-0" }]);
  });

  it("scripts HTTP errors, dropped streams and garbage", async () => {
    fake.enqueue([{ httpStatus: 500 }, { httpStatus: 400, body: "bad request body" }, { text: "cut", dropStream: true }, { garbage: true }]);
    const e500 = await post({ input: [] });
    expect(e500.status).toBe(500);
    expect(JSON.parse(e500.text)).toMatchObject({ error: { message: "fake error 500" } });
    expect(await post({ input: [] })).toEqual({ status: 400, text: "bad request body" });
    const dropped = sse((await post({ input: [] })).text);
    expect(dropped.map((e) => e.event)).not.toContain("response.completed");
    expect(dropped.length).toBeGreaterThan(0);
    const garbage = (await post({ input: [] })).text;
    expect(() => sse(garbage)).toThrow();
  });

  it("computes replies from functions and custom defaults", async () => {
    fake.setDefault((req) => ({ text: `#${req.index}` }));
    fake.enqueue((req) => ({ text: `queued for ${lastUserText(req.body)}` }));
    expect(sse((await post({ input: [userMsg("q")] })).text).at(-2)!.data.item).toMatchObject({ content: [{ text: "queued for q" }] });
    expect(sse((await post({ input: [] })).text).at(-2)!.data.item).toMatchObject({ content: [{ text: "#1" }] });
    fake.reset();
    expect(fake.requests).toEqual([]);
    expect(sse((await post({ input: [userMsg("z")] })).text).at(-2)!.data.item).toMatchObject({ content: [{ text: "reply to: z" }] });
  });

  it("marks a request aborted when the client leaves a slow stream, and 404s other routes", async () => {
    fake.enqueue({ text: ["a", "b", "c", "d", "e", "f"], delayMs: 50 });
    const ac = new AbortController();
    const res = await fetch(`${fake.baseUrl}/responses`, { method: "POST", body: "{}", signal: ac.signal });
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    await expect(reader.read()).rejects.toThrow();
    const start = Date.now();
    while (!fake.requests[0]!.aborted && Date.now() - start < 3_000) await new Promise((r) => setTimeout(r, 20));
    expect(fake.requests[0]!.aborted).toBe(true);

    const missing = await fetch(`${fake.baseUrl}/models`);
    expect(missing.status).toBe(404);
    expect(fake.requests[1]).toMatchObject({ method: "GET", path: "/v1/models", replySource: "none" });
  });

  it("waitForRequests rejects after its timeout", async () => {
    await expect(fake.waitForRequests(1, { timeoutMs: 50 })).rejects.toThrow(/expected 1 requests/);
  });
});

describe("fake Responses server: native tool calls", () => {
  it("streams exec_command, apply_patch (custom tool call) and a web search as output items with distinct call ids", async () => {
    fake.enqueue({
      text: "working",
      webSearch: { query: "q1" },
      functionCall: [execCommandCall("echo hi > out.txt", { workdir: "w" }), updatePlanCall([{ step: "s", status: "in_progress" }], "why")],
      customToolCall: applyPatchCall([{ kind: "add", path: "a.txt", content: "x\n" }]),
    });
    const r = await post({ model: "m", input: [userMsg("go")] });
    const items = sse(r.text)
      .filter((e) => e.event === "response.output_item.done")
      .map((e) => e.data.item as Record<string, unknown>);
    expect(items.map((i) => i.type)).toEqual(["message", "web_search_call", "function_call", "function_call", "custom_tool_call"]);
    expect(items[1]).toMatchObject({ action: { type: "search", query: "q1" }, status: "completed" });
    expect(items[2]).toMatchObject({ name: "exec_command", call_id: "call_0_0" });
    expect(JSON.parse(items[2]!.arguments as string)).toEqual({ cmd: "echo hi > out.txt", login: false, workdir: "w" });
    expect(JSON.parse(items[3]!.arguments as string)).toEqual({ plan: [{ step: "s", status: "in_progress" }], explanation: "why" });
    expect(items[4]).toEqual({
      type: "custom_tool_call",
      id: "ctc_0_2",
      call_id: "call_0_2",
      name: "apply_patch",
      input: "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n",
      status: "completed",
    });
  });

  it("writes patches in Codex's apply_patch grammar", () => {
    expect(
      applyPatchText([
        { kind: "update", path: "b.txt", lines: ["-old", "+new"], context: "fn main", moveTo: "c.txt" },
        { kind: "delete", path: "d.txt" },
      ]),
    ).toBe("*** Begin Patch\n*** Update File: b.txt\n*** Move to: c.txt\n@@ fn main\n-old\n+new\n*** Delete File: d.txt\n*** End Patch\n");
  });

  it("reads the tool outputs Codex sends back (string and content-list outputs)", () => {
    const body = {
      input: [
        userMsg("go"),
        { type: "function_call_output", call_id: "c1", output: "Exit code: 0" },
        { type: "custom_tool_call_output", call_id: "c2", output: [{ type: "input_text", text: "Success." }, { type: "input_text", text: "A a.txt" }] },
        { type: "function_call_output", output: "no call id" },
      ],
    };
    expect(toolOutputs(body)).toEqual([
      { callId: "c1", type: "function_call_output", output: "Exit code: 0" },
      { callId: "c2", type: "custom_tool_call_output", output: "Success.\nA a.txt" },
    ]);
    expect(toolOutputs(null)).toEqual([]);
  });
});
