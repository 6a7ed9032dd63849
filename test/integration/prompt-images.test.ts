/**
 * Images with the prompt, through `runCodexTurn` on the real `codex app-server` 0.169.0, offline: a local file and
 * base64 bytes reach the model request as `input_image` parts (the file inside Codex's `<image ... path=...>`
 * wrapper), the transcript's prompt message records them as OpenClaw image parts, hooks and logs see only a count,
 * and a bad image fails with a typed error before anything is written.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn, startCodexTurn } from "../../src/turn.js";
import { CodexAppServerError } from "../../src/codex/errors.js";
import { CodexTurnParamsError } from "../../src/params.js";
import type { LlmInputEvent } from "../../src/hooks/types.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { contextEntryOutputs, startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";
import { captureLogger, disposeChecked, tempSessions } from "../helpers/turn-env.js";
import { waitFor } from "../codex/helpers.js";

/** A real 1x1 PNG and GIF. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
const GIF = "R0lGODlhAQABAIAAAP///wAAACwAAAAAAQABAAACAkQBADs=";

let env: OfflineCodex;
let ws: string;
let png: string;
const sessions = tempSessions("prompt-images-");

beforeAll(async () => {
  ws = mkdtempSync(path.join(tmpdir(), "ctm-images-ws-"));
  png = path.join(ws, "red.png");
  writeFileSync(png, Buffer.from(PNG, "base64"));
  env = await startOfflineCodex({ offline: { inputModalities: ["text", "image"] } });
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
  rmSync(ws, { recursive: true, force: true });
});

type Part = { type: string; text?: string; image_url?: string };
/** The content of the last user message of a model request. */
function lastUserContent(r: RecordedRequest): Part[] {
  const input = ((r.body as { input?: Array<{ role?: string; content?: Part[] }> })?.input ?? []).filter((i) => i.role === "user");
  return input.at(-1)?.content ?? [];
}

