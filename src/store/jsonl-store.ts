/**
 * The pi-JSONL session store: the transcript is a pi session file (format v3) that pi's SessionManager opens as is;
 * the thread binding, the pending-finalize record and the lock are sidecars next to it (`src/transcript/paths.ts`).
 * A thin adapter over `src/transcript/*`; the history read is the incremental, frozen one of `history-cache.ts`.
 */
import { findRecordedRequest } from "../transcript/requests.js";
import path from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import { AppendMessageSchema, CompactionEntrySchema as CompactionSchema, StoreResetSchema as ResetSchema } from "./input-schemas.js";
import type { AgentMessage } from "../context-engine/types.js";
import { silentLogger } from "../log/logger.js";
import { moveThreadBindingAside, readThreadBinding, writeValidatedThreadBinding, type ThreadBinding } from "../transcript/binding.js";
import { SessionFileError } from "../transcript/errors.js";
import { readCachedHistory } from "../transcript/history-cache.js";
import { acquireSessionLock, type SessionLockHandle } from "../transcript/lock.js";
import { mirrorValidatedTurn } from "../transcript/mirror.js";
import {
  commitPendingFinalize,
  completePendingFinalize,
  listPendingFinalize,
  markPendingIngested,
  movePendingFinalizeAside,
  pendingFinalizeExists,
  recordValidatedPendingFinalize,
  type PendingFinalizeRecord,
} from "../transcript/pending.js";
import { deleteSessionFiles, resetSessionFiles } from "../transcript/reset.js";
import { resolveSessionPath } from "../transcript/resolve.js";
import { rewriteTranscriptEntriesInFile } from "../transcript/rewrite.js";
import { readVisibleEntries } from "../transcript/visible.js";
import { openSessionFile } from "../transcript/writer.js";
import type {
  AcquireLockOptions,
  AppendMessageInput,
  AppendTurnInput,
  AppendTurnResult,
  CompactionEntryInput,
  PendingFinalizeInput,
  SessionHistory,
  SessionStore,
  StoreResetOptions,
} from "./session-store.js";

/** Options of {@link createJsonlSessionStore}. */
export interface JsonlSessionStoreOptions {
  /** The pi session JSONL transcript; created by the first append. */
  sessionFile: string;
  /** The turn's session id: a transcript whose header names another id is refused (`SESSION_ID_MISMATCH`). */
  sessionId: string;
  /** When given, the transcript must resolve (symlinks and `..` included) under it (`SESSION_OUTSIDE_ROOT`). */
  sessionRoot?: string | undefined;
  /** Header cwd of a transcript created by this store (default: the process's cwd). */
  cwd?: string | undefined;
  logger?: Logger | undefined;
  /**
   * Hears each thing this store moved aside to keep the session going (a corrupt binding, an unreadable
   * pending-finalize record), as a sentence naming the file: a turn puts these in `result.warnings`.
   */
  onWarning?: ((warning: string) => void) | undefined;
  /**
   * The lock's stale time (`staleMs` of `acquireSessionLock`: a holder beats every quarter of it, and a loss is noticed
   * at the next beat). Default 10 s; at least 2 s.
   */
  lockStaleMs?: number | undefined;
}

const OptionsSchema = z.object({
  sessionFile: z.string().min(1),
  sessionId: z.string().min(1),
  sessionRoot: z.string().min(1).optional(),
  cwd: z.string().min(1).optional(),
  logger: z.any().optional(),
  onWarning: z.custom<(warning: string) => void>((v) => typeof v === "function", "onWarning must be a function").optional(),
  lockStaleMs: z.number().int().min(2000).optional(),
});

function invalid(file: string, what: string, err: z.ZodError): SessionFileError {
  const issues = err.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
  return new SessionFileError("SESSION_INVALID_ARGUMENT", file, `invalid ${what} for session ${file}: ${issues}`);
}

/**
 * A {@link SessionStore} over a pi session JSONL file and its sidecars. Writes assume the caller holds the lock
 * (`acquireLock()`); while the store holds one, every write first checks it is still held (`SESSION_LOCK_COMPROMISED`
 * otherwise, nothing written).
 *
 * @example
 * ```ts
 * const store = createJsonlSessionStore({ sessionFile: path.join(os.tmpdir(), "s1.jsonl"), sessionId: "s1" });
 * const lock = await store.acquireLock();
 * try {
 *   const { messages } = await store.readHistory();
 *   await store.appendTurn({ threadId: "thr_1", turnId: "turn_1", messages: [prompt, reply] });
 * } finally {
 *   await lock.release();
 * }
 * ```
 */
