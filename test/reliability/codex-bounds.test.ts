/**
 * Every wait of the Codex client is bounded, on the real `codex app-server` against the fake Responses API: lone
 * surrogates in outgoing text, tool handlers that hang or return non-strings, tool interceptors that misbehave, and a
 * turn that only retries.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CodexAppServer } from "../../src/codex/app-server.js";
import { offlineCodexConfig } from "../../src/codex/config.js";
import type { CodexTurnWarning } from "../../src/codex/warnings.js";
import { inputMessageTexts, startFakeResponsesServer, startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";

const LONE = "\ud800";
const REPLACED = "\ufffd";
let env: OfflineCodex;

beforeAll(async () => {
  // A short request timeout: a line Codex cannot parse would make turn/start fail after it instead of completing.
  env = await startOfflineCodex({ offline: { lean: true }, codex: { requestTimeoutMs: 8_000 } });
});
afterAll(async () => {
  await env?.dispose();
});

/** The `function_call_output` text of the last model request. */
function toolOutput(request: RecordedRequest | undefined): string {
  const input = (request?.body?.input ?? []) as Array<{ type?: string; output?: unknown }>;
  const out = input.filter((i) => i.type === "function_call_output").at(-1)?.output;
  return typeof out === "string" ? out : JSON.stringify(out);
}

const probeTool = (handler: (args: unknown, ctx: { signal?: AbortSignal }) => unknown) => ({
  name: "probe",
  description: "probe",
  inputSchema: { type: "object" },
  handler: handler as (args: unknown) => string,
});

describe("lone surrogates are replaced with U+FFFD at the JSON-RPC boundary (real app-server)", () => {
  it.each([
    ["the prompt", { text: `prompt ${LONE} end` }, {}],
    ["the developer instructions", { text: "hello" }, { developerInstructions: `dev ${LONE} end` }],
    ["additional context", { text: "hello", additionalContext: { ctx: { kind: "application" as const, value: `ctx ${LONE} end` } } }, {}],
  ])("in %s: the turn completes and the model sees U+FFFD", async (_what, turnOptions, threadOptions) => {
    const { codex, fake } = env;
    const before = codex.stats().sanitizedMessages;
    const { threadId } = await codex.startThread(threadOptions);
    fake.enqueue({ text: "ok" });
    const record = await (await codex.startTurn({ threadId, ...turnOptions })).completion;
    expect(record.codexStatus).toBe("completed");
    const body = fake.requests.at(-1)!.body;
    const texts = [...inputMessageTexts(body, "user"), ...inputMessageTexts(body, "developer")].join("\n");
    expect(texts).toContain(`${REPLACED} end`);
    expect(codex.stats().sanitizedMessages).toBeGreaterThan(before);
  });

  it("in a dynamic tool result: Codex gets the result and the turn completes", async () => {
    const { codex, fake } = env;
    const { threadId } = await codex.startThread({ dynamicTools: [probeTool(() => `result ${LONE} end`)] });
    fake.enqueue([{ functionCall: { name: "probe", arguments: {} } }, { text: "done" }]);
    const record = await (await codex.startTurn({ threadId, text: "call the probe" })).completion;
    expect(record.codexStatus).toBe("completed");
    expect(toolOutput(fake.requests.at(-1))).toContain(`result ${REPLACED} end`);
  });
});

