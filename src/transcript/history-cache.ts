/**
 * The per-turn history read, cached so its cost does not grow with the session.
 *
 * Every turn needs the rebuilt context of the whole transcript. Re-parsing a 10,000-message file costs 45-90 ms, so
 * the parsed entries are kept per canonical path with the file's identity (dev, ino, size, mtime) and the last bytes
 * read. A turn then costs one `stat` when nothing changed, or a read and parse of only the appended bytes when the
 * file grew (after checking that the bytes read last time are still in place); anything else (replaced, truncated,
 * rewritten in place) is parsed again from the start. What this process appends itself is taken in while the append's
 * fsync runs (`extendCachedHistory`), so the next turn's read is one `stat` again.
 *
 * What it hands out is deeply frozen and shared between turns: an engine that mutates a message gets a TypeError at
 * the mutation (strict mode), never a corrupted cache. Copy (`structuredClone`) before changing anything.
 *
 * Unlike `readSessionTranscript` (inspection, any version), this read is for a turn that will append: a header version
 * other than 3 throws `SESSION_VERSION_UNSUPPORTED` and another session id `SESSION_ID_MISMATCH`, before the model is
 * called. Malformed entries are validated away (`validate.ts`) and counted; a torn last line is ignored.
 */
import fs, { promises as fsp, type Stats } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "pino";
import type { SessionHistory } from "../store/session-store.js";
import { silentLogger } from "../log/logger.js";
import { buildSessionContextFromEntries, entryContextMessage } from "./context.js";
import { entryOrigin, SESSION_FORMAT_VERSION, type SessionEntry, type SessionHeader, type TranscriptOrigin } from "./entries.js";
import { SessionFileError } from "./errors.js";
import { copyArray, deepFreeze, markAppendedTo, markDeepFrozen } from "./freeze.js";
import { checkHeader, isEntryShape, parseLine, readRange, statOrMissingSync, versionError } from "./parse.js";
import { sessionIoError } from "./resolve.js";
import { validateEntry } from "./validate.js";

/**
 * Sessions whose parsed entries are kept, least recently read dropped first: at most this many, and at most
 * `bytes` of transcript between them (parsed, a message takes about 2-3 times its bytes on the heap). The session
 * just read is always kept, whatever its size. A dropped session is parsed again from the start at its next read.
 */
const limits = { sessions: 32, bytes: 256 * 1024 * 1024 };
const TAIL_CHECK_BYTES = 64;
/** Appended bytes read synchronously (one turn's mirror is a few KB; more than this is read asynchronously). */
const SYNC_READ_MAX_BYTES = 1 << 20;
const MAX_LINES_NAMED = 20;

interface HistoryState {
  dev: number;
  ino: number;
  /** Bytes of complete lines parsed. */
  size: number;
  /** `st.size` when last read (may include an unterminated last line). */
  fileSize: number;
  mtimeMs: number;
  /** The last bytes before `size`, to check that a grown file still starts with what was parsed. */
  tail: Buffer;
  lineCount: number;
  header: SessionHeader | null;
  /** Validated, frozen entries in file order (malformed ones as chain-only stubs). */
  entries: SessionEntry[];
  byId: Map<string, SessionEntry>;
  skippedLines: number[];
  /** Line numbers of entries after the first whose `parentId` is null (pi: a new root). */
  rootLines: number[];
  /** The history built at the last read, when it had no unterminated entry (the base for the append fast path). */
  history: SessionHistory | undefined;
  /** Extended by this process's own append, whose stat is not recorded yet (see `extendCachedHistory`). */
  awaitingStat?: boolean | undefined;
}

const cache = new Map<string, HistoryState>();

/**
 * Forget cached histories (all, or one canonical path). `invalidateSessionIndex` calls it too.
 *
 * @example
 * ```ts
 * invalidateHistoryCache(); // the next read parses every transcript from the start
 * ```
 */
export function invalidateHistoryCache(realPath?: string): void {
  if (realPath === undefined) cache.clear();
  else cache.delete(realPath);
}

/** Options of {@link readCachedHistory}. */
export interface CachedHistoryOptions {
  /** The turn's session id: an existing header naming another id throws `SESSION_ID_MISMATCH`. */
  sessionId?: string | undefined;
  logger?: Logger | undefined;
}

const EMPTY_HISTORY: SessionHistory = deepFreeze({
  messages: [],
  origins: [],
  entryCount: 0,
  lastEntryId: undefined,
  skippedEntries: 0,
  warnings: [],
  exists: false,
});

