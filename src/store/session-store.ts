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
  /**
   * Whether the session's transcript exists (a header, even with no entries yet): a turn on a session that does not
   * exist yet runs the engine's `bootstrap`.
   */
  readonly exists: boolean;
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

/**
 * A held session lock, as {@link SessionStore.acquireLock} returns it. The JSONL store's handle is the file lock's
 * `SessionLockHandle` (which also names its lock directory); other stores return a lease.
 *
 * @example
 * ```ts
 * const lock = await store.acquireLock({ timeoutMs: 30_000 });
 * try {
 *   lock.signal.addEventListener("abort", () => stopWriting());
 *   await lock.runHeld(() => store.appendTurn(turn));
 * } finally {
 *   await lock.release();
 * }
 * ```
 */
export interface SessionStoreLock {
  /** Aborts (reason: a `SessionFileError` with code `SESSION_LOCK_COMPROMISED`) when the lock is lost. */
  readonly signal: AbortSignal;
  /** Throws `SESSION_LOCK_COMPROMISED` if the lock was lost or already released. */
  assertHeld(): void;
  /** Run `fn` in an async context that counts as holding this lock (a nested `acquireLock` there throws `SESSION_LOCK_REENTRANT`). */
  runHeld<T>(fn: () => Promise<T>): Promise<T>;
  /** Idempotent; never rejects. The store's writes are refused (`SESSION_LOCK_COMPROMISED`) after it, until the next `acquireLock`. */
  release(): Promise<void>;
}

/** What {@link SessionStore.reset} does: the binding is always cleared; the transcript archived only when asked. */
export interface StoreResetOptions {
  /** Put the current transcript aside as an archive (kept, never deleted) so the session starts with an empty one. */
  archiveTranscript?: boolean | undefined;
  /**
   * With `archiveTranscript`: the fresh transcript is created at once, holding only a header that names this id
   * (OpenClaw gives a reset session a new id). Readers built for the old id then get `SESSION_ID_MISMATCH`.
   */
  nextSessionId?: string | undefined;
  /** Header cwd of that fresh transcript (default: the process's cwd). */
  cwd?: string | undefined;
}

/** What {@link SessionStore.reset} did. */
export interface StoreResetResult {
  /** A binding existed and was removed. */
  bindingCleared: boolean;
  /** A readable label of where the archived transcript went (the JSONL store: its new path), when one was archived. */
  archivedTo?: string | undefined;
  /** Pending-finalize records left in place (they are finalized, exactly once, before the next turn). */
  pendingFinalize: number;
  /** The id the fresh transcript's header names, when `nextSessionId` was given and a transcript was archived. */
  sessionId?: string | undefined;
}

/** Options of {@link SessionStore.acquireLock}. */
export interface AcquireLockOptions {
  signal?: AbortSignal | undefined;
  logger?: Logger | undefined;
  /** Give up waiting after this long (`SESSION_LOCK_TIMEOUT`). */
  timeoutMs?: number | undefined;
}

