/**
 * The storage seam of a session: everything a turn reads and writes durably (transcript history, the mirror, the
 * thread binding, the pending-finalize record, the session lock) behind one interface, so the turn host does not know
 * whether a session lives in a pi JSONL file with sidecars (`createJsonlSessionStore`) or in a shared database. See
 * docs/storage.md for the contract each method must keep and how a SQLite/Postgres store would implement it.
 */
import type { Logger } from "pino";
import type { AgentMessage } from "../context-engine/types.js";
import type { ThreadBinding } from "../transcript/binding.js";
import type { TranscriptOrigin } from "../transcript/entries.js";
import type { SessionLockHandle } from "../transcript/lock.js";
import type { PendingFinalizeRecord } from "../transcript/pending.js";
import type { TranscriptRewriteRequest, TranscriptRewriteResult } from "../transcript/rewrite.js";

export type { SessionLockHandle } from "../transcript/lock.js";
export type { PendingFinalizeRecord } from "../transcript/pending.js";
export type { TranscriptRewriteReplacement, TranscriptRewriteRequest, TranscriptRewriteResult } from "../transcript/rewrite.js";

/**
 * A session's history as the next turn sees it: the rebuilt model context (pi's `buildSessionContext` order), with
 * the Codex thread/turn each message was mirrored from.
 *
 * @example
 * ```ts
 * const h = await store.readHistory();
 * h.messages.length === h.origins.length; // true
 * ```
 */
export interface SessionHistory {
  /**
   * Deeply frozen: engines must not mutate them (a mutation throws a TypeError in strict code). The same objects are
   * handed to later turns; copy with `structuredClone` before changing anything.
   */
  readonly messages: readonly AgentMessage[];
  /** Parallel to `messages`: where each was mirrored from; null for messages with no mirror key (e.g. a compaction summary). */
  readonly origins: ReadonlyArray<TranscriptOrigin | null>;
  /** Entries in the file when read, and the id of the last one (to check "the mirror is the tail"). */
  readonly entryCount: number;
  readonly lastEntryId: string | undefined;
  /** Malformed entries skipped and counted (warnings, never content). */
  readonly skippedEntries: number;
  readonly warnings: readonly string[];
}

/**
 * One message of the session's visible transcript, as OpenClaw's `readVisibleSessionTranscriptMessageEntries` returns
 * it: the entry's id and parent (pi's `parentId`), its position among the file's entries (`seq`), the message and its
 * role, the entry's timestamp and idempotency key. "Visible" is the active branch as the next turn sees it (the
 * messages `readHistory` rebuilds, without the synthetic summary a compaction contributes).
 *
 * @example
 * ```ts
 * const [first] = await store.readVisibleEntries();
 * first?.entryId; first?.parentId; first?.message.role === first?.role; // true
 * ```
 */
export interface VisibleTranscriptEntry {
  entryId: string;
  parentId: string | null;
  seq: number;
  message: AgentMessage;
  role: string;
  createdAt?: string | undefined;
  idempotencyKey?: string | undefined;
}

/** One turn to mirror: its snapshot, original prompt first. */
export interface AppendTurnInput {
  threadId: string;
  turnId: string;
  messages: readonly AgentMessage[];
  /** Header cwd when the transcript is created by this append. */
  cwd?: string | undefined;
  /**
   * The host's request mark (`requestId` and the attempt's status): stored with the turn's prompt entry (the JSONL
   * store: a top-level `request` field on it), found again by {@link SessionStore.findRequest}.
   */
  request?: RequestMarkInput | undefined;
}

/** A request mark: the host's `requestId`, the status of the attempt that ran it, and whether it was a cut turn. */
export interface RequestMarkInput {
  id: string;
  status: "completed" | "failed" | "aborted" | "yieldAborted";
  /** The turn was recovered from Codex's thread after its attempt died mid-turn. */
  cut?: boolean | undefined;
}

/**
 * A request the transcript holds ({@link SessionStore.findRequest}): its mark, the Codex thread and turn it ran as,
 * its prompt's entry and the turn's messages in transcript order.
 *
 * @example
 * ```ts
 * const r = await store.findRequest("req-42");
 * r?.status; r?.turnId; r?.messages[0]?.role === "user"; // true
 * ```
 */
export interface RecordedRequest extends RequestMarkInput {
  threadId: string;
  turnId: string;
  entryId: string;
  messages: AgentMessage[];
}

/** What {@link SessionStore.appendTurn} did. */
export interface AppendTurnResult {
  /** Entries written by this call. */
  appended: number;
  /** Messages already in the transcript (by mirror key). */
  skipped: number;
  /** Entry id of every message of the turn, in snapshot order (existing ids for skipped ones). */
  entryIds: string[];
  /** The last entry of the transcript after the append. */
  lastEntryId?: string | undefined;
  /** Entries in the transcript after the append. */
  entryCount: number;
}

/** One message outside any Codex turn (e.g. the redacted record of a turn a gate refused); idempotent by key. */
export interface AppendMessageInput {
  message: AgentMessage;
  /** Stored on the entry and on the message (OpenClaw's `message.idempotencyKey`); a key already present appends nothing. */
  idempotencyKey: string;
  /** Header cwd when the transcript is created by this append. */
  cwd?: string | undefined;
}

/** A pi `compaction` entry: the next history starts with `summary`, then the entries from `firstKeptEntryId` on. */
export interface CompactionEntryInput {
  summary: string;
  /** An entry already in the transcript (typed error otherwise). */
  firstKeptEntryId: string;
  tokensBefore: number;
  details?: Record<string, unknown> | undefined;
}