export function createJsonlSessionStore(opts: JsonlSessionStoreOptions): SessionStore {
  const parsed = OptionsSchema.safeParse(opts);
  if (!parsed.success) throw invalid(String(opts?.sessionFile ?? "(unknown)"), "store options", parsed.error);
  const { sessionFile, sessionId, sessionRoot } = opts;
  const logger = opts.logger ?? silentLogger;
  let lock: SessionLockHandle | undefined;
  /** Before a durable write: the lock this store took must still be ours. */
  const guard = (): void => lock?.assertHeld();
  const pending = createPendingSidecar(sessionFile, logger, guard, () => lock !== undefined, opts.onWarning);

  return {
    address: sessionFile,
    sessionFile,
    sessionId,
    readHistory: async () => readCachedHistory(await resolveSessionPath(sessionFile, sessionRoot), sessionFile, { sessionId, logger }),
    readVisibleEntries: async () => readVisibleEntries(sessionFile, { sessionId, ...(sessionRoot !== undefined ? { sessionRoot } : {}), logger }),
    findRequest: async (requestId: string) => findRecordedRequest(sessionFile, requestId, { sessionId, ...(sessionRoot !== undefined ? { sessionRoot } : {}), logger }),
    appendTurn: async (turn) => {
      guard();
      return appendTurn(opts, logger, turn, pending.takeCommit());
    },
    appendMessage: async (input) => {
      guard();
      return appendMessage(opts, logger, input);
    },
    appendCompaction: async (entry) => {
      guard();
      return appendCompaction(opts, logger, entry);
    },
    rewriteEntries: async (request) => {
      guard();
      return rewriteTranscriptEntriesInFile(sessionFile, request, {
        sessionId,
        ...(sessionRoot !== undefined ? { sessionRoot } : {}),
        logger,
      });
    },
    readBinding: (o) => readThreadBinding(sessionFile, logger, { readOnly: o?.readOnly === true, ...(opts.onWarning ? { onSetAside: opts.onWarning } : {}) }),
    writeBinding: async (binding: ThreadBinding, o) => {
      guard();
      // The binding is the typed one the turn host read and updated: written without a schema walk of its ledger.
      await writeValidatedThreadBinding(sessionFile, binding, { durable: o.durable });
    },
    recordPending: pending.record,
    markPendingIngested: pending.markIngested,
    completePending: pending.complete,
    hasPending: pending.has,
    listPending: pending.list,
    setAsidePending: pending.setAside,
    ...sessionFileMethods(opts, logger, guard, pending.forget),
    acquireLock: async (o: AcquireLockOptions = {}) => {
      if (sessionRoot !== undefined) await resolveSessionPath(sessionFile, sessionRoot); // before the lock creates the directory
      // What this store knew of the pending sidecar held only while it held its previous lock: another process may
      // have written it since.
      pending.forget();
      lock = await acquireSessionLock(sessionFile, {
        ...(o.signal ? { signal: o.signal } : {}),
        ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
        ...(opts.lockStaleMs !== undefined ? { staleMs: opts.lockStaleMs } : {}),
        logger: o.logger ?? logger,
      });
      return lock;
    },
  } satisfies SessionStore;
}

/** `setAsideBinding`, `reset` and `deleteSession` of the JSONL store: whole sidecars and the transcript moved or removed. */
function sessionFileMethods(opts: JsonlSessionStoreOptions, logger: Logger, guard: () => void, forgetPending: () => void): Pick<SessionStore, "setAsideBinding" | "reset" | "deleteSession"> {
  const { sessionFile } = opts;
  return {
    setAsideBinding: async () => {
      guard();
      const aside = await moveThreadBindingAside(sessionFile);
      if (aside !== undefined) logger.warn({ event: "thread binding set aside", movedTo: path.basename(aside) }, "thread binding moved aside");
      return aside;
    },
    reset: async (o: StoreResetOptions = {}) => {
      const parsed = ResetSchema.safeParse(o);
      if (!parsed.success) throw invalid(sessionFile, "reset options", parsed.error);
      guard();
      const real = await resolveSessionPath(sessionFile, opts.sessionRoot);
      const out = await resetSessionFiles(sessionFile, real, { ...parsed.data, cwd: parsed.data.cwd ?? opts.cwd, logger });
      forgetPending();
      return out;
    },
    deleteSession: async () => {
      guard();
      await deleteSessionFiles(sessionFile);
      forgetPending();
    },
  };
}

