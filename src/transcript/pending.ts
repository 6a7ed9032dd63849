/**
 * The durable "mirrored, not yet finalized" record (the `pendingFinalize` sidecar, path from `paths.ts`).
 *
 * Exactly-once finalize, and where it stops being exactly-once:
 * 1. Under the session lock the host writes the record and mirrors the turn (the mirror is idempotent by key).
 *    These functions do not take the session lock by default (see {@link PendingFinalizeOptions.takeLock}).
 * 2. It calls the engine (`afterTurn` / `ingestBatch` / `ingest`) with the turn.
 * 3. After the engine call returned it clears the record (`completePendingFinalize`).
 * On the next attempt for the session, every record still present is finalized first (from the re-read transcript:
 * `messages.slice(prePromptMessageCount)`), then cleared. A record set that exists is replaced atomically (temp file +
 * rename), so a crash leaves either the old or the new set; the first record is created in place, and one torn by an
 * OS crash is unreadable and moved aside (its turn's append came after it and was not committed either). Durability:
 * fsynced here by default, or (`deferCommit`) committed by the caller together with the transcript append
 * ({@link commitPendingFinalize}); removals are not fsynced (see {@link writePendingFile}).
 *
 * The unavoidable window: the engine call returned (the engine took the turn) and the process died before the
 * record was cleared. Recovery then finalizes the same turn again: at-least-once. No file protocol can close this
 * window, because the engine's own commit and our clear are two separate durable writes. The finalize caller passes
 * the `turnId`; an engine that dedupes by it makes the second delivery a no-op, which closes the window.
 *
 * Ordering note: if the record is written AFTER the mirror, a crash between the two leaves a mirrored turn that is
 * never finalized (at-most-once for that turn). Writing the record FIRST (both inside one locked section) avoids
 * that: a record whose turn never reached the transcript is found at recovery (no origin with its turnId) and can be
 * cleared without calling the engine.
 */
import fs, { promises as fsp } from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import type { TurnRecord, TurnStatus } from "../../machines/turn.contract.js";
import type { AgentMessage } from "../context-engine/types.js";
import { silentLogger } from "../log/logger.js";
import { SessionFileError } from "./errors.js";
import { faultPoint } from "./fault.js";
import { withSessionLock, type SessionLockOptions } from "./lock.js";
import { sessionSidecarPaths } from "./paths.js";
import { nextFreePath } from "./binding.js";
import { errCode } from "./resolve.js";
import { discardPath } from "./discard.js";
import { fsyncDirectory } from "./fsync-dir.js";
import { createSmallFile, fsyncFd, readSmallFile, replaceSmallFile } from "./small-file.js";

/** Codex's status of the turn, or the machine's status of the attempt (a blocked turn never ran: it has no record). */
export type PendingFinalizeStatus = TurnRecord["codexStatus"] | Exclude<TurnStatus, "blocked">;

/** One turn waiting for its engine finalize. */
export interface PendingFinalizeRecord {
  threadId: string;
  turnId: string;
  /** `messages.slice(prePromptMessageCount)` of the re-read history is this turn. */
  prePromptMessageCount: number;
  /** Messages in the turn's snapshot. */
  messageCount: number;
  status: PendingFinalizeStatus;
  /**
   * The turn's snapshot (original prompt first), so recovery can complete a mirror the crash cut short: the mirror is
   * idempotent by key, so re-mirroring appends exactly the missing messages.
   */
  messages?: AgentMessage[] | undefined;
  /**
   * Mirror keys of the turn's messages the engine has already ingested (one by one, `ingest`), so recovery resumes
   * after them instead of delivering them twice. Absent: none known.
   */
  ingestedKeys?: string[] | undefined;
  /**
   * The durable turn's advancement key (an engine that takes durable turns, OpenClaw's `commitTurn`): recovery retries
   * `commitTurn` with this very key after a crash between the commit and the record's clearing.
   */
  advancementKey?: string | undefined;
  /** The host's `requestId` of the turn and the attempt's status, written on the prompt's entry when it is mirrored. */
  request?: { id: string; status: "completed" | "failed" | "aborted" | "yieldAborted"; cut?: boolean | undefined } | undefined;
  /** When the record was written (ISO; metadata only). */
  recordedAt: string;
}

