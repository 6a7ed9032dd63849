/**
 * pi-coding-agent session JSONL (version 3): read, rebuild and append.
 *
 * The format and the rebuild rules match `SessionManager` from `@mariozechner/pi-coding-agent` (0.73.x):
 * line 1 is `{"type":"session","version":3,"id","timestamp","cwd"}`, then one entry per line with `type`, `id`
 * (8 hex), `parentId`, `timestamp` (ISO) and a payload. The message list is rebuilt by walking `parentId` from the
 * last entry in file order (SessionManager's leaf after open); a compaction entry on that path contributes a
 * `compactionSummary` message followed by the path entries from `firstKeptEntryId` on.
 *
 * Our mirror stores each message's idempotency key as an extra top-level `idempotencyKey` field on the `message`
 * entry: SessionManager keeps unknown fields when it opens and re-serialises entries, and never copies them into the
 * rebuilt messages, so the messages an engine sees are exactly the ones we mirrored. Keys written by OpenClaw's own
 * mirror (`message.idempotencyKey`) are read too.
 *
 * Damage policy (a transcript is the user's data: we never rewrite it away):
 * - torn last line (crash mid-append): readers ignore it; the next writer moves the bytes to `<file>.torn-<n>` and
 *   truncates to the last complete line. A last line that is complete JSON but lacks its newline is kept and
 *   terminated instead.
 * - corrupt line in the middle: skipped with a warning, left in place.
 * - missing file: a new, empty session; reading never creates it.
 */
import { createHash, randomBytes } from "node:crypto";
import { promises as fsp } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import type { AgentMessage } from "../context-engine/types.js";
import { silentLogger } from "../log/logger.js";
import { SessionFileError } from "./errors.js";
import { faultPoint, faultsEnabled } from "./fault.js";
import { errCode, resolveSessionPath, sessionIoError } from "./resolve.js";
import { fsyncDirectory } from "./fsync-dir.js";

/** The session format version we read natively and write. */
export const SESSION_FORMAT_VERSION = 3;
/** Prefix of the mirror's idempotency keys: `codex-app-server:<threadId>:<turnId>:<kind>`. */
export const MIRROR_KEY_PREFIX = "codex-app-server";

/** Line 1 of a session file. Unknown fields are kept. */
export interface SessionHeader {
  type: "session";
  version?: number;
  id: string;
  timestamp?: string;
  cwd?: string;
  parentSession?: string;
  [key: string]: unknown;
}

/** Any entry after the header. Unknown entry types and fields are kept. */
export interface SessionEntry {
  type: string;
  id: string;
  parentId: string | null;
  timestamp: string;
  /** Set by our mirror (top level, outside `message`). */
  idempotencyKey?: string;
  [key: string]: unknown;
}

export interface MessageEntry extends SessionEntry {
  type: "message";
  message: AgentMessage;
}
export interface CompactionEntry extends SessionEntry {
  type: "compaction";
  summary: string;
  firstKeptEntryId: string;
  tokensBefore: number;
  details?: unknown;
  fromHook?: boolean;
}
export interface BranchSummaryEntry extends SessionEntry {
  type: "branch_summary";
  fromId: string;
  summary: string;
}
export interface CustomMessageEntry extends SessionEntry {
  type: "custom_message";
  customType: string;
  content: unknown;
  display?: boolean;
  details?: unknown;
}

/** The Codex thread and turn a mirrored message came from. */
export interface TranscriptOrigin {
  threadId: string;
  turnId: string;
}

/** Damage found while reading; counts and line numbers only, never content. */
export interface TranscriptDamage {
  /** 1-based line numbers of complete lines that were skipped (unparsable or not an entry). */
  corruptLines: number[];
  /** Bytes after the last newline that do not form a complete entry (a torn append). 0 when clean. */
  tornTailBytes: number;
}

/** A rebuilt context: messages plus, in parallel, the entry each came from (the compaction entry for its summary). */
export interface SessionContext {
  messages: AgentMessage[];
  sources: SessionEntry[];
}