/**
 * The pending-finalize sidecar as one store sees it. While the store holds the lock nobody else writes the sidecar, so
 * what this store last listed or wrote stays true until it releases the lock: that lets `complete` remove the sidecar
 * unread when it holds just that turn, and lets `record` defer its fsync to the next transcript append.
 */
function createPendingSidecar(sessionFile: string, logger: Logger, guard: () => void, lockHeld: () => boolean, onWarning?: (warning: string) => void) {
  /** Turn ids in the sidecar, as this store last listed or wrote it while holding the lock (undefined: not known). */
  let knownPending: string[] | undefined;
  /** A pending record written but not yet fsynced: the next append commits it beside the transcript. */
  let pendingUncommitted = false;
  return {
    record: async (record: PendingFinalizeInput): Promise<void> => {
      guard();
      await recordValidatedPendingFinalize(sessionFile, record, { logger, deferCommit: true, knownEmpty: knownPending?.length === 0 });
      pendingUncommitted = true;
      if (knownPending && !knownPending.includes(record.turnId)) knownPending = [...knownPending, record.turnId];
    },
    markIngested: async (turnId: string, keys: string[]): Promise<void> => {
      guard();
      await markPendingIngested(sessionFile, turnId, keys, { logger });
    },
    complete: async (turnId: string): Promise<boolean> => {
      guard();
      const onlyRecord = knownPending?.length === 1 && knownPending[0] === turnId;
      const removed = await completePendingFinalize(sessionFile, turnId, { logger, onlyRecord });
      if (knownPending) knownPending = knownPending.filter((t) => t !== turnId);
      return removed;
    },
    has: async (): Promise<boolean> => {
      const present = pendingFinalizeExists(sessionFile);
      // Under our lock nobody else writes the record: none now means none until this store writes one.
      knownPending = lockHeld() && !present ? [] : undefined;
      return present;
    },
    list: async (o?: { readOnly?: boolean | undefined }) => {
      const records = await listPending(sessionFile, logger, o?.readOnly === true, onWarning);
      // Only a listing under our lock can be relied on until we release it.
      knownPending = lockHeld() && !o?.readOnly ? records.map((r) => r.turnId) : undefined;
      return records;
    },
    setAside: async (): Promise<string | undefined> => {
      guard();
      const aside = await movePendingFinalizeAside(sessionFile);
      knownPending = lockHeld() ? [] : undefined;
      pendingUncommitted = false;
      if (aside !== undefined) logger.warn({ event: "pending record set aside", movedTo: path.basename(aside) }, "pending-finalize record moved aside");
      return aside;
    },
    /** The deferred fsync of a record written since the last append, to run beside the next one. */
    takeCommit: (): (() => Promise<void>) | undefined => {
      if (!pendingUncommitted) return undefined;
      pendingUncommitted = false;
      return () => commitPendingFinalize(sessionFile);
    },
    /** Before a new lock: what this store knew held only under its previous lock (another process may have written since). */
    forget: (): void => {
      knownPending = undefined;
      pendingUncommitted = false;
    },
  };
}

async function appendTurn(
  opts: JsonlSessionStoreOptions,
  logger: Logger,
  turn: AppendTurnInput,
  syncAlongside: (() => Promise<void>) | undefined,
): Promise<AppendTurnResult> {
  const cwd = turn.cwd ?? opts.cwd;
  if (turn.messages.length === 0) {
    await syncAlongside?.();
    // Nothing to write; report the transcript as it is (never creates it).
    const h = await readCachedHistory(await resolveSessionPath(opts.sessionFile, opts.sessionRoot), opts.sessionFile, { sessionId: opts.sessionId, logger });
    return { appended: 0, skipped: 0, entryIds: [], entryCount: h.entryCount, ...(h.lastEntryId !== undefined ? { lastEntryId: h.lastEntryId } : {}) };
  }
  // Only the ids are checked here (they form the idempotency keys); the messages come typed from the turn record, and
  // validating every message again would put a schema walk of the whole turn on the critical path.
  for (const [name, id] of [["threadId", turn.threadId], ["turnId", turn.turnId]] as const) {
    if (typeof id !== "string" || id.length === 0 || id.includes(":")) {
      throw new SessionFileError("SESSION_INVALID_ARGUMENT", opts.sessionFile, `invalid turn for session ${opts.sessionFile}: ${name} must be a non-empty string without ':'`);
    }
  }
  const out = await mirrorValidatedTurn({
    sessionFile: opts.sessionFile,
    sessionId: opts.sessionId,
    threadId: turn.threadId,
    turnId: turn.turnId,
    messages: turn.messages,
    ...(cwd !== undefined ? { cwd } : {}),
    ...(opts.sessionRoot !== undefined ? { sessionRoot: opts.sessionRoot } : {}),
    ...(turn.request !== undefined ? { request: turn.request } : {}),
    logger,
    locked: true,
    onSessionIdMismatch: "throw",
    ...(syncAlongside ? { syncAlongside } : {}),
  });
  return {
    appended: out.appended,
    skipped: out.skipped,
    entryIds: out.entryIds,
    entryCount: out.entryCount ?? 0,
    ...(out.lastEntryId !== undefined ? { lastEntryId: out.lastEntryId } : {}),
  };
}