/** Options shared by the pending-finalize functions. */
export interface PendingFinalizeOptions {
  logger?: Logger | undefined;
  /**
   * Also take the session lock for this update (true, or lock options). Default false: the turn runner updates the
   * record while it already holds the session lock, and whether a call chain holds it cannot be detected reliably
   * (AsyncLocalStorage does not follow event-emitter callbacks of resources created outside the lock), so taking it
   * here by default could wait on ourselves. Standalone tools that hold no lock pass true. Updates from one process
   * are always serialized by an in-process queue.
   */
  takeLock?: boolean | Omit<SessionLockOptions, "logger"> | undefined;
  /**
   * Write the record without fsync (visible to every process and safe from a process crash at once); the caller makes
   * it durable with {@link commitPendingFinalize} before, or together with, the transcript append it guards.
   * Default false (fsynced here).
   */
  deferCommit?: boolean | undefined;
  /**
   * The caller holds the lock and listed the record set empty since taking it: write without reading it back.
   * Default false.
   */
  knownEmpty?: boolean | undefined;
}

const STATUSES = ["completed", "failed", "interrupted", "timedOut", "aborted", "yieldAborted"] as const;

const RecordInputSchema = z.object({
  threadId: z.string().min(1),
  turnId: z.string().min(1),
  prePromptMessageCount: z.number().int().nonnegative(),
  messageCount: z.number().int().nonnegative(),
  status: z.enum(STATUSES),
  messages: z.array(z.looseObject({ role: z.string().min(1) })).optional(),
  ingestedKeys: z.array(z.string().min(1)).optional(),
  advancementKey: z.string().min(1).max(200).optional(),
  request: z.object({ id: z.string().min(1).max(200), status: z.enum(["completed", "failed", "aborted", "yieldAborted"]), cut: z.boolean().optional() }).optional(),
});

const FileSchema = z.object({
  version: z.literal(1),
  records: z.array(RecordInputSchema.extend({ recordedAt: z.string() })),
});

type PendingFile = z.infer<typeof FileSchema>;

function pendingPath(sessionFile: string): string {
  return sessionSidecarPaths(path.resolve(sessionFile)).pendingFinalize;
}

async function readPendingFile(file: string, sessionFile: string): Promise<PendingFile> {
  let text: string | undefined;
  try {
    text = readSmallFile(file);
  } catch (err) {
    throw new SessionFileError("SESSION_UNREADABLE", file, `cannot read pending-finalize record ${file} of session ${sessionFile} (${errCode(err) ?? String(err)})`, {
      cause: err,
    });
  }
  if (text === undefined) return { version: 1, records: [] };
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new SessionFileError("SESSION_PENDING_INVALID", file, `pending-finalize record ${file} is not valid JSON (a turn moves it aside to .corrupt-<n>; a read-only listing leaves it)`, { cause: err });
  }
  const version = (json as { version?: unknown } | null)?.version;
  if (typeof json === "object" && json !== null && version !== undefined && version !== 1) {
    throw new SessionFileError(
      "SESSION_SIDECAR_VERSION_UNSUPPORTED",
      file,
      `pending-finalize record ${file} has format version ${JSON.stringify(version)}, and this version of codex-turn-machine reads version 1 (written by a newer version?); nothing was moved or changed: finish its turns with the version that wrote it, or move the file aside yourself`,
    );
  }
  const r = FileSchema.safeParse(json);
  if (!r.success) {
    throw new SessionFileError(
      "SESSION_PENDING_INVALID",
      file,
      `pending-finalize record ${file} has an unexpected shape (${r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}) (a turn moves it aside to .corrupt-<n>; a read-only listing leaves it)`,
    );
  }
  return r.data;
}

/**
 * Write the sidecar: created in place when there is none (the common case: one turn's record), else replaced
 * atomically (temp file + rename); an empty record set removes it. Creating is about 6x cheaper than replacing on
 * ext4 (a rename over an existing file flushes the new file's data first), and a record torn by an OS crash while
 * being created is unreadable JSON, which recovery moves aside: the transcript append it guards comes after it and
 * was not committed either. `durable: false` skips the fsyncs: the caller commits the record with
 * {@link commitPendingFinalize} (the turn host does it beside the transcript's own fsync). A removal is never fsynced:
 * if an OS crash brings a cleared record back, recovery finalizes that turn again, which is the at-least-once window
 * described at the top of this module (a process crash cannot bring it back).
 */