describe("images with the prompt", () => {
  it("a file and base64 bytes reach the model after the text; the transcript keeps them as image parts", async () => {
    const sessionFile = sessions.file("two-images");
    const seen: LlmInputEvent[] = [];
    const routed: unknown[] = [];
    const answered: unknown[] = [];
    const log = captureLogger();
    const before = env.fake.requests.length;
    const prompt = "What differs between these two images?";
    const result = await runCodexTurn({
      appServer: env.codex,
      sessionId: "images",
      sessionFile,
      prompt,
      cwd: ws,
      images: [{ path: png }, { data: GIF, mimeType: "image/gif" }],
      hooks: {
        llmInput: (e) => void seen.push(e),
        beforeModelResolve: (ctx) => void routed.push(ctx.attachments),
        llmOutput: (e) => void answered.push(e.lastAssistant),
      },
      logger: log.logger,
    });
    expect(result.status, JSON.stringify(result.error)).toBe("completed");

    const turnRequests = env.fake.requests.slice(before).filter((r) => r.requestKind === "turn");
    expect(turnRequests).toHaveLength(1);
    const content = lastUserContent(turnRequests[0]!);
    expect(content[0]).toEqual({ type: "input_text", text: prompt });
    const images = content.filter((p) => p.type === "input_image").map((p) => p.image_url);
    expect(images).toHaveLength(2);
    expect(images[0]).toBe(`data:image/png;base64,${PNG}`);
    // Codex re-encodes a GIF as PNG before sending it (observed with 0.169.0): the same 1x1 image, as a PNG.
    const second = Buffer.from(images[1]!.replace(/^data:image\/png;base64,/, ""), "base64");
    expect(second.subarray(1, 4).toString("latin1")).toBe("PNG");
    expect([second.readUInt32BE(16), second.readUInt32BE(20)]).toEqual([1, 1]);
    // The file goes as Codex's localImage: the model is told its path.
    expect(content.some((p) => p.type === "input_text" && p.text?.includes(`path="${png}"`))).toBe(true);

    const expected = [
      { type: "text", text: prompt },
      { type: "image", data: PNG, mimeType: "image/png" },
      { type: "image", data: GIF, mimeType: "image/gif" },
    ];
    expect(result.messagesSnapshot[0]).toMatchObject({ role: "user", content: expected });
    const { messages: history } = await readSessionHistory(sessionFile);
    expect(history[0]).toMatchObject({ role: "user", content: expected });
    expect(history.at(-1)).toMatchObject({ role: "assistant" });

    expect(seen.map((e) => e.imagesCount)).toEqual([2]);
    // A model router sees what is attached (kind and type, never bytes or paths), as OpenClaw's before_model_resolve.
    expect(routed).toEqual([[{ kind: "image", mimeType: "image/png" }, { kind: "image", mimeType: "image/gif" }]]);
    expect(JSON.stringify(routed)).not.toContain(png);
    // llmOutput carries the turn's assistant message as the transcript records it.
    expect(answered).toEqual([history.at(-1)]);
    const logged = JSON.stringify(log.events);
    expect(logged).not.toContain(PNG.slice(0, 40));
    expect(logged).not.toContain(GIF.slice(0, 30));
  }, 60_000);

  it("a bad image rejects with a typed error naming it, before any lock, transcript or model request", async () => {
    const sessionFile = sessions.file("bad-image");
    const before = env.fake.requests.length;
    const missing = path.join(ws, "missing.png");
    const err = await runCodexTurn({ appServer: env.codex, sessionId: "bad", sessionFile, prompt: "look", images: [{ path: png }, { path: missing }] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CodexTurnParamsError);
    expect((err as CodexTurnParamsError).field).toBe("images.1.path");
    expect((err as Error).message).toContain(`cannot read ${missing} (ENOENT)`);
    expect(existsSync(sessionFile)).toBe(false);
    expect(existsSync(`${sessionFile}.lock`)).toBe(false);
    expect(env.fake.requests.length).toBe(before);
  }, 30_000);

  it("the bare client takes the same images, and rejects a bad one as INVALID_ARGUMENT naming the field", async () => {
    const { threadId } = await env.codex.startThread({ cwd: ws });
    const bad = await env.codex.startTurn({ threadId, text: "look", images: [{ data: PNG, mimeType: "image/jpeg" }] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(bad).toBeInstanceOf(CodexAppServerError);
    expect(bad).toMatchObject({ code: "INVALID_ARGUMENT", field: "images.0.data" });
    expect((bad as Error).message).toContain("the bytes are image/png, not image/jpeg");
    const before = env.fake.requests.length;
    const record = await (await env.codex.startTurn({ threadId, text: "look", images: [{ path: png }] })).completion;
    expect(record.codexStatus).toBe("completed");
    expect(record.messagesSnapshot[0]).toMatchObject({ content: [{ type: "text", text: "look" }, { type: "image", data: PNG, mimeType: "image/png" }] });
    const content = lastUserContent(env.fake.requests.slice(before).find((r) => r.requestKind === "turn")!);
    expect(content.filter((p) => p.type === "input_image").map((p) => p.image_url)).toEqual([`data:image/png;base64,${PNG}`]);
  }, 30_000);
});

describe("images of earlier messages in the context a turn sends", () => {
  const contextOf = (r: RecordedRequest): string => contextEntryOutputs(r.body).map((e) => e.output).join("\n");
  const tool = { name: "lookup", description: "Look up.", inputSchema: { type: "object" }, handler: () => "ok" };

  it("a fresh thread's context carries the earlier screenshot: its label in the block, the image itself before the prompt", async () => {
    const sessionFile = sessions.file("context-image");
    const turn = async (prompt: string, extra: Partial<Parameters<typeof runCodexTurn>[0]>) => {
      const before = env.fake.requests.length;
      const seen: LlmInputEvent[] = [];
      env.fake.enqueue({ text: "noted" });
      const result = await runCodexTurn({ appServer: env.codex, sessionId: "ci", sessionFile, prompt, cwd: ws, hooks: { llmInput: (e) => void seen.push(e) }, ...extra });
      expect(result.status, JSON.stringify(result.error)).toBe("completed");
      return { result, request: env.fake.requests.slice(before).find((r) => r.requestKind === "turn")!, seen };
    };
    const first = await turn("look-7x at this screenshot", { images: [{ data: PNG, mimeType: "image/png" }] });
    // New tools: a fresh thread, which (no engine) gets the history as context; the screenshot goes with it.
    const second = await turn("what color-7x was it", { dynamicTools: [tool] });
    expect(second.result.threadId).not.toBe(first.result.threadId);
    expect(second.result.projection).toMatchObject({ reason: "historyContinuity" });
    const content = lastUserContent(second.request);
    const label = content[0]?.text ?? "";
    expect(label).toMatch(/^\[image [0-9a-f]{12} \(image\/png\)\]$/);
    // (Codex adds `detail: "high"` to each image.)
    expect(content).toMatchObject([
      { type: "input_text", text: label },
      { type: "input_image", image_url: `data:image/png;base64,${PNG}` },
      { type: "input_text", text: "what color-7x was it" },
    ]);
    // The same label stands for it in the rendered user block the thread received.
    expect(contextOf(second.request)).toContain(`[user]\nlook-7x at this screenshot\n${label}`);
    expect(second.seen.map((e) => e.imagesCount)).toEqual([1]);
    // The transcript records the prompt as the user wrote it: the context image is not copied into turn 2.
    expect(second.result.messagesSnapshot[0]).toMatchObject({ role: "user" });
    expect(JSON.stringify(second.result.messagesSnapshot)).not.toContain(PNG);
    const { messages } = await readSessionHistory(sessionFile);
    expect(messages.filter((m) => JSON.stringify(m).includes(PNG))).toHaveLength(1);

    // The thread holds it now: the next turn sends neither the block nor the image again.
    const third = await turn("and the size-7x", { dynamicTools: [tool] });
    expect(third.result.threadId).toBe(second.result.threadId);
    expect(lastUserContent(third.request)).toEqual([{ type: "input_text", text: "and the size-7x" }]);
    expect(third.seen.map((e) => e.imagesCount)).toEqual([0]);
  }, 120_000);
});

describe("images steered into a running turn", () => {
  const slow = (): string[] => Array.from({ length: 300 }, (_, i) => `word${i} `);
  /** Start a slow turn through the client and wait for its first delta (so a steer lands mid-turn). */
  async function slowTurn(text: string) {
    const { threadId } = await env.codex.startThread({ cwd: ws });
    env.fake.enqueue({ text: slow(), delayMs: 40 });
    env.fake.enqueue({ text: "seen both" });
    let deltas = 0;
    const before = env.fake.requests.length;
    const turn = await env.codex.startTurn({ threadId, text, steerQuietWindowMs: 20, onEvent: (e) => void (e.type === "agentMessageDelta" && deltas++) });
    await waitFor(() => deltas > 0, 10_000, "the first delta");
    return { turn, before };
  }

  it("the client sends each steer's text then its images; the transcript's steer message keeps them as image parts", async () => {
    const { turn, before } = await slowTurn("describe the first");
    const bad = await turn.steer("bad", { images: [{ data: PNG, mimeType: "image/gif" }] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(bad).toMatchObject({ code: "INVALID_ARGUMENT", field: "images.0.data" });
    expect(await turn.steer("STEER-IMG and this one", { images: [{ data: PNG, mimeType: "image/png" }, { path: png }] })).toEqual({ accepted: true });
    const record = await turn.completion;
    expect(record.codexStatus).toBe("completed");
    // The model's next request: the steer text, the bytes, then the file in Codex's <image path=...> wrapper.
    const content = lastUserContent(env.fake.requests[before + 1]!);
    expect(content[0]).toEqual({ type: "input_text", text: "STEER-IMG and this one" });
    expect(content.filter((p) => p.type === "input_image").map((p) => p.image_url)).toEqual([`data:image/png;base64,${PNG}`, `data:image/png;base64,${PNG}`]);
    expect(content.some((p) => p.type === "input_text" && p.text?.includes(`path="${png}"`))).toBe(true);
    const steered = record.messagesSnapshot.filter((m) => m.role === "user")[1];
    expect(steered).toMatchObject({
      content: [
        { type: "text", text: "STEER-IMG and this one" },
        { type: "image", data: PNG, mimeType: "image/png" },
        { type: "image", data: PNG, mimeType: "image/png" },
      ],
    });
    // After the turn, a steer and its images come straight back.
    const late = await turn.steer("too late", { images: [{ data: GIF, mimeType: "image/gif" }] });
    expect(late).toMatchObject({ accepted: false, followUp: ["too late"], images: [{ data: GIF, mimeType: "image/gif" }] });
  }, 60_000);

  it("through runCodexTurn: the handle checks the images, the mirror records them, and a late steer's images come back with it", async () => {
    const sessionFile = sessions.file("steer-images");
    env.fake.enqueue({ text: slow(), delayMs: 40 });
    env.fake.enqueue({ text: "seen it" });
    let deltas = 0;
    const handle = startCodexTurn({
      appServer: env.codex,
      sessionId: "si",
      sessionFile,
      prompt: "watch this space",
      cwd: ws,
      steerQuietWindowMs: 20,
      onEvent: (e) => void (e.type === "agentMessageDelta" && deltas++),
    });
    await waitFor(() => deltas > 0, 10_000, "the first delta");
    expect(() => handle.steer("bad", { images: [{ path: "relative.png" }] })).toThrow(CodexTurnParamsError);
    expect(() => handle.steer("bad", { images: [{ path: "relative.png" }] })).toThrow(/`images\.0\.path`: must be an absolute path/);
    handle.steer("STEER-9 this screenshot", { images: [{ data: PNG, mimeType: "image/png" }] });
    const result = await handle.result;
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(result.followUps).toEqual([]);
    expect(result.followUpImages).toEqual([]);
    const { messages } = await readSessionHistory(sessionFile);
    expect(messages.map((m) => m.role)).toEqual(["user", "user", "assistant"]);
    expect(messages[1]).toMatchObject({ content: [{ type: "text", text: "STEER-9 this screenshot" }, { type: "image", data: PNG, mimeType: "image/png" }] });

    // A steer that arrives before the turn runs is a follow-up; its images travel with it.
    env.fake.enqueue({ text: "ok" });
    const early = startCodexTurn({ appServer: env.codex, sessionId: "si", sessionFile, prompt: "next", cwd: ws });
    early.steer("EARLY with image", { images: [{ path: png }] });
    early.steer("EARLY text only");
    const r2 = await early.result;
    expect(r2.followUps).toEqual(["EARLY with image", "EARLY text only"]);
    expect(r2.followUpImages).toEqual([[{ data: PNG, mimeType: "image/png", path: png }], []]);
  }, 60_000);
});

describe("images for a text-only model", () => {
  let textOnly: OfflineCodex;
  beforeAll(async () => {
    textOnly = await startOfflineCodex();
  });
  afterAll(async () => disposeChecked(textOnly));

  it("Codex replaces each image with a note (observed behaviour the README documents); the transcript still has the image", async () => {
    const sessionFile = sessions.file("text-only");
    const result = await runCodexTurn({ appServer: textOnly.codex, sessionId: "text-only", sessionFile, prompt: "describe", cwd: ws, images: [{ data: GIF, mimeType: "image/gif" }] });
    expect(result.status).toBe("completed");
    const content = lastUserContent(textOnly.fake.requests.filter((r) => r.requestKind === "turn").at(-1)!);
    expect(content.some((p) => p.type === "input_image")).toBe(false);
    expect(content).toContainEqual({ type: "input_text", text: "image content omitted because you do not support image input" });
    expect((await readSessionHistory(sessionFile)).messages[0]).toMatchObject({ content: [{ type: "text", text: "describe" }, { type: "image", data: GIF, mimeType: "image/gif" }] });
  }, 60_000);
});
