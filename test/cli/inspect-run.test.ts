/**
 * A whole `codex-turn run --inspect` against the offline live view, and the inspector's keep-alive (`--inspect-wait`):
 * the CLI prints the inspector's URL before the turn, streams the turn's machine events (redacted) to a receiver on its
 * WebSocket while the turn runs, serves our own live statechart view at `/live`, and after the turn keeps serving for
 * the given seconds, then exits by itself. The hosted UI the bridge page embeds points at a closed loopback port, so
 * nothing leaves 127.0.0.1.
 */
import { spawn } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";
import { createWebSocketReceiver, type StatelyInspectionEvent } from "@statelyai/inspect";
import { describe, expect, it } from "vitest";
import { cliBin } from "../helpers/cli.js";
import { testTempDir } from "../helpers/temp-dir.js";

const SECRET = "SECRET-PROMPT-inspect-5521";

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("run --inspect", () => {
  it("streams the turn to the live view, serves it, keeps serving --inspect-wait seconds after the turn, then exits", async () => {
    const dir = await testTempDir("ctm-inspect-run-");
    // A slow model (each SSE event delayed) leaves time to connect before the turn ends.
    await writeFile(path.join(dir, "slow.json"), JSON.stringify([{ text: "slow offline reply", delayMs: 150 }]));
    const args = ["run", SECRET, "--session", path.join(dir, "s.jsonl"), "--offline", "--json", "--offline-script", path.join(dir, "slow.json"), "--inspect", "--inspect-wait", "3", "--inspect-ui-url", `http://127.0.0.1:${await closedPort()}/`];
    const child = spawn(process.execPath, [cliBin, ...args], { cwd: dir, env: { ...process.env, CODEX_TURN_FROM_SOURCE: "1" }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.on("exit", (code) => resolve({ code, at: Date.now() })));
    const received: StatelyInspectionEvent[] = [];
    let servingAt = 0;
    let livePage = "";
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no inspector URL; stderr: ${stderr}`)), 60_000);
      child.stderr.on("data", (c: Buffer) => {
        stderr += c.toString();
        const m = /inspector: (http:\/\/127\.0\.0\.1:\d+\/)\n/.exec(stderr);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
        if (!servingAt && /inspector: still serving .* for 3 s/.test(stderr)) servingAt = Date.now();
      });
    });
    createWebSocketReceiver({ server: url.replace("http", "ws").replace(/\/$/, "") }).subscribe((ev) => received.push(ev));
    // The keep-alive: after the turn, the page and its live view still answer.
    while (!servingAt) {
      if (child.exitCode !== null) throw new Error(`exited before the keep-alive; stderr: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    livePage = await (await fetch(`${url}live`)).text();
    const bridge = await (await fetch(url)).text();
    const { code, at } = await exited;
    expect(code, stderr).toBe(0);
    // It waited about the seconds asked (the timer starts as the note is printed), then left by itself.
    expect(at - servingAt).toBeGreaterThanOrEqual(2_500);
    expect(at - servingAt).toBeLessThan(15_000);
    expect(JSON.parse(stdout.trim().split("\n").at(-1)!)).toMatchObject({ status: "completed", assistantText: "slow offline reply" });
    expect(livePage).toContain("codex-turn-machine (live, offline view)");
    expect(bridge).toContain(url.replace("http", "ws").replace(/\/$/, ""));
    // The turn's machine reached the receiver, its prompt redacted.
    expect(received.filter((e) => e.type === "@xstate.snapshot").length).toBeGreaterThan(0);
    expect(JSON.stringify(received)).not.toContain(SECRET);
  }, 120_000);
});
