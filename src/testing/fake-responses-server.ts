/**
 * A scriptable fake of the OpenAI Responses API (`POST /v1/responses`, SSE) on 127.0.0.1, for running the real
 * `codex app-server` offline. Wire format verified against codex 0.169.0 (team notes, codex-app-server.md §3).
 *
 * Replies are consumed FIFO per request kind ("turn" or "compaction", from the `x-codex-turn-metadata` header); when
 * the queue is empty the default reply answers: an echo of the last user input for turns, a summary message for
 * compaction requests, a `compaction` item for remote compaction (`compaction_trigger`).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

/** Token usage reported in `response.completed` (Codex's auto-compaction compares `total_tokens` to its limit). */
export interface FakeUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  /** `input_tokens_details.cached_tokens`. */
  cached?: number | undefined;
  /** `output_tokens_details.reasoning_tokens`. */
  reasoning?: number | undefined;
}

export interface FakeFunctionCall {
  name: string;
  /** Object (JSON-encoded for the wire) or an already-encoded JSON string. */
  arguments: unknown;
  callId?: string | undefined;
  /**
   * The tool's namespace, for a tool offered inside a `namespace` tool (Codex's `spawn_agent` is in `multi_agent_v1`):
   * Codex routes such a call by name and namespace, and answers "unsupported call" without it.
   */
  namespace?: string | undefined;
}

/**
 * A freeform ("custom") tool call, e.g. Codex's `apply_patch` when the model catalog says
 * `apply_patch_tool_type: "freeform"` (the offline catalog does): the input is raw text, not JSON.
 */
export interface FakeCustomToolCall {
  name: string;
  /** The raw tool input (for `apply_patch`: the patch text, see `applyPatchText`). */
  input: string;
  callId?: string | undefined;
}

/** A hosted web search the model ran (`web_search_call` output item); Codex reports it as a `webSearch` item. */
export interface FakeWebSearch {
  query: string;
}

/**
 * One scripted reply. Fields combine: reasoning, then text, then web searches, then function calls, then custom tool
 * calls, then a compaction item, each as its own output item. `httpStatus` other than 200 replaces the stream with an
 * error response.
 */
export interface FakeReply {
  /** Assistant text; a string is streamed word by word, an array is streamed chunk by chunk. */
  text?: string | string[] | undefined;
  /** A reasoning summary (streamed as `response.reasoning_summary_text.delta`). */
  reasoning?: string | undefined;
  functionCall?: FakeFunctionCall | FakeFunctionCall[] | undefined;
  /** Freeform tool calls (`custom_tool_call` output items), e.g. `apply_patch`. */
  customToolCall?: FakeCustomToolCall | FakeCustomToolCall[] | undefined;
  /** Hosted web searches (`web_search_call` output items), emitted before the function calls. */
  webSearch?: FakeWebSearch | FakeWebSearch[] | undefined;
  /** Remote-compaction output item (`{type:"compaction", encrypted_content}`). */
  compaction?: boolean | { encryptedContent?: string | undefined } | undefined;
  usage?: Partial<FakeUsage> | undefined;
  /** Delay before each SSE event, in ms (makes the stream slow enough to steer or interrupt). */
  delayMs?: number | undefined;
  /**
   * Before the first event, send only SSE keep-alive comments (`: keep-alive`, every 500 ms) for this long: a stream
   * that is open and alive but makes no progress (Codex sees no event, so nothing is notified).
   */
  keepAliveMs?: number | undefined;
  /** Keep the stream open this long after `response.completed`. */
  holdOpenMs?: number | undefined;
  /** Non-200 status: answer with `body` (default a JSON error) instead of a stream. */
  httpStatus?: number | undefined;
  body?: string | undefined;
  /** Close the stream before `response.completed`. */
  dropStream?: boolean | undefined;
  /** Send bytes that are not valid SSE/JSON, then close. */
  garbage?: boolean | undefined;
  /**
   * The model that answered, sent as the `openai-model` response header: another model than the request's makes
   * Codex report `model/rerouted` (as when the real API answers a flagged request with a fallback model).
   */
  answeredBy?: string | undefined;
}

/** A reply or a function computing one from the request. */
export type FakeReplySource = FakeReply | ((request: RecordedRequest) => FakeReply);

export type FakeRequestKind = "turn" | "compaction";