/** What `recordPending` takes: a turn waiting for its engine finalize (see `src/transcript/pending.ts`). */
export type PendingFinalizeInput = Omit<PendingFinalizeRecord, "recordedAt">;

/** Options of {@link SessionStore.acquireLock}. */
export interface AcquireLockOptions {
  signal?: AbortSignal | undefined;
  logger?: Logger | undefined;
  /** Give up waiting after this long (`SESSION_LOCK_TIMEOUT`). */
  timeoutMs?: number | undefined;
}

/**
 * One session's durable state. Writes (`appendTurn`, `appendCompaction`, `rewriteEntries`, `writeBinding`,
 * `recordPending`, `markPendingIngested`, `completePending`) must run while the caller holds the lock from {@link acquireLock}, and an
 * implementation refuses one (`SESSION_LOCK_COMPROMISED`) once that lock is lost: the turn host relies on the store for
 * this check and does not repeat it. Reads may run without the lock. Every method throws `SessionFileError` (typed
 * `code`) on failure and leaves what was already written intact.
 *
 * @example
 * ```ts
 * const store = createJsonlSessionStore({ sessionFile, sessionId: "s1" });
 * const lock = await store.acquireLock();
 * try {
 *   const history = await store.readHistory();
 *   await store.recordPending({ threadId, turnId, prePromptMessageCount: history.messages.length, messageCount: 2, status: "completed", messages });
 *   await store.appendTurn({ threadId, turnId, messages });
 *   // ... engine finalize ...
 *   await store.completePending(turnId);
 * } finally {
 *   await lock.release();
 * }
 * ```
 */
export interface SessionStore {
  /** The transcript path (the JSONL store) or the session's address (other stores). */
  readonly sessionFile: string;
  /** The history the next turn sees. Throws `SESSION_VERSION_UNSUPPORTED` / `SESSION_ID_MISMATCH` before any model call. */
  readHistory(): Promise<SessionHistory>;
  /**
   * The visible transcript with entry ids, parents and timestamps (OpenClaw's session-transcript runtime, for engines
   * that reconcile against it, e.g. lossless-claw 1.x). Reads without the lock; the messages are copies.
   */
  readVisibleEntries(): Promise<VisibleTranscriptEntry[]>;
  /** The mirror: append the turn's messages not yet present (idempotent by mirror keys). */
  appendTurn(turn: AppendTurnInput): Promise<AppendTurnResult>;
  /**
   * The turn recorded for a request id (its prompt entry carries the mark), searched in every entry of the transcript
   * (not only the visible branch: a request compacted away is still found); the last one when several carry it.
   * Undefined when none does. Reads without the lock; the messages are copies.
   */
  findRequest(requestId: string): Promise<RecordedRequest | undefined>;
  /** Append one message that belongs to no Codex turn; returns its entry id (the existing one when the key is present). */
  appendMessage(input: AppendMessageInput): Promise<{ entryId: string; appended: boolean }>;
  /** Append a pi `compaction` entry; returns its id. */
  appendCompaction(entry: CompactionEntryInput): Promise<string>;
  /**
   * Give `message` entries on the active branch new messages, as OpenClaw's runtime does for an engine's
   * `rewriteTranscriptEntries` (copy-on-write: the branch from the first replaced entry is re-issued with new entry ids,
   * the abandoned entries dropped; atomic). The request is validated (`SESSION_INVALID_ARGUMENT` names the field);
   * nothing matching is `{ changed: false, reason }`, not an error.
   */
  rewriteEntries(request: TranscriptRewriteRequest): Promise<TranscriptRewriteResult>;
  /** The Codex thread binding; `readOnly` reports a corrupt one (warning, undefined) without moving it aside. */
  readBinding(opts?: { readOnly?: boolean | undefined }): Promise<ThreadBinding | undefined>;
  /**
   * Write the binding whole: readers see the old one or the new one, never a mix. `durable: false` need not survive an
   * OS crash (the JSONL store appends it as one line of its binding log, docs/storage.md); `durable: true` must.
   */
  writeBinding(binding: ThreadBinding, opts: { durable: boolean }): Promise<void>;
  /** Durably record a turn awaiting its finalize (replaces a record with the same turnId). */
  recordPending(record: PendingFinalizeInput): Promise<void>;
  /** Record which of the turn's messages the engine has ingested (by mirror key), so recovery resumes after them. */
  markPendingIngested(turnId: string, messageKeys: readonly string[]): Promise<void>;
  /** Clear the turn's record after its finalize returned; whether one was removed. */
  completePending(turnId: string): Promise<boolean>;
  /**
   * Turns awaiting finalize, oldest first. A corrupt record set: moved aside with a warning and `[]` (default, so the
   * session is not wedged), or with `readOnly` a `SESSION_PENDING_INVALID` error and nothing moved.
   */
  listPending(opts?: { readOnly?: boolean | undefined }): Promise<PendingFinalizeRecord[]>;
  /**
   * Whether a pending-finalize record exists (readable or not), without reading it: under the lock, the turn host asks
   * this to decide whether recovery runs at all. A shared store answers with an existence query on its pending rows.
   */
  hasPending(): Promise<boolean>;
  /** Take the session's lock (serializes turns across processes); release it when the attempt settles. */
  acquireLock(opts?: AcquireLockOptions): Promise<SessionLockHandle>;
}

export { createJsonlSessionStore, type JsonlSessionStoreOptions } from "./jsonl-store.js";
