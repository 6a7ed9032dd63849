/**
 * What the CLI says about itself that the documentation says too: its exit codes and the environment variables it
 * reads. `--help` renders these; test/cli/reference.test.ts checks that README.md and docs/cli.md say the same.
 */
import { EXIT } from "./errors.js";

/** Each exit code and what it means, in the order they are listed. */
export const EXIT_CODE_DOCS: ReadonlyArray<{ code: number; meaning: string }> = [
  { code: EXIT.ok, meaning: "ok" },
  { code: EXIT.turnFailed, meaning: "turn failed (or compaction not ok)" },
  { code: EXIT.usage, meaning: "usage error" },
  { code: EXIT.env, meaning: "environment/config error (no Codex login or API key, a missing session or directory, an engine that cannot load)" },
  { code: EXIT.blocked, meaning: "turn refused by a gate (before_agent_run)" },
  { code: EXIT.aborted, meaning: "aborted (Ctrl-C, SIGINT, SIGTERM)" },
];

/** The environment variables the CLI reads or passes to Codex, and what each does. */
export const ENV_VAR_DOCS: ReadonlyArray<{ name: string; meaning: string }> = [
  { name: "CODEX_HOME", meaning: "Codex's home for live runs (login, config.toml); default ~/.codex" },
  { name: "OPENAI_API_KEY", meaning: "an API key for live runs instead of `npx codex login`; passed to Codex" },
  { name: "HTTPS_PROXY", meaning: "with HTTP_PROXY, NO_PROXY, SSL_CERT_FILE, SSL_CERT_DIR: passed to Codex for its network" },
  { name: "CODEX_TURN_FROM_SOURCE", meaning: "1: a checkout runs src/ through tsx even when dist/ exists" },
  { name: "CODEX_TURN_PG_URL", meaning: "a PostgreSQL URL: as --pg, sessions live in that database (--session names the id)" },
];

/**
 * The exit codes in one line, as `--help` ends with it and README.md quotes it.
 *
 * @example
 * ```ts
 * exitCodesLine(); // "Exit codes: 0 ok, 1 turn failed (or compaction not ok), 2 usage error, ..."
 * ```
 */
export function exitCodesLine(): string {
  return `Exit codes: ${EXIT_CODE_DOCS.map((e) => `${e.code} ${e.meaning}`).join(", ")}.`;
}

/**
 * The environment variables, one per line, as `--help` lists them.
 *
 * @example
 * ```ts
 * environmentLines()[0]; // "  CODEX_HOME  Codex's home for live runs (login, config.toml); default ~/.codex"
 * ```
 */
export function environmentLines(): string[] {
  const width = Math.max(...ENV_VAR_DOCS.map((e) => e.name.length));
  return ENV_VAR_DOCS.map((e) => `  ${e.name.padEnd(width)}  ${e.meaning}`);
}