/** Everything the fake saw of one HTTP request. */
export interface RecordedRequest {
  /** 0-based arrival index. */
  index: number;
  method: string;
  path: string;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  /** Parsed JSON body (null when absent or invalid). */
  body: Record<string, unknown> | null;
  /** Parsed `x-codex-turn-metadata` header. */
  turnMetadata: Record<string, unknown> | null;
  /** `turnMetadata.request_kind` ("turn" | "compaction"), defaulting to "turn". */
  requestKind: FakeRequestKind;
  /** Byte length of JSON.stringify(body.input). */
  inputBytes: number;
  remoteAddress: string;
  receivedAtMs: number;
  /** Where the reply came from. */
  replySource: "queue" | "default" | "none";
  /** The client closed the connection before the scripted stream finished (steer, interrupt). */
  aborted: boolean;
}

export interface FakeResponsesServer {
  /** `http://127.0.0.1:PORT/v1`; Codex POSTs to `${baseUrl}/responses`. */
  readonly baseUrl: string;
  readonly port: number;
  /** Every request received, in arrival order (including unexpected paths). */
  readonly requests: RecordedRequest[];
  /** Queue replies for the next requests of `kind` (default "turn"). */
  enqueue(reply: FakeReplySource | FakeReplySource[], options?: { kind?: FakeRequestKind | undefined }): void;
  /** Replace the default reply for turn requests (or compaction requests with `{ kind: "compaction" }`). */
  setDefault(reply: FakeReplySource, options?: { kind?: FakeRequestKind | undefined }): void;
  /** Replies still queued for `kind`. */
  queued(kind?: FakeRequestKind): number;
  /** Resolve once at least `count` requests (matching `filter`) arrived; rejects after `timeoutMs`. */
  waitForRequests(count: number, options?: { timeoutMs?: number | undefined; filter?: ((r: RecordedRequest) => boolean) | undefined }): Promise<RecordedRequest[]>;
  /** Forget recorded requests and queued replies; restore default replies. */
  reset(): void;
  /** Stop listening and drop open connections. */
  close(): Promise<void>;
}

export interface FakeResponsesServerOptions {
  /** Default 0 (random free port). The host is always 127.0.0.1. */
  port?: number | undefined;
}

/**
 * Texts of `input` messages with `role` (default "user"), each message's text parts joined.
 *
 * @example
 * ```ts
 * expect(inputMessageTexts(fake.requests[0]!.body, "developer")).toContain("<ctx>value</ctx>");
 * ```
 */
export function inputMessageTexts(body: Record<string, unknown> | null, role = "user"): string[] {
  const input = body?.input;
  if (!Array.isArray(input)) return [];
  const out: string[] = [];
  for (const item of input) {
    const it = item as { type?: unknown; role?: unknown; content?: unknown };
    if (it.type !== "message" || it.role !== role || !Array.isArray(it.content)) continue;
    out.push(
      it.content
        .map((c: { type?: unknown; text?: unknown }) => (typeof c.text === "string" ? c.text : ""))
        .filter((t: string) => t.length > 0)
        .join("\n"),
    );
  }
  return out;
}

/**
 * The context entries a request carried, in order. Codex 0.169.0 injects each `untrusted` additionalContext entry as a
 * `function_call_output` item named after its key without dots (`openclaw.context.000.<hash>` becomes
 * `openclawcontext000<hash>`), never as a developer message.
 *
 * @example
 * ```ts
 * const text = contextEntryOutputs(fake.requests[0]!.body).map((e) => e.output).join("\n");
 * expect(text).toContain("[user]\nearlier question");
 * ```
 */
export function contextEntryOutputs(body: Record<string, unknown> | null): Array<{ name: string; output: string }> {
  const input = Array.isArray(body?.input) ? (body.input as Array<Record<string, unknown>>) : [];
  return input
    .filter((item) => item.type === "function_call_output" && typeof item.name === "string" && item.name.startsWith("openclawcontext"))
    .map((item) => ({ name: item.name as string, output: typeof item.output === "string" ? item.output : JSON.stringify(item.output) }));
}

/**
 * The last user message of a request that is not Codex's `<environment_context>` block.
 *
 * @example
 * ```ts
 * fake.setDefault((req) => ({ text: `you said: ${lastUserText(req.body)}` }));
 * ```
 */
