/**
 * The writer's index of a session file (ids, idempotency keys, leaf, size), cached per canonical path so an append
 * never re-reads the whole file: a stat decides whether it is current, a grown file is read from where the index
 * ended (after checking its last indexed bytes are unchanged).
 */
import { promises as fsp } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import type { Logger } from "pino";
import { createLruMap } from "../lru-map.js";
import { SessionFileError } from "./errors.js";
import { entryIdempotencyKey, SESSION_FORMAT_VERSION, type SessionEntry, type SessionHeader } from "./entries.js";
import { checkHeader, HeaderSchema, isEntryShape, parseLine, readRange, statOrMissingSync, versionError } from "./parse.js";
import { invalidateHistoryCache } from "./history-cache.js";
import { repairTornTail, terminateLastLine } from "./repair.js";
import { sessionIoError } from "./resolve.js";

export const TAIL_CHECK_BYTES = 64;

export interface FileIndex {
  real: string;
  dev: number;
  ino: number;
  /** Bytes covered by complete lines (the index describes exactly [0, size)). */
  size: number;
  mtimeMs: number;
  header: SessionHeader | null;
  ids: Set<string>;
  keys: Map<string, string>;
  lastEntryId: string | null;
  entryCount: number;
  lineCount: number;
  corruptLines: number;
  /** The last bytes before `size`, to check that a grown file still starts with what we indexed. */
  tail: Buffer;
}

/**
 * Sessions whose index is kept, least recently used dropped first. A long-running host touches many sessions; an
 * unbounded cache held every id and idempotency key of every transcript the process ever opened (about 160 bytes per
 * entry, measured). A dropped index costs one full scan of that file at its next append.
 */
const MAX_INDEXED_SESSIONS = 64;

const indexCache = createLruMap<string, FileIndex>(MAX_INDEXED_SESSIONS);

/** The cached index of `real`, marked as most recently used. */
export function cachedIndex(real: string): FileIndex | undefined {
  return indexCache.get(real);
}

/** Cache `index` as the most recently used one, dropping the least recently used beyond the bound. */
export function rememberIndex(real: string, index: FileIndex): void {
  indexCache.set(real, index);
}

/** Forget the cached index of `real` (its file changed in a way an append cannot follow). */
export function forgetIndex(real: string): void {
  indexCache.delete(real);
}

/** The sessions with a cached index, least recently used first (tests and diagnostics). */
export function cachedIndexPaths(): string[] {
  return indexCache.keys();
}

/**
 * Forget cached indexes and histories (all, or one canonical path). Reset/archive calls it; tests use it to measure a cold open.
 *
 * @example
 * ```ts
 * invalidateSessionIndex(); // next open re-reads every session file once
 * ```
 */
export function invalidateSessionIndex(realPath?: string): void {
  invalidateHistoryCache(realPath);
  if (realPath === undefined) indexCache.clear();
  else indexCache.delete(realPath);
}

export function emptyIndex(real: string): FileIndex {
  return {
    real,
    dev: 0,
    ino: 0,
    size: 0,
    mtimeMs: 0,
    header: null,
    ids: new Set(),
    keys: new Map(),
    lastEntryId: null,
    entryCount: 0,
    lineCount: 0,
    corruptLines: 0,
    tail: Buffer.alloc(0),
  };
}

export function indexAddEntry(index: FileIndex, e: SessionEntry): void {
  index.ids.add(e.id);
  index.lastEntryId = e.id;
  index.entryCount++;
  const key = entryIdempotencyKey(e);
  if (key !== undefined && !index.keys.has(key)) index.keys.set(key, e.id);
}

/**
 * Consume the complete lines of `chunk` (which starts at file offset `index.size`) into the index. Returns the
 * unterminated remainder (a possibly torn last line).
 */