async function writePendingFile(file: string, data: PendingFile, opts: { durable: boolean } = { durable: true }): Promise<void> {
  const dir = path.dirname(file);
  try {
    if (data.records.length === 0) {
      fs.rmSync(file, { force: true });
      return;
    }
    // Replacing uses a fixed temp name: safe because updates run under the session lock, and a crash leaves no litter
    // behind (the next update overwrites it).
    const text = `${JSON.stringify(data)}\n`;
    if (!(await createSmallFile(file, text, { durable: opts.durable }))) {
      await replaceSmallFile(file, `${file}.tmp`, text, { durable: opts.durable, beforeRename: () => faultPoint("pending:before-rename") });
    }
    faultPoint("pending:after-rename");
    if (opts.durable) await fsyncDirectory(dir);
  } catch (err) {
    if (err instanceof SessionFileError) throw err;
    throw new SessionFileError("SESSION_WRITE_FAILED", file, `cannot write pending-finalize record ${file} (${errCode(err) ?? String(err)})`, {
      cause: err,
    });
  }
}

const queues = new Map<string, Promise<unknown>>();

/** Serialize read-modify-write updates of one sidecar within this process (held briefly, never while waiting). */
function queued<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const prev = queues.get(file) ?? Promise.resolve();
  const run = prev.then(
    () => fn(),
    () => fn(),
  );
  queues.set(file, run);
  void run.then(
    () => undefined,
    () => undefined,
  ).then(() => {
    if (queues.get(file) === run) queues.delete(file);
  });
  return run;
}

/** Optionally take the session lock first, then the in-process queue (never the other way round: no lock-order cycle). */
function runSerialized<T>(sessionFile: string, file: string, opts: PendingFinalizeOptions, fn: () => Promise<T>): Promise<T> {
  if (!opts.takeLock) return queued(file, fn);
  const lockOpts: SessionLockOptions = {
    ...(typeof opts.takeLock === "object" ? opts.takeLock : {}),
    ...(opts.logger ? { logger: opts.logger } : {}),
  };
  return withSessionLock(sessionFile, () => queued(file, fn), lockOpts);
}

/**
 * Durably record that a turn is mirrored (or about to be) and awaits its engine finalize. Recording the same turnId
 * again replaces the earlier record (idempotent).
 *
 * @example
 * ```ts
 * await recordPendingFinalize(sessionFile, { threadId, turnId, prePromptMessageCount: 12, messageCount: 3, status: "completed" });
 * ```
 */
export async function recordPendingFinalize(
  sessionFile: string,
  record: Omit<PendingFinalizeRecord, "recordedAt">,
  opts: PendingFinalizeOptions = {},
): Promise<PendingFinalizeRecord> {
  return writeRecord(sessionFile, checkedRecord(RecordInputSchema, sessionFile, record), opts);
}

