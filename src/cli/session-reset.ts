/**
 * `/new` and `/reset`, OpenClaw's chat commands that start a fresh session, at the CLI (`chat`, and `run "/new"`): the
 * plugins' `before_reset` hears of it with the transcript's messages (lossless-claw prunes or archives its conversation
 * there), the session's transcript is archived and its Codex thread binding cleared (`resetCodexSession`), then
 * `session_end` (with the reason, the archived file and the session that follows) and `session_start` for the fresh
 * session on the same file. The fresh session gets a new id (`<file's base name>-<uuid>`, written into the new
 * transcript's header, which later runs read), as OpenClaw gives one. Text after the command is the fresh session's
 * first prompt.
 */
import { randomUUID } from "node:crypto";
import type { SessionStore } from "../store/session-store.js";
import { resetCodexSession } from "../transcript/reset.js";
import { readSessionTranscript } from "../transcript/session-file.js";
import type { LoadedEngine } from "./engine.js";
import type { Out } from "./output.js";
import { sessionIdOf } from "./session-file.js";

/** OpenClaw's reset triggers. */
export type SessionResetAction = "new" | "reset";

/** How long the CLI waits for the plugins' reset hooks (OpenClaw does not wait at all; a CLI must not exit first). */
const RESET_HOOK_TIMEOUT_MS = 30_000;

/**
 * The reset a line asks for (`/new`, `/reset`, optionally followed by the first prompt), or undefined.
 *
 * @example
 * ```ts
 * sessionResetCommand("/new let's start over"); // { action: "new", rest: "let's start over" }
 * sessionResetCommand("/newsletter"); // undefined
 * ```
 */
export function sessionResetCommand(line: string): { action: SessionResetAction; rest: string } | undefined {
  const m = /^\/(new|reset)(?:\s+([\s\S]*))?$/.exec(line.trim());
  return m ? { action: m[1] as SessionResetAction, rest: (m[2] ?? "").trim() } : undefined;
}

async function bounded(what: string, run: () => Promise<void>, warn: (line: string) => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([run(), new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${RESET_HOOK_TIMEOUT_MS} ms`)), RESET_HOOK_TIMEOUT_MS)))]);
  } catch (error) {
    warn(`warning: ${what}: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Reset the session of `sessionFile` as OpenClaw's `/new` / `/reset` do (see the module comment). A plugin hook that
 * fails or hangs is a printed warning; a reset that cannot be done (the lock, the file system) rejects.
 *
 * @example
 * ```ts
 * await resetCliSession({ loaded, sessionFile, sessionId: "s1", action: "reset" }, out, (l) => out.text(l));
 * ```
 */
export async function resetCliSession(
  p: {
    loaded: LoadedEngine;
    sessionFile: string;
    sessionId: string;
    sessionKey?: string | undefined;
    action: SessionResetAction;
    cwd?: string | undefined;
    /** A session in another store (`--pg`): read and reset through it; `base` names its fresh ids. */
    store?: { store: SessionStore; base: string } | undefined;
  },
  out: Out,
  say: (line: string) => void,
): Promise<{ archivedTo?: string | undefined; sessionId: string }> {
  const keys = { sessionId: p.sessionId, ...(p.sessionKey !== undefined ? { sessionKey: p.sessionKey } : {}) };
  // A new session id, as OpenClaw gives a reset session: an engine keyed by session (lossless-claw 1.x) must not take
  // the fresh transcript for the old session's, starting over.
  const nextSessionId = `${p.store ? p.store.base : sessionIdOf(p.sessionFile)}-${randomUUID()}`;
  const messages = p.store
    ? (await p.store.store.readVisibleEntries()).map((e) => e.message)
    : (await readSessionTranscript(p.sessionFile)).entries.filter((e) => e.type === "message").map((e) => e["message"]);
  if (p.loaded.beforeReset) await bounded("before_reset", () => p.loaded.beforeReset!({ ...keys, sessionFile: p.sessionFile, messages, reason: p.action }), say);
  const reset = await resetCodexSession({
    ...(p.store ? { store: p.store.store } : { sessionFile: p.sessionFile }),
    archiveTranscript: true,
    nextSessionId,
    ...(p.cwd !== undefined ? { cwd: p.cwd } : {}),
  });
  const archived = reset.archivedTo !== undefined;
  // No transcript to archive: nothing was written, and the session keeps its id.
  const sessionId = reset.sessionId ?? p.sessionId;
  const nextKeys = { ...keys, sessionId };
  if (p.loaded.sessionEnd) {
    await bounded(
      "session_end",
      () =>
        p.loaded.sessionEnd!({
          ...keys,
          messageCount: messages.length,
          reason: p.action,
          sessionFile: reset.archivedTo ?? p.sessionFile,
          transcriptArchived: archived,
          nextSessionId: sessionId,
          ...(p.sessionKey !== undefined ? { nextSessionKey: p.sessionKey } : {}),
        }),
      say,
    );
  }
  if (p.loaded.sessionStart) await bounded("session_start", () => p.loaded.sessionStart!(nextKeys), say);
  if (reset.pendingFinalize > 0) say(`warning: ${reset.pendingFinalize} crashed turn(s) of the previous session are still to be finalized; the next turn completes them first`);
  if (out.json) out.record({ command: `/${p.action}`, sessionReset: { reason: p.action, ...(archived ? { archivedTo: reset.archivedTo } : {}) } });
  else say(archived ? `(new session; the previous transcript is at ${reset.archivedTo})` : "(new session)");
  return archived ? { archivedTo: reset.archivedTo!, sessionId } : { sessionId };
}
