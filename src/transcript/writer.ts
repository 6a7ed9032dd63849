/**
 * Append entries to a session file: one O_APPEND write of the whole batch, then fsync; on failure the file is cut back
 * to where it was, so a failed write (ENOSPC, EIO) leaves no torn line. Call it while holding the session lock.
 */
import fs, { type Stats } from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import { silentLogger } from "../log/logger.js";
import { SessionFileError } from "./errors.js";
import {
  deriveEntryId,
  randomEntryId,
  SESSION_FORMAT_VERSION,
  type AppendOptions,
  type NewSessionEntry,
  type OpenSessionOptions,
  type SessionEntry,
  type SessionFileWriter,
  type SessionHeader,
} from "./entries.js";
import { faultPoint, faultsEnabled } from "./fault.js";
import { fsyncDirectory } from "./fsync-dir.js";
import { confirmCachedHistory, extendCachedHistory, invalidateHistoryCache } from "./history-cache.js";
import { fsyncFd } from "./small-file.js";
import { invalidArgs, statOrMissingSync } from "./parse.js";
import { resolveSessionPath, sessionIoError } from "./resolve.js";
import { forgetIndex, indexAddEntry, loadIndex, rememberIndex, TAIL_CHECK_BYTES, type FileIndex } from "./writer-index.js";

const OpenOptionsSchema = z.object({
  sessionId: z.string().min(1),
  cwd: z.string().min(1).optional(),
  sessionRoot: z.string().min(1).optional(),
  logger: z.any().optional(),
  onSessionIdMismatch: z.enum(["warn", "throw"]).optional(),
});

function entryTimestamp(draft: NewSessionEntry): string {
  if (typeof draft.timestamp === "string") return draft.timestamp;
  // A message's own time makes the line deterministic for unchanged input; fall back to now.
  const msg = draft["message"] as { timestamp?: unknown } | undefined;
  const t = msg?.timestamp;
  if (typeof t === "number" && Number.isFinite(t) && Math.abs(t) <= 8.64e15) return new Date(t).toISOString();
  return new Date().toISOString();
}

/**
 * Open a session file for appending (call it while holding the session lock). Validates the path and header,
 * repairs a torn last line, and returns a writer whose idempotency-key index is cached per file, so appending to a
 * long transcript does not re-read it.
 *
 * @example
 * ```ts
 * await withSessionLock(file, async () => {
 *   const w = await openSessionFile(file, { sessionId: "s1" });
 *   if (!w.hasKey(key)) await w.append([{ type: "message", idempotencyKey: key, message }]);
 * });
 * ```
 */
export async function openSessionFile(sessionFile: string, opts: OpenSessionOptions): Promise<SessionFileWriter> {
  const parsedOpts = OpenOptionsSchema.safeParse(opts);
  if (!parsedOpts.success) throw invalidArgs("open options", sessionFile, parsedOpts.error);
  const logger: Logger = opts.logger ?? silentLogger;
  const real = await resolveSessionPath(sessionFile, opts.sessionRoot);
  let index = await loadIndex(real, sessionFile, logger);
  checkSessionId(index, sessionFile, opts, logger);

  const append = async (drafts: NewSessionEntry[], appendOpts: AppendOptions = {}): Promise<SessionEntry[]> => {
    if (drafts.length === 0) {
      await appendOpts.syncAlongside?.();
      return [];
    }
    // Cheap (one stat) unless someone else changed the file since we indexed it.
    index = await loadIndex(real, sessionFile, logger);
    checkSessionId(index, sessionFile, opts, logger);
    const batch = encodeBatch(index, drafts, sessionFile, opts);
    const created = index.size === 0 && statOrMissingSync(real, sessionFile) === null;
    const st = await writeBatch(real, sessionFile, batch.data, index.size, created, appendOpts.syncAlongside);
    commitToIndex(index, batch, st);
    logger.debug(
      { event: "transcript.appended", sessionFile, entries: batch.written.length, bytes: batch.data.length, createdFile: created },
      "entries appended",
    );
    return batch.written;
  };

  return {
    path: real,
    sessionId: opts.sessionId,
    get header() {
      return index.header;
    },
    get entryCount() {
      return index.entryCount;
    },
    get lastEntryId() {
      return index.lastEntryId;
    },
    hasKey: (key) => index.keys.has(key),
    entryIdForKey: (key) => index.keys.get(key),
    hasEntryId: (id) => index.ids.has(id),
    append,
  };
}

