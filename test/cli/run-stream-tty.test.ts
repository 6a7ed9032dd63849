/**
 * `codex-turn run` and `codex-turn demo` on a real terminal (tmux panes, 80 columns), against the real app-server and
 * the offline fake model: run's reply is on screen while the model still streams (the state spinner on stderr), and
 * the demo's live state line stays one row, so its redraws leave no stale copies.
 */
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliBin } from "../helpers/cli.js";
import { tmuxDriver } from "../helpers/tmux.js";

const words = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`).join(" ");
const quote = (args: string[]) => args.map((a) => `'${a}'`).join(" ");

let dir: string;
const drivers: Array<ReturnType<typeof tmuxDriver>> = [];
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-run-tty-"));
});
afterAll(async () => {
  for (const d of drivers) d.kill();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function waitExit(exitFile: string): Promise<string> {
  const deadline = Date.now() + 60_000;
  while (!existsSync(exitFile) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  return (await readFile(exitFile, "utf8")).trim();
}

describe("run and demo on a terminal", { timeout: 180_000 }, () => {
  it("run streams the reply as it arrives, before the turn ends", async () => {
    const script = path.join(dir, "script.json");
    await writeFile(script, JSON.stringify([{ text: words("w", 40), delayMs: 120 }]));
    const exitFile = path.join(dir, "run-exit");
    const session = `ctm-run-${process.pid}`;
    const t = tmuxDriver(session);
    drivers.push(t);
    const cmd = quote([process.execPath, cliBin, "run", "count please", "--session", path.join(dir, "run.jsonl"), "--offline", "--offline-script", script]);
    t.tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "40", "-e", "CODEX_TURN_FROM_SOURCE=1", `${cmd}; echo EXIT=$? > '${exitFile}'`);
    const early = await t.waitFor((s) => s.includes("w2 "), "streamed reply text");
    expect(early).not.toContain("w40");
    expect(early).not.toContain("status:");
    const done = await t.waitFor((s) => s.includes("status: completed"), "the end of the turn");
    expect(done).toContain("w40");
    // The reply is shown once (streamed, not printed again at the end).
    expect(done.match(/w40/g)).toHaveLength(1);
    expect(await waitExit(exitFile)).toBe("EXIT=0");
  });

  it("the demo's live line fits 80 columns: one line per turn, no stale copies", async () => {
    const exitFile = path.join(dir, "demo-exit");
    const session = `ctm-demo-${process.pid}`;
    const t = tmuxDriver(session);
    drivers.push(t);
    const cmd = quote([process.execPath, cliBin, "demo", "--out", path.join(dir, "demo")]);
    t.tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "100", "-e", "CODEX_TURN_FROM_SOURCE=1", `${cmd}; echo EXIT=$? > '${exitFile}'; sleep 30`);
    expect(await waitExit(exitFile)).toBe("EXIT=0");
    const screen = t.pane();
    expect(screen).toContain("summary: 5 turns");
    const lines = screen.split("\n");
    for (let n = 1; n <= 5; n++) {
      // The live line of turn n (its states), and the line with its reply.
      const live = lines.filter((l) => l.startsWith(`turn ${n}: `) && !l.startsWith(`turn ${n}: completed`));
      expect(live, `turn ${n}'s live line:\n${screen}`).toHaveLength(1);
      expect(live[0]!.length).toBeLessThan(80);
      expect(lines.filter((l) => l.startsWith(`turn ${n}: completed`))).toHaveLength(1);
    }
    // Nothing on screen is a wrapped row (capture-pane -J joins those into lines wider than the pane).
    for (const l of lines) if (l.includes(" > ")) expect(l.length, l).toBeLessThan(80);
  });
});