/** The record as `schema` parsed it, or a typed error naming every invalid field. */
function checkedRecord(schema: z.ZodType, sessionFile: string, record: unknown): Omit<PendingFinalizeRecord, "recordedAt"> {
  const r = schema.safeParse(record);
  if (r.success) return r.data as Omit<PendingFinalizeRecord, "recordedAt">;
  throw new SessionFileError(
    "SESSION_INVALID_ARGUMENT",
    sessionFile,
    `invalid pending-finalize record for session ${sessionFile}: ${r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
  );
}

/** The record's own fields; its snapshot's messages are not walked (see {@link recordValidatedPendingFinalize}). */
const RecordScalarsSchema = RecordInputSchema.extend({ messages: z.array(z.any()).optional() });

/**
 * {@link recordPendingFinalize} for a record whose snapshot the caller took from already-validated data (the session
 * store writing the machine's turn record): the record's own fields are checked, the snapshot's messages are not
 * walked again by a schema on the turn's critical path.
 */
export async function recordValidatedPendingFinalize(
  sessionFile: string,
  record: Omit<PendingFinalizeRecord, "recordedAt">,
  opts: PendingFinalizeOptions = {},
): Promise<PendingFinalizeRecord> {
  return writeRecord(sessionFile, checkedRecord(RecordScalarsSchema, sessionFile, record), opts);
}

async function writeRecord(
  sessionFile: string,
  record: Omit<PendingFinalizeRecord, "recordedAt">,
  opts: PendingFinalizeOptions,
): Promise<PendingFinalizeRecord> {
  const logger = opts.logger ?? silentLogger;
  const file = pendingPath(sessionFile);
  return runSerialized(sessionFile, file, opts, async () => {
    const data = opts.knownEmpty ? { version: 1 as const, records: [] } : await readPendingFile(file, sessionFile);
    const next = { ...record, recordedAt: new Date().toISOString() } as PendingFinalizeRecord;
    const at = data.records.findIndex((x) => x.turnId === next.turnId);
    if (at >= 0) data.records[at] = next;
    else data.records.push(next);
    await writePendingFile(file, data, { durable: opts.deferCommit !== true });
    logger.info(
      { event: "transcript.pending.recorded", threadId: next.threadId, turnId: next.turnId, pending: data.records.length, replaced: at >= 0 },
      "pending finalize recorded",
    );
    return next;
  });
}

/**
 * Make a record written with `deferCommit` durable: fsync the sidecar and its directory (together). Nothing to do
 * when no record exists.
 *
 * @example
 * ```ts
 * await recordPendingFinalize(sessionFile, record, { deferCommit: true });
 * await Promise.all([appendAndFsyncTranscript(), commitPendingFinalize(sessionFile)]);
 * ```
 */
export async function commitPendingFinalize(sessionFile: string): Promise<void> {
  const file = pendingPath(sessionFile);
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (err) {
    if (errCode(err) === "ENOENT") return;
    throw new SessionFileError("SESSION_WRITE_FAILED", file, `cannot commit pending-finalize record ${file} (${errCode(err) ?? String(err)})`, { cause: err });
  }
  try {
    await Promise.all([fsyncFd(fd), fsyncDirectory(path.dirname(file))]);
  } catch (err) {
    throw new SessionFileError("SESSION_WRITE_FAILED", file, `cannot commit pending-finalize record ${file} (${errCode(err) ?? String(err)})`, { cause: err });
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Clear a turn's record once its engine finalize returned. Returns whether a record was removed.
 *
 * @example
 * ```ts
 * await completePendingFinalize(sessionFile, turnId);
 * ```
 */
export async function completePendingFinalize(
  sessionFile: string,
  turnId: string,
  opts: PendingFinalizeOptions & {
    /** The caller holds the lock and knows the record set is exactly this turn's record: remove it unread. */
    onlyRecord?: boolean | undefined;
  } = {},
): Promise<boolean> {
  if (typeof turnId !== "string" || turnId.length === 0) {
    throw new SessionFileError("SESSION_INVALID_ARGUMENT", sessionFile, `completePendingFinalize for session ${sessionFile} needs a non-empty turnId`);
  }
  const logger = opts.logger ?? silentLogger;
  const file = pendingPath(sessionFile);
  return runSerialized(sessionFile, file, opts, async () => {
    if (opts.onlyRecord) {
      // The caller (holding the lock since it listed and wrote the set) knows this turn's is the only record: the
      // sidecar goes without being read back (it holds the turn's whole snapshot).
      // Renamed away at once and removed in the background (see discard.ts): the unlink of an fsynced file waits on the
      // file system, right before the result is reported.
      let removed: boolean;
      try {
        removed = discardPath(file, () => fs.unlinkSync(file), { file: true });
      } catch (err) {
        if (errCode(err) !== "ENOENT") {
          throw new SessionFileError("SESSION_WRITE_FAILED", file, `cannot remove pending-finalize record ${file} (${errCode(err) ?? String(err)})`, { cause: err });
        }
        removed = false;
      }
      if (removed) logger.info({ event: "transcript.pending.completed", turnId, pending: 0 }, "pending finalize cleared");
      return removed;
    }
    const data = await readPendingFile(file, sessionFile);
    const before = data.records.length;
    data.records = data.records.filter((x) => x.turnId !== turnId);
    if (data.records.length === before) return false;
    await writePendingFile(file, data);
    logger.info({ event: "transcript.pending.completed", turnId, pending: data.records.length }, "pending finalize cleared");
    return true;
  });
}

/**
 * Add mirror keys to a turn's `ingestedKeys` (ingest progress; kept in first-seen order, duplicates ignored). Returns
 * false, with a warning, when no record for `turnId` exists (nothing is written).
 *
 * @example
 * ```ts
 * await markPendingIngested(sessionFile, turnId, [mirrorKey(threadId, turnId, "prompt")]);
 * ```
 */
export async function markPendingIngested(
  sessionFile: string,
  turnId: string,
  messageKeys: readonly string[],
  opts: PendingFinalizeOptions = {},
): Promise<boolean> {
  const keys = z.array(z.string().min(1)).safeParse(messageKeys);
  if (typeof turnId !== "string" || turnId.length === 0 || !keys.success) {
    throw new SessionFileError("SESSION_INVALID_ARGUMENT", sessionFile, `markPendingIngested for session ${sessionFile} needs a non-empty turnId and non-empty string keys`);
  }
  const logger = opts.logger ?? silentLogger;
  const file = pendingPath(sessionFile);
  return runSerialized(sessionFile, file, opts, async () => {
    const data = await readPendingFile(file, sessionFile);
    const record = data.records.find((x) => x.turnId === turnId);
    if (!record) {
      logger.warn({ event: "transcript.pending.ingest_unknown_turn", turnId, keys: keys.data.length }, "no pending record for the turn; ingest progress not recorded");
      return false;
    }
    const merged = new Set(record.ingestedKeys ?? []);
    const before = merged.size;
    for (const k of keys.data) merged.add(k);
    if (merged.size === before) return true;
    record.ingestedKeys = [...merged];
    await writePendingFile(file, data);
    logger.debug({ event: "transcript.pending.ingested", turnId, ingested: merged.size }, "pending ingest progress recorded");
    return true;
  });
}

/**
 * Whether the session has a pending-finalize sidecar at all (readable or not): one `stat`, no read. Only a missing
 * file (or a path that cannot exist: a file in place of its directory) counts as none; any other error says "maybe",
 * so recovery looks and reports it.
 *
 * @example
 * ```ts
 * if (pendingFinalizeExists(sessionFile)) await finalizePendingTurns(input, logger);
 * ```
 */
export function pendingFinalizeExists(sessionFile: string): boolean {
  // A missing record is the common case: stat without throwing (the ENOENT exception, built with its stack on every
  // turn, cost more than the syscall). A path under a file (ENOTDIR) cannot hold one either: Node 22+ returns
  // undefined for it as for ENOENT, Node 20 throws, so it is named here to answer the same on both.
  try {
    return fs.statSync(pendingPath(sessionFile), { throwIfNoEntry: false }) !== undefined;
  } catch (err) {
    return errCode(err) !== "ENOTDIR";
  }
}

/**
 * Turns still waiting for their finalize, oldest first. No lock needed: the sidecar is only ever replaced whole.
 * Never writes: an unreadable sidecar throws `SESSION_PENDING_INVALID` and stays as it is. A turn then moves it aside
 * ({@link movePendingFinalizeAside}; the session store's `listPending()` does both), inspection only reports it.
 *
 * @example
 * ```ts
 * for (const p of await listPendingFinalize(sessionFile)) await finalize(p);
 * ```
 */
export async function listPendingFinalize(sessionFile: string): Promise<PendingFinalizeRecord[]> {
  const data = await readPendingFile(pendingPath(sessionFile), sessionFile);
  return data.records.map((r) => ({ ...r }) as PendingFinalizeRecord);
}

/**
 * Move a pending-finalize sidecar that cannot be read (`SESSION_PENDING_INVALID`) aside to `<file>.corrupt-<n>`, so
 * the session is not wedged: every later attempt would otherwise reject. The file is kept for inspection; the turns it
 * named are not finalized again. Returns the new path, or undefined when there was nothing to move.
 *
 * @example
 * ```ts
 * const aside = await movePendingFinalizeAside(sessionFile); // ".../s1.jsonl.codex-pending.json.corrupt-1"
 * ```
 */
export async function movePendingFinalizeAside(sessionFile: string): Promise<string | undefined> {
  const file = pendingPath(sessionFile);
  return queued(file, async () => {
    const aside = await nextFreePath(`${file}.corrupt`);
    try {
      await fsp.rename(file, aside);
    } catch (err) {
      if (errCode(err) === "ENOENT") return undefined;
      throw new SessionFileError("SESSION_WRITE_FAILED", file, `cannot move the unreadable pending-finalize record ${file} aside (${errCode(err) ?? String(err)})`, { cause: err });
    }
    await fsyncDirectory(path.dirname(file));
    return aside;
  });
}