/**
 * The rebuilt, deeply frozen history of a transcript (canonical path `real`; `reported` names it in errors). A
 * missing file is an empty history; nothing is ever written.
 *
 * @example
 * ```ts
 * const h = await readCachedHistory(await resolveSessionPath(file), file, { sessionId: "s1" });
 * h.messages.length; h.origins[0]; h.lastEntryId;
 * ```
 */
export async function readCachedHistory(real: string, reported: string, opts: CachedHistoryOptions = {}): Promise<SessionHistory> {
  const logger = opts.logger ?? silentLogger;
  const st = statOrMissingSync(real, reported);
  if (!st) {
    cache.delete(real);
    return EMPTY_HISTORY;
  }
  const hit = cache.get(real);
  if (hit && hit.history && isUnchanged(hit, st)) {
    checkIdentity(hit.header, reported, opts.sessionId);
    touch(real, hit);
    return hit.history;
  }
  const skippedBefore = hit?.skippedLines.length ?? 0;
  const { state, added, tailEntry, tornBytes, base } = await parseNewBytes(real, reported, hit, st);
  checkIdentity(state.header, reported, opts.sessionId);
  const history = buildHistory(state, added, base, tailEntry, tornBytes);
  state.history = tailEntry ? undefined : history;
  touch(real, state);
  const newlySkipped = state.skippedLines.length - (base ? skippedBefore : 0);
  if (tornBytes > 0 || newlySkipped > 0) {
    logger.warn(
      { event: "transcript.damage", sessionFile: path.basename(reported), corruptLines: history.skippedEntries, firstCorruptLines: state.skippedLines.slice(0, MAX_LINES_NAMED), tornTailBytes: tornBytes },
      "transcript damage skipped while reading",
    );
  }
  logger.debug(
    { event: "transcript.history_read", entries: history.entryCount, parsedEntries: added.length, incremental: base !== undefined, skipped: history.skippedEntries },
    "session history read",
  );
  return history;
}

/**
 * The writer appended `data` (complete lines) at the end of `real`, whose stat on the open descriptor was `before` the
 * write: extend the cached history by the appended entries, so that the next turn's read is one `stat` instead of a
 * read and parse of what this process just wrote. Called while the append's fsync is in flight, when the event loop
 * would otherwise wait for the disk; {@link confirmCachedHistory} then records the file's stat once the fsync
 * succeeded. Until then the entry does not match the file, and a read in between reads it as before.
 *
 * Only when the cache holds exactly the file as it was before the write (same identity, size and mtime, nothing
 * unterminated); anything else leaves the cache as it is. An appended line that a read would report (malformed, a new
 * root) drops the entry, so that read re-parses and reports it. A writer whose append fails calls
 * {@link invalidateHistoryCache}.
 *
 * @example
 * ```ts
 * const before = fs.fstatSync(fd);
 * fs.writeSync(fd, data);
 * const synced = fsyncFd(fd);
 * extendCachedHistory(real, before, data);
 * await synced;
 * confirmCachedHistory(real, fs.fstatSync(fd)); // the next readCachedHistory(real, ...) is a stat
 * ```
 */
export function extendCachedHistory(real: string, before: Stats, data: Buffer): void {
  const hit = cache.get(real);
  if (!hit?.history || hit.header === null || !isUnchanged(hit, before) || hit.size !== before.size || data[data.length - 1] !== 10) return;
  const base = hit.history;
  const skippedBefore = hit.skippedLines.length;
  const rootsBefore = hit.rootLines.length;
  try {
    const added: SessionEntry[] = [];
    scanLines(hit, data, real, added);
    if (hit.skippedLines.length !== skippedBefore || hit.rootLines.length !== rootsBefore) throw new Error("left to the next read");
    hit.history = buildHistory(hit, added, base, undefined, 0);
    hit.awaitingStat = true;
  } catch {
    cache.delete(real);
  }
}

/**
 * The append {@link extendCachedHistory} took in is durable and the file's stat is `after`: the extended entry now
 * matches the file (when `after` is exactly that file at that size; otherwise the entry is dropped).
 *
 * @example
 * ```ts
 * confirmCachedHistory(real, fs.fstatSync(fd));
 * ```
 */
export function confirmCachedHistory(real: string, after: Stats): void {
  const hit = cache.get(real);
  if (!hit?.awaitingStat) return;
  hit.awaitingStat = false;
  if (after.dev !== hit.dev || after.ino !== hit.ino || after.size !== hit.size) {
    cache.delete(real);
    return;
  }
  hit.fileSize = after.size;
  hit.mtimeMs = after.mtimeMs;
  touch(real, hit);
}