/** A whole transcript as read from disk. */
export interface SessionTranscript {
  /** Canonical path (symlinks and `..` resolved). */
  path: string;
  exists: boolean;
  header: SessionHeader | null;
  /** Entries in file order (header excluded, corrupt lines skipped). */
  entries: SessionEntry[];
  /** Last entry in file order: the leaf SessionManager resumes from. */
  leafId: string | null;
  damage: TranscriptDamage;
  /** The model-context messages along the leaf's parent chain, as `SessionManager.buildSessionContext()` builds them. */
  buildMessages(): AgentMessage[];
  buildContext(): SessionContext;
}

/** Options for reading. */
export interface ReadSessionOptions {
  /** Expected session id; a mismatch with the header is logged (not fatal). */
  sessionId?: string;
  /** When given, the path must resolve inside it. */
  sessionRoot?: string;
  logger?: Logger;
}

/** Options for opening a session file for appending. */
export interface OpenSessionOptions {
  sessionId: string;
  /** Written to a new file's header; defaults to `process.cwd()`. */
  cwd?: string;
  sessionRoot?: string;
  logger?: Logger;
}

/** An entry to append; `id`, `parentId` and (unless given) `timestamp` are filled in by the writer. */
export interface NewSessionEntry {
  type: string;
  idempotencyKey?: string;
  timestamp?: string;
  [payload: string]: unknown;
}

/**
 * An open session file. Use it while holding the session lock ({@link withSessionLock} in `lock.ts`): the index it
 * keeps (ids, idempotency keys, leaf) is only valid while no one else appends.
 */
export interface SessionFileWriter {
  readonly path: string;
  readonly sessionId: string;
  /** null while the file does not exist (or held only a torn header): the first append writes one. */
  readonly header: SessionHeader | null;
  readonly entryCount: number;
  readonly lastEntryId: string | null;
  hasKey(key: string): boolean;
  entryIdForKey(key: string): string | undefined;
  /** Append entries as a chain after the current leaf: one O_APPEND write of all lines, then fsync. */
  append(entries: NewSessionEntry[]): Promise<SessionEntry[]>;
}

// ---------------------------------------------------------------------------------------------------------------
// Idempotency keys and ids

/**
 * Build a mirror idempotency key.
 *
 * @example
 * ```ts
 * mirrorKey("thr_1", "turn_2", "prompt"); // "codex-app-server:thr_1:turn_2:prompt"
 * ```
 */
export function mirrorKey(threadId: string, turnId: string, kind: string): string {
  return `${MIRROR_KEY_PREFIX}:${threadId}:${turnId}:${kind}`;
}

/**
 * Parse `codex-app-server:<threadId>:<turnId>:<kind>`; null for anything else. The kind may contain colons
 * (OpenClaw's first port used `<role>:<index>`).
 *
 * @example
 * ```ts
 * parseMirrorKey("codex-app-server:t:u:assistant"); // { threadId: "t", turnId: "u", kind: "assistant" }
 * ```
 */
export function parseMirrorKey(key: string): { threadId: string; turnId: string; kind: string } | null {
  const prefix = `${MIRROR_KEY_PREFIX}:`;
  if (!key.startsWith(prefix)) return null;
  const rest = key.slice(prefix.length);
  const a = rest.indexOf(":");
  if (a <= 0) return null;
  const b = rest.indexOf(":", a + 1);
  if (b <= a + 1 || b === rest.length - 1) return null;
  return { threadId: rest.slice(0, a), turnId: rest.slice(a + 1, b), kind: rest.slice(b + 1) };
}

/**
 * The idempotency key of an entry: our top-level field, or OpenClaw's `message.idempotencyKey`.
 *
 * @example
 * ```ts
 * entryIdempotencyKey({ type: "message", id: "a", parentId: null, timestamp: "", idempotencyKey: "k" }); // "k"
 * ```
 */
export function entryIdempotencyKey(entry: SessionEntry): string | undefined {
  if (typeof entry.idempotencyKey === "string") return entry.idempotencyKey;
  const msg = entry["message"];
  if (msg && typeof msg === "object" && typeof (msg as { idempotencyKey?: unknown }).idempotencyKey === "string") {
    return (msg as { idempotencyKey: string }).idempotencyKey;
  }
  return undefined;
}

