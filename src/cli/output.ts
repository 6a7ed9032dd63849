/**
 * Where a command's output goes. `--json` keeps stdout machine-readable: one JSON document per line, errors included
 * (`{ "error": { "code", "message" } }`), and human notes (inspector URL, hints) go to stderr instead.
 */
import { CliError, EXIT } from "./errors.js";

/** A command's output channel. */
export interface Out {
  /** Whether `--json` was given. */
  readonly json: boolean;
  /** One line of human text on stdout (nothing in JSON mode). */
  text(line: string): void;
  /** One JSON line on stdout. */
  record(value: unknown): void;
  /** A human note: stdout in text mode, stderr in JSON mode (so stdout stays parseable). */
  note(line: string): void;
}

/**
 * An output channel over the given streams (the process's by default).
 *
 * @example
 * ```ts
 * const out = createOut(true);
 * out.record({ status: "completed" }); // {"status":"completed"}
 * ```
 */
export function createOut(
  json: boolean,
  stdout: NodeJS.WritableStream = process.stdout,
  stderr: NodeJS.WritableStream = process.stderr,
): Out {
  return {
    json,
    text: (line) => {
      if (!json) stdout.write(`${line}\n`);
    },
    record: (value) => {
      stdout.write(`${JSON.stringify(value)}\n`);
    },
    note: (line) => {
      (json ? stderr : stdout).write(`${line}\n`);
    },
  };
}

/**
 * Prints an error the way the CLI reports it and returns its exit code: a {@link CliError} keeps its code and exit
 * code; anything else is an unexpected error (`ENV`, exit 3) shown with its stack in text mode.
 *
 * @example
 * ```ts
 * return reportError(err, argv.includes("--json"));
 * ```
 */
export function reportError(err: unknown, json: boolean): number {
  const known = err instanceof CliError;
  const code = known ? err.code : "ENV";
  const message = known ? err.message : err instanceof Error ? err.message : String(err);
  if (json) process.stdout.write(`${JSON.stringify({ error: { code, message } })}\n`);
  else if (known) process.stderr.write(`codex-turn: ${message}\n`);
  else process.stderr.write(`codex-turn: ${(err as Error)?.stack ?? String(err)}\n`);
  return known ? err.exitCode : EXIT.env;
}