function isUnchanged(s: HistoryState, st: Stats): boolean {
  return s.dev === st.dev && s.ino === st.ino && s.fileSize === st.size && s.mtimeMs === st.mtimeMs;
}

function touch(real: string, state: HistoryState): void {
  cache.delete(real);
  cache.set(real, state);
  let bytes = 0;
  for (const s of cache.values()) bytes += s.size;
  // The oldest first; the entry just set is last, so it is never the one dropped.
  for (const [key, s] of cache) {
    if (cache.size <= 1 || (cache.size <= limits.sessions && bytes <= limits.bytes)) break;
    cache.delete(key);
    bytes -= s.size;
  }
}

/**
 * Change the cache's bounds (tests; not part of the package's public API). Returns the previous ones.
 *
 * @example
 * ```ts
 * const previous = setHistoryCacheLimits({ bytes: 64 * 1024 * 1024 });
 * ```
 */
export function setHistoryCacheLimits(next: { sessions?: number | undefined; bytes?: number | undefined }): { sessions: number; bytes: number } {
  const previous = { ...limits };
  if (next.sessions !== undefined) limits.sessions = Math.max(1, Math.floor(next.sessions));
  if (next.bytes !== undefined) limits.bytes = Math.max(0, next.bytes);
  return previous;
}

/** The sessions whose history is cached, least recently read first (tests and diagnostics). */
export function cachedHistoryPaths(): string[] {
  return [...cache.keys()];
}

function checkIdentity(header: SessionHeader | null, reported: string, sessionId: string | undefined): void {
  if (!header) return;
  const version = header.version ?? 1;
  if (version !== SESSION_FORMAT_VERSION) throw versionError(reported, version);
  if (sessionId !== undefined && header.id !== sessionId) {
    throw new SessionFileError(
      "SESSION_ID_MISMATCH",
      reported,
      `session file ${reported} belongs to session ${JSON.stringify(header.id)}, not ${JSON.stringify(sessionId)}; refusing to mix two sessions in one transcript`,
    );
  }
}

function emptyState(): HistoryState {
  return {
    dev: 0,
    ino: 0,
    size: 0,
    fileSize: 0,
    mtimeMs: 0,
    tail: Buffer.alloc(0),
    lineCount: 0,
    header: null,
    entries: [],
    byId: new Map(),
    skippedLines: [],
    rootLines: [],
    history: undefined,
  };
}

interface ParsedBytes {
  state: HistoryState;
  /** Entries parsed by this read (all of them when `base` is undefined). */
  added: SessionEntry[];
  /** A complete entry on an unterminated last line (in the history, not yet in `state`). */
  tailEntry: SessionEntry | undefined;
  tornBytes: number;
  /** The previous history when `added` continues it (incremental read), else undefined. */
  base: SessionHistory | undefined;
}

/** What was read: the file's stat, the bytes after `state.size`, and the state they continue (undefined: from the start). */
interface NewBytes {
  fst: Stats;
  chunk: Buffer;
  state: HistoryState | undefined;
}

/** Read what is new since `prev` (or everything) and parse its complete lines into the state. */
async function parseNewBytes(real: string, reported: string, prev: HistoryState | undefined, st: Stats): Promise<ParsedBytes> {
  const grown = prev !== undefined && isGrowthOf(prev, st);
  const read = (grown && st.size - prev.size <= SYNC_READ_MAX_BYTES ? readGrowthSync(real, reported, prev) : undefined) ?? (await readAsync(real, reported, grown ? prev : undefined));
  const { fst, chunk } = read;
  const base = read.state?.history;
  const state = read.state ?? emptyState();
  const added: SessionEntry[] = [];
  const remainder = scanLines(state, chunk, reported, added);
  state.dev = fst.dev;
  state.ino = fst.ino;
  state.fileSize = fst.size;
  state.mtimeMs = fst.mtimeMs;
  const tailEntry = remainder.length > 0 ? completeTailEntry(state, remainder) : undefined;
  return { state, added, tailEntry, tornBytes: tailEntry ? 0 : remainder.length, base };
}

/** The same file (dev, ino), grown past what was parsed, and a history to extend. */
function isGrowthOf(state: HistoryState, st: Stats): boolean {
  return state.history !== undefined && state.dev === st.dev && state.ino === st.ino && st.size > state.size;
}