/**
 * The origin (thread, turn) recorded in an entry's key, or null.
 *
 * @example
 * ```ts
 * entryOrigin(entry); // { threadId: "thr_1", turnId: "turn_2" } for a mirrored entry
 * ```
 */
export function entryOrigin(entry: SessionEntry): TranscriptOrigin | null {
  const key = entryIdempotencyKey(entry);
  const parsed = key === undefined ? null : parseMirrorKey(key);
  return parsed ? { threadId: parsed.threadId, turnId: parsed.turnId } : null;
}

/**
 * Deterministic 8-hex entry id for an idempotency key: sha256(key) (then `key#1`, `key#2`, ... on collision).
 *
 * @example
 * ```ts
 * deriveEntryId("codex-app-server:t:u:prompt", new Set()); // e.g. "3f9a01c2"
 * ```
 */
export function deriveEntryId(key: string, taken: { has(id: string): boolean }): string {
  for (let i = 0; i < 1000; i++) {
    const id = createHash("sha256")
      .update(i === 0 ? key : `${key}#${i}`)
      .digest("hex")
      .slice(0, 8);
    if (!taken.has(id)) return id;
  }
  // Unreachable in practice (would need 1000 collisions); mirror SessionManager's fallback to a longer id.
  return createHash("sha256").update(key).digest("hex");
}

function randomEntryId(taken: { has(id: string): boolean }): string {
  for (let i = 0; i < 100; i++) {
    const id = randomBytes(4).toString("hex");
    if (!taken.has(id)) return id;
  }
  return randomBytes(16).toString("hex");
}

// ---------------------------------------------------------------------------------------------------------------
// Rebuild (port of SessionManager.buildSessionContext)

function isoToMs(ts: unknown): number {
  return new Date(ts as string).getTime();
}

/**
 * Rebuild the model-context messages from entries, exactly as pi's `buildSessionContext(entries, leafId)` does:
 * walk `parentId` from the leaf (default: the last entry), emit the latest compaction's summary first, then the kept
 * entries from `firstKeptEntryId` up to the compaction, then everything after it. `message` entries contribute their
 * message, `custom_message` entries a `custom` message, `branch_summary` entries a `branchSummary` message.
 *
 * @example
 * ```ts
 * const { messages, sources } = buildSessionContextFromEntries(transcript.entries);
 * ```
 */
export function buildSessionContextFromEntries(entries: readonly SessionEntry[], leafId?: string | null): SessionContext {
  const byId = new Map<string, SessionEntry>();
  for (const e of entries) byId.set(e.id, e);
  if (leafId === null) return { messages: [], sources: [] };
  let leaf = leafId ? byId.get(leafId) : undefined;
  if (!leaf) leaf = entries[entries.length - 1];
  if (!leaf) return { messages: [], sources: [] };

  const pathRev: SessionEntry[] = [];
  const seen = new Set<SessionEntry>();
  let current: SessionEntry | undefined = leaf;
  // pi has no cycle guard (a cyclic parent chain hangs it); we stop at the first repeat.
  while (current && !seen.has(current)) {
    seen.add(current);
    pathRev.push(current);
    current = current.parentId ? byId.get(current.parentId) : undefined;
  }
  const chain = pathRev.reverse();

  let compaction: CompactionEntry | null = null;
  for (const e of chain) if (e.type === "compaction") compaction = e as CompactionEntry;

  const messages: AgentMessage[] = [];
  const sources: SessionEntry[] = [];
  const emit = (e: SessionEntry): void => {
    if (e.type === "message") {
      messages.push((e as MessageEntry).message);
      sources.push(e);
    } else if (e.type === "custom_message") {
      const c = e as CustomMessageEntry;
      messages.push({
        role: "custom",
        customType: c.customType,
        content: c.content,
        display: c.display,
        details: c.details,
        timestamp: isoToMs(c.timestamp),
      });
      sources.push(e);
    } else if (e.type === "branch_summary" && (e as BranchSummaryEntry).summary) {
      const b = e as BranchSummaryEntry;
      messages.push({ role: "branchSummary", summary: b.summary, fromId: b.fromId, timestamp: isoToMs(b.timestamp) });
      sources.push(e);
    }
  };

  if (compaction) {
    messages.push({
      role: "compactionSummary",
      summary: compaction.summary,
      tokensBefore: compaction.tokensBefore,
      timestamp: isoToMs(compaction.timestamp),
    });
    sources.push(compaction);
    const idx = chain.findIndex((e) => e.type === "compaction" && e.id === compaction.id);
    let foundFirstKept = false;
    for (let i = 0; i < idx; i++) {
      const e = chain[i]!;
      if (e.id === compaction.firstKeptEntryId) foundFirstKept = true;
      if (foundFirstKept) emit(e);
    }
    for (let i = idx + 1; i < chain.length; i++) emit(chain[i]!);
  } else {
    for (const e of chain) emit(e);
  }
  return { messages, sources };
}

