/**
 * CLI conventions, through bin/codex-turn.js as a user runs it: --version, per-command help with option descriptions,
 * usage errors (exit 2) for excess arguments, honest exit 3 for missing or unreadable sessions, errors as JSON with
 * --json, a bounded engine load, and SIGINT during `run` (exit 130, no lock left).
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliBin, repoRoot, runCli } from "../helpers/cli.js";

const root = repoRoot;
const bin = cliBin;
const env = { ...process.env, CODEX_TURN_FROM_SOURCE: "1" };

const cli = (args: string[]) => runCli(args);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-conv-"));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

// Generous bounds: each case spawns the CLI through tsx, which takes seconds on a shared, loaded machine.
describe("conventions", { timeout: 180_000 }, () => {
  it("--version prints the package version", async () => {
    const pkg = JSON.parse(await readFile(path.join(root, "package.json"), "utf8")) as { version: string };
    const r = await cli(["--version"]);
    expect(r).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
  });

  it("run --help and help run print the command's options with descriptions", async () => {
    for (const args of [["run", "--help"], ["help", "run"]]) {
      const r = await cli(args);
      expect(r.code, args.join(" ")).toBe(0);
      expect(r.stdout).toContain("Usage: codex-turn run [options] <prompt>");
      expect(r.stdout).toMatch(/--session <file>\s+pi session JSONL transcript/);
      expect(r.stdout).toMatch(/--budget <tokens>\s+context token budget/);
      expect(r.stdout).toMatch(/--engine-timeout <ms>/);
    }
  });

  it("too many positionals is a usage error (exit 2), as text and as JSON", async () => {
    const session = path.join(dir, "never.jsonl");
    const r = await cli(["run", "a", "b", "--session", session, "--offline"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("too many arguments for 'run'");
    const j = await cli(["run", "a", "b", "--session", session, "--offline", "--json"]);
    expect(j.code).toBe(2);
    expect(JSON.parse(j.stdout)).toEqual({ error: { code: "USAGE", message: expect.stringContaining("too many arguments") } });
    expect(existsSync(session)).toBe(false);
  });

  it("compact and inspect-session on a missing session exit 3 with a clear message", async () => {
    const compact = await cli(["compact", "--session", "/nonexistent", "--offline"]);
    expect(compact.code).toBe(3);
    expect(compact.stderr).toBe("codex-turn: no session file at /nonexistent\n");
    const inspect = await cli(["inspect-session", "/nonexistent"]);
    expect(inspect.code).toBe(3);
    expect(inspect.stderr).toBe("codex-turn: no session file at /nonexistent\n");
    const json = await cli(["inspect-session", "/nonexistent", "--json"]);
    expect(JSON.parse(json.stdout)).toEqual({ error: { code: "SESSION_NOT_FOUND", message: "no session file at /nonexistent" } });
  });

  it("compact and inspect-session on a file that is not a transcript exit 3", async () => {
    const garbage = path.join(dir, "garbage.jsonl");
    await writeFile(garbage, "this is not a transcript\n");
    for (const args of [["compact", "--session", garbage, "--offline", "--json"], ["inspect-session", garbage, "--json"]]) {
      const r = await cli(args);
      expect(r.code, args[0]).toBe(3);
      expect(JSON.parse(r.stdout)).toMatchObject({ error: { code: "SESSION_UNREADABLE" } });
    }
  });

  it("an engine factory that never resolves exits 3 after --engine-timeout", async () => {
    const hang = path.join(dir, "hang-engine.mjs");
    await writeFile(hang, "export function createContextEngine() { return new Promise(() => {}); }\n");
    const r = await cli(["run", "hi", "--session", path.join(dir, "hang.jsonl"), "--offline", "--engine", hang, "--engine-timeout", "1500", "--json"]);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toEqual({
      error: { code: "ENGINE_TIMEOUT", message: `--engine ${hang}: the engine did not load within 1500 ms (--engine-timeout)` },
    });
  });

  it("config-file options refuse a FIFO, a device and an oversized file with exit 3 (at once, nothing read)", async () => {
    const fifo = path.join(dir, "config.fifo");
    execFileSync("mkfifo", [fifo]);
    const big = path.join(dir, "big.json");
    await writeFile(big, `{"x":"${"y".repeat(9 * 1024 * 1024)}"}`);
    const session = path.join(dir, "cfg.jsonl");
    for (const [flag, file, reason] of [
      ["--plugin-config", fifo, "not a regular file (a FIFO)"],
      ["--plugin-config", "/dev/zero", "not a regular file (a character device)"],
      ["--plugins-config", big, "larger than 8388608 bytes"],
      ["--offline-script", fifo, "not a regular file (a FIFO)"],
    ] as const) {
      const engine = flag === "--offline-script" ? [] : ["--engine", path.join(root, "test/fixtures/openclaw-plugins/summarizer")];
      const r = await cli(["run", "hi", "--session", session, "--offline", ...engine, flag, file]);
      expect(r.code, `${flag} ${file}`).toBe(3);
      expect(r.stderr, `${flag} ${file}`).toContain(reason);
    }
    expect(existsSync(session)).toBe(false);
  });

  it("an integer option above 2^31-1 is a usage error (Node would clamp the timer to 1 ms)", async () => {
    const r = await cli(["run", "hi", "--session", path.join(dir, "big-timeout.jsonl"), "--offline", "--engine-timeout", "99999999999"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--engine-timeout");
    expect(r.stderr).toContain("must be at most 2147483647");
  });

  it("viz without --out writes under the OS temp dir and prints the path", async () => {
    const r = await cli(["viz", "--json"]);
    expect(r.code).toBe(0);
    const { file } = JSON.parse(r.stdout) as { file: string };
    expect(path.dirname(path.dirname(file))).toBe(os.tmpdir());
    expect(existsSync(file)).toBe(true);
    expect(existsSync(path.join(root, "statecharts.html"))).toBe(false);
    await rm(path.dirname(file), { recursive: true, force: true });
  });

  it("SIGINT during run aborts the turn, exits 130 and leaves no lock", async () => {
    const script = path.join(dir, "slow.json");
    await writeFile(script, JSON.stringify([{ text: Array.from({ length: 80 }, (_, i) => `s${i}`).join(" "), delayMs: 100 }]));
    const session = path.join(dir, "sigint.jsonl");
    const child = spawn(process.execPath, [bin, "run", "go", "--session", session, "--offline", "--offline-script", script, "--json"], { cwd: root, env });
    let stdout = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    // The lock directory exists while the turn runs; signal then.
    const deadline = Date.now() + 90_000;
    while (!existsSync(`${session}.lock`) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 1500));
    child.kill("SIGINT");
    const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
    expect(code).toBe(130);
    expect(JSON.parse(stdout)).toMatchObject({ status: "aborted" });
    expect(existsSync(`${session}.lock`)).toBe(false);
  });
});