/**
 * One session's durable state. Writes (`appendTurn`, `appendMessage`, `appendCompaction`, `rewriteEntries`,
 * `writeBinding`, `recordPending`, `markPendingIngested`, `completePending`, `setAsidePending`, `setAsideBinding`,
 * `reset`, and the set-aside `readBinding()` / `listPending()` may do) must run while the caller holds the lock from
 * {@link acquireLock} on this same store object, and an implementation refuses one (`SESSION_LOCK_COMPROMISED`,
 * nothing written) once that lock is lost or released: the turn host relies on the store for this check (fencing) and
 * does not repeat it. Reads may run without the lock. Every method throws `SessionFileError` (typed `code`; its
 * `path` is the store's {@link address}) on failure and leaves what was already written intact.
 *
 * Identity: a store names one session. {@link address} is how errors, logs and engines name it: the transcript path
 * for the JSONL store, a readable key such as `postgres://host/db#session/s1` for a database store (never a
 * credential). Nothing in the contract is a file path except that address of the JSONL store.
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
  /** The session's readable identity: the transcript path (the JSONL store) or a key naming the session (other stores). */
  readonly address: string;
  /** The same as {@link address} (kept: the JSONL store's transcript path; engines and hooks get it as OpenClaw's `sessionFile`). */
  readonly sessionFile: string;
  /** The session id the store checks transcripts against (`SESSION_ID_MISMATCH`). */
  readonly sessionId: string;
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
  /**
   * The Codex thread binding. A corrupt one reads as `undefined` and is set aside as {@link setAsideBinding} does
   * (the store's warning names where it went); with `readOnly` it is reported (warning, undefined) and left in place.
   */
  readBinding(opts?: { readOnly?: boolean | undefined }): Promise<ThreadBinding | undefined>;
  /**
   * Write the binding whole: readers see the old one or the new one, never a mix. `durable: false` need not survive an
   * OS crash (the JSONL store appends it as one line of its binding log, docs/storage.md); `durable: true` must.
   */
  writeBinding(binding: ThreadBinding, opts: { durable: boolean }): Promise<void>;
  /**
   * Move the binding aside (kept for inspection, never read as the binding again): the next {@link readBinding} is
   * `undefined` and the next turn starts a fresh Codex thread. Returns a readable label of where it went (the JSONL
   * store: the `.corrupt-<n>` path), undefined when there was no binding. Atomic.
   */
  setAsideBinding(): Promise<string | undefined>;
  /** Durably record a turn awaiting its finalize (replaces a record with the same turnId). */
  recordPending(record: PendingFinalizeInput): Promise<void>;
  /** Record which of the turn's messages the engine has ingested (by mirror key), so recovery resumes after them. */
  markPendingIngested(turnId: string, messageKeys: readonly string[]): Promise<void>;
  /** Clear the turn's record after its finalize returned; whether one was removed. */
  completePending(turnId: string): Promise<boolean>;
  /**
   * Turns awaiting finalize, oldest first. A corrupt record set: set aside as {@link setAsidePending} does, with a
   * warning, and `[]` (default, so the session is not wedged), or with `readOnly` a `SESSION_PENDING_INVALID` error and
   * nothing moved.
   */
  listPending(opts?: { readOnly?: boolean | undefined }): Promise<PendingFinalizeRecord[]>;
  /**
   * Whether a pending-finalize record exists (readable or not), without reading it: under the lock, the turn host asks
   * this to decide whether recovery runs at all. A shared store answers with an existence query on its pending rows.
   */
  hasPending(): Promise<boolean>;
  /**
   * Move every pending-finalize record of the session aside (kept for inspection; their turns are not finalized
   * again), readable or not: afterwards {@link hasPending} is false and {@link listPending} is `[]`. Returns a readable
   * label of where they went (the JSONL store: the `.corrupt-<n>` path), undefined when there were none. Atomic.
   */
  setAsidePending(): Promise<string | undefined>;
  /**
   * Reset the session's Codex state: clear the binding (the next turn starts a fresh thread) and, with
   * `archiveTranscript`, archive the transcript (kept, never deleted; the session then has an empty one, or one holding
   * only a header naming `nextSessionId`). Pending-finalize records stay. Nothing is half done: a failure leaves the
   * binding or the archive step as it was (a database store: one transaction).
   */
  reset(opts?: StoreResetOptions): Promise<StoreResetResult>;
  /**
   * Remove the session's transcript, binding and pending records (archives stay): a deleted sub-agent session. The
   * caller makes sure nothing runs on the session (the lock is not required; with it held by this store, the write is
   * fenced like any other). Removing a session that does not exist is not an error.
   */
  deleteSession(): Promise<void>;
  /** Take the session's lock (serializes turns across processes); release it when the attempt settles. */
  acquireLock(opts?: AcquireLockOptions): Promise<SessionStoreLock>;
}

export { createJsonlSessionStore, type JsonlSessionStoreOptions } from "./jsonl-store.js";