function checkSessionId(index: FileIndex, sessionFile: string, opts: OpenSessionOptions, logger: Logger): void {
  if (!index.header || index.header.id === opts.sessionId) return;
  if (opts.onSessionIdMismatch === "throw") {
    throw new SessionFileError(
      "SESSION_ID_MISMATCH",
      sessionFile,
      `session file ${sessionFile} belongs to session ${JSON.stringify(index.header.id)}, not ${JSON.stringify(opts.sessionId)}; nothing was appended`,
    );
  }
  logger.warn(
    { event: "transcript.session_id_mismatch", sessionFile, headerId: index.header.id, sessionId: opts.sessionId },
    "session id differs from the header",
  );
}

/** The bytes of one append and the entries they hold. */
interface EncodedBatch {
  data: Buffer;
  lineCount: number;
  written: SessionEntry[];
  /** The header written first, when the file had none. */
  header: SessionHeader | null;
}

/** Turn drafts into lines chained after the current leaf (ids from keys, or random), checking keys are new. */
function encodeBatch(index: FileIndex, drafts: readonly NewSessionEntry[], sessionFile: string, opts: OpenSessionOptions): EncodedBatch {
  const batchIds = new Set<string>();
  const taken = { has: (id: string) => index.ids.has(id) || batchIds.has(id) };
  const batchKeys = new Set<string>();
  const written: SessionEntry[] = [];
  const lines: string[] = [];
  let header: SessionHeader | null = null;
  if (index.header === null) {
    header = { type: "session", version: SESSION_FORMAT_VERSION, id: opts.sessionId, timestamp: new Date().toISOString(), cwd: opts.cwd ?? process.cwd() };
    lines.push(`${JSON.stringify(header)}\n`);
  }
  let parentId = index.lastEntryId;
  for (const draft of drafts) {
    const { type, idempotencyKey, timestamp: _ts, ...payload } = draft;
    if (typeof type !== "string" || type.length === 0 || type === "session") {
      throw new SessionFileError("SESSION_INVALID_ARGUMENT", sessionFile, `cannot append an entry of type ${JSON.stringify(type)} to ${sessionFile}`);
    }
    if (idempotencyKey !== undefined) {
      if (index.keys.has(idempotencyKey) || batchKeys.has(idempotencyKey)) {
        throw new SessionFileError(
          "SESSION_INVALID_ARGUMENT",
          sessionFile,
          `idempotency key already present in ${sessionFile} (entry ${index.keys.get(idempotencyKey) ?? "in this batch"})`,
        );
      }
      batchKeys.add(idempotencyKey);
    }
    const id = idempotencyKey !== undefined ? deriveEntryId(idempotencyKey, taken) : randomEntryId(taken);
    batchIds.add(id);
    const entry: SessionEntry = { type, id, parentId, timestamp: entryTimestamp(draft), ...(idempotencyKey !== undefined ? { idempotencyKey } : {}), ...payload };
    const line = serializeEntry(entry, sessionFile);
    lines.push(`${line}\n`);
    written.push(JSON.parse(line) as SessionEntry);
    parentId = id;
  }
  return { data: Buffer.from(lines.join(""), "utf8"), lineCount: lines.length, written, header };
}

