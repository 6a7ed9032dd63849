/**
 * Reset a session's Codex state: forget the thread binding (the next turn starts a fresh thread) and optionally
 * archive the transcript. Nothing is deleted except the binding: the transcript is renamed, never removed, and the
 * pending-finalize record stays so the turn it names is still finalized (exactly once) before anything else.
 */
import { promises as fsp } from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import { silentLogger } from "../log/logger.js";
import { SessionFileError } from "./errors.js";
import { withSessionLock, withSessionLockUnlessHeld, type SessionLockOptions } from "./lock.js";
import { sessionSidecarPaths } from "./paths.js";
import { listPendingFinalize } from "./pending.js";
import { errCode, resolveSessionPath } from "./resolve.js";
import { invalidateSessionIndex } from "./session-file.js";
import { fsyncDirectory } from "./fsync-dir.js";
import { SESSION_FORMAT_VERSION } from "./entries.js";
import { createSmallFile } from "./small-file.js";
import { discardedName } from "./discard.js";
import type { SessionStore, SessionStoreLock } from "../store/session-store.js";

/** Parameters of {@link resetCodexSession}. */
export interface ResetCodexSessionParams {
  /** The transcript; optional with `store` (then `store.sessionFile`, which it must equal when given). */
  sessionFile?: string | undefined;
  /**
   * The session's store: the reset is its `reset()`, under its lock (default: the JSONL store of `sessionFile`, as
   * files). `sessionRoot` applies to `sessionFile` only.
   */
  store?: SessionStore | undefined;
  /** Rename the transcript to `<file>.archived-<n>.jsonl` (next free n). Default false. */
  archiveTranscript?: boolean | undefined;
  /**
   * The session id the session goes on with (OpenClaw gives a reset session a new one): with `archiveTranscript`, a
   * fresh transcript holding only a header that names it is created in the old one's place, so whoever runs the next
   * turn reads the new id from it. Engines that key their memory by session (lossless-claw 1.x) then see a new session
   * instead of the old one's transcript starting over.
   */
  nextSessionId?: string | undefined;
  /** Header cwd of that fresh transcript (default: the process's cwd). */
  cwd?: string | undefined;
  sessionRoot?: string | undefined;
  logger?: Logger | undefined;
  /** true: the caller holds the session lock. false: always take it. Omitted: take it unless this call chain holds it. */
  locked?: boolean | undefined;
  lock?: Omit<SessionLockOptions, "logger"> | undefined;
}

/** What {@link resetCodexSession} did. */
export interface ResetCodexSessionResult {
  /** A binding sidecar existed and was removed. */
  bindingCleared: boolean;
  /** Where the transcript went, when archived. */
  archivedTo?: string | undefined;
  /** Pending-finalize records left in place (finalize them before the next turn). */
  pendingFinalize: number;
  /** The id the fresh transcript's header names, when `nextSessionId` was given and the transcript archived. */
  sessionId?: string | undefined;
}

const ParamsSchema = z.object({
  sessionFile: z.string().min(1).optional(),
  store: z
    .custom<SessionStore>((v) => typeof v === "object" && v !== null && typeof (v as SessionStore).reset === "function" && typeof (v as SessionStore).acquireLock === "function", "store must be a SessionStore")
    .optional(),
  archiveTranscript: z.boolean().optional(),
  sessionRoot: z.string().min(1).optional(),
  logger: z.any().optional(),
  locked: z.boolean().optional(),
  lock: z.any().optional(),
  nextSessionId: z.string().min(1).optional(),
  cwd: z.string().min(1).optional(),
});

