/**
 * Exit codes and the one error type every command throws. `main` maps a {@link CliError} to its exit code and prints
 * it as text (`codex-turn: <message>` on stderr) or, with `--json`, as `{ "error": { "code", "message" } }` on stdout.
 */

/**
 * The CLI's exit codes: 0 ok, 1 turn failed (or compaction not ok), 2 usage error, 3 environment/config error,
 * 130 aborted (a signal, Ctrl-C, or a turn that ended aborted/yield-aborted).
 *
 * @example
 * ```ts
 * process.exitCode = EXIT.usage;
 * ```
 */
export const EXIT = { ok: 0, turnFailed: 1, usage: 2, env: 3, blocked: 4, aborted: 130 } as const;

/**
 * Machine-readable error codes of the CLI. The first three are the families; the others are specific causes of an
 * environment error (exit 3) that scripts may want to tell apart.
 */
export type CliErrorCode =
  | "USAGE"
  | "ENV"
  | "TURN_FAILED"
  | "ABORTED"
  | "SESSION_NOT_FOUND"
  | "SESSION_UNREADABLE"
  | "ENGINE_LOAD_FAILED"
  | "ENGINE_TIMEOUT"
  | "PLUGIN_CONFIG_INVALID"
  | "MISSING_PACKAGE"
  | "AUTH_REQUIRED";

/**
 * A CLI failure with the exit code it maps to.
 *
 * @example
 * ```ts
 * throw new CliError("SESSION_NOT_FOUND", "no session file at /tmp/s.jsonl", EXIT.env);
 * ```
 */
export class CliError extends Error {
  constructor(
    readonly code: CliErrorCode,
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
    this.name = "CliError";
  }
}

/** A usage error (exit 2). */
export const usageError = (message: string): CliError => new CliError("USAGE", message, EXIT.usage);

/** An environment/config error (exit 3), optionally with a more specific code. */
export const envError = (message: string, code: CliErrorCode = "ENV"): CliError => new CliError(code, message, EXIT.env);

/**
 * The exit code of a settled turn status.
 *
 * @example
 * ```ts
 * statusExit("aborted"); // 130
 * ```
 */
export function statusExit(status: string): number {
  if (status === "completed") return EXIT.ok;
  if (status === "aborted" || status === "yieldAborted") return EXIT.aborted;
  // Refused by a gate (before_agent_run): not a failure of the turn, but no answer either.
  if (status === "blocked") return EXIT.blocked;
  return EXIT.turnFailed;
}