describe("dynamic tool calls are bounded and typed (real app-server)", () => {
  it("a handler that never answers times out: Codex gets a timed-out result, the turn completes, the handler is aborted", async () => {
    const { codex, fake } = env;
    let signal: AbortSignal | undefined;
    const { threadId } = await codex.startThread({
      dynamicTools: [probeTool((_a, ctx) => ((signal = ctx.signal), new Promise<string>(() => undefined)))],
    });
    fake.enqueue([{ functionCall: { name: "probe", arguments: {} } }, { text: "done" }]);
    const warnings: CodexTurnWarning[] = [];
    const turn = await codex.startTurn({ threadId, text: "call", toolCallTimeoutMs: 300, onWarning: (w) => warnings.push(w) });
    const record = await turn.completion;
    expect(record.codexStatus).toBe("completed");
    expect(toolOutput(fake.requests.at(-1))).toContain("tool probe timed out after 300 ms");
    expect(warnings).toEqual([expect.objectContaining({ code: "toolCallTimeout", tool: "probe", threadId })]);
    expect(turn.warnings).toEqual(warnings);
    expect(signal?.aborted).toBe(true);
  });

  it("a handler returning an object gives Codex an error naming the tool and the type, with a warning", async () => {
    const { codex, fake } = env;
    const { threadId } = await codex.startThread({ dynamicTools: [probeTool(() => ({ not: "a string" }))] });
    fake.enqueue([{ functionCall: { name: "probe", arguments: {} } }, { text: "done" }]);
    const turn = await codex.startTurn({ threadId, text: "call" });
    expect((await turn.completion).codexStatus).toBe("completed");
    const out = toolOutput(fake.requests.at(-1));
    expect(out).toContain("tool probe returned object, expected a string");
    expect(out).not.toContain("[object Object]");
    expect(turn.warnings.map((w) => w.code)).toEqual(["toolResultNotString"]);
  });

  it("beforeToolCall may block or rewrite a call; afterToolCall sees the outcome; a hanging interceptor is ignored", async () => {
    const { codex, fake } = env;
    const seenArgs: unknown[] = [];
    const { threadId } = await codex.startThread({ dynamicTools: [probeTool((args) => (seenArgs.push(args), "handled"))] });
    const after: unknown[] = [];
    const run = async (beforeToolCall: Parameters<typeof codex.startTurn>[0]["beforeToolCall"]) => {
      fake.enqueue([{ functionCall: { name: "probe", arguments: { n: 1 } } }, { text: "done" }]);
      const turn = await codex.startTurn({
        threadId,
        text: "call",
        toolInterceptorTimeoutMs: 300,
        beforeToolCall,
        afterToolCall: (c) => void after.push({ result: c.result, error: c.error, args: c.arguments, ms: typeof c.durationMs }),
      });
      expect((await turn.completion).codexStatus).toBe("completed");
      return { out: toolOutput(fake.requests.at(-1)), warnings: turn.warnings.map((w) => w.code) };
    };
    expect(await run(async () => ({ block: true, blockReason: "blocked by policy" }))).toEqual({ out: "blocked by policy", warnings: [] });
    expect(seenArgs).toEqual([]);
    expect(await run(async () => ({ arguments: { n: 2 } }))).toEqual({ out: "handled", warnings: [] });
    expect(seenArgs).toEqual([{ n: 2 }]);
    expect(await run(() => new Promise(() => undefined))).toEqual({ out: "handled", warnings: ["toolInterceptorFailed"] });
    expect(await run(() => Promise.reject(new Error("interceptor broke")))).toEqual({ out: "handled", warnings: ["toolInterceptorFailed"] });
    expect(after).toEqual([
      { result: undefined, error: "blocked by policy", args: { n: 1 }, ms: "number" },
      { result: "handled", error: undefined, args: { n: 2 }, ms: "number" },
      { result: "handled", error: undefined, args: { n: 1 }, ms: "number" },
      { result: "handled", error: undefined, args: { n: 1 }, ms: "number" },
    ]);
  });
});

describe("a turn that only retries ends (real app-server)", () => {
  it("is interrupted after retryWithoutProgressMs and fails with code retryWithoutProgress", async () => {
    const fake = await startFakeResponsesServer();
    const settings = offlineCodexConfig({ baseUrl: fake.baseUrl, lean: true });
    // Stream retries on (the offline config turns them off): every stream drops, Codex reconnects again and again.
    const provider = (settings.config.model_providers as Record<string, Record<string, unknown>>).fakeresp!;
    provider.stream_max_retries = 50;
    const codex = await CodexAppServer.spawn({ config: settings.config, env: settings.env, modelCatalog: settings.modelCatalog! });
    try {
      fake.setDefault({ dropStream: true, text: "partial" });
      const { threadId } = await codex.startThread();
      const retries: boolean[] = [];
      const turn = await codex.startTurn({
        threadId,
        text: "hello",
        retryWithoutProgressMs: 2_000,
        onEvent: (e) => void (e.type === "error" && retries.push(e.willRetry)),
      });
      const record = await turn.completion;
      expect(record.codexStatus).toBe("timedOut");
      expect(record.error).toMatchObject({ code: "retryWithoutProgress" });
      expect(retries.length).toBeGreaterThan(0);
      expect(retries.every((r) => r)).toBe(true);
    } finally {
      await codex.close();
      await fake.close();
    }
  });

  it("without a reachable model (connection refused, Codex's default retries) ends with retryWithoutProgress", async () => {
    // A loopback port nothing listens on: start a fake to get a free port, then close it.
    const gone = await startFakeResponsesServer();
    const baseUrl = gone.baseUrl;
    await gone.close();
    const settings = offlineCodexConfig({ baseUrl, lean: true });
    const provider = (settings.config.model_providers as Record<string, Record<string, unknown>>).fakeresp!;
    delete provider.request_max_retries;
    delete provider.stream_max_retries;
    const codex = await CodexAppServer.spawn({ config: settings.config, env: settings.env, modelCatalog: settings.modelCatalog! });
    try {
      const { threadId } = await codex.startThread();
      const record = await (await codex.startTurn({ threadId, text: "hello", retryWithoutProgressMs: 3_000 })).completion;
      expect(record.codexStatus).toBe("timedOut");
      expect(record.error).toMatchObject({ code: "retryWithoutProgress" });
    } finally {
      await codex.close();
    }
  });
});