/** Move `from` to the first free `<from>.archived-<n>.jsonl` without ever overwriting (link + unlink; rename where links are unsupported). */
async function archive(from: string, reported: string): Promise<string | undefined> {
  try {
    const st = await fsp.lstat(from);
    if (st.isDirectory()) {
      throw new SessionFileError("SESSION_PATH_IS_DIRECTORY", reported, `session path ${reported} is a directory, not a session file`);
    }
  } catch (err) {
    if (errCode(err) === "ENOENT") return undefined;
    throw err;
  }
  for (let n = 1; n < 100_000; n++) {
    const to = `${from}.archived-${n}.jsonl`;
    try {
      try {
        await fsp.link(from, to);
        await fsp.unlink(from);
      } catch (err) {
        const code = errCode(err);
        if (code === "EEXIST") continue;
        if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS") throw err;
        // No hard links on this filesystem: rename after checking the name is free (we hold the session lock).
        const taken = await fsp.lstat(to).then(
          () => true,
          () => false,
        );
        if (taken) continue;
        await fsp.rename(from, to);
      }
    } catch (err) {
      throw new SessionFileError("SESSION_WRITE_FAILED", reported, `cannot archive session file ${reported} to ${to} (${errCode(err) ?? String(err)})`, {
        cause: err,
      });
    }
    await fsyncDirectory(path.dirname(from));
    return to;
  }
  throw new SessionFileError("SESSION_WRITE_FAILED", reported, `no free archive name for session file ${reported}`);
}

/**
 * Clear the Codex thread binding of a session and optionally archive its transcript, under the session lock. With
 * `store`, this is that store's `reset()` under its lock (`archivedTo` is then the store's label of the archive).
 *
 * @example
 * ```ts
 * const r = await resetCodexSession({ sessionFile: "/data/s1.jsonl", archiveTranscript: true });
 * // r.archivedTo === "/data/s1.jsonl.archived-1.jsonl"; r.pendingFinalize turns still to finalize
 * await resetCodexSession({ store, archiveTranscript: true, nextSessionId: "s1-2" }); // a session in another store
 * ```
 */
