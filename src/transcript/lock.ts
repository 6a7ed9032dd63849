/**
 * Per-session lock: attempts on one session serialize, different sessions run in parallel, across processes too.
 *
 * Two layers:
 * - in-process: a promise queue per session path, so callers in one process take turns in call order without polling;
 * - across processes: a lock directory `<session>.lock/` created with mkdir (atomic: exactly one creator wins), holding
 *   `owner.json` = `{ pid, hostname, pidNamespace?, token, acquiredAt }`.
 *
 * Liveness is a heartbeat: the holder refreshes the MTIME OF `owner.json` (utimes) every `staleMs / 4`, and checks at
 * each beat that `owner.json` is still its own (same token). The directory's mtime is never refreshed and
 * nothing is judged by it except for a directory without a readable owner record (an older version's lock, or the
 * instant between mkdir and the owner write). Writing inside the directory therefore cannot "compromise" the lock
 * (that is what broke the proper-lockfile version: its refresh compared the directory mtime it had set with what it
 * read back, so the owner.json write made the first refresh report the lock compromised and every turn over ~5 s
 * lost its lock).
 *
 * A waiter judges the lock it finds stale, and removes it, when:
 * 1. the owner is on this host (same hostname and pid namespace) and its pid is dead (or is this process and the
 *    token is not one this process holds): at once;
 * 2. it has watched the heartbeat (owner token, inode and mtimes) NOT CHANGE for `staleMs` by its own clock. This
 *    needs no agreement between clocks, so a lock dated an hour in the future, or written by a host whose clock
 *    disagrees, is taken over `staleMs` after the waiter first saw it instead of blocking for the whole timeout;
 * 3. the owner is on this host (one clock) or unknown, and the heartbeat mtime is older than `staleMs`: at once, so a
 *    lock left long ago does not cost a fresh waiter `staleMs`. Owners on other hosts are judged by rule 2 only.
 * Removals (takeover and release) happen under a small guard directory `<session>.lock.takeover` and only after
 * re-reading the lock and finding the same heartbeat identity, so two waiters cannot both remove, and nobody removes
 * a lock that was re-created or refreshed meanwhile. A holder whose `owner.json` vanished or changed owner aborts
 * its `signal` (reason: `SessionFileError` `SESSION_LOCK_COMPROMISED`) and `assertHeld()` throws from then on.
 *
 * Why not proper-lockfile any more: its staleness is only the directory mtime against the local clock (a future
 * mtime is never stale), its compromise check trips on any write inside the directory, and the pid takeover, the
 * observed-progress rule and the guarded removal were all ours anyway. The format on disk is compatible in the
 * direction that matters: a lock directory left by the previous version is judged by its directory mtime and owner pid.
 *
 * A shared store (SQLite/Postgres behind the `SessionStore` seam) takes the same lock as a lease row:
 * `session_lock(session_key PRIMARY KEY, token, owner_pid, owner_host, heartbeat_seq, lease_expires_at)`.
 * Acquire = `INSERT ... ON CONFLICT (session_key) DO UPDATE SET token = :new, ... WHERE session_lock.lease_expires_at
 * < now()` (Postgres `now()`/SQLite `unixepoch()` of the DATABASE, so only one clock decides), returning whether our
 * token is in the row. Heartbeat = `UPDATE ... SET heartbeat_seq = heartbeat_seq + 1, lease_expires_at = now() +
 * :staleMs WHERE session_key = :k AND token = :mine`; zero rows updated = the lease was lost: abort `signal`.
 * `assertHeld()` = the same conditional update (or `SELECT ... FOR UPDATE` inside the write's own transaction, which
 * makes the check and the durable write atomic: a fencing token). Release = `DELETE ... WHERE token = :mine`. The
 * handle API below stays the same; only the lease storage changes.
 *
 * NOT re-entrant: taking the lock of a session from code that already holds it would wait for itself. When the nested
 * call runs in the holder's async context (inside `withSessionLock`'s callback or `handle.runHeld(fn)`), that is
 * detected (AsyncLocalStorage) and throws `SESSION_LOCK_REENTRANT` at once. AsyncLocalStorage does not follow
 * event-emitter callbacks of resources created outside the lock (e.g. a child process's stdout, an XState actor driven
 * by those events): a nested call from there is not detected and waits until `timeoutMs`. Code running under a held
 * lock should therefore say so explicitly (`mirrorTurnToTranscript({ locked: true })`, `resetCodexSession({ locked:
 * true })`) or run inside `handle.runHeld(fn)`.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import fs, { promises as fsp } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import { silentLogger } from "../log/logger.js";
import { discardPath } from "./discard.js";
import { SessionFileError } from "./errors.js";
import { sessionSidecarPaths } from "./paths.js";

/** Options of {@link acquireSessionLock} and {@link withSessionLock}. */
export interface SessionLockOptions {
  /** Give up waiting after this long (default 10 minutes: a turn holds the lock for its whole run). */
  timeoutMs?: number | undefined;
  /** Abort waiting (not the holder's work). */
  signal?: AbortSignal | undefined;
  /**
   * A lock whose heartbeat did not move for this long is stale and taken over (default 10 s, minimum 2 s). The holder
   * beats every `staleMs / 4`.
   */
  staleMs?: number | undefined;
  logger?: Logger | undefined;
}

