/**
 * `codex-turn chat` on a real terminal (a tmux pane), against the real app-server and the offline fake model slowed
 * by `--offline-script`: streamed text appears before the turn ends, a steer is taken, a steer that arrives after
 * Codex's turn ended is shown and run next as a follow-up, Ctrl-C aborts the running turn, Ctrl-C when idle exits
 * 0, and no session lock is left behind.
 */
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tmuxDriver } from "../helpers/tmux.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const bin = path.join(root, "bin", "codex-turn.js");
const engine = path.join(root, "test", "cli", "fixtures", "slow-finalize-engine.ts");
const session = `ctm-chat-${process.pid}`;

const words = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`).join(" ");
const SCRIPT = [
  { text: words("w", 40), delayMs: 120 }, // turn 1: slow, steered mid-stream
  { text: "STEERED-REPLY" }, // turn 1 after the steer
  { text: "FINALIZE-SLOW-REPLY" }, // turn 2: its finalize takes 4 s (fixture engine)
  { text: "FOLLOWUP-REPLY" }, // turn 3: the steer that was not taken
  { text: words("z", 60), delayMs: 200 }, // turn 4: aborted with Ctrl-C
];

const { tmux, pane, type, waitFor, kill } = tmuxDriver(session);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-chat-tty-"));
});
afterAll(async () => {
  kill();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("chat on a terminal", { timeout: 240_000 }, () => {
  it("streams, steers, shows a follow-up, aborts on Ctrl-C and exits on Ctrl-C when idle", async () => {
    const script = path.join(dir, "script.json");
    await writeFile(script, JSON.stringify(SCRIPT));
    const sessionFile = path.join(dir, "chat.jsonl");
    const exitFile = path.join(dir, "exit");
    const cmd = [process.execPath, bin, "chat", "--session", sessionFile, "--offline", "--offline-script", script, "--engine", engine]
      .map((a) => `'${a}'`)
      .join(" ");
    tmux("new-session", "-d", "-s", session, "-x", "220", "-y", "60", "-e", "CODEX_TURN_FROM_SOURCE=1", `${cmd}; echo EXIT=$? > '${exitFile}'`);
    await waitFor((s) => s.includes("> "), "the prompt");

    type("count please");
    const early = await waitFor((s) => s.includes("w2 "), "streamed text");
    expect(early).not.toContain("w40"); // text is on screen while the model is still streaming
    type("please stop");
    await waitFor((s) => s.includes("(steer sent)"), "the steer note");
    await waitFor((s) => s.includes("STEERED-REPLY"), "the steered reply");

    type("slowfinalize now");
    await waitFor((s) => s.includes("FINALIZE-SLOW-REPLY"), "turn 2's reply");
    await new Promise((r) => setTimeout(r, 500)); // Codex's turn has ended; finalize is still running
    type("late steer");
    await waitFor((s) => s.includes("steer not taken, running next: late steer"), "the follow-up notice");
    await waitFor((s) => s.includes("FOLLOWUP-REPLY"), "the follow-up's reply");

    await waitFor((s) => s.trimEnd().endsWith(">"), "the idle prompt");
    type("abort me");
    await waitFor((s) => s.includes("z2 "), "turn 4 streaming");
    tmux("send-keys", "-t", session, "C-c");
    const aborted = await waitFor((s) => s.includes("(turn aborted"), "the aborted turn");
    expect(aborted).toContain("(aborting turn)");
    expect(aborted).not.toContain("z60");

    await waitFor((s) => s.trimEnd().endsWith(">"), "the idle prompt after the abort");
    tmux("send-keys", "-t", session, "C-c");
    const deadline = Date.now() + 20_000;
    while (!existsSync(exitFile) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect((await readFile(exitFile, "utf8")).trim()).toBe("EXIT=0");
    expect(existsSync(`${sessionFile}.lock`)).toBe(false);
  });
});