// ---------------------------------------------------------------------------------------------------------------
// Line parsing

const HeaderSchema = z.looseObject({
  type: z.literal("session"),
  id: z.string().min(1),
  version: z.number().int().optional(),
});

type ParsedLine = { kind: "blank" } | { kind: "corrupt" } | { kind: "object"; value: Record<string, unknown> };

function parseLine(buf: Buffer, start: number, end: number): ParsedLine {
  const text = buf.toString("utf8", start, end);
  if (text.trim().length === 0) return { kind: "blank" };
  try {
    const v: unknown = JSON.parse(text);
    if (v && typeof v === "object" && !Array.isArray(v)) return { kind: "object", value: v as Record<string, unknown> };
    return { kind: "corrupt" };
  } catch {
    return { kind: "corrupt" };
  }
}

function isEntryShape(v: Record<string, unknown>): v is SessionEntry {
  return typeof v.type === "string" && v.type !== "session" && typeof v.id === "string";
}

function headerError(file: string, lineNo: number, why: string): SessionFileError {
  return new SessionFileError(
    "SESSION_HEADER_INVALID",
    file,
    `session file ${file} has no valid session header (line ${lineNo}: ${why}); refusing to treat it as a pi transcript`,
  );
}

function checkHeader(value: Record<string, unknown> | null, file: string, lineNo: number): SessionHeader {
  if (!value) throw headerError(file, lineNo, "not JSON");
  const r = HeaderSchema.safeParse(value);
  if (!r.success) throw headerError(file, lineNo, `expected {"type":"session","id":<string>}, got type ${JSON.stringify(value.type)}`);
  return value as SessionHeader;
}

/** Apply pi's v1->v2->v3 migrations in memory (reading only; we never rewrite an old file). */
function migrateInMemory(header: SessionHeader, objects: Record<string, unknown>[]): void {
  const version = header.version ?? 1;
  if (version < 2) {
    const ids = new Set<string>();
    let prev: string | null = null;
    for (let i = 0; i < objects.length; i++) {
      const e = objects[i]!;
      // pi assigns random ids here; ours are derived from the position so a re-read is stable.
      const id = deriveEntryId(`v1-entry:${i}`, ids);
      ids.add(id);
      e.id = id;
      e.parentId = prev;
      prev = id;
      if (e.type === "compaction" && typeof e.firstKeptEntryIndex === "number") {
        // pi's index counts the header as entry 0.
        const target = e.firstKeptEntryIndex === 0 ? undefined : objects[e.firstKeptEntryIndex - 1];
        if (target) e.firstKeptEntryId = target.id;
        delete e.firstKeptEntryIndex;
      }
    }
  }
  if (version < 3) {
    for (const e of objects) {
      const m = e.message as { role?: unknown } | undefined;
      if (e.type === "message" && m && m.role === "hookMessage") m.role = "custom";
    }
  }
}

async function statOrMissing(real: string, reported: string): Promise<import("node:fs").Stats | null> {
  try {
    const st = await fsp.stat(real);
    if (st.isDirectory()) {
      throw new SessionFileError("SESSION_PATH_IS_DIRECTORY", reported, `session path ${reported} is a directory, not a session file`);
    }
    if (!st.isFile()) {
      throw new SessionFileError("SESSION_UNREADABLE", reported, `session path ${reported} is not a regular file`);
    }
    return st;
  } catch (err) {
    if (errCode(err) === "ENOENT") return null;
    throw sessionIoError(err, reported, "read");
  }
}

