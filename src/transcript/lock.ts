/**
 * Per-session lock: attempts on one session serialize, different sessions run in parallel.
 *
 * Two layers:
 * - in-process: a promise queue per canonical session path (proper-lockfile keeps one lock per file per process, so
 *   two callers in one process must not both reach it);
 * - across processes: proper-lockfile on the session's lock path (`sessionSidecarPaths(file).lock`, a directory
 *   created with mkdir, its mtime refreshed while held). A lock whose mtime is older than `staleMs` is stale and is
 *   taken over. Because a SIGKILLed holder would otherwise block everyone for `staleMs`, the holder also writes
 *   `owner.json` (pid, hostname, token) inside the lock directory; a waiter on the same host that finds the owner
 *   pid dead removes the lock at once (under a small takeover mutex so two waiters cannot both remove it).
 *
 * NOT re-entrant: calling `withSessionLock` for a session from inside its own callback would wait for itself. When
 * the nested call runs in the holder's async context, that is detected (AsyncLocalStorage) and throws
 * `SESSION_LOCK_REENTRANT` at once. AsyncLocalStorage does not follow event-emitter callbacks of resources created
 * outside the lock (e.g. a child process's stdout, an XState actor driven by those events): a nested call from there
 * is not detected and waits until `timeoutMs`. Code running under a held lock should therefore say so explicitly
 * (`mirrorTurnToTranscript({ locked: true })`, `resetCodexSession({ locked: true })`); the pending-finalize functions
 * never take the session lock unless asked.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { randomBytes } from "node:crypto";
import fs, { promises as fsp } from "node:fs";
import os from "node:os";
import path from "node:path";
import lockfile from "proper-lockfile";
import type { Logger } from "pino";
import { z } from "zod";
import { silentLogger } from "../log/logger.js";
import { SessionFileError } from "./errors.js";
import { sessionSidecarPaths } from "./paths.js";
import { errCode } from "./resolve.js";

/** Options of {@link withSessionLock}. */
export interface SessionLockOptions {
  /** Give up waiting after this long (default 10 minutes: a turn holds the lock for its whole run). */
  timeoutMs?: number;
  /** Abort waiting (not the callback). */
  signal?: AbortSignal;
  /** A lock not refreshed for this long is stale and taken over (default 10 s, minimum 2 s). */
  staleMs?: number;
  logger?: Logger;
}

/** Handed to the callback. */
export interface SessionLockContext {
  /** The lock directory held. */
  lockPath: string;
  /** Aborted if the lock is compromised while held (its directory vanished or could not be refreshed in time). */
  signal: AbortSignal;
}

const DEFAULT_TIMEOUT_MS = 600_000;
const DEFAULT_STALE_MS = 10_000;
const TAKEOVER_GUARD_STALE_MS = 5_000;

const OptionsSchema = z.object({
  timeoutMs: z.number().int().nonnegative().optional(),
  signal: z.instanceof(AbortSignal).optional(),
  staleMs: z.number().int().min(2000).optional(),
  logger: z.any().optional(),
});

const held = new AsyncLocalStorage<ReadonlySet<string>>();
const queueTails = new Map<string, Promise<void>>();

// proper-lockfile removes its lock with rmdir; ours holds owner.json. Removing that one file and then the directory
// takes two syscalls where a recursive rm takes five; anything else found inside falls back to the recursive rm.
const lockFs = {
  ...fs,
  rmdir: (p: string, cb: (err: NodeJS.ErrnoException | null) => void) =>
    fs.unlink(path.join(p, "owner.json"), () =>
      fs.rmdir(p, (err) => (err && err.code === "ENOTEMPTY" ? fs.rm(p, { recursive: true }, cb) : cb(err))),
    ),
  rmdirSync: (p: string) => fs.rmSync(p, { recursive: true }),
};

/** Canonical path used as the lock key: symlinks in the file (or its directory) resolved, so spellings agree. */
async function lockTarget(sessionFile: string): Promise<string> {
  const abs = path.resolve(sessionFile);
  try {
    return await fsp.realpath(abs);
  } catch {
    // The file may not exist yet; its directory must (the lock lives next to it).
    const dir = path.dirname(abs);
    await fsp.mkdir(dir, { recursive: true }).catch(() => undefined);
    try {
      return path.join(await fsp.realpath(dir), path.basename(abs));
    } catch {
      return abs;
    }
  }
}

/**
 * Whether the current async context holds the lock of `sessionFile` (as acquired through {@link withSessionLock}).
 *
 * @example
 * ```ts
 * await withSessionLock(file, async () => { await isSessionLockHeld(file); }); // true
 * ```
 */