export function lastUserText(body: Record<string, unknown> | null): string {
  const texts = inputMessageTexts(body, "user").filter((t) => !t.startsWith("<environment_context>"));
  return texts[texts.length - 1] ?? "";
}

function isRemoteCompaction(body: Record<string, unknown> | null): boolean {
  const input = body?.input;
  if (!Array.isArray(input) || input.length === 0) return false;
  return (input[input.length - 1] as { type?: unknown }).type === "compaction_trigger";
}

function estimateTokens(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / 4));
}

/**
 * The default turn reply: deterministic, derived from the last user input.
 *
 * @example
 * ```ts
 * fake.setDefault(defaultTurnReply); // restores "reply to: <last user text>"
 * ```
 */
export function defaultTurnReply(request: RecordedRequest): FakeReply {
  return { text: `reply to: ${lastUserText(request.body)}` };
}

/**
 * The default compaction reply: a summary message (or a compaction item for remote compaction).
 *
 * @example
 * ```ts
 * fake.setDefault(defaultCompactionReply, { kind: "compaction" });
 * ```
 */
export function defaultCompactionReply(request: RecordedRequest): FakeReply {
  if (isRemoteCompaction(request.body)) return { compaction: true };
  const items = Array.isArray(request.body?.input) ? (request.body!.input as unknown[]).length : 0;
  return { text: `FAKE-SUMMARY: ${items} input items were summarized.` };
}

function chunksOf(text: string | string[]): string[] {
  if (Array.isArray(text)) return text;
  const parts = text.match(/\S+\s*|\s+/g);
  return parts && parts.length > 0 ? parts : [text];
}

function listOf<T>(value: T | T[] | undefined): T[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

type SseEvent = { type: string; data: Record<string, unknown> };

/** Accumulates one response's SSE events; output items take consecutive `output_index` values. */
class ResponseEvents {
  readonly events: SseEvent[] = [];
  outputIndex = 0;
  outputChars = 0;
  constructor(readonly requestIndex: number) {}

  push(type: string, data: Record<string, unknown>): void {
    this.events.push({ type, data: { type, ...data } });
  }

  /** A complete output item in one `response.output_item.done` event (tool calls are not streamed). */
  doneItem(item: Record<string, unknown>, chars: number): void {
    this.push("response.output_item.done", { output_index: this.outputIndex, item });
    this.outputChars += chars;
    this.outputIndex++;
  }
}

function writeReasoning(w: ResponseEvents, reasoning: string): void {
  const id = `rs_${w.requestIndex}_${w.outputIndex}`;
  const output_index = w.outputIndex;
  w.push("response.output_item.added", { output_index, item: { type: "reasoning", id, summary: [] } });
  w.push("response.reasoning_summary_part.added", { item_id: id, output_index, summary_index: 0, part: { type: "summary_text", text: "" } });
  for (const delta of chunksOf(reasoning)) {
    w.push("response.reasoning_summary_text.delta", { item_id: id, output_index, summary_index: 0, delta });
  }
  w.doneItem({ type: "reasoning", id, summary: [{ type: "summary_text", text: reasoning }] }, reasoning.length);
}

function writeText(w: ResponseEvents, text: string | string[]): void {
  const id = `msg_${w.requestIndex}_${w.outputIndex}`;
  const output_index = w.outputIndex;
  const chunks = chunksOf(text);
  const full = chunks.join("");
  w.push("response.output_item.added", { output_index, item: { type: "message", id, role: "assistant", status: "in_progress", content: [] } });
  for (const delta of chunks) {
    w.push("response.output_text.delta", { item_id: id, output_index, content_index: 0, delta });
  }
  const content = [{ type: "output_text", text: full, annotations: [] }];
  w.doneItem({ type: "message", id, role: "assistant", status: "completed", content }, full.length);
}

function writeToolItems(w: ResponseEvents, reply: FakeReply): void {
  const n = w.requestIndex;
  listOf(reply.webSearch).forEach((search, i) => {
    const action = { type: "search", query: search.query };
    w.doneItem({ type: "web_search_call", id: `ws_${n}_${i}`, status: "completed", action }, search.query.length);
  });
  const calls = listOf(reply.functionCall);
  calls.forEach((call, i) => {
    const args = typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {});
    const callId = call.callId ?? `call_${n}_${i}`;
    const namespace = call.namespace !== undefined ? { namespace: call.namespace } : {};
    w.doneItem({ type: "function_call", id: `fc_${n}_${i}`, call_id: callId, name: call.name, ...namespace, arguments: args, status: "completed" }, args.length);
  });
  // Ids continue after the function calls' so a reply mixing both never repeats a call id.
  listOf(reply.customToolCall).forEach((call, j) => {
    const i = calls.length + j;
    const callId = call.callId ?? `call_${n}_${i}`;
    w.doneItem({ type: "custom_tool_call", id: `ctc_${n}_${i}`, call_id: callId, name: call.name, input: call.input, status: "completed" }, call.input.length);
  });
}

