/**
 * Live inspection for people who use the Stately inspector UI.
 *
 * Data path: actor -> `createWebSocketInspector` (from `@statelyai/inspect`) -> a WebSocket relay on 127.0.0.1 ->
 * the relay's bridge page in your browser -> an iframe of the Stately inspector UI. The run data only ever travels
 * over loopback, but the UI page inside the iframe is hosted by Stately (`https://stately.ai/inspect`), so viewing
 * it needs internet, and whatever reaches the browser is handed to that page via `postMessage`. That is why every
 * event sent here is reduced to event types, state values and statuses first (no context, payloads, input, output
 * or errors: they carry prompts). With `fallbackPage`, the bridge page switches to our own live statechart view
 * (served at `/live`, fed by the same relay) when the hosted UI has not connected in time, so a machine without
 * internet still shows the run moving. For a recorded run use `renderStatechartPage` with a trace.
 *
 * Why not `createInspectorServer` from `@statelyai/inspect/server` (0.7.2): it calls `listen(port)` with no host,
 * so it listens on every interface, opens a browser with `exec` by default, and hard-codes `ws://localhost:<port>`
 * in its page (wrong for port 0). The relay below is the same protocol (buffer the last 200 messages, replay them to
 * new clients, broadcast each message to the other clients), bound to 127.0.0.1, with an Origin check.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import { createWebSocketInspector, type StatelyInspectionEvent } from "@statelyai/inspect";
import { pino, type Logger } from "pino";
import type { InspectionEvent, Observer } from "xstate";
import { z } from "zod";

/** Codes of {@link LiveInspectorError}. */
export type LiveInspectorErrorCode =
  /** Options failed validation. */
  | "LIVE_INVALID_ARGUMENT"
  /** The relay could not listen (e.g. the port is taken). */
  | "LIVE_LISTEN_FAILED"
  /** The inspector client did not connect to the relay in time. */
  | "LIVE_CONNECT_TIMEOUT";

/**
 * The error type thrown by {@link createLiveInspector}.
 *
 * @example
 * ```ts
 * try {
 *   await createLiveInspector({ port: 8080 });
 * } catch (err) {
 *   if (err instanceof LiveInspectorError && err.code === "LIVE_LISTEN_FAILED") console.error(err.message);
 * }
 * ```
 */
export class LiveInspectorError extends Error {
  readonly code: LiveInspectorErrorCode;
  constructor(code: LiveInspectorErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "LiveInspectorError";
    this.code = code;
  }
}

const liveOptionsSchema = z
  .object({
    /** TCP port on 127.0.0.1; 0 picks a free one. Default 0. */
    port: z.number().int().min(0).max(65535).optional(),
    /** The inspector UI embedded by the bridge page. Default `https://stately.ai/inspect`. */
    inspectorUrl: z.url().optional(),
    /** How long to wait for the inspector client to reach the relay. Default 5000 ms. */
    connectTimeoutMs: z.number().int().positive().max(60_000).optional(),
    /**
     * Our own live statechart page (served at `/live`, given the relay's `ws://` URL). When set, the bridge page
     * switches to it when the hosted inspector has not connected within `fallbackAfterMs` (offline, blocked).
     */
    fallbackPage: z.custom<(wsUrl: string) => string>((v) => typeof v === "function", "fallbackPage must be a function").optional(),
    /** How long the bridge waits for the hosted inspector before showing `/live`. Default 4000 ms. */
    fallbackAfterMs: z.number().int().positive().max(60_000).optional(),
    logger: z.custom<Logger>().optional(),
  })
  .strict();

export type LiveInspectorOptions = z.input<typeof liveOptionsSchema>;

/** What {@link createLiveInspector} resolves to. */
export interface LiveInspector {
  /** Pass as `createActor(machine, { inspect })`. */
  inspect: Observer<InspectionEvent>;
  /** The bridge page to open in a browser (`http://127.0.0.1:<port>/`). */
  url: string;
  /** The WebSocket relay (`ws://127.0.0.1:<port>`), for other clients such as `createWebSocketReceiver`. */
  wsUrl: string;
  /** The bound port. */
  port: number;
  /** Stops the inspector client, disconnects every relay client and closes the server. */
  close(): Promise<void>;
}

// The subset of `ws` this file uses (the package ships no types and `@types/ws` is not installed).
interface WsSocket {
  readyState: number;
  send(data: string): void;
  on(event: "message", cb: (data: { toString(): string }) => void): void;
  terminate(): void;
}
interface WsServer {
  clients: Set<WsSocket>;
  on(event: "connection", cb: (socket: WsSocket) => void): void;
  close(cb?: (err?: Error) => void): void;
}
interface ClientSocket {
  readyState: number;
  addEventListener(event: "open", cb: () => void): void;
}
interface WsModule {
  WebSocketServer: new (options: {
    server: Server;
    verifyClient: (info: { origin?: string | undefined; req: IncomingMessage }) => boolean;
  }) => WsServer;
  OPEN: number;
}