/**
 * The steady state (the previous turn appended a few KB): read the last parsed bytes and the new ones in one
 * synchronous read. A few microseconds of blocking I/O here beat four thread-pool round trips, which on a busy host
 * cost milliseconds each. Undefined when the file is not the one parsed (the caller then reads it whole).
 */
function readGrowthSync(real: string, reported: string, state: HistoryState): NewBytes | undefined {
  let fd: number;
  try {
    fd = fs.openSync(real, "r");
  } catch (err) {
    throw sessionIoError(err, reported, "read");
  }
  try {
    const fst = fs.fstatSync(fd);
    if (!isGrowthOf(state, fst)) return undefined;
    const from = state.size - state.tail.length;
    const buf = Buffer.alloc(fst.size - from);
    let off = 0;
    while (off < buf.length) {
      const n = fs.readSync(fd, buf, off, buf.length - off, from + off);
      if (n === 0) break;
      off += n;
    }
    if (!buf.subarray(0, state.tail.length).equals(state.tail)) return undefined;
    return { fst, chunk: buf.subarray(state.tail.length, off), state };
  } catch (err) {
    throw sessionIoError(err, reported, "read");
  } finally {
    fs.closeSync(fd);
  }
}

async function readAsync(real: string, reported: string, prev: HistoryState | undefined): Promise<NewBytes> {
  let fh: FileHandle;
  try {
    fh = await fsp.open(real, "r");
  } catch (err) {
    throw sessionIoError(err, reported, "read");
  }
  try {
    const fst = await fh.stat();
    const state = prev && isGrowthOf(prev, fst) && (await tailMatches(fh, prev)) ? prev : undefined;
    const start = state?.size ?? 0;
    return { fst, chunk: await readRange(fh, start, fst.size - start), state };
  } catch (err) {
    throw sessionIoError(err, reported, "read");
  } finally {
    await fh.close();
  }
}

async function tailMatches(fh: FileHandle, state: HistoryState): Promise<boolean> {
  const check = await readRange(fh, state.size - state.tail.length, state.tail.length);
  return check.equals(state.tail);
}

/** Parse the complete lines of `chunk` (starting at `state.size`) into the state; returns the unterminated rest. */
function scanLines(state: HistoryState, chunk: Buffer, reported: string, added: SessionEntry[]): Buffer {
  let pos = 0;
  for (let nl = chunk.indexOf(10, pos); nl >= 0; nl = chunk.indexOf(10, pos)) {
    state.lineCount++;
    const parsed = parseLine(chunk, pos, nl);
    pos = nl + 1;
    if (parsed.kind === "blank") continue;
    if (state.header === null) {
      state.header = checkHeader(parsed.kind === "object" ? parsed.value : null, reported, state.lineCount);
      continue;
    }
    if (parsed.kind === "corrupt" || !isEntryShape(parsed.value)) {
      if (parsed.kind === "object" && parsed.value.type === "session") continue; // pi ignores repeated headers
      state.skippedLines.push(state.lineCount);
      continue;
    }
    const entry = admitEntry(state, parsed.value, state.lineCount);
    added.push(entry);
  }
  state.size += pos;
  if (pos > 0) {
    const consumed = chunk.subarray(0, pos);
    const joined = consumed.length >= TAIL_CHECK_BYTES ? consumed : Buffer.concat([state.tail, consumed]);
    state.tail = Buffer.from(joined.subarray(Math.max(0, joined.length - TAIL_CHECK_BYTES)));
  }
  return chunk.subarray(pos);
}

/** Validate, freeze and index one entry. */
function admitEntry(state: HistoryState, value: SessionEntry, lineNo: number): SessionEntry {
  const { entry, invalid } = validateEntry(value);
  if (invalid !== undefined) state.skippedLines.push(lineNo);
  if (state.entries.length > 0 && (entry.parentId === null || entry.parentId === undefined)) state.rootLines.push(lineNo);
  deepFreeze(entry);
  state.entries.push(entry);
  state.byId.set(entry.id, entry);
  return entry;
}

/** A complete entry on an unterminated last line (a crash between write and newline cannot produce one; a hand edit can). */
function completeTailEntry(state: HistoryState, remainder: Buffer): SessionEntry | undefined {
  if (state.header === null) return undefined;
  const parsed = parseLine(remainder, 0, remainder.length);
  if (parsed.kind !== "object" || !isEntryShape(parsed.value)) return undefined;
  const { entry } = validateEntry(parsed.value);
  return deepFreeze(entry);
}