function buildEvents(reply: FakeReply, request: RecordedRequest): SseEvent[] {
  const n = request.index;
  const respId = `resp_${n}`;
  const w = new ResponseEvents(n);
  w.push("response.created", { response: { id: respId, status: "in_progress" } });
  if (reply.reasoning !== undefined) writeReasoning(w, reply.reasoning);
  if (reply.text !== undefined) writeText(w, reply.text);
  writeToolItems(w, reply);
  if (reply.compaction) {
    const blob = typeof reply.compaction === "object" && reply.compaction.encryptedContent ? reply.compaction.encryptedContent : `FAKE-COMPACTION-BLOB-${n}`;
    w.doneItem({ type: "compaction", id: `cmp_${n}`, encrypted_content: blob }, 0);
  }
  const input = reply.usage?.input_tokens ?? estimateTokens(request.inputBytes);
  const output = reply.usage?.output_tokens ?? estimateTokens(w.outputChars);
  w.push("response.completed", {
    response: {
      id: respId,
      status: "completed",
      usage: {
        input_tokens: input,
        input_tokens_details: { cached_tokens: reply.usage?.cached ?? 0 },
        output_tokens: output,
        output_tokens_details: { reasoning_tokens: reply.usage?.reasoning ?? 0 },
        total_tokens: reply.usage?.total_tokens ?? input + output,
      },
    },
  });
  return w.events;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function headerRecord(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined) continue;
    out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
}

function parseJson(text: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Answer one request with `reply`: an HTTP error, garbage, or the SSE events of a Responses stream. */
async function streamReply(res: ServerResponse, request: RecordedRequest, reply: FakeReply): Promise<void> {
  if (reply.httpStatus !== undefined && reply.httpStatus !== 200) {
    const body = reply.body ?? JSON.stringify({ error: { message: `fake error ${reply.httpStatus}`, type: "server_error", code: null } });
    res.writeHead(reply.httpStatus, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
    return;
  }
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
    ...(reply.answeredBy !== undefined ? { "openai-model": reply.answeredBy } : {}),
  });
  let closed = false;
  res.on("close", () => {
    closed = true;
  });
  if (reply.garbage) {
    res.write("this is not server-sent events\n\ndata: {not json\n\nevent: response.completed\ndata: [[[\n\n");
    res.end();
    return;
  }
  if (reply.keepAliveMs) {
    const until = Date.now() + reply.keepAliveMs;
    while (Date.now() < until) {
      if (closed || res.destroyed) {
        request.aborted = true;
        return;
      }
      res.write(": keep-alive\n\n");
      await sleep(Math.min(500, Math.max(1, until - Date.now())));
    }
  }
  const events = buildEvents(reply, request);
  for (const e of events) {
    if (reply.dropStream && e.type === "response.completed") break;
    if (reply.delayMs) await sleep(reply.delayMs);
    if (closed || res.destroyed) {
      request.aborted = true;
      return;
    }
    res.write(`event: ${e.type}\ndata: ${JSON.stringify(e.data)}\n\n`);
  }
  if (reply.holdOpenMs && !reply.dropStream) await sleep(reply.holdOpenMs);
  if (!res.destroyed) res.end();
}