export async function resetCodexSession(params: ResetCodexSessionParams): Promise<ResetCodexSessionResult> {
  const parsed = ParamsSchema.safeParse(params);
  const named = typeof params?.sessionFile === "string" ? params.sessionFile : typeof params?.store?.address === "string" ? params.store.address : "(unknown)";
  const refuse = (issues: string) => new SessionFileError("SESSION_INVALID_ARGUMENT", named, `invalid reset parameters for session ${named}: ${issues}`);
  if (!parsed.success) throw refuse(parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; "));
  if (params.store !== undefined) {
    if (params.sessionFile !== undefined && params.sessionFile !== params.store.sessionFile) throw refuse(`sessionFile: names another session than the store (${params.store.sessionFile})`);
    return resetThroughStore(params.store, params);
  }
  if (params.sessionFile === undefined) throw refuse("sessionFile: required (or a store)");
  const logger = params.logger ?? silentLogger;
  const { sessionFile } = params;
  const real = await resolveSessionPath(sessionFile, params.sessionRoot);

  const run = () =>
    resetSessionFiles(sessionFile, real, {
      ...(params.archiveTranscript !== undefined ? { archiveTranscript: params.archiveTranscript } : {}),
      ...(params.nextSessionId !== undefined ? { nextSessionId: params.nextSessionId } : {}),
      ...(params.cwd !== undefined ? { cwd: params.cwd } : {}),
      logger,
    });

  const lockOpts: SessionLockOptions = { ...(params.lock ?? {}), logger };
  if (params.locked === true) return run();
  if (params.locked === false) return withSessionLock(sessionFile, run, lockOpts);
  return withSessionLockUnlessHeld(sessionFile, run, lockOpts);
}

/** {@link resetCodexSession} with a store: its `reset()` under its lock (unless the caller says it holds it, or this call chain does). */
async function resetThroughStore(store: SessionStore, params: ResetCodexSessionParams): Promise<ResetCodexSessionResult> {
  const opts = {
    ...(params.archiveTranscript !== undefined ? { archiveTranscript: params.archiveTranscript } : {}),
    ...(params.nextSessionId !== undefined ? { nextSessionId: params.nextSessionId } : {}),
    ...(params.cwd !== undefined ? { cwd: params.cwd } : {}),
  };
  if (params.locked === true) return store.reset(opts);
  let lock: SessionStoreLock;
  try {
    lock = await store.acquireLock({
      ...(params.logger ? { logger: params.logger } : {}),
      ...(params.lock?.timeoutMs !== undefined ? { timeoutMs: params.lock.timeoutMs } : {}),
      ...(params.lock?.signal ? { signal: params.lock.signal } : {}),
    });
  } catch (err) {
    // Omitted `locked`: this call chain already holds the session's lock (a hook inside a turn), so the reset runs in it.
    if (params.locked === undefined && err instanceof SessionFileError && err.code === "SESSION_LOCK_REENTRANT") return store.reset(opts);
    throw err;
  }
  try {
    return await lock.runHeld(() => store.reset(opts));
  } finally {
    await lock.release();
  }
}

/**
 * The reset itself, for a caller holding the session lock (`resetCodexSession` and the JSONL store's `reset()`):
 * remove the binding, then (with `archiveTranscript`) archive the transcript (`real`, its canonical path) and create a
 * fresh one naming `nextSessionId`. The pending record stays.
 *
 * @example
 * ```ts
 * await resetSessionFiles(file, await resolveSessionPath(file), { archiveTranscript: true, logger });
 * ```
 */
export async function resetSessionFiles(
  sessionFile: string,
  real: string,
  opts: { archiveTranscript?: boolean | undefined; nextSessionId?: string | undefined; cwd?: string | undefined; logger: Logger },
): Promise<ResetCodexSessionResult> {
  // The binding path comes from paths.ts with the caller's spelling, as the binding writer computes it.
  const binding = sessionSidecarPaths(path.resolve(sessionFile)).binding;
  let bindingCleared = false;
  try {
    await fsp.unlink(binding);
    bindingCleared = true;
  } catch (err) {
    if (errCode(err) !== "ENOENT") {
      throw new SessionFileError("SESSION_WRITE_FAILED", binding, `cannot remove thread binding ${binding} of session ${sessionFile} (${errCode(err) ?? String(err)})`, {
        cause: err,
      });
    }
  }
  let archivedTo: string | undefined;
  let sessionId: string | undefined;
  if (opts.archiveTranscript) {
    archivedTo = await archive(real, sessionFile);
    if (archivedTo !== undefined && opts.nextSessionId !== undefined) {
      const header = { type: "session", version: SESSION_FORMAT_VERSION, id: opts.nextSessionId, timestamp: new Date().toISOString(), cwd: opts.cwd ?? process.cwd() };
      if (await createSmallFile(real, `${JSON.stringify(header)}\n`, { durable: true })) sessionId = opts.nextSessionId;
    }
    invalidateSessionIndex(real);
  }
  const pendingFinalize = (await listPendingFinalize(sessionFile)).length;
  opts.logger.info(
    { event: "transcript.reset", sessionFile: path.basename(real), bindingCleared, archived: archivedTo !== undefined, newSessionId: sessionId !== undefined, pendingFinalize },
    "codex session reset",
  );
  return { bindingCleared, ...(archivedTo !== undefined ? { archivedTo } : {}), pendingFinalize, ...(sessionId !== undefined ? { sessionId } : {}) };
}

/**
 * Remove a session's transcript, binding and pending record, and what a last turn discarded on its way out (the JSONL
 * store's `deleteSession()`, e.g. a deleted sub-agent session). Archives stay; a missing file is not an error.
 *
 * @example
 * ```ts
 * await deleteSessionFiles("/tmp/subagents/child.jsonl");
 * ```
 */
export async function deleteSessionFiles(sessionFile: string): Promise<void> {
  const sidecars = sessionSidecarPaths(sessionFile);
  const real = await fsp.realpath(sessionFile).catch(() => path.resolve(sessionFile));
  try {
    await Promise.all([sidecars.transcript, sidecars.binding, sidecars.pendingFinalize].map((f) => fsp.rm(f, { force: true })));
    // What the last turn discarded may still be on its way out (src/transcript/discard.ts): nothing is left.
    await Promise.all([discardedName(sidecars.pendingFinalize), discardedName(sidecars.lock)].map((f) => fsp.rm(f, { force: true, recursive: true })));
  } catch (err) {
    throw new SessionFileError("SESSION_WRITE_FAILED", sessionFile, `cannot delete session ${sessionFile} (${errCode(err) ?? String(err)})`, { cause: err });
  }
  invalidateSessionIndex(real);
}
