/**
 * Session-file checks for commands that read an existing session (`compact`, `inspect-session`): a missing or
 * unreadable file is an environment error (exit 3) with a clear message, never an empty success.
 */
import { stat } from "node:fs/promises";
import path from "node:path";
import { readSessionTranscript } from "../transcript/session-file.js";
import { envError } from "./errors.js";

/**
 * Resolves `file` and checks that it is an existing, readable pi session transcript.
 *
 * @example
 * ```ts
 * const sessionFile = await requireExistingSession(opts.session); // throws CliError SESSION_NOT_FOUND (exit 3)
 * ```
 */
export async function requireExistingSession(file: string): Promise<string> {
  const abs = path.resolve(file);
  let isFile: boolean;
  try {
    isFile = (await stat(abs)).isFile();
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === "ENOENT" || code === "ENOTDIR") throw envError(`no session file at ${abs}`, "SESSION_NOT_FOUND");
    throw envError(`cannot read session file ${abs}: ${(err as Error).message}`, "SESSION_UNREADABLE");
  }
  if (!isFile) throw envError(`session ${abs} is not a file`, "SESSION_UNREADABLE");
  try {
    const t = await readSessionTranscript(abs);
    if (!t.exists) throw new Error("no session header");
  } catch (err) {
    throw envError(`cannot read session file ${abs}: ${(err as Error).message}`, "SESSION_UNREADABLE");
  }
  return abs;
}

/** The session id the CLI uses for a session file: its base name without extension. */
export function sessionIdOf(sessionFile: string): string {
  return path.basename(sessionFile, path.extname(sessionFile));
}