/** What the fake records of one request (before it is answered). */
function recordRequest(req: IncomingMessage, bodyText: string, index: number): RecordedRequest {
  const body = parseJson(bodyText);
  const headers = headerRecord(req);
  const metaHeader = headers["x-codex-turn-metadata"];
  const turnMetadata = metaHeader ? parseJson(metaHeader) : null;
  const requestKind: FakeRequestKind = turnMetadata?.request_kind === "compaction" ? "compaction" : "turn";
  return {
    index,
    method: req.method ?? "",
    path: (req.url ?? "").split("?")[0] ?? "",
    headers,
    body,
    turnMetadata,
    requestKind,
    inputBytes: body && body.input !== undefined ? Buffer.byteLength(JSON.stringify(body.input)) : 0,
    remoteAddress: req.socket.remoteAddress ?? "",
    receivedAtMs: Date.now(),
    replySource: "none",
    aborted: false,
  };
}

/** Resolve once `count` recorded requests match `opts.filter` (checked at every new request), or reject at the timeout. */
function waitForRecorded(
  requests: readonly RecordedRequest[],
  waiters: Set<() => void>,
  count: number,
  opts: { timeoutMs?: number | undefined; filter?: ((r: RecordedRequest) => boolean) | undefined },
): Promise<RecordedRequest[]> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const filter = opts.filter ?? (() => true);
  return new Promise<RecordedRequest[]>((resolve, reject) => {
    const check = (): boolean => {
      const matched = requests.filter(filter);
      if (matched.length >= count) {
        waiters.delete(waiter);
        clearTimeout(timer);
        resolve(matched);
        return true;
      }
      return false;
    };
    const waiter = (): void => void check();
    const timer = setTimeout(() => {
      waiters.delete(waiter);
      reject(new Error(`fake responses server: expected ${count} requests within ${timeoutMs} ms, got ${requests.filter(filter).length}`));
    }, timeoutMs);
    waiters.add(waiter);
    check();
  });
}

/**
 * Start the fake on 127.0.0.1 (random port by default).
 *
 * @example
 * ```ts
 * const fake = await startFakeResponsesServer();
 * fake.enqueue({ reasoning: "thinking", text: "Hello world", usage: { input_tokens: 100, output_tokens: 5, total_tokens: 105 } });
 * fake.enqueue({ functionCall: { name: "lookup", arguments: { q: "x" } } });
 * fake.enqueue({ httpStatus: 500 });
 * // ... run codex against fake.baseUrl ...
 * console.log(fake.requests.map((r) => r.requestKind));
 * await fake.close();
 * ```
 */
export async function startFakeResponsesServer(options: FakeResponsesServerOptions = {}): Promise<FakeResponsesServer> {
  const requests: RecordedRequest[] = [];
  const queues: Record<FakeRequestKind, FakeReplySource[]> = { turn: [], compaction: [] };
  const defaults: Record<FakeRequestKind, FakeReplySource> = { turn: defaultTurnReply, compaction: defaultCompactionReply };
  const sockets = new Set<Socket>();
  const waiters = new Set<() => void>();
  const notify = (): void => {
    for (const w of [...waiters]) w();
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const record = recordRequest(req, Buffer.concat(chunks).toString("utf8"), requests.length);
      const requestKind = record.requestKind;
      requests.push(record);
      notify();
      if (req.method !== "POST" || !/\/responses$/.test(record.path)) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `fake server: no route for ${req.method} ${record.path}` } }));
        return;
      }
      const queued = queues[requestKind].shift();
      record.replySource = queued ? "queue" : "default";
      const source = queued ?? defaults[requestKind];
      let reply: FakeReply;
      try {
        reply = typeof source === "function" ? source(record) : source;
      } catch (err) {
        reply = { httpStatus: 500, body: JSON.stringify({ error: { message: `fake reply function threw: ${String(err)}` } }) };
      }
      streamReply(res, record, reply).catch(() => {
        record.aborted = true;
        if (!res.destroyed) res.destroy();
      });
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    enqueue(reply, opts) {
      const kind = opts?.kind ?? "turn";
      queues[kind].push(...(Array.isArray(reply) ? reply : [reply]));
    },
    setDefault(reply, opts) {
      defaults[opts?.kind ?? "turn"] = reply;
    },
    queued(kind = "turn") {
      return queues[kind].length;
    },
    waitForRequests(count, opts = {}) {
      return waitForRecorded(requests, waiters, count, opts);
    },
    reset() {
      requests.length = 0;
      queues.turn.length = 0;
      queues.compaction.length = 0;
      defaults.turn = defaultTurnReply;
      defaults.compaction = defaultCompactionReply;
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
