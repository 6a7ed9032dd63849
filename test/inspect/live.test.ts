import { request } from "node:http";
import { createRequire } from "node:module";
import { connect } from "node:net";
import { networkInterfaces } from "node:os";
import { createWebSocketReceiver, type StatelyInspectionEvent } from "@statelyai/inspect";
import { afterEach, describe, expect, it, vi } from "vitest";
import { assign, createActor, fromPromise, setup, toPromise } from "xstate";
import { createLiveInspector, LiveInspectorError, redactStatelyEvent, type LiveInspector } from "../../src/inspect/live.js";

const SECRET = "SECRET-PROMPT-live-7f3a";

// The same `ws` build @statelyai/inspect uses (no @types/ws, so a minimal local shape).
interface WsClient {
  on(event: "open", cb: () => void): void;
  on(event: "error", cb: (err: Error) => void): void;
  on(event: "unexpected-response", cb: (req: unknown, res: { statusCode?: number }) => void): void;
  close(): void;
  terminate(): void;
}
type WsCtor = new (url: string, options?: { origin?: string }) => WsClient;
const requireHere = createRequire(import.meta.url);
const WebSocketClient = createRequire(requireHere.resolve("@statelyai/inspect/server"))("ws") as WsCtor;

const demo = setup({
  types: { context: {} as { prompt: string; echoed?: string }, input: {} as { prompt: string } },
  actors: { echo: fromPromise(async ({ input }: { input: { text: string } }) => input.text) },
  actions: {
    storeEcho: assign((_, params: { output: string }) => ({ echoed: params.output })),
  },
}).createMachine({
  id: "liveDemo",
  context: ({ input }) => ({ prompt: input.prompt }),
  initial: "idle",
  states: {
    idle: { on: { GO: "working" } },
    working: {
      invoke: {
        id: "echo",
        src: "echo",
        input: ({ context }) => ({ text: context.prompt }),
        onDone: { target: "done", actions: { type: "storeEcho", params: ({ event }) => ({ output: event.output }) } },
      },
    },
    done: { type: "final", output: ({ context }) => ({ echoed: context.echoed }) },
  },
});

let live: LiveInspector | undefined;
afterEach(async () => {
  await live?.close();
  live = undefined;
});

function nonLoopbackIPv4(): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const addr of list ?? []) if (addr.family === "IPv4" && !addr.internal) return addr.address;
  }
  return undefined;
}

function tryConnect(host: string, port: number): Promise<"connected" | "refused"> {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    sock.once("connect", () => {
      sock.destroy();
      resolve("connected");
    });
    sock.once("error", () => resolve("refused"));
  });
}

describe("createLiveInspector", () => {
  it("listens on 127.0.0.1 only, on a free port, and serves the bridge page", async () => {
    live = await createLiveInspector({ port: 0 });
    expect(live.port).toBeGreaterThan(0);
    expect(live.url).toBe(`http://127.0.0.1:${live.port}/`);
    expect(live.wsUrl).toBe(`ws://127.0.0.1:${live.port}`);
    expect(await tryConnect("127.0.0.1", live.port)).toBe("connected");
    const other = nonLoopbackIPv4();
    if (other !== undefined) expect(await tryConnect(other, live.port)).toBe("refused");

    const res = await fetch(live.url);
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain(JSON.stringify(live.wsUrl));
    expect(html).toContain('src="https://stately.ai/inspect"');
  });

  it("refuses a request whose Host header is not loopback (DNS rebinding)", async () => {
    live = await createLiveInspector();
    const port = live.port;
    // fetch() drops a custom Host header, so use node:http.
    const status = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request({ host: "127.0.0.1", port, path: "/", headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on("error", reject);
        req.end();
      });
    expect(await status(`evil.example:${port}`)).toBe(403);
    expect(await status(`localhost:${port}`)).toBe(200);
  });

  it("relays redacted events to a WebSocket client: state values and event types, never payloads or context", async () => {
    live = await createLiveInspector();
    const received: StatelyInspectionEvent[] = [];
    createWebSocketReceiver({ server: live.wsUrl }).subscribe((ev) => received.push(ev));

    const actor = createActor(demo, { input: { prompt: SECRET }, inspect: live.inspect });
    actor.start();
    actor.send({ type: "GO", payload: SECRET } as never);
    await toPromise(actor);

    await vi.waitFor(
      () => {
        const done = received.find(
          (e) => e.type === "@xstate.snapshot" && (e.snapshot as { value?: unknown }).value === "done",
        );
        expect(done).toBeDefined();
      },
      { timeout: 5000, interval: 20 },
    );
    const text = JSON.stringify(received);
    expect(text).not.toContain(SECRET);
    expect(text).toContain('"type":"GO"');
    expect(text).toContain('"value":"working"');
  });

  it("rejects browser connections from a foreign Origin", async () => {
    live = await createLiveInspector();
    const wsUrl = live.wsUrl;
    const status = await new Promise<number | string>((resolve) => {
      const client = new WebSocketClient(wsUrl, { origin: "http://evil.example" });
      client.on("open", () => {
        client.close();
        resolve("open");
      });
      client.on("unexpected-response", (_req, res) => {
        client.terminate();
        resolve(res.statusCode ?? 0);
      });
      client.on("error", () => resolve("error"));
    });
    expect(status).toBe(401);

    const allowed = await new Promise<string>((resolve) => {
      const client = new WebSocketClient(wsUrl, { origin: `http://127.0.0.1:${live?.port ?? 0}` });
      client.on("open", () => {
        client.close();
        resolve("open");
      });
      client.on("error", (err) => resolve(`error: ${err.message}`));
    });
    expect(allowed).toBe("open");
  });

  it("close() stops the server", async () => {
    const started = await createLiveInspector();
    await started.close();
    expect(await tryConnect("127.0.0.1", started.port)).toBe("refused");
    await started.close(); // idempotent
  });

  it("reports a taken port as a typed error", async () => {
    live = await createLiveInspector();
    const err = await createLiveInspector({ port: live.port }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LiveInspectorError);
    expect((err as LiveInspectorError).code).toBe("LIVE_LISTEN_FAILED");
    expect((err as Error).message).toContain(String(live.port));
  });

  it("validates options", async () => {
    const err = await createLiveInspector({ port: 70000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LiveInspectorError);
    expect((err as LiveInspectorError).code).toBe("LIVE_INVALID_ARGUMENT");
    expect((err as Error).message).toContain("port");
  });
});

describe("redactStatelyEvent", () => {
  it("keeps status and value, drops context, output, error and event payloads", () => {
    const redacted = redactStatelyEvent({
      type: "@xstate.snapshot",
      event: { type: "GO", payload: SECRET },
      snapshot: { status: "done", value: "done", context: { prompt: SECRET }, output: SECRET, error: SECRET } as never,
      rootId: "x:0",
      sessionId: "x:0",
      createdAt: "0",
      id: "1",
      _version: "0.7.2",
    });
    expect(JSON.stringify(redacted)).not.toContain(SECRET);
    expect(redacted).toMatchObject({ event: { type: "GO" }, snapshot: { status: "done", value: "done" } });
  });
});
