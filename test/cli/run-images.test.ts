/**
 * `codex-turn run --image` and chat's `/image FILE`: image files sent with the prompt, spawned as a user runs it against the real app-server and
 * the offline fake model (whose catalog entry takes images). The session transcript's prompt message holds the image;
 * a file that is not an image is a usage error (exit 2) naming it, and nothing is written.
 */
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../helpers/cli.js";

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-cli-images-"));
  await writeFile(path.join(dir, "red.png"), Buffer.from(PNG, "base64"));
  await writeFile(path.join(dir, "notes.txt"), "not an image");
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("codex-turn run --image", () => {
  it("sends the file with the prompt (paths relative to the current directory); the transcript keeps it", async () => {
    const session = path.join(dir, "with-image.jsonl");
    const r = await runCli(["run", "what colour is this?", "--session", session, "--offline", "--image", "red.png", "--json"], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!)).toMatchObject({ status: "completed", assistantText: "offline reply" });
    const entries = (await readFile(session, "utf8")).trim().split("\n").map((l) => JSON.parse(l) as { type: string; message?: { role: string; content: unknown } });
    const prompt = entries.find((e) => e.type === "message" && e.message?.role === "user")!.message!;
    expect(prompt.content).toEqual([
      { type: "text", text: "what colour is this?" },
      { type: "image", data: PNG, mimeType: "image/png" },
    ]);
  }, 120_000);

  it("chat: /image FILE attaches an image to the next prompt only; a bad file is reported and the chat goes on", async () => {
    const session = path.join(dir, "chat-images.jsonl");
    const lines = ["first", "/image red.png", "second", "/image notes.txt", "third"].join("\n");
    const r = await runCli(["chat", "--session", session, "--offline"], { cwd: dir, input: `${lines}\n` });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("(image attached: red.png; it goes with your next prompt)");
    expect(r.stdout).toContain(`(image not attached: /image notes.txt: ${path.join(dir, "notes.txt")} is not a PNG, JPEG, GIF or WebP image)`);
    const prompts = (await readFile(session, "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; message?: { role: string; content: unknown } })
      .filter((e) => e.type === "message" && e.message?.role === "user")
      .map((e) => e.message!.content);
    expect(prompts).toEqual(["first", [{ type: "text", text: "second" }, { type: "image", data: PNG, mimeType: "image/png" }], "third"]);
  }, 120_000);

  it("a file that is not an image is a usage error naming it; no session is written", async () => {
    const session = path.join(dir, "bad-image.jsonl");
    const r = await runCli(["run", "look", "--session", session, "--offline", "--image", "red.png", "--image", "notes.txt"], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--image notes.txt: ${path.join(dir, "notes.txt")} is not a PNG, JPEG, GIF or WebP image`);
    expect(existsSync(session)).toBe(false);
  }, 120_000);
});
