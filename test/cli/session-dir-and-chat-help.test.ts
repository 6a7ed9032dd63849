/** `--session` in a missing directory is an error unless `--mkdir`; chat's banner and its local `/help`. */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../helpers/cli.js";
import { testTempDir } from "../helpers/temp-dir.js";

describe("a session directory that does not exist", () => {
  it("run exits 3 naming it and --mkdir, before anything starts; with --mkdir it is created", async () => {
    const dir = await testTempDir("ctm-session-dir-");
    const file = path.join(dir, "typo", "deeper", "s.jsonl");
    const refused = await runCli(["run", "hi", "--session", file, "--offline"]);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain(path.join(dir, "typo", "deeper"));
    expect(refused.stderr).toContain("--mkdir");
    expect(existsSync(path.join(dir, "typo"))).toBe(false);
    const made = await runCli(["run", "hi", "--session", file, "--offline", "--mkdir"]);
    expect(made.code).toBe(0);
    expect(existsSync(file)).toBe(true);
  });
});

describe("chat banner and /help", () => {
  it("starts with one line naming the session, and answers /help itself (nothing reaches the model)", async () => {
    const dir = await testTempDir("ctm-chat-help-");
    const file = path.join(dir, "s.jsonl");
    const requests = path.join(dir, "requests.jsonl");
    const r = await runCli(["chat", "--session", file, "--offline", "--offline-requests", requests], { input: "/help\n" });
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines[0]).toBe(`codex-turn chat: session ${file} (offline model). /help for commands, Ctrl-D to exit.`);
    for (const item of ["/new, /reset", "/image FILE", "steers it", "Ctrl-D"]) expect(r.stdout).toContain(item);
    expect(await readFile(requests, "utf8")).toBe("");
  });
});