/** Whether `added` extends the previous leaf in one straight chain with no compaction (then the context only grows). */
function continuesLinearly(base: SessionHistory, added: readonly SessionEntry[]): boolean {
  let parent = base.lastEntryId;
  for (const e of added) {
    if (e.type === "compaction" || e.parentId !== parent) return false;
    parent = e.id;
  }
  return true;
}

function originOf(source: SessionEntry): TranscriptOrigin | null {
  return source.type === "compaction" ? null : entryOrigin(source);
}

/**
 * `origin`, frozen, or the previous message's origin object when it names the same thread and turn: a turn's messages
 * then share one origin, so a pass over a long history (the projection's held-message flags, every turn) compares
 * each turn's ids once instead of once per message.
 */
function sharedOrigin(previous: TranscriptOrigin | null | undefined, origin: TranscriptOrigin | null): TranscriptOrigin | null {
  if (origin === null) return null;
  if (previous && previous.threadId === origin.threadId && previous.turnId === origin.turnId) return previous;
  return deepFreeze(origin);
}

function buildHistory(
  state: HistoryState,
  added: readonly SessionEntry[],
  base: SessionHistory | undefined,
  tailEntry: SessionEntry | undefined,
  tornBytes: number,
): SessionHistory {
  let messages: unknown[];
  let origins: Array<TranscriptOrigin | null>;
  const extra = tailEntry ? [...added, tailEntry] : added;
  const appended = base !== undefined && continuesLinearly(base, extra);
  if (appended) {
    // Only the new messages need freezing: the earlier ones are the previous history's, already frozen.
    messages = copyArray(base.messages);
    origins = copyArray(base.origins);
    for (const e of extra) {
      const m = entryContextMessage(e);
      if (m === undefined) continue;
      messages.push(markDeepFrozen(deepFreeze(m)));
      origins.push(sharedOrigin(origins[origins.length - 1], originOf(e)));
    }
  } else {
    const entries = tailEntry ? [...state.entries, tailEntry] : state.entries;
    const byId = tailEntry ? new Map(state.byId).set(tailEntry.id, tailEntry) : state.byId;
    const ctx = buildSessionContextFromEntries(entries, undefined, byId);
    // Messages of message entries are frozen with their entry; custom/summary messages are built here.
    // Marked so the projection may cache a message's rendering by identity (it can never change).
    messages = ctx.messages.map((m) => markDeepFrozen(deepFreeze(m)));
    origins = [];
    for (const source of ctx.sources) origins.push(sharedOrigin(origins[origins.length - 1], originOf(source)));
  }
  const last = tailEntry ?? state.entries[state.entries.length - 1];
  const frozenMessages = Object.freeze(messages);
  const frozenOrigins = Object.freeze(origins);
  // The previous history's arrays with elements appended (or new ones): the projection's per-turn "the kept history,
  // extended?" check then needs no pass over them (`startsWithArray`).
  markAppendedTo(frozenMessages, appended ? base.messages : undefined);
  markAppendedTo(frozenOrigins, appended ? base.origins : undefined);
  return Object.freeze({
    messages: frozenMessages as SessionHistory["messages"],
    origins: frozenOrigins,
    entryCount: state.entries.length + (tailEntry ? 1 : 0),
    lastEntryId: last?.id,
    skippedEntries: state.skippedLines.length,
    warnings: Object.freeze(historyWarnings(state, tornBytes)),
    exists: true,
  });
}

function linesNamed(lines: readonly number[]): string {
  const named = lines.slice(0, MAX_LINES_NAMED).join(", ");
  return lines.length > MAX_LINES_NAMED ? `${named}, ...` : named;
}

function historyWarnings(state: HistoryState, tornBytes: number): string[] {
  const warnings: string[] = [];
  if (state.skippedLines.length > 0) {
    warnings.push(`transcript: ${state.skippedLines.length} malformed entries skipped (lines ${linesNamed(state.skippedLines)})`);
  }
  if (state.rootLines.length > 0) {
    const lastRoot = state.rootLines[state.rootLines.length - 1]!;
    warnings.push(
      `transcript: ${state.rootLines.length} entries after the first have parentId null (lines ${linesNamed(state.rootLines)}); as in pi, each starts a new root, so entries before line ${lastRoot} are outside the context unless the chain leads back to them`,
    );
  }
  if (tornBytes > 0) warnings.push(`transcript: torn last line ignored (${tornBytes} bytes; the next append moves it aside)`);
  return warnings;
}