export function scanIntoIndex(index: FileIndex, chunk: Buffer, reported: string, corrupt: number[]): Buffer {
  let pos = 0;
  for (;;) {
    const nl = chunk.indexOf(10, pos);
    if (nl < 0) break;
    index.lineCount++;
    const parsed = parseLine(chunk, pos, nl);
    pos = nl + 1;
    if (parsed.kind === "blank") continue;
    if (index.header === null) {
      const header = checkHeader(parsed.kind === "object" ? parsed.value : null, reported, index.lineCount);
      const version = header.version ?? 1;
      if (version !== SESSION_FORMAT_VERSION) throw versionError(reported, version);
      index.header = header;
      continue;
    }
    if (parsed.kind === "corrupt") {
      index.corruptLines++;
      corrupt.push(index.lineCount);
      continue;
    }
    if (parsed.value.type === "session") continue; // pi ignores repeated headers too
    if (!isEntryShape(parsed.value)) {
      index.corruptLines++;
      corrupt.push(index.lineCount);
      continue;
    }
    indexAddEntry(index, parsed.value);
  }
  const consumed = chunk.subarray(0, pos);
  index.size += pos;
  if (consumed.length > 0) {
    const joined = consumed.length >= TAIL_CHECK_BYTES ? consumed : Buffer.concat([index.tail, consumed]);
    index.tail = Buffer.from(joined.subarray(Math.max(0, joined.length - TAIL_CHECK_BYTES)));
  }
  return chunk.subarray(pos);
}


/** Bring the cached index up to date with the file (incrementally when the file only grew), repairing a torn tail. */
export async function loadIndex(real: string, reported: string, logger: Logger, attempt = 0): Promise<FileIndex> {
  const st = statOrMissingSync(real, reported);
  if (!st) {
    indexCache.delete(real);
    return emptyIndex(real);
  }
  let index = cachedIndex(real);
  if (index && index.dev === st.dev && index.ino === st.ino && index.size === st.size && index.mtimeMs === st.mtimeMs) {
    return index;
  }
  // The index is updated in place below; until it is consistent again it must not be served from the cache.
  indexCache.delete(real);
  let fh: FileHandle;
  try {
    fh = await fsp.open(real, "r");
  } catch (err) {
    throw sessionIoError(err, reported, "read");
  }
  const corrupt: number[] = [];
  let remainder: Buffer;
  try {
    const fst = await fh.stat();
    let start = 0;
    if (index && index.dev === fst.dev && index.ino === fst.ino && fst.size > index.size) {
      // Grown: verify the bytes we indexed last are still there, then read only the new part.
      const check = await readRange(fh, index.size - index.tail.length, index.tail.length);
      if (check.equals(index.tail)) start = index.size;
      else index = undefined;
    } else {
      index = undefined;
    }
    if (!index) {
      index = emptyIndex(real);
      start = 0;
    }
    index.dev = fst.dev;
    index.ino = fst.ino;
    const chunk = await readRange(fh, start, fst.size - start);
    remainder = scanIntoIndex(index, chunk, reported, corrupt);
    index.mtimeMs = fst.mtimeMs;
  } finally {
    await fh.close();
  }
  if (corrupt.length > 0) {
    logger.warn(
      { event: "transcript.corrupt_lines", sessionFile: reported, count: corrupt.length, lines: corrupt.slice(0, 20) },
      "corrupt transcript lines skipped and left in place",
    );
  }
  if (remainder.length > 0) {
    const parsed = parseLine(remainder, 0, remainder.length);
    const complete =
      parsed.kind === "object" &&
      (index.header === null ? HeaderSchema.safeParse(parsed.value).success : isEntryShape(parsed.value));
    if (complete) {
      await terminateLastLine(index, reported, logger);
      scanIntoIndex(index, Buffer.concat([remainder, Buffer.from("\n")]), reported, corrupt);
    } else {
      await repairTornTail(index, remainder, reported, logger);
    }
    const after = await fsp.stat(real);
    index.mtimeMs = after.mtimeMs;
    if (after.size !== index.size) {
      // Someone appended during the repair (a writer not honouring the lock): index again from scratch.
      indexCache.delete(real);
      if (attempt >= 3) {
        throw new SessionFileError("SESSION_WRITE_FAILED", reported, `session file ${reported} keeps changing while being repaired; is another writer ignoring the lock?`);
      }
      return loadIndex(real, reported, logger, attempt + 1);
    }
  }
  rememberIndex(real, index);
  return index;
}

