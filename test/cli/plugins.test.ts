/**
 * OpenClaw plugins through the CLI (issue 17): `run --offline --engine` with a plugin directory that exports the full
 * plugin object, with an installed package (by name, resolved from the working directory) that exports `register`
 * alone, and plugins that cannot be loaded (a bad manifest, an unmet host requirement): exit 3 with one line.
 */
import { existsSync } from "node:fs";
import { cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, runCli } from "../helpers/cli.js";

const root = repoRoot;
const fixture = (name: string) => path.join(root, "test", "fixtures", "openclaw-plugins", name);

const cli = (args: string[], cwd: string) => runCli(args, { cwd, timeoutMs: 180_000 });

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-cli-plugins-"));
  // An installed plugin package, found by name from this working directory.
  await mkdir(path.join(dir, "node_modules"), { recursive: true });
  await cp(fixture("register-only"), path.join(dir, "node_modules", "ctm-register-only-plugin"), { recursive: true });
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("codex-turn with OpenClaw plugins", () => {
  it("runs a turn with a plugin directory (full plugin object) and with an installed package by name (register alone)", async () => {
    const [byPath, byName] = await Promise.all([
      cli(["run", "hello plugin", "--session", path.join(dir, "a.jsonl"), "--offline", "--engine", fixture("summarizer"), "--budget", "1200", "--json"], dir),
      cli(["run", "hello package", "--session", path.join(dir, "b.jsonl"), "--offline", "--engine", "ctm-register-only-plugin", "--json"], dir),
    ]);
    for (const r of [byPath, byName]) {
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!)).toMatchObject({ status: "completed" });
    }
  }, 240_000);

  it("compact --engine hands the plugin's compact() the plugin host's runtime context and the transcript rewrite helper", async () => {
    const session = path.join(dir, "compact.jsonl");
    const run = await cli(["run", "a first turn", "--session", session, "--offline", "--engine", fixture("summarizer"), "--json"], dir);
    expect(run.code, run.stderr).toBe(0);
    const r = await cli(["compact", "--session", session, "--offline", "--engine", fixture("summarizer"), "--json"], dir);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { primary: string; result: { details: { runtimeContext: unknown } } };
    expect(out.primary).toBe("engine");
    expect(out.result.details.runtimeContext).toEqual({ provider: "codex", hasLlm: true, hasRewrite: true });
  }, 240_000);

  it("with --native-tool-hooks a plugin blocks Codex's own shell command and gets its final-answer revision; without, neither", async () => {
    for (const guarded of [true, false]) {
      const ws = await mkdtemp(path.join(dir, `guard-${guarded}-`));
      const script = path.join(ws, "script.json");
      const exec = (file: string) => ({ functionCall: { name: "exec_command", arguments: { cmd: `echo x > ${file}`, workdir: ws } } });
      await writeFile(script, JSON.stringify([exec("allowed.txt"), exec("forbidden.txt"), { text: "done" }, { text: "done. Summary: one file written" }]));
      const args = ["run", "write both", "--session", path.join(ws, "s.jsonl"), "--offline", "--offline-script", script, "--engine", fixture("tool-guard")];
      const r = await runCli([...args, "--cwd", ws, "--sandbox", "workspace-write", ...(guarded ? ["--native-tool-hooks"] : []), "--json"], { cwd: dir, env: { HOME: ws } });
      expect(r.code, r.stderr).toBe(0);
      const expected = guarded ? "done. Summary: one file written" : "done";
      expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!)).toMatchObject({ status: "completed", assistantText: expected });
      expect(existsSync(path.join(ws, "allowed.txt"))).toBe(true);
      expect(existsSync(path.join(ws, "forbidden.txt"))).toBe(!guarded);
    }
  }, 240_000);

  it("a bad manifest and an unmet host requirement exit 3 with a one-line error", async () => {
    const results = await Promise.all(
      ["bad-manifest", "unmet-requirement"].map((name) =>
        cli(["run", "never runs", "--session", path.join(dir, `${name}.jsonl`), "--offline", "--engine", fixture(name)], dir),
      ),
    );
    for (const r of results) {
      expect(r.code).toBe(3);
      const lines = r.stderr.trim().split("\n").filter((l) => l.trim().length > 0);
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).not.toMatch(/^\s+at /);
    }
  }, 240_000);
});