async function readRange(fh: FileHandle, start: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  let off = 0;
  while (off < length) {
    const { bytesRead } = await fh.read(buf, off, length - off, start + off);
    if (bytesRead === 0) break;
    off += bytesRead;
  }
  return off === length ? buf : buf.subarray(0, off);
}

// ---------------------------------------------------------------------------------------------------------------
// Writer index (cached per canonical path so an append never re-reads the whole file)

const TAIL_CHECK_BYTES = 64;

interface FileIndex {
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

const indexCache = new Map<string, FileIndex>();

/**
 * Forget cached indexes (all, or one canonical path). Reset/archive calls it; tests use it to measure a cold open.
 *
 * @example
 * ```ts
 * invalidateSessionIndex(); // next open re-reads every session file once
 * ```
 */
export function invalidateSessionIndex(realPath?: string): void {
  if (realPath === undefined) indexCache.clear();
  else indexCache.delete(realPath);
}

function emptyIndex(real: string): FileIndex {
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

function indexAddEntry(index: FileIndex, e: SessionEntry): void {
  index.ids.add(e.id);
  index.lastEntryId = e.id;
  index.entryCount++;
  const key = entryIdempotencyKey(e);
  if (key !== undefined && !index.keys.has(key)) index.keys.set(key, e.id);
}

function versionError(file: string, version: number): SessionFileError {
  return new SessionFileError(
    "SESSION_VERSION_UNSUPPORTED",
    file,
    version < SESSION_FORMAT_VERSION
      ? `session file ${file} is version ${version}; open it once with pi (which migrates by rewriting) before mirroring into it`
      : `session file ${file} is version ${version}; this writer only appends to version ${SESSION_FORMAT_VERSION}`,
  );
}

/**
 * Consume the complete lines of `chunk` (which starts at file offset `index.size`) into the index. Returns the
 * unterminated remainder (a possibly torn last line).
 */
function scanIntoIndex(index: FileIndex, chunk: Buffer, reported: string, corrupt: number[]): Buffer {
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

async function nextFreeSideFile(base: string, suffix: (n: number) => string): Promise<{ path: string; fh: FileHandle }> {
  for (let n = 1; n < 100_000; n++) {
    const p = `${base}${suffix(n)}`;
    try {
      return { path: p, fh: await fsp.open(p, "wx") };
    } catch (err) {
      if (errCode(err) === "EEXIST") continue;
      throw err;
    }
  }
  throw new Error(`no free side-file name for ${base}`);
}

/** Move a torn tail aside and truncate the transcript to its last complete line. */
async function repairTornTail(index: FileIndex, torn: Buffer, reported: string, logger: Logger): Promise<void> {
  try {
    const side = await nextFreeSideFile(index.real, (n) => `.torn-${n}`);
    try {
      await side.fh.writeFile(torn);
      await side.fh.sync();
    } finally {
      await side.fh.close();
    }
    const fh = await fsp.open(index.real, "r+");
    try {
      await fh.truncate(index.size);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fsyncDirectory(path.dirname(index.real));
    logger.warn(
      { event: "transcript.torn_tail_repaired", sessionFile: reported, tornBytes: torn.length, keptBytes: index.size, sideFile: side.path },
      "torn last line moved aside and transcript truncated to its last complete line",
    );
  } catch (err) {
    throw new SessionFileError("SESSION_WRITE_FAILED", reported, `cannot repair torn last line of session file ${reported}: ${String(err)}`, {
      cause: err,
    });
  }
}

/** Terminate a last line that is complete JSON but lacks its newline (keeps the entry). */
async function terminateLastLine(index: FileIndex, reported: string, logger: Logger): Promise<void> {
  try {
    const fh = await fsp.open(index.real, "a");
    try {
      await fh.write("\n");
      await fh.sync();
    } finally {
      await fh.close();
    }
    logger.warn({ event: "transcript.last_line_terminated", sessionFile: reported }, "complete last line lacked its newline; terminated it");
  } catch (err) {
    throw new SessionFileError("SESSION_WRITE_FAILED", reported, `cannot terminate last line of session file ${reported}: ${String(err)}`, {
      cause: err,
    });
  }
}

/** Bring the cached index up to date with the file (incrementally when the file only grew), repairing a torn tail. */
async function loadIndex(real: string, reported: string, logger: Logger, attempt = 0): Promise<FileIndex> {
  const st = await statOrMissing(real, reported);
  if (!st) {
    indexCache.delete(real);
    return emptyIndex(real);
  }
  let index = indexCache.get(real);
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
  indexCache.set(real, index);
  return index;
}

// ---------------------------------------------------------------------------------------------------------------
// Reading

const ReadOptionsSchema = z.object({
  sessionId: z.string().min(1).optional(),
  sessionRoot: z.string().min(1).optional(),
  logger: z.any().optional(),
});

function invalidArgs(what: string, file: string, err: z.ZodError): SessionFileError {
  return new SessionFileError(
    "SESSION_INVALID_ARGUMENT",
    file,
    `invalid ${what} for session file ${file}: ${err.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ")}`,
  );
}

/**
 * Read a whole session transcript. A missing file is an empty session (nothing is created). Corrupt lines are
 * skipped (and reported in `damage`), a torn last line is ignored; nothing is written.
 *
 * @example
 * ```ts
 * const t = await readSessionTranscript("/data/s1.jsonl", { sessionRoot: "/data" });
 * const messages = t.buildMessages();
 * ```
 */
export async function readSessionTranscript(sessionFile: string, opts: ReadSessionOptions = {}): Promise<SessionTranscript> {
  const parsedOpts = ReadOptionsSchema.safeParse(opts);
  if (!parsedOpts.success) throw invalidArgs("read options", sessionFile, parsedOpts.error);
  const logger: Logger = opts.logger ?? silentLogger;
  const real = await resolveSessionPath(sessionFile, opts.sessionRoot);
  const st = await statOrMissing(real, sessionFile);
  const damage: TranscriptDamage = { corruptLines: [], tornTailBytes: 0 };
  if (!st) {
    logger.debug({ event: "transcript.read", sessionFile, exists: false, entries: 0 }, "session file missing: empty session");
    return makeTranscript(real, false, null, [], damage);
  }
  let buf: Buffer;
  let fst: import("node:fs").Stats;
  try {
    const fh = await fsp.open(real, "r");
    try {
      fst = await fh.stat();
      buf = await readRange(fh, 0, fst.size);
    } finally {
      await fh.close();
    }
  } catch (err) {
    throw sessionIoError(err, sessionFile, "read");
  }

  let header: SessionHeader | null = null;
  const objects: Record<string, unknown>[] = [];
  const objectLines: number[] = [];
  let lineNo = 0;
  let pos = 0;
  const consume = (start: number, end: number): void => {
    lineNo++;
    const parsed = parseLine(buf, start, end);
    if (parsed.kind === "blank") return;
    if (header === null) {
      header = checkHeader(parsed.kind === "object" ? parsed.value : null, sessionFile, lineNo);
      return;
    }
    if (parsed.kind === "corrupt") {
      damage.corruptLines.push(lineNo);
      return;
    }
    if (parsed.value.type === "session") return;
    objects.push(parsed.value);
    objectLines.push(lineNo);
  };
  for (;;) {
    const nl = buf.indexOf(10, pos);
    if (nl < 0) break;
    consume(pos, nl);
    pos = nl + 1;
  }
  const completeEnd = pos;
  if (pos < buf.length) {
    const parsed = parseLine(buf, pos, buf.length);
    const complete =
      parsed.kind === "object" &&
      (header === null ? HeaderSchema.safeParse(parsed.value).success : parsed.value.type === "session" || isEntryShape(parsed.value));
    if (complete) consume(pos, buf.length);
    else if (parsed.kind !== "blank") damage.tornTailBytes = buf.length - pos;
  }

  const h = header as SessionHeader | null;
  if (h) {
    const version = h.version ?? 1;
    if (version < SESSION_FORMAT_VERSION) migrateInMemory(h, objects);
    else if (version > SESSION_FORMAT_VERSION) {
      logger.warn({ event: "transcript.version_newer", sessionFile, version }, "session file is newer than version 3; reading as version 3");
    }
    if (opts.sessionId !== undefined && h.id !== opts.sessionId) {
      logger.warn({ event: "transcript.session_id_mismatch", sessionFile, headerId: h.id, sessionId: opts.sessionId }, "session id differs from the header");
    }
  }
  const entries: SessionEntry[] = [];
  objects.forEach((o, i) => {
    if (isEntryShape(o)) entries.push(o);
    else damage.corruptLines.push(objectLines[i]!);
  });
  damage.corruptLines.sort((a, b) => a - b);

  if (damage.corruptLines.length > 0 || damage.tornTailBytes > 0) {
    logger.warn(
      {
        event: "transcript.damage",
        sessionFile,
        corruptLines: damage.corruptLines.length,
        firstCorruptLines: damage.corruptLines.slice(0, 20),
        tornTailBytes: damage.tornTailBytes,
      },
      "transcript damage skipped while reading",
    );
  }
  logger.debug({ event: "transcript.read", sessionFile, exists: true, entries: entries.length, bytes: buf.length }, "session file read");

  // Warm the writer's index so the next append in this process does not re-read the file.
  const cached = indexCache.get(real);
  const cacheValid = cached && cached.dev === fst.dev && cached.ino === fst.ino && cached.size === completeEnd && cached.mtimeMs === fst.mtimeMs;
  if (h && (h.version ?? 1) === SESSION_FORMAT_VERSION && !cacheValid) {
    const index = emptyIndex(real);
    index.dev = fst.dev;
    index.ino = fst.ino;
    index.mtimeMs = fst.mtimeMs;
    scanIntoIndex(index, buf.subarray(0, completeEnd), sessionFile, []);
    indexCache.set(real, index);
  }
  return makeTranscript(real, true, h, entries, damage);
}

function makeTranscript(
  real: string,
  exists: boolean,
  header: SessionHeader | null,
  entries: SessionEntry[],
  damage: TranscriptDamage,
): SessionTranscript {
  let ctx: SessionContext | undefined;
  const context = (): SessionContext => (ctx ??= buildSessionContextFromEntries(entries));
  return {
    path: real,
    exists,
    header,
    entries,
    leafId: entries.length > 0 ? entries[entries.length - 1]!.id : null,
    damage,
    buildMessages: () => context().messages.slice(),
    buildContext: () => {
      const c = context();
      return { messages: c.messages.slice(), sources: c.sources.slice() };
    },
  };
}

/**
 * Read the mirrored history in the shape `readHistory` returns (`HistoryOutput`): the rebuilt messages and, in
 * parallel, the Codex thread/turn each came from (null for messages with no mirror key, e.g. a compaction summary).
 *
 * @example
 * ```ts
 * const { messages, origins } = await readSessionHistory(sessionFile, { sessionId });
 * ```
 */
export async function readSessionHistory(
  sessionFile: string,
  opts: ReadSessionOptions = {},
): Promise<{ messages: AgentMessage[]; origins: Array<TranscriptOrigin | null> }> {
  return historyFromTranscript(await readSessionTranscript(sessionFile, opts));
}

/**
 * The history of an already-read transcript, as {@link readSessionHistory} returns it.
 *
 * @example
 * ```ts
 * const t = await readSessionTranscript(sessionFile);
 * const { messages, origins } = historyFromTranscript(t); // t.entries.length: entries in the file
 * ```
 */
export function historyFromTranscript(t: SessionTranscript): { messages: AgentMessage[]; origins: Array<TranscriptOrigin | null> } {
  const { messages, sources } = t.buildContext();
  return { messages, origins: sources.map((s) => (s.type === "compaction" ? null : entryOrigin(s))) };
}

// ---------------------------------------------------------------------------------------------------------------
// Writing

const OpenOptionsSchema = z.object({
  sessionId: z.string().min(1),
  cwd: z.string().min(1).optional(),
  sessionRoot: z.string().min(1).optional(),
  logger: z.any().optional(),
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
  if (index.header && index.header.id !== opts.sessionId) {
    logger.warn(
      { event: "transcript.session_id_mismatch", sessionFile, headerId: index.header.id, sessionId: opts.sessionId },
      "session id differs from the header",
    );
  }

  const append = async (drafts: NewSessionEntry[]): Promise<SessionEntry[]> => {
    if (drafts.length === 0) return [];
    // Cheap (one stat) unless someone else changed the file since we indexed it.
    index = await loadIndex(real, sessionFile, logger);
    const batchIds = new Set<string>();
    const taken = { has: (id: string) => index.ids.has(id) || batchIds.has(id) };
    const batchKeys = new Set<string>();
    const written: SessionEntry[] = [];
    const lines: string[] = [];
    let header: SessionHeader | null = null;
    if (index.header === null) {
      header = {
        type: "session",
        version: SESSION_FORMAT_VERSION,
        id: opts.sessionId,
        timestamp: new Date().toISOString(),
        cwd: opts.cwd ?? process.cwd(),
      };
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
      const entry: SessionEntry = {
        type,
        id,
        parentId,
        timestamp: entryTimestamp(draft),
        ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
        ...payload,
      };
      let line: string;
      try {
        line = JSON.stringify(entry);
      } catch (err) {
        throw new SessionFileError("SESSION_INVALID_ARGUMENT", sessionFile, `entry for ${sessionFile} is not JSON-serialisable: ${String(err)}`, {
          cause: err,
        });
      }
      lines.push(`${line}\n`);
      written.push(JSON.parse(line) as SessionEntry);
      parentId = id;
    }
    const data = Buffer.from(lines.join(""), "utf8");
    const created = index.size === 0 && (await statOrMissing(real, sessionFile)) === null;
    const st = await writeBatch(real, sessionFile, data, index.size, created);

    // Update the index (in place: copying it would make every append O(entries)) only after the data is durable.
    if (header) index.header = header;
    for (const e of written) indexAddEntry(index, e);
    index.lineCount += lines.length;
    index.size += data.length;
    const joined = data.length >= TAIL_CHECK_BYTES ? data : Buffer.concat([index.tail, data]);
    index.tail = Buffer.from(joined.subarray(Math.max(0, joined.length - TAIL_CHECK_BYTES)));
    index.dev = st.dev;
    index.ino = st.ino;
    index.mtimeMs = st.mtimeMs;
    if (st.size === index.size) indexCache.set(real, index);
    else indexCache.delete(real);
    logger.debug(
      { event: "transcript.appended", sessionFile, entries: written.length, bytes: data.length, createdFile: created },
      "entries appended",
    );
    return written;
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
    append,
  };
}

/** One O_APPEND write of the whole batch, then fsync. On failure, cut the file back to where it was. */
async function writeBatch(
  real: string,
  reported: string,
  data: Buffer,
  sizeBefore: number,
  created: boolean,
): Promise<import("node:fs").Stats> {
  if (created) {
    try {
      await fsp.mkdir(path.dirname(real), { recursive: true });
    } catch (err) {
      throw sessionIoError(err, reported, "create the directory of");
    }
  }
  let fh: FileHandle;
  try {
    fh = await fsp.open(real, "a");
  } catch (err) {
    throw sessionIoError(err, reported, "open for append");
  }
  let st: import("node:fs").Stats;
  try {
    faultPoint("transcript:before-write");
    let off = 0;
    // With a fault hook installed, write in two halves so a crash can land between them (a torn line).
    const firstChunk = faultsEnabled() ? Math.max(1, Math.floor(data.length / 2)) : data.length;
    while (off < data.length) {
      const len = off === 0 ? firstChunk : data.length - off;
      const { bytesWritten } = await fh.write(data, off, len);
      off += bytesWritten;
      if (off === firstChunk && off < data.length) faultPoint("transcript:mid-write");
    }
    faultPoint("transcript:after-write");
    await fh.sync();
    faultPoint("transcript:after-fsync");
    st = await fh.stat();
  } catch (err) {
    // We hold the session lock, so nothing else appended after sizeBefore: cutting back leaves no torn line.
    await fh.truncate(sizeBefore).catch(() => undefined);
    await fh.close().catch(() => undefined);
    throw sessionIoError(err, reported, "append to");
  }
  await fh.close();
  if (created) await fsyncDirectory(path.dirname(real));
  return st;
}