/**
 * A held session lock. Acquire with {@link acquireSessionLock} (or get it as the argument of {@link withSessionLock}'s
 * callback); release exactly when the attempt settles.
 *
 * @example
 * ```ts
 * const lock = await acquireSessionLock("/data/s1.jsonl");
 * try {
 *   lock.signal.addEventListener("abort", () => stopWriting());
 *   lock.assertHeld();
 *   await lock.runHeld(() => mirrorTurnToTranscript(params)); // nested helpers see the lock as held
 * } finally {
 *   await lock.release();
 * }
 * ```
 */
export interface SessionLockHandle {
  /** The lock directory (`<canonical session path>.lock`). */
  readonly lockPath: string;
  /** Aborted (reason: SessionFileError code "SESSION_LOCK_COMPROMISED") when the lock is lost. */
  readonly signal: AbortSignal;
  /**
   * Throws SessionFileError("SESSION_LOCK_COMPROMISED") if the lock was lost (or already released); call before every
   * durable write. Costs one small synchronous read of the owner record (its token is compared).
   */
  assertHeld(): void;
  /** Run `fn` in an async context where {@link isSessionLockHeld} is true for this session (helpers then do not re-lock). */
  runHeld<T>(fn: () => Promise<T>): Promise<T>;
  /** Idempotent. Removes everything the lock created (never another holder's lock). Never rejects. */
  release(): Promise<void>;
}

/** Handed to the callback of {@link withSessionLock}: the held lock. */
export type SessionLockContext = SessionLockHandle;

const DEFAULT_TIMEOUT_MS = 600_000;
const DEFAULT_STALE_MS = 10_000;
/** The guard is held for a few syscalls; one this old (or dated in the future) was abandoned. */
const GUARD_STALE_MS = 5_000;
const OWNER_FILE = "owner.json";

const OptionsSchema = z.object({
  timeoutMs: z.number().int().nonnegative().optional(),
  signal: z.instanceof(AbortSignal).optional(),
  staleMs: z.number().int().min(2000).optional(),
  logger: z.any().optional(),
});

const OwnerSchema = z.object({
  pid: z.number().int(),
  hostname: z.string(),
  pidNamespace: z.string().optional(),
  token: z.string().min(1),
  acquiredAt: z.string().optional(),
});
type OwnerRecord = z.infer<typeof OwnerSchema>;

const held = new AsyncLocalStorage<ReadonlySet<string>>();
const queueTails = new Map<string, Promise<void>>();
/** Leases this process holds, by token (rule 1 for our own pid; removal at process exit). */
const liveLeases = new Map<string, FileLease>();

