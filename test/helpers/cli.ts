/**
 * The `codex-turn` CLI, spawned through bin/codex-turn.js exactly as a user runs it. CODEX_TURN_FROM_SOURCE=1 makes
 * the bin run src/ (through tsx) even when a dist/ build exists, so tests always exercise the current sources.
 */
import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
/** The CLI's entry point. */
export const cliBin = path.join(repoRoot, "bin", "codex-turn.js");

export interface CliRun {
  /** The exit code (-1 when killed, e.g. by the timeout). */
  code: number;
  stdout: string;
  stderr: string;
}

/** Run the CLI to its end. `cwd` defaults to the repository root; `env` is merged over this process's. */
export function runCli(args: readonly string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string; timeoutMs?: number } = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    const env = { ...process.env, CODEX_TURN_FROM_SOURCE: "1", ...opts.env };
    const child = execFile(process.execPath, [cliBin, ...args], { cwd: opts.cwd ?? repoRoot, env, timeout: opts.timeoutMs ?? 120_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}


