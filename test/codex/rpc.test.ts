import { PassThrough } from "node:stream";
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { CodexAppServerError } from "../../src/codex/errors.js";
import { JsonRpcConnection, validateNotification, type ServerRequestMessage } from "../../src/codex/rpc.js";
import type { IncomingNotification } from "../../src/codex/schemas.js";

/** A connection wired to in-memory streams: `serverSays` writes to our input, `sent` collects what we wrote. */
function harness(opts: { maxLineBytes?: number; requestTimeoutMs?: number } = {}) {
  const fromServer = new PassThrough();
  const toServer = new PassThrough();
  const sent: Array<Record<string, unknown>> = [];
  let pending = "";
  toServer.on("data", (c: Buffer) => {
    pending += c.toString("utf8");
    let i: number;
    while ((i = pending.indexOf("\n")) >= 0) {
      sent.push(JSON.parse(pending.slice(0, i)) as Record<string, unknown>);
      pending = pending.slice(i + 1);
    }
  });
  const notifications: IncomingNotification[] = [];
  const unknown: string[] = [];
  const requests: ServerRequestMessage[] = [];
  const logLines: string[] = [];
  const logger = pino({ level: "debug" }, { write: (s: string) => void logLines.push(s) });
  const rpc = new JsonRpcConnection({
    input: fromServer,
    output: toServer,
    logger,
    ...opts,
    onNotification: (n) => notifications.push(n),
    onUnknownNotification: (m) => unknown.push(m),
    onServerRequest: (r) => requests.push(r),
    errorDetails: () => ({ stderrTail: "STDERR-TAIL" }),
  });
  const serverSays = (text: string | Buffer): Promise<void> =>
    new Promise((resolve) => {
      fromServer.write(text, () => setImmediate(resolve));
    });
  return { rpc, sent, notifications, unknown, requests, logLines, serverSays };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("JsonRpcConnection", () => {
  it("matches responses to requests and writes requests without a jsonrpc field", async () => {
    const h = harness();
    const p = h.rpc.request("thread/start", { cwd: "/x" });
    await h.serverSays("");
    expect(h.sent).toEqual([{ id: 1, method: "thread/start", params: { cwd: "/x" } }]);
    await h.serverSays(`${JSON.stringify({ id: 1, result: { thread: { id: "t1" } } })}\n`);
    await expect(p).resolves.toEqual({ thread: { id: "t1" } });
  });

  it("rejects with RPC_ERROR carrying the JSON-RPC code, message and stderr tail", async () => {
    const h = harness();
    const p = h.rpc.request("turn/steer", {}).catch((e: unknown) => e);
    await h.serverSays(`${JSON.stringify({ id: 1, error: { code: -32600, message: "no active turn to steer" } })}\n`);
    const err = (await p) as CodexAppServerError;
    expect(err).toBeInstanceOf(CodexAppServerError);
    expect(err).toMatchObject({ code: "RPC_ERROR", rpcCode: -32600, rpcMessage: "no active turn to steer", method: "turn/steer", stderrTail: "STDERR-TAIL" });
  });

  it("times out a request and counts its late response", async () => {
    vi.useFakeTimers();
    const h = harness({ requestTimeoutMs: 100 });
    const p = h.rpc.request("thread/read", {}).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(150);
    expect(await p).toMatchObject({ code: "REQUEST_TIMEOUT", method: "thread/read" });
    vi.useRealTimers();
    await h.serverSays(`${JSON.stringify({ id: 1, result: {} })}\n`);
    await h.serverSays(`${JSON.stringify({ id: 99, result: {} })}\n`);
    expect(h.rpc.stats()).toMatchObject({ lateResponses: 1, unknownResponses: 1 });
  });

  it("survives malformed lines and counts them, never logging their content", async () => {
    const h = harness();
    await h.serverSays("not json at all SECRET-CONTENT\n[1,2,3]\n{\"foo\":1}\n\n   \n{\"method\":\"\"}\n");
    const s = h.rpc.stats();
    expect(s.malformedLines).toBe(4);
    expect(h.logLines.join("")).not.toContain("SECRET-CONTENT");
    // Still works afterwards.
    const p = h.rpc.request("x" as never, {});
    await h.serverSays(`${JSON.stringify({ id: 1, result: { ok: true } })}\n`);
    await expect(p).resolves.toEqual({ ok: true });
  });

  it("drops and counts oversized lines, then resynchronizes at the next newline", async () => {
    const h = harness({ maxLineBytes: 64 });
    const big = JSON.stringify({ method: "warning", params: { message: "x".repeat(200) } });
    // Deliver the big line in pieces, followed by a good line in the same chunk as its tail.
    await h.serverSays(big.slice(0, 50));
    await h.serverSays(big.slice(50, 120));
    await h.serverSays(`${big.slice(120)}\n${JSON.stringify({ method: "warning", params: { message: "ok" } })}\n`);
    expect(h.rpc.stats().oversizedLines).toBe(1);
    expect(h.notifications.map((n) => n.method)).toEqual(["warning"]);
    expect((h.notifications[0]!.params as { message: string }).message).toBe("ok");
  });

  it("reassembles a line split across chunks, including inside a multi-byte character", async () => {
    const h = harness();
    const line = Buffer.from(`${JSON.stringify({ method: "warning", params: { message: "héllo ✓" } })}\n`);
    const cut = line.indexOf(Buffer.from("✓")) + 1;
    await h.serverSays(line.subarray(0, cut));
    await h.serverSays(line.subarray(cut));
    expect((h.notifications[0]!.params as { message: string }).message).toBe("héllo ✓");
  });

  it("counts unknown notification methods and passes them to the raw listener only", async () => {
    const h = harness();
    await h.serverSays(`${JSON.stringify({ method: "future/thing", params: { a: 1 } })}\n`);
    expect(h.rpc.stats().unknownNotifications).toBe(1);
    expect(h.unknown).toEqual(["future/thing"]);
    expect(h.notifications).toEqual([]);
    expect(h.logLines.join("")).toContain("future/thing");
  });

  it("drops a consumed notification whose params do not validate, logging method and path only", async () => {
    const h = harness();
    await h.serverSays(
      `${JSON.stringify({ method: "item/agentMessage/delta", params: { threadId: "t", turnId: "u", itemId: "i", delta: 42, leak: "SECRET" } })}\n`,
    );
    expect(h.rpc.stats().invalidNotifications).toBe(1);
    expect(h.notifications).toEqual([]);
    const log = h.logLines.join("");
    expect(log).toContain("item/agentMessage/delta");
    expect(log).toContain("\"path\":\"delta\"");
    expect(log).not.toContain("SECRET");
  });

  it("routes server requests and answers them", async () => {
    const h = harness();
    await h.serverSays(`${JSON.stringify({ id: 0, method: "item/tool/call", params: { tool: "t" } })}\n`);
    expect(h.requests).toEqual([{ id: 0, method: "item/tool/call", params: { tool: "t" } }]);
    h.rpc.respond(0, { success: true, contentItems: [] });
    h.rpc.respondError(1, -32601, "nope");
    await h.serverSays("");
    expect(h.sent).toEqual([
      { id: 0, result: { success: true, contentItems: [] } },
      { id: 1, error: { code: -32601, message: "nope" } },
    ]);
  });

  it("failAll rejects pending requests with the failure code and refuses new ones", async () => {
    const h = harness();
    const p1 = h.rpc.request("thread/start", {}).catch((e: unknown) => e);
    h.rpc.failAll(new CodexAppServerError("PROCESS_EXITED", "exited", { stderrTail: "tail", exitCode: null, signal: "SIGKILL" }));
    expect(await p1).toMatchObject({ code: "PROCESS_EXITED", method: "thread/start", stderrTail: "tail", signal: "SIGKILL" });
    await expect(h.rpc.request("turn/start", {})).rejects.toMatchObject({ code: "PROCESS_EXITED", method: "turn/start" });
    expect(h.rpc.pendingCount).toBe(0);
  });
});

describe("validateNotification", () => {
  it("types consumed notifications and keeps emittedAtMs", () => {
    const c = validateNotification({
      method: "thread/tokenUsage/updated",
      emittedAtMs: 123,
      params: {
        threadId: "t",
        turnId: "u",
        tokenUsage: {
          total: { totalTokens: 3, inputTokens: 2, cachedInputTokens: 0, outputTokens: 1, reasoningOutputTokens: 0 },
          last: { totalTokens: 3, inputTokens: 2, cachedInputTokens: 0, outputTokens: 1, reasoningOutputTokens: 0 },
          modelContextWindow: null,
        },
      },
    });
    expect(c.kind).toBe("ok");
    if (c.kind === "ok" && c.notification.consumed && c.notification.method === "thread/tokenUsage/updated") {
      expect(c.notification.emittedAtMs).toBe(123);
      // Missing newer field gets its default.
      expect(c.notification.params.tokenUsage.total.cacheWriteInputTokens).toBe(0);
    } else {
      throw new Error("expected a typed tokenUsage notification");
    }
  });

  it("validates items by type: a broken agentMessage is invalid, an unknown item type only needs type and id", () => {
    const base = { threadId: "t", turnId: "u", completedAtMs: 1 };
    expect(validateNotification({ method: "item/completed", params: { ...base, item: { type: "agentMessage", id: "m" } } })).toMatchObject({
      kind: "invalid",
      path: "item.text",
    });
    expect(validateNotification({ method: "item/completed", params: { ...base, item: { type: "futureItem", id: "f" } } }).kind).toBe("ok");
    expect(validateNotification({ method: "item/completed", params: { ...base, item: { id: "f" } } }).kind).toBe("invalid");
  });

  it("passes known but unconsumed notifications through untouched", () => {
    const c = validateNotification({ method: "configWarning", params: { summary: "s", details: null } });
    expect(c).toEqual({ kind: "ok", notification: { consumed: false, method: "configWarning", params: { summary: "s", details: null } } });
  });
});