function errCode(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err ? String((err as { code: unknown }).code) : undefined;
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

// ---- host identity and owner liveness ----

let cachedPidNamespace: string | null | undefined;
/** The pid namespace (Linux), so two containers sharing a hostname and a volume do not judge each other's pids. */
function pidNamespace(): string | undefined {
  if (cachedPidNamespace === undefined) {
    try {
      cachedPidNamespace = fs.readlinkSync("/proc/self/ns/pid");
    } catch {
      cachedPidNamespace = null;
    }
  }
  return cachedPidNamespace ?? undefined;
}

function sameHost(owner: OwnerRecord): boolean {
  if (owner.hostname !== os.hostname()) return false;
  const mine = pidNamespace();
  return owner.pidNamespace === undefined || mine === undefined || owner.pidNamespace === mine;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errCode(err) === "EPERM";
  }
}

/** Only meaningful for an owner on this host. */
function ownerAlive(owner: OwnerRecord): boolean {
  if (owner.pid === process.pid) return liveLeases.has(owner.token);
  return processAlive(owner.pid);
}

// ---- what a waiter sees ----

interface LockObservation {
  owner: OwnerRecord | null;
  /** The newest of the owner record's and the directory's mtime (the latter only moves for an older version's lock). */
  beatMs: number;
  /** Changes whenever the holder beats or the lock is re-created. */
  identity: string;
}