/** `ws` as resolved by `@statelyai/inspect` itself, so the relay speaks with the same library version. */
function loadWs(): WsModule {
  const require = createRequire(import.meta.url);
  const inspectServerPath = require.resolve("@statelyai/inspect/server");
  return createRequire(inspectServerPath)("ws") as WsModule;
}

const MAX_BUFFER = 200;

type InspectedSnapshot = Extract<StatelyInspectionEvent, { type: "@xstate.actor" }>["snapshot"];

function safeSnapshot(snapshot: unknown): InspectedSnapshot {
  if (snapshot === null || typeof snapshot !== "object") return {};
  const s = snapshot as InspectedSnapshot;
  const out: InspectedSnapshot = {};
  if (s.status !== undefined) out.status = s.status;
  // State values are built from state names only; JSON round-trip drops anything exotic.
  if (s.value !== undefined) out.value = JSON.parse(JSON.stringify(s.value)) as unknown;
  return out;
}

function safeEvent(event: unknown): { type: string } {
  const type = (event as { type?: unknown } | null)?.type;
  return { type: typeof type === "string" ? type : "" };
}

/**
 * Reduces a Stately inspection event to ids, event types, state values and statuses. Exported for tests.
 *
 * @example
 * ```ts
 * const safe = redactStatelyEvent(event); // no context, payload, input, output or error left
 * ```
 */
export function redactStatelyEvent(event: StatelyInspectionEvent): StatelyInspectionEvent {
  switch (event.type) {
    case "@xstate.snapshot":
      // The UI reads status and value; the other Snapshot fields (output, error, input) are dropped on purpose.
      return { ...event, event: safeEvent(event.event), snapshot: safeSnapshot(event.snapshot) as typeof event.snapshot };
    case "@xstate.event":
      return { ...event, event: safeEvent(event.event) };
    case "@xstate.actor":
      // `definition` is the machine config (state names, transitions, named actions/guards): no run data.
      return { ...event, snapshot: safeSnapshot(event.snapshot) };
    default:
      return event;
  }
}

function bridgeHtml(wsUrl: string, inspectorUrl: string, fallback: { afterMs: number } | undefined): string {
  // Same postMessage handshake as @statelyai/inspect's own bridge page, plus the switch to our offline view.
  const bar = fallback
    ? `<div id="bar">Stately inspector (hosted; needs internet) &middot; <a href="/live" target="_top">offline view</a> <span id="mode"></span></div>`
    : "";
  const switchScript = fallback
    ? `setTimeout(() => {
  if (connected) return;
  iframe.src = '/live';
  document.body.setAttribute('data-mode', 'fallback');
  document.getElementById('mode').textContent = '\u2014 the hosted inspector did not load: showing the offline view';
}, ${fallback.afterMs});`
    : "";
  return `<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>Stately Inspector (loopback relay)</title>
<style>*{margin:0;padding:0}html,body{height:100%}body{display:flex;flex-direction:column}
#bar{font:13px system-ui,sans-serif;padding:4px 8px;background:#f4f4f4;border-bottom:1px solid #ddd}
iframe{width:100%;flex:1;border:none}</style>
</head>
<body data-mode="hosted">
${bar}
<iframe id="inspector" src="${inspectorUrl}"></iframe>
<script>
const iframe = document.getElementById('inspector');
const buffer = [];
let connected = false;
window.addEventListener('message', (e) => {
  if (e.data && e.data.type === '@statelyai.connected') {
    connected = true;
    buffer.forEach((event) => iframe.contentWindow.postMessage(event, '*'));
    buffer.length = 0;
  }
});
const ws = new WebSocket(${JSON.stringify(wsUrl)});
ws.onmessage = (event) => {
  const data = JSON.parse(event.data);
  if (connected) iframe.contentWindow.postMessage(data, '*');
  else buffer.push(data);
};
${switchScript}
</script>
</body>
</html>`;
}

/** Serves our own live page; a failure to render it (e.g. mermaid not installed) is a plain-text 500, not a crash. */
function serveFallback(res: ServerResponse, render: () => string, logger: Logger): void {
  let html: string;
  try {
    html = render();
  } catch (err) {
    logger.warn({ event: "inspect.live.fallback_failed", code: (err as { code?: unknown }).code }, "offline view unavailable");
    res.writeHead(500, { "Content-Type": "text/plain; charset=utf-8" });
    res.end(`offline view unavailable: ${(err as Error).message}\n`);
    return;
  }
  res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" });
  res.end(html);
}

/** Listen on 127.0.0.1:`port` (0: any); resolves with the port, rejects with `LIVE_LISTEN_FAILED`. */
function listenOnLoopback(server: Server, port: number): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const onError = (err: Error) => {
      reject(new LiveInspectorError("LIVE_LISTEN_FAILED", `cannot listen on 127.0.0.1:${port}: ${err.message}`, { cause: err }));
    };
    server.once("error", onError);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * Relay every message a client sends to every other open client, and replay the last {@link MAX_BUFFER} messages to a
 * client that connects later. Returns the replay buffer.
 */