export async function isSessionLockHeld(sessionFile: string): Promise<boolean> {
  const store = held.getStore();
  if (!store || store.size === 0) return false;
  return store.has(path.resolve(sessionFile)) || store.has(await lockTarget(sessionFile));
}

/**
 * Run `fn` holding the session's lock unless the current context already holds it (helpers use this so they work
 * both standalone and inside a caller's locked section).
 *
 * @example
 * ```ts
 * await withSessionLockUnlessHeld(file, () => appendSomething());
 * ```
 */
export async function withSessionLockUnlessHeld<T>(sessionFile: string, fn: () => Promise<T>, opts: SessionLockOptions = {}): Promise<T> {
  if (await isSessionLockHeld(sessionFile)) return fn();
  return withSessionLock(sessionFile, () => fn(), opts);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

function timeoutError(file: string, timeoutMs: number, lockPath: string): SessionFileError {
  return new SessionFileError(
    "SESSION_LOCK_TIMEOUT",
    file,
    `timed out after ${timeoutMs} ms waiting for the lock of session ${file} (${lockPath})`,
  );
}

function abortedError(file: string): SessionFileError {
  return new SessionFileError("SESSION_LOCK_ABORTED", file, `waiting for the lock of session ${file} was aborted`);
}

/** Wait for `p`, bounded by the deadline and the signal. */
async function waitBounded(p: Promise<void>, deadline: number, signal: AbortSignal | undefined, onTimeout: () => Error): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  try {
    await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(onTimeout()), Math.max(0, deadline - Date.now()));
        if (signal) {
          onAbort = () => reject(new Error("aborted"));
          signal.addEventListener("abort", onAbort, { once: true });
        }
      }),
    ]);
  } finally {
    if (timer) clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
  }
}

interface OwnerRecord {
  pid: number;
  hostname: string;
  token: string;
  acquiredAt: string;
}

async function readOwner(lockPath: string): Promise<OwnerRecord | null> {
  try {
    const v = JSON.parse(await fsp.readFile(path.join(lockPath, "owner.json"), "utf8")) as Partial<OwnerRecord>;
    if (typeof v.pid === "number" && typeof v.hostname === "string" && typeof v.token === "string") return v as OwnerRecord;
    return null;
  } catch {
    return null;
  }
}

function processAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errCode(err) === "EPERM";
  }
}

/** Remove a lock whose owner process (on this host) is dead. Returns true when removed. */
async function takeOverDeadOwner(lockPath: string, sessionFile: string, logger: Logger): Promise<boolean> {
  const owner = await readOwner(lockPath);
  if (!owner || owner.hostname !== os.hostname() || processAlive(owner.pid)) return false;
  const guard = `${lockPath}.takeover`;
  try {
    await fsp.mkdir(guard);
  } catch (err) {
    if (errCode(err) === "EEXIST") {
      // A takeover in progress, or one that died half-way: clear the guard once it is clearly abandoned.
      const st = await fsp.stat(guard).catch(() => null);
      if (st && Date.now() - st.mtimeMs > TAKEOVER_GUARD_STALE_MS) await fsp.rm(guard, { recursive: true, force: true }).catch(() => undefined);
    }
    return false;
  }
  try {
    // Re-check under the guard: only the dead owner's directory may be removed, never a fresh lock.
    const again = await readOwner(lockPath);
    if (!again || again.token !== owner.token) return false;
    await fsp.rm(lockPath, { recursive: true, force: true });
    logger.warn(
      { event: "transcript.lock.dead_owner_takeover", sessionFile, lockPath, deadPid: owner.pid },
      "session lock held by a dead process was removed",
    );
    return true;
  } finally {
    await fsp.rmdir(guard).catch(() => undefined);
  }
}

async function acquireFileLock(
  target: string,
  lockPath: string,
  sessionFile: string,
  deadline: number,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  staleMs: number,
  logger: Logger,
  onCompromised: (err: Error) => void,
): Promise<() => Promise<void>> {
  let delay = 10;
  for (;;) {
    if (signal?.aborted) throw abortedError(sessionFile);
    try {
      const release = await lockfile.lock(target, {
        lockfilePath: lockPath,
        realpath: false,
        stale: staleMs,
        retries: 0,
        fs: lockFs,
        onCompromised,
      });
      const owner: OwnerRecord = {
        pid: process.pid,
        hostname: os.hostname(),
        token: randomBytes(8).toString("hex"),
        acquiredAt: new Date().toISOString(),
      };
      // Written while the holder already works (it is only read by waiters that find the lock taken). Without
      // owner.json the lock still works; a crash then costs waiters `staleMs` instead of one retry.
      const ownerWritten = fsp.writeFile(path.join(lockPath, "owner.json"), JSON.stringify(owner)).catch(() => undefined);
      return async () => {
        await ownerWritten;
        await release();
      };
    } catch (err) {
      if (errCode(err) !== "ELOCKED") {
        throw new SessionFileError("SESSION_WRITE_FAILED", sessionFile, `cannot create the lock ${lockPath} for session ${sessionFile}: ${String(err)}`, {
          cause: err,
        });
      }
    }
    if (await takeOverDeadOwner(lockPath, sessionFile, logger)) continue;
    const left = deadline - Date.now();
    if (left <= 0) throw timeoutError(sessionFile, timeoutMs, lockPath);
    // Jittered backoff: contention is short (one append) or long (a whole turn); both settle quickly at 250 ms.
    await sleep(Math.min(left, delay + Math.floor(Math.random() * delay)), signal);
    delay = Math.min(delay * 2, 250);
  }
}

