/**
 * The pi session entry model (format version 3) and the mirror's idempotency keys and entry ids.
 *
 * Line 1 of a session file is `{"type":"session","version":3,"id","timestamp","cwd"}`, then one entry per line with
 * `type`, `id` (8 hex), `parentId`, `timestamp` (ISO) and a payload. Our mirror stores each message's idempotency key
 * as an extra top-level `idempotencyKey` field on the entry: pi's SessionManager keeps unknown fields and never copies
 * them into rebuilt messages. Keys written by OpenClaw's own mirror (`message.idempotencyKey`) are read too.
 */
import { createHash, randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { AgentMessage } from "../context-engine/types.js";

/** The session format version we read natively and write. */
export const SESSION_FORMAT_VERSION = 3;
/** Prefix of the mirror's idempotency keys: `codex-app-server:<threadId>:<turnId>:<kind>`. */
export const MIRROR_KEY_PREFIX = "codex-app-server";

/** Line 1 of a session file. Unknown fields are kept. */
export interface SessionHeader {
  type: "session";
  version?: number | undefined;
  id: string;
  timestamp?: string | undefined;
  cwd?: string | undefined;
  parentSession?: string | undefined;
  [key: string]: unknown;
}

/** Any entry after the header. Unknown entry types and fields are kept. */
export interface SessionEntry {
  type: string;
  id: string;
  parentId: string | null;
  timestamp: string;
  /** Set by our mirror (top level, outside `message`). */
  idempotencyKey?: string | undefined;
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
  fromHook?: boolean | undefined;
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
  display?: boolean | undefined;
  details?: unknown;
}

/** The Codex thread and turn a mirrored message came from. */
export interface TranscriptOrigin {
  threadId: string;
  turnId: string;
}

/** Damage found while reading; counts and line numbers only, never content. */
export interface TranscriptDamage {
  /** 1-based line numbers of complete lines that were skipped (unparsable, not an entry, or a malformed entry: see validate.ts). */
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
  sessionId?: string | undefined;
  /** When given, the path must resolve inside it. */
  sessionRoot?: string | undefined;
  logger?: Logger | undefined;
}

/** Options for opening a session file for appending. */
export interface OpenSessionOptions {
  sessionId: string;
  /** Written to a new file's header; defaults to `process.cwd()`. */
  cwd?: string | undefined;
  sessionRoot?: string | undefined;
  logger?: Logger | undefined;
  /**
   * An existing header naming another session id: "warn" (default, as before) logs and appends anyway; "throw" throws
   * `SESSION_ID_MISMATCH` before anything is written (the session store uses this).
   */
  onSessionIdMismatch?: "warn" | "throw" | undefined;
}

/** An entry to append; `id`, `parentId` and (unless given) `timestamp` are filled in by the writer. */
export interface NewSessionEntry {
  type: string;
  idempotencyKey?: string | undefined;
  timestamp?: string | undefined;
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
  /** Whether an entry with this id is in the file. */
  hasEntryId(id: string): boolean;
  /** Append entries as a chain after the current leaf: one O_APPEND write of all lines, then fsync. */
  append(entries: NewSessionEntry[], opts?: AppendOptions): Promise<SessionEntry[]>;
}

/** Options of {@link SessionFileWriter.append}. */
export interface AppendOptions {
  /**
   * Another durable write of the same step, fsynced at the same moment as the append (one journal commit instead of
   * two in a row); the append rejects if it fails, after the transcript itself is safe. Runs even when nothing is
   * appended.
   */
  syncAlongside?: (() => Promise<void>) | undefined;
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

/** A random 8-hex id not in `taken` (entries without an idempotency key, as pi assigns them). */
export function randomEntryId(taken: { has(id: string): boolean }): string {
  for (let i = 0; i < 100; i++) {
    const id = randomBytes(4).toString("hex");
    if (!taken.has(id)) return id;
  }
  return randomBytes(16).toString("hex");
}

