/**
 * Session-file checks for commands that read an existing session (`compact`, `inspect-session`): a missing or
 * unreadable file is an environment error (exit 3) with a clear message, never an empty success.
 */
import { open, stat } from "node:fs/promises";
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

/** The session id the CLI gives a new session file: its base name without extension. */
export function sessionIdOf(sessionFile: string): string {
  return path.basename(sessionFile, path.extname(sessionFile));
}

/**
 * The session id the CLI uses for a session file: the one its transcript's header names (a `/new` or `/reset` gives
 * the session a fresh one, as OpenClaw does), else {@link sessionIdOf}. Reads only the first line.
 *
 * @example
 * ```ts
 * await cliSessionId("/data/s1.jsonl"); // "s1", or the id a /new wrote into the header
 * ```
 */
export async function cliSessionId(sessionFile: string): Promise<string> {
  let first = "";
  try {
    const handle = await open(sessionFile, "r");
    try {
      const buf = Buffer.alloc(64 * 1024);
      const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
      first = buf.subarray(0, bytesRead).toString("utf8").split("\n", 1)[0] ?? "";
    } finally {
      await handle.close();
    }
  } catch {
    return sessionIdOf(sessionFile);
  }
  try {
    const header = JSON.parse(first) as { type?: unknown; id?: unknown };
    if (header.type === "session" && typeof header.id === "string" && header.id.length > 0) return header.id;
  } catch {
    // Not a header: the turn reports the transcript's problem.
  }
  return sessionIdOf(sessionFile);
}