/**
 * Run `fn` while holding the session's lock (in-process queue + cross-process proper-lockfile). Not re-entrant:
 * a nested call for the same session from inside `fn` throws `SESSION_LOCK_REENTRANT`.
 *
 * @example
 * ```ts
 * const n = await withSessionLock("/data/s1.jsonl", async () => {
 *   const w = await openSessionFile("/data/s1.jsonl", { sessionId: "s1" });
 *   return w.entryCount;
 * }, { timeoutMs: 30_000 });
 * ```
 */
export async function withSessionLock<T>(
  sessionFile: string,
  fn: (ctx: SessionLockContext) => Promise<T>,
  opts: SessionLockOptions = {},
): Promise<T> {
  const parsed = OptionsSchema.safeParse(opts);
  if (!parsed.success) {
    throw new SessionFileError(
      "SESSION_INVALID_ARGUMENT",
      sessionFile,
      `invalid lock options for session ${sessionFile}: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  }
  const logger: Logger = opts.logger ?? silentLogger;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const staleMs = opts.staleMs ?? DEFAULT_STALE_MS;
  const signal = opts.signal;
  // Everything up to the queue entry is synchronous, so callers queue in call order.
  const queueKey = path.resolve(sessionFile);
  const store = held.getStore();
  const reentrant = () =>
    new SessionFileError(
      "SESSION_LOCK_REENTRANT",
      sessionFile,
      `the lock of session ${sessionFile} is already held by this call chain (withSessionLock is not re-entrant)`,
    );
  if (store?.has(queueKey)) throw reentrant();
  if (signal?.aborted) throw abortedError(sessionFile);
  const started = Date.now();
  const deadline = started + timeoutMs;

  // In-process queue: wait for the previous holder; successors wait for us (and, transitively, for it).
  const prev = queueTails.get(queueKey) ?? Promise.resolve();
  let releaseTurn!: () => void;
  const mine = new Promise<void>((r) => (releaseTurn = r));
  const tail = prev.then(() => mine);
  queueTails.set(queueKey, tail);
  const leaveQueue = () => {
    releaseTurn();
    void tail.then(() => {
      if (queueTails.get(queueKey) === tail) queueTails.delete(queueKey);
    });
  };

  let lockPath = sessionSidecarPaths(queueKey).lock;
  let target: string;
  try {
    await waitBounded(prev, deadline, signal, () => timeoutError(sessionFile, timeoutMs, lockPath));
    // The canonical path (symlinks resolved) keys the file lock, so every spelling of a session shares it.
    target = await lockTarget(sessionFile);
    lockPath = sessionSidecarPaths(target).lock;
    if (store?.has(target)) throw reentrant();
  } catch (err) {
    leaveQueue();
    if (signal?.aborted) throw abortedError(sessionFile);
    throw err;
  }

  const compromise = new AbortController();
  let releaseFile: () => Promise<void>;
  try {
    releaseFile = await acquireFileLock(target, lockPath, sessionFile, deadline, timeoutMs, signal, staleMs, logger, (err) => {
      logger.error({ event: "transcript.lock.compromised", sessionFile, lockPath, err: err.message }, "session lock compromised while held");
      compromise.abort(err);
    });
  } catch (err) {
    leaveQueue();
    throw err;
  }
  logger.debug({ event: "transcript.lock.acquired", sessionFile, waitedMs: Date.now() - started }, "session lock acquired");

  const nextStore = new Set(store ?? []);
  nextStore.add(queueKey);
  nextStore.add(target);
  try {
    return await held.run(nextStore, () => fn({ lockPath, signal: compromise.signal }));
  } finally {
    try {
      await releaseFile();
    } catch (err) {
      // ERELEASED after a compromise: nothing left to release.
      logger.warn({ event: "transcript.lock.release_failed", sessionFile, code: errCode(err) }, "session lock release failed");
    }
    leaveQueue();
    logger.debug({ event: "transcript.lock.released", sessionFile }, "session lock released");
  }
}