function parseOwner(text: string | null): OwnerRecord | null {
  if (text === null) return null;
  try {
    const parsed = OwnerSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** The lock as it is now, or null when there is none. */
async function observeLock(lockPath: string): Promise<LockObservation | null> {
  const ownerPath = path.join(lockPath, OWNER_FILE);
  const [dir, file, text] = await Promise.all([
    fsp.stat(lockPath).catch(() => null),
    fsp.stat(ownerPath).catch(() => null),
    fsp.readFile(ownerPath, "utf8").catch(() => null),
  ]);
  if (!dir) return null;
  const owner = file ? parseOwner(text) : null;
  const beatMs = Math.max(dir.mtimeMs, file?.mtimeMs ?? -Infinity);
  const identity = [dir.ino, dir.ctimeMs, dir.mtimeMs, owner?.token ?? "-", file?.ino ?? "-", file?.mtimeMs ?? "-"].join(":");
  return { owner, beatMs, identity };
}

type StaleReason = "deadOwner" | "noProgress" | "heartbeatOld";

/** Rules 1-3 of the header, for one waiter (it remembers since when it has seen the same heartbeat). */
class StalenessJudge {
  private seen: string | undefined;
  private since = 0;

  constructor(private readonly staleMs: number) {}

  judge(obs: LockObservation, now = Date.now()): StaleReason | null {
    if (obs.identity !== this.seen) {
      this.seen = obs.identity;
      this.since = now;
    }
    const owner = obs.owner;
    const local = owner === null || sameHost(owner);
    if (owner && local && !ownerAlive(owner)) return "deadOwner";
    if (now - this.since >= this.staleMs) return "noProgress";
    if (local && now - obs.beatMs >= this.staleMs) return "heartbeatOld";
    return null;
  }
}

// ---- removal, serialized by the guard directory ----

const GUARD_BUSY = Symbol("guard busy");

/** Run `fn` holding `<lock>.takeover`; GUARD_BUSY when it stayed taken for `waitMs`. Clears an abandoned guard. */
async function underGuard<T>(lockPath: string, waitMs: number, fn: () => Promise<T>): Promise<T | typeof GUARD_BUSY> {
  const guard = `${lockPath}.takeover`;
  const until = Date.now() + waitMs;
  for (;;) {
    try {
      await fsp.mkdir(guard);
      break;
    } catch (err) {
      if (errCode(err) !== "EEXIST") throw err;
    }
    const st = await fsp.stat(guard).catch(() => null);
    if (st && Math.abs(Date.now() - st.mtimeMs) > GUARD_STALE_MS) {
      await fsp.rm(guard, { recursive: true, force: true }).catch(() => undefined);
      continue;
    }
    if (Date.now() >= until) return GUARD_BUSY;
    await sleep(5 + Math.floor(Math.random() * 10));
  }
  try {
    return await fn();
  } finally {
    await fsp.rmdir(guard).catch(() => undefined);
  }
}

/**
 * The lock directory goes in one rename (its blocks are freed in the background, see discard.ts); when that is refused,
 * unlink owner.json + rmdir, and anything else found inside falls back to a recursive rm.
 */
async function removeLockDir(lockPath: string): Promise<void> {
  discardPath(lockPath, () => removeLockDirInPlace(lockPath), { files: [OWNER_FILE] });
}

function removeLockDirInPlace(lockPath: string): void {
  try {
    fs.unlinkSync(path.join(lockPath, OWNER_FILE));
  } catch {
    // Gone already, or not a plain file: the rmdir below decides.
  }
  try {
    fs.rmdirSync(lockPath);
  } catch (err) {
    const code = errCode(err);
    if (code === "ENOENT") return;
    if (code === "ENOTEMPTY" || code === "EEXIST" || code === "ENOTDIR") fs.rmSync(lockPath, { recursive: true, force: true });
    else throw err;
  }
}

interface LockSite {
  sessionFile: string;
  lockPath: string;
  logger: Logger;
}

/** Remove the stale lock `obs` if it is still exactly that lock. */
async function takeOver(site: LockSite, obs: LockObservation, reason: StaleReason): Promise<boolean> {
  const removed = await underGuard(site.lockPath, 0, async () => {
    const again = await observeLock(site.lockPath);
    if (!again || again.identity !== obs.identity) return false;
    await removeLockDir(site.lockPath);
    return true;
  });
  if (removed !== true) return false;
  const fields = { sessionFile: site.sessionFile, lockPath: site.lockPath, reason, ownerPid: obs.owner?.pid, ownerHost: obs.owner?.hostname };
  if (reason === "deadOwner") {
    site.logger.warn({ event: "transcript.lock.dead_owner_takeover", ...fields, deadPid: obs.owner?.pid }, "session lock held by a dead process was removed");
  } else {
    site.logger.warn({ event: "transcript.lock.stale_takeover", ...fields }, "stale session lock (no heartbeat) was removed");
  }
  return true;
}

// ---- the holder's lease ----

function compromisedError(site: LockSite, why: string): SessionFileError {
  return new SessionFileError(
    "SESSION_LOCK_COMPROMISED",
    site.sessionFile,
    `the lock of session ${site.sessionFile} is not held (${why}): ${site.lockPath}`,
  );
}

/** The cross-process part of a held lock: owner record, heartbeat, loss detection, guarded release. */
class FileLease {
  readonly controller = new AbortController();
  private lost: SessionFileError | undefined;
  private released = false;
  private lastBeat = Date.now();
  private timer: NodeJS.Timeout | undefined;
  private readonly ownerPath: string;
  /** The owner record as this holder last verified it (token read back): its inode and change time. */
  private verified: { ino: bigint; ctimeNs: bigint } | undefined;

  constructor(
    private readonly site: LockSite,
    private readonly owner: OwnerRecord,
    private readonly staleMs: number,
    /** The owner record as its creator wrote it (O_EXCL, our token): verified without reading it back. */
    created?: fs.BigIntStats,
  ) {
    this.ownerPath = path.join(site.lockPath, OWNER_FILE);
    if (created) this.verified = { ino: created.ino, ctimeNs: created.ctimeNs };
    liveLeases.set(owner.token, this);
    ensureExitCleanup();
    this.schedule();
  }

  private schedule(): void {
    this.timer = setTimeout(() => void this.beat().finally(() => this.active() && this.schedule()), Math.floor(this.staleMs / 4));
    this.timer.unref();
  }

  private active(): boolean {
    return !this.released && this.lost === undefined;
  }

  /** Refresh the heartbeat after checking the record is still ours. */
  private async beat(): Promise<void> {
    if (!this.active()) return;
    try {
      const text = await fsp.readFile(this.ownerPath, "utf8");
      if (!this.active()) return;
      // The token, not the inode: a removed and re-created record often gets the same inode number back.
      if (parseOwner(text)?.token !== this.owner.token) return this.markLost("the owner record belongs to another holder");
      const now = new Date();
      await fsp.utimes(this.ownerPath, now, now);
      this.noteBeat();
    } catch (err) {
      const code = errCode(err);
      if (code === "ENOENT" || code === "ENOTDIR") return this.markLost("the lock directory was removed");
      if (Date.now() - this.lastBeat > this.staleMs) return this.markLost(`the heartbeat failed for longer than ${this.staleMs} ms (${code})`);
      this.site.logger.warn({ event: "transcript.lock.heartbeat_failed", sessionFile: this.site.sessionFile, code }, "session lock heartbeat failed; retrying");
    }
  }

  private noteBeat(): void {
    const gap = Date.now() - this.lastBeat;
    this.lastBeat = Date.now();
    // Late but still ours: nobody took over (that would have removed the record). Say so: a waiter could have.
    if (gap > this.staleMs) this.site.logger.warn({ event: "transcript.lock.heartbeat_late", sessionFile: this.site.sessionFile, gapMs: gap }, "session lock heartbeat was late");
  }

  markLost(why: string): void {
    if (!this.active()) return;
    this.lost = compromisedError(this.site, why);
    this.stop();
    this.site.logger.error({ event: "transcript.lock.compromised", sessionFile: this.site.sessionFile, lockPath: this.site.lockPath, why }, "session lock lost while held");
    this.controller.abort(this.lost);
  }

  private stop(): void {
    if (this.timer) clearTimeout(this.timer);
    liveLeases.delete(this.owner.token);
  }

  /**
   * Synchronous. One `stat` of the owner record when it is the very file this holder last verified (same inode and
   * change time: a takeover removes it and writes a new one, and only this holder's heartbeat changes it in place);
   * otherwise a read of the record and a token check. Refreshes the heartbeat too when the last beat is late.
   */
  assertHeld(): void {
    if (this.lost) throw this.lost;
    if (this.released) throw compromisedError(this.site, "it was released");
    let st: fs.BigIntStats | undefined;
    try {
      st = fs.statSync(this.ownerPath, { bigint: true, throwIfNoEntry: false });
    } catch (err) {
      this.markLost(`the owner record is unreadable (${errCode(err)})`);
      throw this.lost!;
    }
    if (!st) {
      this.markLost("the owner record is gone (ENOENT)");
      throw this.lost!;
    }
    if (!this.verified || st.ino !== this.verified.ino || st.ctimeNs !== this.verified.ctimeNs) {
      let text: string;
      try {
        text = fs.readFileSync(this.ownerPath, "utf8");
      } catch (err) {
        this.markLost(`the owner record is gone (${errCode(err)})`);
        throw this.lost!;
      }
      if (parseOwner(text)?.token !== this.owner.token) {
        this.markLost("the owner record was replaced");
        throw this.lost!;
      }
      this.verified = { ino: st.ino, ctimeNs: st.ctimeNs };
    }
    if (Date.now() - this.lastBeat > this.staleMs / 2) {
      // A stalled event loop delayed the beats: refresh now, before the caller's write (the timer retries on failure).
      try {
        const now = new Date();
        fs.utimesSync(this.ownerPath, now, now);
        this.noteBeat();
      } catch {
        // The next beat decides.
      }
    }
  }

  async release(): Promise<void> {
    if (this.released) return;
    const wasLost = this.lost !== undefined;
    this.released = true;
    this.stop();
    if (wasLost) return; // nothing of ours is left to remove
    // With a heartbeat this fresh no waiter can judge the lock stale (rules 2 and 3 need staleMs without one), so no
    // takeover can race the removal and the guard's two syscalls are skipped; the token is still checked.
    const fresh = Date.now() - this.lastBeat < this.staleMs / 2;
    const outcome = await (fresh ? this.removeIfOurs() : underGuard(this.site.lockPath, GUARD_STALE_MS + 1000, () => this.removeIfOurs())).catch(
      (err: unknown) => err,
    );
    if (outcome === GUARD_BUSY) await this.removeIfOurs().catch(() => undefined);
    else if (outcome instanceof Error) {
      this.site.logger.warn({ event: "transcript.lock.release_failed", sessionFile: this.site.sessionFile, code: errCode(outcome) }, "session lock release failed");
    }
  }

  /** The owner record is still the very file this holder verified (one `stat`; see {@link assertHeld}). */
  private stillVerified(): boolean {
    if (!this.verified) return false;
    try {
      const st = fs.statSync(this.ownerPath, { bigint: true, throwIfNoEntry: false });
      return st !== undefined && st.ino === this.verified.ino && st.ctimeNs === this.verified.ctimeNs;
    } catch {
      return false;
    }
  }

  private async removeIfOurs(): Promise<void> {
    if (!this.stillVerified()) {
      let text: string | null = null;
      try {
        text = fs.readFileSync(this.ownerPath, "utf8");
      } catch {
        // Gone: not ours any more (reported below).
      }
      if (parseOwner(text)?.token !== this.owner.token) {
        this.site.logger.error({ event: "transcript.lock.compromised", sessionFile: this.site.sessionFile, why: "lost before release" }, "session lock was not ours at release");
        return;
      }
    }
    await removeLockDir(this.site.lockPath);
  }

  /** At process exit: remove the lock synchronously if it is still ours (a later waiter then need not judge it). */
  removeAtExit(): void {
    if (!this.active()) return;
    try {
      if (parseOwner(fs.readFileSync(this.ownerPath, "utf8"))?.token === this.owner.token) fs.rmSync(this.site.lockPath, { recursive: true, force: true });
    } catch {
      // Best effort: the dead-owner rule covers what is left.
    }
  }
}

let exitHooked = false;
function ensureExitCleanup(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.once("exit", () => {
    for (const lease of liveLeases.values()) lease.removeAtExit();
  });
}

/** mkdir the lock and write our owner record; null when the lock exists. */
async function tryCreateLease(site: LockSite, staleMs: number): Promise<FileLease | null> {
  // Synchronous: a few microseconds each, against a thread-pool round trip apiece (see small-file.ts).
  try {
    fs.mkdirSync(site.lockPath);
  } catch (err) {
    if (errCode(err) === "EEXIST") return null;
    throw new SessionFileError("SESSION_WRITE_FAILED", site.sessionFile, `cannot create the lock ${site.lockPath} for session ${site.sessionFile}: ${String(err)}`, { cause: err });
  }
  const owner: OwnerRecord = {
    pid: process.pid,
    hostname: os.hostname(),
    ...(pidNamespace() === undefined ? {} : { pidNamespace: pidNamespace() }),
    // randomUUID draws from a pooled entropy buffer: no crypto call of its own per lock, as randomBytes makes.
    token: randomUUID(),
    acquiredAt: new Date().toISOString(),
  };
  try {
    const fd = fs.openSync(path.join(site.lockPath, OWNER_FILE), "wx");
    let created: fs.BigIntStats;
    try {
      fs.writeSync(fd, JSON.stringify(owner));
      created = fs.fstatSync(fd, { bigint: true });
    } finally {
      fs.closeSync(fd);
    }
    return new FileLease(site, owner, staleMs, created);
  } catch (err) {
    fs.rmSync(site.lockPath, { recursive: true, force: true });
    throw new SessionFileError("SESSION_WRITE_FAILED", site.sessionFile, `cannot write the owner record of the lock ${site.lockPath}: ${String(err)}`, { cause: err });
  }
}

function timeoutError(file: string, timeoutMs: number, lockPath: string): SessionFileError {
  return new SessionFileError("SESSION_LOCK_TIMEOUT", file, `timed out after ${timeoutMs} ms waiting for the lock of session ${file} (${lockPath})`);
}

function abortedError(file: string): SessionFileError {
  return new SessionFileError("SESSION_LOCK_ABORTED", file, `waiting for the lock of session ${file} was aborted`);
}

interface WaitLimits {
  deadline: number;
  timeoutMs: number;
  staleMs: number;
  signal: AbortSignal | undefined;
}

/** Create the lock, taking over a stale one; polls with jittered backoff (10 ms doubling to 250 ms). */
async function acquireFileLease(site: LockSite, limits: WaitLimits): Promise<FileLease> {
  const judge = new StalenessJudge(limits.staleMs);
  let delay = 10;
  for (;;) {
    if (limits.signal?.aborted) throw abortedError(site.sessionFile);
    const lease = await tryCreateLease(site, limits.staleMs);
    if (lease) return lease;
    const obs = await observeLock(site.lockPath);
    const reason = obs ? judge.judge(obs) : null;
    if (obs && reason && (await takeOver(site, obs, reason))) continue;
    const left = limits.deadline - Date.now();
    if (left <= 0) throw timeoutError(site.sessionFile, limits.timeoutMs, site.lockPath);
    await sleep(Math.min(left, delay + Math.floor(Math.random() * delay)), limits.signal);
    delay = Math.min(delay * 2, 250);
  }
}

// ---- in-process layer and public API ----

/** Canonical path used as the lock key: symlinks in the file (or its directory) resolved, so spellings agree. */
async function lockTarget(sessionFile: string): Promise<string> {
  const abs = path.resolve(sessionFile);
  try {
    return fs.realpathSync.native(abs);
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
 * Whether the current async context holds the lock of `sessionFile` (inside {@link withSessionLock}'s callback or
 * a handle's `runHeld`).
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

function validateOptions(sessionFile: string, opts: SessionLockOptions): void {
  const parsed = OptionsSchema.safeParse(opts);
  if (parsed.success) return;
  throw new SessionFileError(
    "SESSION_INVALID_ARGUMENT",
    sessionFile,
    `invalid lock options for session ${sessionFile}: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
  );
}

function reentrantError(sessionFile: string): SessionFileError {
  return new SessionFileError(
    "SESSION_LOCK_REENTRANT",
    sessionFile,
    `the lock of session ${sessionFile} is already held by this call chain (the session lock is not re-entrant)`,
  );
}

/** Join the in-process queue of `key` (synchronously, so callers queue in call order). */
function joinQueue(key: string): { prev: Promise<void> | undefined; leave: () => void } {
  const waitFor = queueTails.get(key);
  const prev = waitFor ?? Promise.resolve();
  let releaseTurn!: () => void;
  const mine = new Promise<void>((r) => (releaseTurn = r));
  const tail = prev.then(() => mine);
  queueTails.set(key, tail);
  let left = false;
  const leave = () => {
    if (left) return;
    left = true;
    releaseTurn();
    void tail.then(() => {
      if (queueTails.get(key) === tail) queueTails.delete(key);
    });
  };
  return { prev: waitFor, leave };
}

function makeHandle(lease: FileLease, site: LockSite, keys: string[], leaveQueue: () => void): SessionLockHandle {
  let releasing: Promise<void> | undefined;
  return {
    lockPath: site.lockPath,
    signal: lease.controller.signal,
    assertHeld: () => lease.assertHeld(),
    runHeld: <T>(fn: () => Promise<T>) => held.run(new Set([...(held.getStore() ?? []), ...keys]), fn),
    release: () =>
      (releasing ??= lease.release().finally(() => {
        leaveQueue();
        site.logger.debug({ event: "transcript.lock.released", sessionFile: site.sessionFile }, "session lock released");
      })),
  };
}

/**
 * Take the session's lock (in-process queue, then the cross-process lock directory) and return the handle. Waits up
 * to `timeoutMs` (`SESSION_LOCK_TIMEOUT`), stops waiting when `signal` aborts (`SESSION_LOCK_ABORTED`), throws
 * `SESSION_LOCK_REENTRANT` when the current async context already holds it. The lock stays held, with a heartbeat,
 * until `release()`; if it is lost meanwhile, `signal` aborts and `assertHeld()` throws `SESSION_LOCK_COMPROMISED`.
 *
 * @example
 * ```ts
 * const lock = await acquireSessionLock("/data/s1.jsonl", { timeoutMs: 60_000 });
 * try {
 *   lock.assertHeld();
 *   await appendDurably();
 * } finally {
 *   await lock.release();
 * }
 * ```
 */
export async function acquireSessionLock(sessionFile: string, opts: SessionLockOptions = {}): Promise<SessionLockHandle> {
  validateOptions(sessionFile, opts);
  const logger: Logger = opts.logger ?? silentLogger;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const signal = opts.signal;
  const queueKey = path.resolve(sessionFile);
  const store = held.getStore();
  if (store?.has(queueKey)) throw reentrantError(sessionFile);
  if (signal?.aborted) throw abortedError(sessionFile);
  const started = Date.now();
  const limits: WaitLimits = { deadline: started + timeoutMs, timeoutMs, staleMs: opts.staleMs ?? DEFAULT_STALE_MS, signal };
  // Everything up to here is synchronous, so callers in one process queue in call order.
  const queue = joinQueue(queueKey);
  const site: LockSite = { sessionFile, lockPath: sessionSidecarPaths(queueKey).lock, logger };
  let target: string;
  try {
    // No earlier caller in this process: nothing to wait for (and no timer to arm and clear on every turn).
    if (queue.prev) await waitBounded(queue.prev, limits.deadline, signal, () => timeoutError(sessionFile, timeoutMs, site.lockPath));
    // The canonical path (symlinks resolved) names the lock directory, so every spelling of a session shares it.
    target = await lockTarget(sessionFile);
    site.lockPath = sessionSidecarPaths(target).lock;
    if (store?.has(target)) throw reentrantError(sessionFile);
    const lease = await acquireFileLease(site, limits);
    logger.debug({ event: "transcript.lock.acquired", sessionFile, waitedMs: Date.now() - started }, "session lock acquired");
    return makeHandle(lease, site, [queueKey, target], queue.leave);
  } catch (err) {
    queue.leave();
    if (signal?.aborted && !(err instanceof SessionFileError && err.code !== "SESSION_LOCK_ABORTED")) throw abortedError(sessionFile);
    throw err;
  }
}

/**
 * Run `fn` while holding the session's lock; `fn` receives the handle (its `signal` aborts if the lock is lost, its
 * `assertHeld()` guards durable writes). The lock is released when `fn` settles. Not re-entrant: a nested call for
 * the same session from inside `fn` throws `SESSION_LOCK_REENTRANT`.
 *
 * @example
 * ```ts
 * const n = await withSessionLock("/data/s1.jsonl", async (lock) => {
 *   lock.assertHeld();
 *   const w = await openSessionFile("/data/s1.jsonl", { sessionId: "s1" });
 *   return w.entryCount;
 * }, { timeoutMs: 30_000 });
 * ```
 */
export async function withSessionLock<T>(
  sessionFile: string,
  fn: (lock: SessionLockContext) => Promise<T>,
  opts: SessionLockOptions = {},
): Promise<T> {
  const lock = await acquireSessionLock(sessionFile, opts);
  try {
    return await lock.runHeld(() => fn(lock));
  } finally {
    await lock.release();
  }
}
