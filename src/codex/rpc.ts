/**
 * Newline-delimited JSON-RPC as spoken by `codex app-server`: no `"jsonrpc"` field, requests `{id, method, params}`,
 * responses `{id, result}` / `{id, error}`, notifications `{method, params, emittedAtMs}`, server->client requests
 * `{id, method, params}` with their own id space. Bad input never throws: it is counted and logged by method name.
 */
import type { Readable, Writable } from "node:stream";
import type { Logger } from "pino";
import { CodexAppServerError } from "./errors.js";
import { encodeRpcLine } from "./json-safe.js";
import { knownNotificationMethods } from "./known-methods.js";
import {
  consumedNotificationSchemas,
  isConsumedMethod,
  notificationEnvelopeSchema,
  responseEnvelopeSchema,
  serverRequestEnvelopeSchema,
  type IncomingNotification,
} from "./schemas.js";

/** Counters of what came over the wire (never content). */
export interface RpcStats {
  linesReceived: number;
  notifications: number;
  serverRequests: number;
  responses: number;
  /** Lines that were not JSON objects or matched no message shape. */
  malformedLines: number;
  /** Lines longer than `maxLineBytes` (dropped). */
  oversizedLines: number;
  /** Notifications whose method is not in the pinned protocol (passed to raw listeners only). */
  unknownNotifications: number;
  /** Notifications of a consumed method whose params failed validation (dropped). */
  invalidNotifications: number;
  /** Responses to ids we never sent. */
  unknownResponses: number;
  /** Responses that arrived after their request timed out. */
  lateResponses: number;
  /** Outgoing messages in which lone UTF-16 surrogates were replaced with U+FFFD (see json-safe.ts). */
  sanitizedMessages: number;
}

export interface ServerRequestMessage {
  id: string | number;
  method: string;
  params: unknown;
}

export interface JsonRpcConnectionOptions {
  /** The server's stdout. */
  input: Readable;
  /** The server's stdin. */
  output: Writable;
  logger: Logger;
  /** Lines longer than this are dropped and counted (default 16 MiB). */
  maxLineBytes?: number | undefined;
  /** Default per-request timeout in ms (default 30 s). */
  requestTimeoutMs?: number | undefined;
  onNotification: (notification: IncomingNotification) => void;
  /** Notifications whose method the pinned protocol does not know (raw, unvalidated). */
  onUnknownNotification?: ((method: string, params: unknown) => void) | undefined;
  onServerRequest: (request: ServerRequestMessage) => void;
  /** Extra diagnostics for errors (stderr tail). */
  errorDetails?: (() => { stderrTail?: string | undefined }) | undefined;
  /** Called when an outgoing message had lone surrogates replaced (count only; for a turn warning). */
  onSanitized?: ((info: { method?: string | undefined; id?: string | number | undefined; replaced: number }) => void) | undefined;
  /** Called with every message this side writes (requests, notifications, replies to server requests), as sent. */
  onOutgoing?: ((message: OutgoingRpcMessage) => void) | undefined;
}

/** A JSON-RPC message the client wrote: a request (`id`, `method`), a notification (`method`) or a reply (`id`, `result` or `error`). */
export interface OutgoingRpcMessage {
  id?: string | number | undefined;
  method?: string | undefined;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string } | undefined;
}

interface Pending {
  method: string;
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export const DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024;
const NEWLINE = 0x0a;

/**
 * One JSON-RPC connection over a pair of streams (normally a child's stdio).
 *
 * @example
 * ```ts
 * const rpc = new JsonRpcConnection({ input: child.stdout, output: child.stdin, logger, onNotification, onServerRequest });
 * const result = await rpc.request("thread/start", { cwd: process.cwd() });
 * ```
 */
export class JsonRpcConnection {
  private readonly opts: JsonRpcConnectionOptions;
  private readonly maxLineBytes: number;
  private readonly pending = new Map<number, Pending>();
  private readonly timedOut = new Set<number>();
  private nextId = 1;
  private chunks: Buffer[] = [];
  private bufferedBytes = 0;
  private discarding = false;
  private failure: CodexAppServerError | undefined;
  private readonly counters: RpcStats = {
    linesReceived: 0,
    notifications: 0,
    serverRequests: 0,
    responses: 0,
    malformedLines: 0,
    oversizedLines: 0,
    unknownNotifications: 0,
    invalidNotifications: 0,
    unknownResponses: 0,
    lateResponses: 0,
    sanitizedMessages: 0,
  };

  constructor(opts: JsonRpcConnectionOptions) {
    this.opts = opts;
    this.maxLineBytes = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    opts.input.on("data", (chunk: Buffer | string) => this.onData(typeof chunk === "string" ? Buffer.from(chunk) : chunk));
    // Writes after the child died raise EPIPE here; the exit handler reports the failure, so only log it.
    opts.output.on("error", (err: NodeJS.ErrnoException) => {
      opts.logger.debug({ event: "codex.rpc.writeError", errCode: err.code }, "write to app-server failed");
    });
  }

