/**
 * `codex-turn run` doing real work: `--cwd`, `--sandbox`, `--approval-policy` and `--approve`, spawned as a user runs
 * it, against the real app-server and the offline fake model, which is scripted (`--offline-script`) to have Codex
 * run a shell command that writes a file. The file exists exactly when the CLI's answer approved the command.
 */
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, runCli } from "../helpers/cli.js";

const root = repoRoot;

// A HOME of its own keeps the machine's shell startup files out of the sandboxed command.
const cli = (args: string[]) => runCli(args, { env: { HOME: dir } });

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-cli-work-"));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A script: the model runs `echo CLI-RAN > <file>` in `ws`, then answers. */
async function writeScript(ws: string, file: string): Promise<string> {
  const script = path.join(dir, `${path.basename(file)}.script.json`);
  const call = { name: "exec_command", arguments: { cmd: `echo CLI-RAN > ${file}`, workdir: ws } };
  await writeFile(script, JSON.stringify([{ functionCall: call }, { text: "done" }]));
  return script;
}

describe("codex-turn run --cwd --sandbox --approval-policy --approve", () => {
  it("the command runs when --approve approves it and not when it denies; each request is printed", async () => {
    for (const answer of ["approve", "deny"] as const) {
      const ws = await mkdtemp(path.join(dir, `ws-${answer}-`));
      const marker = path.join(ws, "out.txt");
      const script = await writeScript(ws, marker);
      const session = path.join(dir, `work-${answer}.jsonl`);
      const args = ["run", "write the file", "--session", session, "--offline", "--offline-script", script, "--json"];
      const r = await cli([...args, "--cwd", ws, "--sandbox", "workspace-write", "--approval-policy", "untrusted", "--approve", answer]);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!)).toMatchObject({ status: "completed", assistantText: "done" });
      // Asked once, printed (stderr with --json), answered as told.
      expect(r.stderr).toMatch(new RegExp(`approval commandExecution: run ".*CLI-RAN.*" in ${ws} -> ${answer}`));
      expect(existsSync(marker)).toBe(answer === "approve");
      if (answer === "approve") expect(await readFile(marker, "utf8")).toBe("CLI-RAN\n");
    }
  }, 240_000);

  it("without --approve the CLI denies (the default); a --cwd that is not a directory exits 3 before any work", async () => {
    const ws = await mkdtemp(path.join(dir, "ws-default-"));
    const marker = path.join(ws, "out.txt");
    const script = await writeScript(ws, marker);
    const session = path.join(dir, "work-default.jsonl");
    const r = await cli(["run", "go", "--session", session, "--offline", "--offline-script", script, "--cwd", ws, "--sandbox", "workspace-write", "--approval-policy", "untrusted"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("-> deny");
    expect(existsSync(marker)).toBe(false);

    const missing = await cli(["run", "go", "--session", session, "--offline", "--cwd", path.join(dir, "no-such-dir"), "--json"]);
    expect(missing.code).toBe(3);
    expect(missing.stdout).toContain("not an existing directory");
    const bad = await cli(["run", "go", "--session", session, "--offline", "--sandbox", "everything"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--sandbox");
    // Nobody can answer a question in `run`: `ask` is chat's.
    const ask = await cli(["run", "go", "--session", path.join(dir, "ask.jsonl"), "--offline", "--approve", "ask"]);
    expect(ask.code).toBe(2);
    expect(ask.stderr).toContain("--approve ask needs someone to answer: use it with chat");
    expect(existsSync(path.join(dir, "ask.jsonl"))).toBe(false);
  }, 240_000);
});