function relayMessages(wss: WsServer, openState: number): string[] {
  const buffer: string[] = [];
  wss.on("connection", (socket) => {
    for (const msg of buffer) socket.send(msg);
    socket.on("message", (data) => {
      const msg = data.toString();
      buffer.push(msg);
      if (buffer.length > MAX_BUFFER) buffer.shift();
      for (const client of wss.clients) if (client !== socket && client.readyState === openState) client.send(msg);
    });
  });
  return buffer;
}

/** Whether `socket` (absent: nothing to wait for) is open within `timeoutMs`. */
async function socketOpened(socket: ClientSocket | undefined, openState: number, timeoutMs: number): Promise<"ok" | "timeout"> {
  const connected = new Promise<void>((resolve) => {
    if (socket === undefined || socket.readyState === openState) return resolve();
    socket.addEventListener("open", () => resolve());
  });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
  });
  const outcome = await Promise.race([connected.then(() => "ok" as const), timedOut]);
  clearTimeout(timer);
  return outcome;
}

/**
 * Starts a loopback WebSocket relay plus a `createWebSocketInspector` client for it. Open `url` in a browser to see
 * the run in the Stately inspector UI (that page is hosted by Stately and needs internet; run data stays on
 * 127.0.0.1 and is reduced to event types and state values before it leaves the process).
 *
 * @example
 * ```ts
 * const live = await createLiveInspector({ port: 0 });
 * console.log(`open ${live.url}`);
 * const actor = createActor(turnMachine.provide({ actors }), { input, inspect: live.inspect });
 * actor.start();
 * await toPromise(actor);
 * await live.close();
 * ```
 */
export async function createLiveInspector(options: LiveInspectorOptions = {}): Promise<LiveInspector> {
  const parsed = liveOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new LiveInspectorError(
      "LIVE_INVALID_ARGUMENT",
      `invalid live inspector option ${issue?.path.join(".") ?? "?"}: ${issue?.message ?? "invalid"}`,
    );
  }
  const opts = parsed.data;
  const logger = opts.logger ?? pino({ level: "silent" });
  const inspectorUrl = opts.inspectorUrl ?? "https://stately.ai/inspect";
  const connectTimeoutMs = opts.connectTimeoutMs ?? 5000;
  const ws = loadWs();

  let port = 0;
  const allowedHosts = (): Set<string> => new Set([`127.0.0.1:${port}`, `localhost:${port}`]);
  const allowedOrigins = (): Set<string> => new Set([`http://127.0.0.1:${port}`, `http://localhost:${port}`]);

  const httpServer = createServer((req, res) => {
    // Host check: a DNS-rebinding page must not be served our bridge under its own origin.
    if (!allowedHosts().has(req.headers.host ?? "")) {
      res.writeHead(403, { "Content-Type": "text/plain" });
      res.end("forbidden host\n");
      return;
    }
    const wsUrlNow = `ws://127.0.0.1:${port}`;
    if (req.url === "/live" && opts.fallbackPage) return serveFallback(res, () => opts.fallbackPage!(wsUrlNow), logger);
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" });
    res.end(bridgeHtml(wsUrlNow, inspectorUrl, opts.fallbackPage ? { afterMs: opts.fallbackAfterMs ?? 4000 } : undefined));
  });

  port = await listenOnLoopback(httpServer, opts.port ?? 0);

  // Node clients send no Origin; browsers do, and only the bridge page's own origin may read the stream.
  const wss = new ws.WebSocketServer({
    server: httpServer,
    verifyClient: (info) => info.origin === undefined || allowedOrigins().has(info.origin),
  });
  const buffer = relayMessages(wss, ws.OPEN);

  const closeServer = async (): Promise<void> => {
    for (const client of wss.clients) client.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    await new Promise<void>((resolve) => httpServer.close(() => resolve()));
  };

  const wsUrl = `ws://127.0.0.1:${port}`;
  const inspector = createWebSocketInspector({ url: wsUrl, serialize: redactStatelyEvent, autoStart: true });
  // Wait until the adapter's socket is open: stopping it mid-handshake makes the adapter's `onerror` retry forever
  // every 5 s. `ws` is a private field of the adapter, read defensively.
  const clientSocket = (inspector.adapter as unknown as { ws?: ClientSocket | undefined }).ws;
  if ((await socketOpened(clientSocket, ws.OPEN, connectTimeoutMs)) === "timeout") {
    inspector.stop();
    await closeServer();
    throw new LiveInspectorError("LIVE_CONNECT_TIMEOUT", `inspector client did not reach ${wsUrl} within ${connectTimeoutMs} ms`);
  }
  logger.info({ event: "inspect.live.started", port }, "live inspector relay listening on 127.0.0.1");

  let closed = false;
  return {
    inspect: inspector.inspect,
    url: `http://127.0.0.1:${port}/`,
    wsUrl,
    port,
    async close() {
      if (closed) return;
      closed = true;
      inspector.stop();
      await closeServer();
      logger.info({ event: "inspect.live.closed", port, buffered: buffer.length }, "live inspector relay closed");
    },
  };
}