  stats(): RpcStats {
    return { ...this.counters };
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  /** Send a request and wait for its response. Rejects with RPC_ERROR, REQUEST_TIMEOUT or the connection's failure. */
  request(method: string, params: unknown, options: { timeoutMs?: number | undefined } = {}): Promise<unknown> {
    if (this.failure) return Promise.reject(this.copyFailure(method));
    const id = this.nextId++;
    const timeoutMs = options.timeoutMs ?? this.opts.requestTimeoutMs ?? 30_000;
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        this.timedOut.add(id);
        this.opts.logger.warn({ event: "codex.rpc.timeout", method, id, timeoutMs }, "app-server request timed out");
        reject(
          new CodexAppServerError("REQUEST_TIMEOUT", `codex app-server did not answer ${method} within ${timeoutMs} ms`, {
            method,
            ...this.opts.errorDetails?.(),
          }),
        );
      }, timeoutMs);
      this.pending.set(id, { method, resolve, reject, timer });
      this.write(params === undefined ? { id, method } : { id, method, params });
    });
  }

  /** Send a notification (no response). */
  notify(method: string, params?: unknown): void {
    if (this.failure) return;
    this.write(params === undefined ? { method } : { method, params });
  }

  /** Answer a server->client request. */
  respond(id: string | number, result: unknown): void {
    if (this.failure) return;
    this.write({ id, result });
  }

  respondError(id: string | number, code: number, message: string): void {
    if (this.failure) return;
    this.write({ id, error: { code, message } });
  }

  /** Reject every pending request with `error` and refuse new ones (called when the process exits or is closed). */
  failAll(error: CodexAppServerError): void {
    if (!this.failure) this.failure = error;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.pending.delete(id);
      p.reject(this.copyFailure(p.method));
    }
  }

  private copyFailure(method: string): CodexAppServerError {
    const f = this.failure!;
    return new CodexAppServerError(f.code, `${f.message} (pending ${method})`, {
      method,
      ...(f.stderrTail !== undefined ? { stderrTail: f.stderrTail } : {}),
      ...(f.exitCode !== undefined ? { exitCode: f.exitCode } : {}),
      ...(f.signal !== undefined ? { signal: f.signal } : {}),
    });
  }

  /** Write one message as a line Codex can parse: lone surrogates are replaced, counted and logged (never content). */
  private write(message: { id?: string | number | undefined; method?: string | undefined; [key: string]: unknown }): void {
    try {
      const { line, replaced } = encodeRpcLine(message);
      if (replaced > 0) {
        this.counters.sanitizedMessages++;
        const info = { ...(message.method !== undefined ? { method: message.method } : {}), ...(message.id !== undefined ? { id: message.id } : {}), replaced };
        this.opts.logger.warn({ event: "codex.rpc.loneSurrogatesReplaced", ...info }, "replaced lone surrogates in an outgoing message");
        this.opts.onSanitized?.(info);
      }
      this.opts.output.write(line);
      if (this.opts.onOutgoing) {
        try {
          this.opts.onOutgoing(message);
        } catch {
          // An observer (a trajectory writer) must never break the connection.
        }
      }
    } catch (err) {
      this.opts.logger.debug({ event: "codex.rpc.writeError", errName: err instanceof Error ? err.name : typeof err }, "write to app-server failed");
    }
  }

  private onData(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(NEWLINE, start);
      const end = nl === -1 ? chunk.length : nl;
      if (!this.discarding) {
        const piece = chunk.subarray(start, end);
        if (this.bufferedBytes + piece.length > this.maxLineBytes) {
          // Too long: drop what we have and skip to the next newline without buffering it.
          this.discarding = true;
          this.chunks = [];
          this.bufferedBytes = 0;
          this.counters.oversizedLines++;
          this.opts.logger.warn({ event: "codex.rpc.oversizedLine", maxLineBytes: this.maxLineBytes }, "dropped oversized line");
        } else if (piece.length > 0) {
          this.chunks.push(piece);
          this.bufferedBytes += piece.length;
        }
      }
      if (nl === -1) break;
      if (this.discarding) {
        this.discarding = false;
      } else {
        const line = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
        this.chunks = [];
        this.bufferedBytes = 0;
        this.onLine(line.toString("utf8"));
      }
      start = nl + 1;
    }
  }

  private onLine(line: string): void {
    const text = line.trim();
    if (text.length === 0) return;
    this.counters.linesReceived++;
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      this.malformed("notJson");
      return;
    }
    if (typeof msg !== "object" || msg === null || Array.isArray(msg)) {
      this.malformed("notObject");
      return;
    }
    const obj = msg as Record<string, unknown>;
    const hasId = "id" in obj && obj.id !== null && obj.id !== undefined;
    const hasMethod = typeof obj.method === "string";
    try {
      if (hasId && hasMethod) this.onServerRequest(obj);
      else if (hasId) this.onResponse(obj);
      else if (hasMethod) this.onNotification(obj);
      else this.malformed("noShape");
    } catch (err) {
      // A listener threw; the connection must survive it.
      this.opts.logger.error({ event: "codex.rpc.listenerError", errName: err instanceof Error ? err.name : typeof err }, "listener failed");
    }
  }

  private malformed(reason: string): void {
    this.counters.malformedLines++;
    this.opts.logger.warn({ event: "codex.rpc.malformedLine", reason }, "ignored malformed line from app-server");
  }

  private onResponse(obj: Record<string, unknown>): void {
    const parsed = responseEnvelopeSchema.safeParse(obj);
    if (!parsed.success || (parsed.data.result === undefined && parsed.data.error === undefined)) {
      this.malformed("badResponse");
      return;
    }
    this.counters.responses++;
    const { id, result, error } = parsed.data;
    const numericId = typeof id === "number" ? id : Number(id);
    const pending = this.pending.get(numericId);
    if (!pending) {
      if (this.timedOut.delete(numericId)) this.counters.lateResponses++;
      else this.counters.unknownResponses++;
      this.opts.logger.debug({ event: "codex.rpc.unmatchedResponse", id }, "response without a pending request");
      return;
    }
    this.pending.delete(numericId);
    clearTimeout(pending.timer);
    if (error) {
      pending.reject(
        new CodexAppServerError("RPC_ERROR", `codex app-server rejected ${pending.method}: ${error.message}`, {
          method: pending.method,
          rpcCode: error.code,
          rpcMessage: error.message,
          ...this.opts.errorDetails?.(),
        }),
      );
    } else {
      pending.resolve(result);
    }
  }

  private onServerRequest(obj: Record<string, unknown>): void {
    const parsed = serverRequestEnvelopeSchema.safeParse(obj);
    if (!parsed.success) {
      this.malformed("badServerRequest");
      return;
    }
    this.counters.serverRequests++;
    this.opts.onServerRequest({ id: parsed.data.id, method: parsed.data.method, params: parsed.data.params });
  }

  private onNotification(obj: Record<string, unknown>): void {
    const c = validateNotification(obj);
    switch (c.kind) {
      case "malformed":
        this.malformed("badNotification");
        return;
      case "unknown":
        this.counters.unknownNotifications++;
        this.opts.logger.debug({ event: "codex.rpc.unknownNotification", method: c.method }, "notification not in the pinned protocol");
        this.opts.onUnknownNotification?.(c.method, c.params);
        return;
      case "invalid":
        this.counters.notifications++;
        this.counters.invalidNotifications++;
        this.opts.logger.warn(
          { event: "codex.rpc.invalidNotification", method: c.method, path: c.path },
          "dropped notification with unexpected params",
        );
        return;
      case "ok":
        this.counters.notifications++;
        this.opts.onNotification(c.notification);
        return;
    }
  }
}