async function appendMessage(
  opts: JsonlSessionStoreOptions,
  logger: Logger,
  input: AppendMessageInput,
): Promise<{ entryId: string; appended: boolean }> {
  const parsed = AppendMessageSchema.safeParse(input);
  if (!parsed.success) throw invalid(opts.sessionFile, "message", parsed.error);
  const cwd = input.cwd ?? opts.cwd;
  const writer = await openSessionFile(opts.sessionFile, {
    sessionId: opts.sessionId,
    ...(cwd !== undefined ? { cwd } : {}),
    ...(opts.sessionRoot !== undefined ? { sessionRoot: opts.sessionRoot } : {}),
    logger,
    onSessionIdMismatch: "throw",
  });
  const existing = writer.entryIdForKey(input.idempotencyKey);
  if (existing !== undefined) return { entryId: existing, appended: false };
  const message = { ...input.message, idempotencyKey: input.idempotencyKey } as AgentMessage;
  const [written] = await writer.append([{ type: "message", idempotencyKey: input.idempotencyKey, message }]);
  logger.info({ event: "transcript.message_appended", sessionFile: path.basename(writer.path), entryId: written!.id }, "message appended");
  return { entryId: written!.id, appended: true };
}

async function appendCompaction(opts: JsonlSessionStoreOptions, logger: Logger, entry: CompactionEntryInput): Promise<string> {
  const parsed = CompactionSchema.safeParse(entry);
  if (!parsed.success) throw invalid(opts.sessionFile, "compaction entry", parsed.error);
  const writer = await openSessionFile(opts.sessionFile, {
    sessionId: opts.sessionId,
    ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
    ...(opts.sessionRoot !== undefined ? { sessionRoot: opts.sessionRoot } : {}),
    logger,
    onSessionIdMismatch: "throw",
  });
  if (!writer.hasEntryId(parsed.data.firstKeptEntryId)) {
    throw new SessionFileError(
      "SESSION_INVALID_ARGUMENT",
      opts.sessionFile,
      `compaction for session ${opts.sessionFile}: firstKeptEntryId ${JSON.stringify(parsed.data.firstKeptEntryId)} is not an entry of the transcript`,
    );
  }
  const { details, ...rest } = parsed.data;
  const [written] = await writer.append([{ type: "compaction", ...rest, ...(details !== undefined ? { details } : {}) }]);
  logger.info(
    { event: "transcript.compaction_appended", sessionFile: path.basename(writer.path), entryId: written!.id, tokensBefore: rest.tokensBefore },
    "compaction entry appended",
  );
  return written!.id;
}

async function listPending(sessionFile: string, logger: Logger, readOnly: boolean, onWarning?: (warning: string) => void): Promise<PendingFinalizeRecord[]> {
  try {
    return await listPendingFinalize(sessionFile);
  } catch (err) {
    if (readOnly || !(err instanceof SessionFileError && err.code === "SESSION_PENDING_INVALID")) throw err;
    // Unreadable record set: keep it for inspection, but never let it wedge every later turn on the session.
    const aside = await movePendingFinalizeAside(sessionFile);
    logger.warn(
      { event: "pending record corrupt", movedTo: aside ? path.basename(aside) : undefined },
      "unreadable pending-finalize record moved aside; its turns are not finalized again",
    );
    onWarning?.(
      `the pending-finalize record of ${path.basename(sessionFile)} could not be read (${err.message}); it was moved aside${aside ? ` to ${path.basename(aside)}` : ""} and the turns it held are not finalized again`,
    );
    return [];
  }
}