function serializeEntry(entry: SessionEntry, sessionFile: string): string {
  try {
    return JSON.stringify(entry);
  } catch (err) {
    throw new SessionFileError("SESSION_INVALID_ARGUMENT", sessionFile, `entry for ${sessionFile} is not JSON-serialisable: ${String(err)}`, {
      cause: err,
    });
  }
}

/** Update the index (in place: copying it would make every append O(entries)) only after the data is durable. */
function commitToIndex(index: FileIndex, batch: EncodedBatch, st: Stats): void {
  if (batch.header) index.header = batch.header;
  for (const e of batch.written) indexAddEntry(index, e);
  index.lineCount += batch.lineCount;
  index.size += batch.data.length;
  const joined = batch.data.length >= TAIL_CHECK_BYTES ? batch.data : Buffer.concat([index.tail, batch.data]);
  index.tail = Buffer.from(joined.subarray(Math.max(0, joined.length - TAIL_CHECK_BYTES)));
  index.dev = st.dev;
  index.ino = st.ino;
  index.mtimeMs = st.mtimeMs;
  if (st.size === index.size) rememberIndex(index.real, index);
  else forgetIndex(index.real);
}

/** One O_APPEND write of the whole batch, then fsync. On failure, cut the file back to where it was. */
async function writeBatch(
  real: string,
  reported: string,
  data: Buffer,
  sizeBefore: number,
  created: boolean,
  syncAlongside?: () => Promise<void>,
): Promise<Stats> {
  if (created) {
    try {
      fs.mkdirSync(path.dirname(real), { recursive: true });
    } catch (err) {
      throw sessionIoError(err, reported, "create the directory of");
    }
  }
  // open/write/fstat/close are synchronous (page-cache work, microseconds; each async call was a thread-pool round
  // trip on the turn's critical path, see small-file.ts); the fsync, which waits for the disk, runs on the thread pool.
  let fd: number;
  try {
    fd = fs.openSync(real, "a");
  } catch (err) {
    throw sessionIoError(err, reported, "open for append");
  }
  let st: Stats;
  let alongside: Promise<unknown> | undefined;
  try {
    const before = fs.fstatSync(fd);
    faultPoint("transcript:before-write");
    let off = 0;
    // With a fault hook installed, write in two halves so a crash can land between them (a torn line).
    const firstChunk = faultsEnabled() ? Math.max(1, Math.floor(data.length / 2)) : data.length;
    while (off < data.length) {
      const len = off === 0 ? firstChunk : data.length - off;
      off += fs.writeSync(fd, data, off, len);
      if (off === firstChunk && off < data.length) faultPoint("transcript:mid-write");
    }
    faultPoint("transcript:after-write");
    // The other durable write of this step (the pending-finalize record) is fsynced at the same moment, so both ride
    // one journal commit instead of two in a row. Its failure is reported after the transcript is safe (below).
    alongside = syncAlongside?.().then(() => undefined, (err: unknown) => err ?? new Error("sync failed"));
    const synced = fsyncFd(fd);
    // While the disk works, the history cache takes in the lines just written (the next turn then reads nothing).
    extendCachedHistory(real, before, data);
    await synced;
    faultPoint("transcript:after-fsync");
    st = fs.fstatSync(fd);
    confirmCachedHistory(real, st);
  } catch (err) {
    // What the cache took in from this append is not in the file any more (cut back below).
    invalidateHistoryCache(real);
    // We hold the session lock, so nothing else appended after sizeBefore: cutting back leaves no torn line.
    try {
      fs.ftruncateSync(fd, sizeBefore);
    } catch {
      // Reported below; the next open repairs a torn tail.
    }
    fs.closeSync(fd);
    await alongside;
    throw sessionIoError(err, reported, "append to");
  }
  fs.closeSync(fd);
  if (created) await fsyncDirectory(path.dirname(real));
  const alongsideError = await alongside;
  if (alongsideError !== undefined) throw sessionIoError(alongsideError, reported, "commit the pending-finalize record beside");
  return st;
}