/** Result of {@link validateNotification}. */
export type NotificationCheck =
  | { kind: "ok"; notification: IncomingNotification }
  | { kind: "unknown"; method: string; params: unknown }
  | { kind: "invalid"; method: string; path: string }
  | { kind: "malformed" };

/**
 * Validate one decoded notification object: unknown methods and consumed methods with bad params are reported, not
 * thrown. Pure; used by the connection and by tests that replay recorded wire lines.
 *
 * @example
 * ```ts
 * const c = validateNotification(JSON.parse(line));
 * if (c.kind === "ok") projector.apply(c.notification);
 * ```
 */
export function validateNotification(obj: unknown): NotificationCheck {
  const parsed = notificationEnvelopeSchema.safeParse(obj);
  if (!parsed.success) return { kind: "malformed" };
  const { method, params, emittedAtMs } = parsed.data;
  if (!knownNotificationMethods.has(method)) return { kind: "unknown", method, params };
  const at = emittedAtMs !== undefined ? { emittedAtMs } : {};
  if (isConsumedMethod(method)) {
    const checked = consumedNotificationSchemas[method].safeParse(params);
    if (!checked.success) {
      return { kind: "invalid", method, path: checked.error.issues[0]?.path.map(String).join(".") ?? "" };
    }
    return { kind: "ok", notification: { consumed: true, method, params: checked.data, ...at } as IncomingNotification };
  }
  return { kind: "ok", notification: { consumed: false, method, params, ...at } };
}
