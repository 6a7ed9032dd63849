/**
 * `codex-turn chat --approve ask` on a real terminal (a tmux pane), against the real app-server and the offline fake
 * model scripted to have Codex run a shell command under `--approval-policy untrusted`: the request is shown as a
 * question, the line typed answers it (not a steer), the command runs only when approved, and no lock is left.
 */
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tmuxDriver } from "../helpers/tmux.js";
import { cliBin } from "../helpers/cli.js";

const session = `ctm-chat-ask-${process.pid}`;

const { tmux, pane, type, waitFor, kill } = tmuxDriver(session);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-chat-ask-"));
});
afterAll(async () => {
  kill();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("chat --approve ask on a terminal", { timeout: 240_000 }, () => {
  it("shows each approval request as a question; the typed answer decides whether the command runs", async () => {
    const ws = await mkdtemp(path.join(dir, "ws-"));
    const exec = (file: string) => ({ functionCall: { name: "exec_command", arguments: { cmd: `echo RAN > ${file}`, workdir: ws } } });
    const script = path.join(dir, "script.json");
    await writeFile(script, JSON.stringify([exec("first.txt"), { text: "FIRST-DONE" }, exec("second.txt"), { text: "SECOND-DONE" }]));
    const sessionFile = path.join(dir, "chat.jsonl");
    const exitFile = path.join(dir, "exit");
    const args = ["chat", "--session", sessionFile, "--offline", "--offline-script", script, "--cwd", ws, "--sandbox", "workspace-write"];
    const cmd = [process.execPath, cliBin, ...args, "--approval-policy", "untrusted", "--approve", "ask"].map((a) => `'${a}'`).join(" ");
    // A HOME of its own keeps the machine's shell startup files out of the sandboxed command.
    tmux("new-session", "-d", "-s", session, "-x", "220", "-y", "60", "-e", "CODEX_TURN_FROM_SOURCE=1", "-e", `HOME=${dir}`, `${cmd}; echo EXIT=$? > '${exitFile}'`);
    await waitFor((s) => s.includes("> "), "the prompt");

    type("write the first file");
    const asked = await waitFor((s) => s.includes("approve? [y]es / [s]ession / [N]o"), "the first question");
    expect(asked).toMatch(/approval commandExecution: run ".*echo RAN > first\.txt.*" in .* -- approve\?/);
    expect(existsSync(path.join(ws, "first.txt"))).toBe(false); // Codex waits for the answer
    type("y");
    await waitFor((s) => s.includes("FIRST-DONE"), "the first reply");
    const afterFirst = pane();
    expect(afterFirst).toMatch(/first\.txt.* -> approve/);
    expect(afterFirst).not.toContain("(steer sent)"); // the answer was not a steer
    expect(await readFile(path.join(ws, "first.txt"), "utf8")).toBe("RAN\n");

    await waitFor((s) => s.trimEnd().endsWith(">"), "the idle prompt");
    type("write the second file");
    await waitFor((s) => /second\.txt.* -- approve\?/.test(s), "the second question");
    type("n");
    await waitFor((s) => s.includes("SECOND-DONE"), "the second reply");
    expect(pane()).toMatch(/second\.txt.* -> deny/);
    expect(existsSync(path.join(ws, "second.txt"))).toBe(false);

    await waitFor((s) => s.trimEnd().endsWith(">"), "the idle prompt after the second turn");
    tmux("send-keys", "-t", session, "C-c");
    const deadline = Date.now() + 20_000;
    while (!existsSync(exitFile) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect((await readFile(exitFile, "utf8")).trim()).toBe("EXIT=0");
    expect(existsSync(`${sessionFile}.lock`)).toBe(false);
  });
});
