/**
 * The PostgreSQL session store: one session's transcript entries, binding, pending-finalize records and lease as rows.
 * See docs/storage.md ("PostgreSQL") for the layout and the guarantees; `lease.ts` for the lock.
 *
 * - Entries are stored as `json` (the text as written, key order kept), keyed `(session, generation, seq)` with unique
 *   entry ids and idempotency keys per generation: a replayed mirror or message appends nothing. The export to pi
 *   JSONL is byte-identical to what the file store writes for the same entries.
 * - Every write statement carries the lease's fencing token: a CTE takes the lease row `for share` only when the token
 *   is ours and unexpired (the database clock), and the write selects from it. A holder that lost its lease writes 0
 *   rows and gets `SESSION_LOCK_COMPROMISED`; a new holder's takeover waits for an in-flight fenced write to commit.
 * - The cache of entries is keyed by generation, epoch (bumped by rewrites) and sequence; each read asks the database
 *   for what changed since, so another host's writes are seen. Under a held lease nobody else writes, so the reads a
 *   turn makes right after taking the lease are served from the snapshot taken then.
 * - A pending record is written when the turn records it (visible at once, as the file store's record is before its
 *   fsync); the turn's entries follow in one synchronous commit, which (WAL order) also makes every earlier commit
 *   durable: there is never a durable mirror without its record.
 */
import os from "node:os";
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import pg, { escapeLiteral, type Pool } from "pg";
import type { Logger } from "pino";
import { z } from "zod";
import { AppendMessageSchema, CompactionEntrySchema as CompactionSchema, StoreResetSchema as ResetSchema } from "../store/input-schemas.js";
import type { AgentMessage } from "../context-engine/types.js";
import { silentLogger } from "../log/logger.js";
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
  StoreResetResult,
  VisibleTranscriptEntry,
} from "../store/session-store.js";
import { threadBindingSchema, type ThreadBinding } from "../transcript/binding.js";
import { buildSessionContextFromEntries } from "../transcript/context.js";
import { deriveEntryId, entryIdempotencyKey, entryOrigin, randomEntryId, SESSION_FORMAT_VERSION, type NewSessionEntry, type SessionEntry, type SessionHeader } from "../transcript/entries.js";
import { SessionFileError } from "../transcript/errors.js";
import { deepFreeze } from "../transcript/freeze.js";
import { mirrorEntryFor, mirrorKeysForTurn, withRequestMark } from "../transcript/mirror.js";
import { findRequestInEntries } from "../transcript/requests.js";
import { visibleEntriesOf } from "../transcript/visible.js";
import type { PendingFinalizeRecord } from "../transcript/pending.js";
import { parseTranscriptRewriteRequest, planTranscriptRewrite, type TranscriptLine, type TranscriptRewriteRequest, type TranscriptRewriteResult } from "../transcript/rewrite.js";
import { acquireLease, isConnectionError, LeaseNotifier, prepared, type LeaseTiming, type PostgresLockHandle } from "./lease.js";
import { checkSchemaName, migratePostgresSchema } from "./schema.js";

/** Options of {@link createPostgresSessionStores}: a connection string (the factory owns its pool) or your pool. */
export type PostgresStoreConnection = { connectionString: string; pool?: undefined } | { pool: Pool; connectionString?: undefined };

/** Options of {@link createPostgresSessionStores}. */
export type PostgresSessionStoresOptions = PostgresStoreConnection & {
  /** Schema holding the tables (default `codex_turn`); lowercase letters, digits and `_`. */
  schema?: string | undefined;
  /** Lease length on the database clock (default 20000 ms, at least 500). A crashed holder's session waits this long. */
  leaseMs?: number | undefined;
  /** Renewal interval (default a quarter of `leaseMs`). */
  heartbeatMs?: number | undefined;
  /** Lock waiters retry at least this often when no NOTIFY arrives (default 1000 ms). */
  pollMs?: number | undefined;
  /** Pool size when the factory creates the pool (default 10). */
  maxConnections?: number | undefined;
  logger?: Logger | undefined;
};

/** Per-session options of {@link PostgresSessionStores.session}. */
export interface PostgresSessionOptions {
  /** The id the session's header must name (`SESSION_ID_MISMATCH` otherwise); default: the session key. */
  sessionId?: string | undefined;
  /** Header cwd of a session created by this store (default: the process's cwd). */
  cwd?: string | undefined;
  logger?: Logger | undefined;
  /** Hears what the store set aside to keep the session going (an unreadable binding or pending record). */
  onWarning?: ((warning: string) => void) | undefined;
}

/** A {@link SessionStore} on PostgreSQL, plus what only a database store can do. */
export interface PostgresSessionStore extends SessionStore {
  /** The session's row key (the address names it); the header's id may differ after a reset with `nextSessionId`. */
  readonly sessionKey: string;
  /** The session as a pi session JSONL file (header line, then one line per entry of the current generation). */
  exportJsonl(): Promise<string>;
  /** The current generation (bumped by `reset({ archiveTranscript: true })`: the old entries stay as the archive). */
  generation(): Promise<number>;
  /** The id the session's header names (after a reset with `nextSessionId`, not the key); undefined when none. */
  headerId(): Promise<string | undefined>;
}

/** Many sessions sharing one pool, one LISTEN connection and one migrated schema. */
export interface PostgresSessionStores {
  readonly pool: Pool;
  readonly schema: string;
  /** Apply the schema migration (idempotent; every store call waits for it anyway). */
  migrate(): Promise<void>;
  /** The store of one session, by its key (cheap; stores of the same key share nothing but the pool). */
  session(sessionKey: string, opts?: PostgresSessionOptions): PostgresSessionStore;
  /** Session ids that have rows, sorted. */
  listSessions(): Promise<string[]>;
  /** Stop listening and end the pool when the factory created it. */
  close(): Promise<void>;
}

const OptionsSchema = z.object({
  connectionString: z.string().min(1).optional(),
  pool: z.custom<Pool>((v) => typeof v === "object" && v !== null && typeof (v as { query?: unknown }).query === "function", "pool must be a pg Pool").optional(),
  schema: z.string().optional(),
  leaseMs: z.number().int().min(500).optional(),
  heartbeatMs: z.number().int().min(50).optional(),
  pollMs: z.number().int().min(10).optional(),
  maxConnections: z.number().int().min(2).optional(),
  logger: z.any().optional(),
});

const SessionIdSchema = z.string().min(1).max(512);

function invalid(address: string, what: string, err: z.ZodError): SessionFileError {
  const issues = err.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
  return new SessionFileError("SESSION_INVALID_ARGUMENT", address, `invalid ${what} for session ${address}: ${issues}`);
}

/**
 * A factory of PostgreSQL session stores sharing one pool (created from `connectionString`, or yours).
 *
 * @example
 * ```ts
 * import { createPostgresSessionStores } from "codex-turn-machine/postgres";
 * const stores = createPostgresSessionStores({ connectionString: process.env.DATABASE_URL! });
 * const store = stores.session("chat-42");
 * await runCodexTurn({ ...params, sessionId: "chat-42", store });
 * await stores.close();
 * ```
 */
export function createPostgresSessionStores(opts: PostgresSessionStoresOptions): PostgresSessionStores {
  const parsed = OptionsSchema.safeParse(opts);
  if (!parsed.success) throw invalid("postgres", "PostgreSQL store options", parsed.error);
  if ((opts.connectionString === undefined) === (opts.pool === undefined)) {
    throw new SessionFileError("SESSION_INVALID_ARGUMENT", "postgres", "createPostgresSessionStores needs exactly one of connectionString or pool");
  }
  const schema = checkSchemaName(opts.schema ?? "codex_turn");
  const logger = opts.logger ?? silentLogger;
  const leaseMs = opts.leaseMs ?? 20_000;
  const timing: LeaseTiming = { leaseMs, heartbeatMs: opts.heartbeatMs ?? Math.max(50, Math.floor(leaseMs / 4)), pollMs: opts.pollMs ?? 1_000 };
  if (timing.heartbeatMs >= leaseMs) throw new SessionFileError("SESSION_INVALID_ARGUMENT", "postgres", `heartbeatMs (${timing.heartbeatMs}) must be below leaseMs (${leaseMs})`);
  const ownPool = opts.pool === undefined;
  const pool: Pool = opts.pool ?? createPool(opts.connectionString!, opts.maxConnections ?? 10, logger);
  const notifier = new LeaseNotifier(pool, `${schema}_lease`, logger);
  const owner = `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const baseAddress = `${describeServer(opts)}#${schema}`;
  let migrated: Promise<void> | undefined;
  const migrate = (): Promise<void> => {
    migrated ??= withRetry(() => migratePostgresSchema(pool, schema), logger, "migrate").then(
      (r) => logger.info({ event: "postgres.migrated", schema, from: r.from, to: r.to }, "schema ready"),
      (err) => {
        migrated = undefined;
        throw err;
      },
    );
    return migrated;
  };
  return {
    pool,
    schema,
    migrate,
    session: (sessionKey, sopts = {}) =>
      createSession({ pool, schema, sessionKey, sessionId: sopts.sessionId ?? sessionKey, base: baseAddress, owner, timing, notifier, migrate, logger: sopts.logger ?? logger, sopts }),
    listSessions: async () => {
      await migrate();
      const { rows } = await pool.query<{ session_id: string }>(`select session_id from ${schema}.sessions order by session_id`);
      return rows.map((r) => r.session_id);
    },
    close: async () => {
      await notifier.close();
      if (ownPool) await pool.end();
    },
  };
}

/**
 * One session's PostgreSQL store with its own pool (for a single session; prefer {@link createPostgresSessionStores}
 * for many). `close()` ends the pool it created.
 *
 * @example
 * ```ts
 * const store = createPostgresSessionStore({ connectionString: "postgres://127.0.0.1:5432/app", sessionId: "s1" });
 * const lock = await store.acquireLock();
 * try { await store.appendTurn({ threadId, turnId, messages }); } finally { await lock.release(); }
 * await store.close();
 * ```
 */
export function createPostgresSessionStore(
  opts: PostgresSessionStoresOptions & Omit<PostgresSessionOptions, "sessionId"> & { sessionId: string; sessionKey?: string | undefined },
): PostgresSessionStore & { close(): Promise<void> } {
  const { sessionId, sessionKey, cwd, onWarning, ...factory } = opts;
  const stores = createPostgresSessionStores(factory);
  const store = stores.session(sessionKey ?? sessionId, { sessionId, cwd, onWarning, logger: opts.logger });
  return Object.assign(store, { close: () => stores.close() });
}

function createPool(connectionString: string, max: number, logger: Logger): Pool {
  const pool = new pg.Pool({ connectionString, max, application_name: "codex-turn-machine" });
  // An idle client's connection dying (a server restart, pg_terminate_backend) must not crash the process.
  pool.on("error", (err) => logger.warn({ event: "postgres.idle_client_error", err: err.message }, "idle PostgreSQL connection failed"));
  return pool;
}

/** `postgres://host:port/db` of the server (never a user or password). */
function describeServer(opts: PostgresStoreConnection): string {
  type PoolOptions = { host?: string | undefined; port?: number | undefined; database?: string | undefined; connectionString?: string | undefined };
  const o = (opts.pool as unknown as { options?: PoolOptions | undefined } | undefined)?.options;
  const cs = opts.connectionString ?? o?.connectionString;
  if (cs) {
    try {
      const u = new URL(cs);
      return `postgres://${u.hostname}${u.port ? `:${u.port}` : ""}${u.pathname || "/"}`;
    } catch {
      return "postgres://(connection string)";
    }
  }
  return `postgres://${o?.host ?? "localhost"}:${o?.port ?? 5432}/${o?.database ?? ""}`;
}

interface SessionDeps {
  pool: Pool;
  schema: string;
  /** The row key. */
  sessionKey: string;
  /** The id the header must name. */
  sessionId: string;
  base: string;
  owner: string;
  timing: LeaseTiming;
  notifier: LeaseNotifier;
  migrate: () => Promise<void>;
  logger: Logger;
  sopts: PostgresSessionOptions;
}

/** What this store knows of the session's rows (valid as of the last refresh). */
interface Snapshot {
  exists: boolean;
  generation: number;
  epoch: number;
  header: SessionHeader | null;
  entries: SessionEntry[];
  byId: Map<string, SessionEntry>;
  keys: Map<string, string>;
  bindingVersion: number;
  binding: unknown;
  hasPending: boolean;
  /** The built history of `entries` (reset when they change). */
  history?: SessionHistory | undefined;
}

function emptySnapshot(): Snapshot {
  return { exists: false, generation: 0, epoch: 0, header: null, entries: [], byId: new Map(), keys: new Map(), bindingVersion: 0, binding: null, hasPending: false };
}

const PendingInputSchema = z.looseObject({
  threadId: z.string().min(1),
  turnId: z.string().min(1),
  prePromptMessageCount: z.number().int().nonnegative(),
  messageCount: z.number().int().nonnegative(),
  status: z.enum(["completed", "failed", "interrupted", "timedOut", "aborted", "yieldAborted"]),
  messages: z.array(z.looseObject({ role: z.string().min(1) })).optional(),
  ingestedKeys: z.array(z.string().min(1)).optional(),
});
const PendingRecordSchema = PendingInputSchema.extend({ recordedAt: z.string() });

function entryTimestamp(draft: NewSessionEntry): string {
  if (typeof draft.timestamp === "string") return draft.timestamp;
  const t = (draft["message"] as { timestamp?: unknown } | undefined)?.timestamp;
  if (typeof t === "number" && Number.isFinite(t) && Math.abs(t) <= 8.64e15) return new Date(t).toISOString();
  return new Date().toISOString();
}

/**
 * The fence every write statement starts with: the lease row, only while the token is ours and unexpired (locked `for
 * share` until the write commits, so a takeover waits for it). A store object that never took the lock writes
 * unfenced, as the file store does (`$2` is then null).
 */
function fenceCte(s: string, fenced: boolean): string {
  return fenced
    ? `fence as (select 1 from ${s}.leases where session_id = $1 and token = $2::bigint and expires_at > clock_timestamp() for share)`
    : `fence as (select 1 where $2::bigint is null)`;
}

const FENCE = "%FENCE%";

// Long (about 560 lines) on purpose: one closure per session, whose methods (each short) share the session's snapshot,
// its lease and the fenced-statement helper; splitting it would pass that state around as a mutable bag.
function createSession(d: SessionDeps): PostgresSessionStore {
  for (const [what, v] of [["session key", d.sessionKey], ["session id", d.sessionId]] as const) {
    const ok = SessionIdSchema.safeParse(v);
    if (!ok.success) throw invalid(d.base, what, ok.error);
  }
  const { pool, schema: s, sessionKey: key, sessionId, logger } = d;
  const address = `${d.base}/${key}`;
  let snap = emptySnapshot();
  let lock: PostgresLockHandle | undefined;
  /** The lease under which `snap` was refreshed: while it is held nobody else writes, so reads use `snap` as is. */
  let snapUnder: PostgresLockHandle | undefined;
  /** The binding in `snap` was read as the lease was taken and not handed out since (the turn's first read uses it). */
  let bindingJustRead = false;

  const held = (): PostgresLockHandle | undefined => (lock && snapUnder === lock && !lock.signal.aborted ? lock : undefined);

  /** The lock this store object took, checked (throws when lost or released); undefined when it never took one. */
  const writeToken = (): PostgresLockHandle | undefined => {
    lock?.assertHeld();
    return lock;
  };

  /** Run a write whose SQL starts its CTEs with `%FENCE%` (see {@link fenceCte}); `$1` key, `$2` token, then params. */
  const fencedQuery = async <R extends Record<string, unknown>>(what: string, sql: string, params: unknown[]): Promise<R> => {
    const l = writeToken();
    bindingJustRead = false;
    await d.migrate();
    const text = sql.replace(FENCE, fenceCte(s, l !== undefined));
    let res;
    try {
      res = await withRetry(() => pool.query<R & { fenced: number }>(prepared(text, [key, l?.token ?? null, ...params])), logger, what, l);
    } catch (err) {
      throw wrapError(err, address, what);
    }
    const row = res.rows[0];
    if (!row || Number(row.fenced) === 0) {
      if (!l) throw new SessionFileError("SESSION_WRITE_FAILED", address, `${what} for session ${address} wrote nothing`);
      l.lose(`a ${what} found the lease gone (fencing token ${l.token})`);
      throw new SessionFileError("SESSION_LOCK_COMPROMISED", address, `${what} refused for session ${address}: the lease with fencing token ${l.token} is not held any more (0 rows written)`);
    }
    return row;
  };

  /** The statement of {@link refresh} (`$1` key, `$2` generation, `$3` epoch, `$4` binding version, `$5` entries known). */
  const refreshSql = (extra = "") => `select s.generation, s.epoch, s.entry_seq, s.header::text as header, s.binding_version::text as binding_version,
        case when s.binding_version = $4 then null else s.binding end as binding,
        exists (select 1 from ${s}.pending p where p.session_id = $1) as has_pending,
        (select coalesce(json_agg(e.entry order by e.seq)::text, '[]') from ${s}.entries e
           where e.session_id = s.session_id and e.generation = s.generation
             and e.seq > case when s.generation = $2 and s.epoch = $3 then $5 else 0 end) as fresh
      from ${s}.sessions s where s.session_id = $1${extra}`;
  const refreshParams = (cur: Snapshot): unknown[] => [key, cur.generation, cur.epoch, cur.bindingVersion, cur.entries.length];

  type RefreshRow = { generation: number; epoch: number; entry_seq: number; header: string | null; binding_version: string; binding: unknown; has_pending: boolean; fresh: string };

  /** `snap` advanced from `cur` by the refresh row (undefined: the session has no row); "again" when counts disagree. */
  const applyRefresh = (cur: Snapshot, row: RefreshRow | undefined): Snapshot | "again" => {
    if (!row) {
      snap = emptySnapshot();
      return snap;
    }
    const fresh = JSON.parse(row.fresh) as SessionEntry[];
    const incremental = row.generation === cur.generation && row.epoch === cur.epoch && cur.exists && fresh.length + cur.entries.length === row.entry_seq;
    let next: Snapshot;
    if (incremental) {
      next = { ...cur, exists: true };
      if (fresh.length > 0) {
        next.entries = [...cur.entries];
        next.byId = new Map(cur.byId);
        next.keys = new Map(cur.keys);
        addEntries(next, fresh);
        next.history = undefined;
      }
    } else if (row.generation === cur.generation && row.epoch === cur.epoch && cur.exists) {
      // Counts disagree (should not happen): read everything again.
      return "again";
    } else {
      next = { ...emptySnapshot(), exists: true, generation: row.generation, epoch: row.epoch };
      addEntries(next, fresh);
    }
    next.header = row.header === null ? null : (JSON.parse(row.header) as SessionHeader);
    const bv = Number(row.binding_version);
    if (bv !== cur.bindingVersion) {
      next.bindingVersion = bv;
      next.binding = row.binding;
    }
    next.hasPending = row.has_pending;
    snap = next;
    return snap;
  };

  /** Bring `snap` up to date with the database: only what changed since (same generation and epoch), else all. */
  const refresh = async (): Promise<Snapshot> => {
    await d.migrate();
    const cur = snap;
    let res;
    try {
      res = await withRetry(() => pool.query(prepared(refreshSql(), refreshParams(cur))), logger, "read");
    } catch (err) {
      throw wrapError(err, address, "read");
    }
    const out = applyRefresh(cur, res.rows[0] as RefreshRow | undefined);
    if (out !== "again") return out;
    snap = emptySnapshot();
    return refresh();
  };

  /** The snapshot to read: the one taken under the held lease, else a fresh one; its header must name our id. */
  const current = async (): Promise<Snapshot> => {
    const sn = held() ? snap : await refresh();
    if (sn.header && sn.header.id !== sessionId) {
      throw new SessionFileError(
        "SESSION_ID_MISMATCH",
        address,
        `session ${address} belongs to session ${JSON.stringify(sn.header.id)}, not ${JSON.stringify(sessionId)}; nothing was read or written`,
      );
    }
    return sn;
  };

  const history = (sn: Snapshot): SessionHistory => {
    if (sn.history) return sn.history;
    const { messages, sources } = buildSessionContextFromEntries(sn.entries, undefined, sn.byId);
    const h: SessionHistory = {
      messages: deepFreeze(messages),
      origins: sources.map((e) => (e.type === "compaction" ? null : entryOrigin(e))),
      entryCount: sn.entries.length,
      lastEntryId: sn.entries.at(-1)?.id,
      skippedEntries: 0,
      warnings: [],
      exists: sn.header !== null,
    };
    sn.history = h;
    return h;
  };

  /**
   * Append drafts after the current leaf in one fenced statement (session row advanced only from the sequence this
   * store knows, so a stale cache appends nothing and is refreshed and retried).
   */
  const appendDrafts = async (
    what: string,
    build: (sn: Snapshot) => NewSessionEntry[],
    cwd: string | undefined,
  ): Promise<{ written: SessionEntry[]; sn: Snapshot }> => {
    for (let attempt = 0; ; attempt++) {
      const sn = attempt === 0 ? await current() : await refresh();
      const drafts = build(sn);
      if (drafts.length === 0) return { written: [], sn };
      const taken = { has: (id: string) => sn.byId.has(id) || batchIds.has(id) };
      const batchIds = new Set<string>();
      let parentId = sn.entries.at(-1)?.id ?? null;
      const written: SessionEntry[] = [];
      const texts: string[] = [];
      for (const draft of drafts) {
        const { type, idempotencyKey, timestamp: _ts, ...payload } = draft;
        const id = idempotencyKey !== undefined ? deriveEntryId(idempotencyKey, taken) : randomEntryId(taken);
        batchIds.add(id);
        const entry: SessionEntry = { type, id, parentId, timestamp: entryTimestamp(draft), ...(idempotencyKey !== undefined ? { idempotencyKey } : {}), ...payload };
        const text = JSON.stringify(entry);
        texts.push(text);
        written.push(JSON.parse(text) as SessionEntry);
        parentId = id;
      }
      const base = sn.entries.length;
      const header: SessionHeader = sn.header ?? {
        type: "session",
        version: SESSION_FORMAT_VERSION,
        id: sessionId,
        timestamp: new Date().toISOString(),
        cwd: cwd ?? d.sopts.cwd ?? process.cwd(),
      };
      const sql = `with ${FENCE},
        sess as (
          insert into ${s}.sessions as t (session_id, generation, header, entry_seq, updated_at)
          select $1, $3, $4::json, $6, now() from fence
          on conflict (session_id) do update set entry_seq = excluded.entry_seq, header = coalesce(t.header, excluded.header), updated_at = now()
            where t.generation = $3 and t.epoch = $7 and t.entry_seq = $5
          returning 1),
        ins as (
          insert into ${s}.entries (session_id, generation, seq, entry_id, idem_key, entry)
          select $1, $3, x.seq, x.id, x.key, x.entry::json
          from unnest($8::int[], $9::text[], $10::text[], $11::text[]) as x(seq, id, key, entry)
          where exists (select 1 from sess)
          returning 1)
        select (select count(*) from fence)::int as fenced, (select count(*) from sess)::int as advanced, (select count(*) from ins)::int as inserted`;
      const row = await fencedQuery<{ advanced: number; inserted: number }>(what, sql, [
        sn.generation,
        JSON.stringify(header),
        base,
        base + written.length,
        sn.epoch,
        written.map((_, i) => base + i + 1),
        written.map((e) => e.id),
        written.map((e) => entryIdempotencyKey(e) ?? null),
        texts,
      ]);
      if (Number(row.advanced) === 1) {
        const next: Snapshot = { ...sn, exists: true, header, entries: [...sn.entries], byId: new Map(sn.byId), keys: new Map(sn.keys), history: undefined };
        addEntries(next, written);
        if (snap === sn) snap = next;
        return { written, sn: next };
      }
      if (attempt >= 2) {
        throw new SessionFileError("SESSION_WRITE_FAILED", address, `${what} for session ${address}: the session changed under the lock (generation ${sn.generation}, ${base} entries expected)`);
      }
      logger.warn({ event: "postgres.stale_cache", sessionId, what, expectedEntries: base }, "session changed since the last read; re-reading");
    }
  };

  /** A stored binding as the turn gets it: checked by the schema, handed out whole (a copy); a corrupt one set aside. */
  const bindingOf = async (value: unknown, o?: { readOnly?: boolean | undefined }): Promise<ThreadBinding | undefined> => {
    if (value === null || value === undefined) return undefined;
    const parsed = threadBindingSchema.safeParse(value);
    if (!parsed.success) {
      logger.warn({ event: "postgres.binding_invalid", sessionId, readOnly: o?.readOnly === true }, "stored binding is invalid; ignored");
      if (o?.readOnly) return undefined;
      const aside = await store.setAsideBinding();
      d.sopts.onWarning?.(
        `the thread binding of session ${address} could not be read (${parsed.error.issues[0]?.message ?? "invalid"}); it was moved aside${aside ? ` to ${aside}` : ""} and the session starts a fresh thread`,
      );
      return undefined;
    }
    // The stored object whole (fields a newer writer added pass through), as the schema accepted it.
    return structuredClone(value) as ThreadBinding;
  };

  const store: PostgresSessionStore = {
    address,
    sessionFile: address,
    sessionId,
    sessionKey: key,
    readHistory: async () => history(await current()),
    readVisibleEntries: async () => visibleEntries(await current()),
    appendTurn: async (turn: AppendTurnInput): Promise<AppendTurnResult> => {
      for (const [name, id] of [["threadId", turn.threadId], ["turnId", turn.turnId]] as const) {
        if (typeof id !== "string" || id.length === 0 || id.includes(":")) {
          throw new SessionFileError("SESSION_INVALID_ARGUMENT", address, `invalid turn for session ${address}: ${name} must be a non-empty string without ':'`);
        }
      }
      writeToken();
      const keys = mirrorKeysForTurn(turn.threadId, turn.turnId, turn.messages);
      const { written, sn } = await appendDrafts(
        "turn append",
        (cur) => keys.flatMap((k, i) => (cur.keys.has(k) ? [] : [withRequestMark(mirrorEntryFor(turn.messages[i]!, k), turn.request, i, k)])),
        turn.cwd,
      );
      logger.info(
        { event: "transcript.mirror", sessionId, threadId: turn.threadId, turnId: turn.turnId, messages: keys.length, appended: written.length, skipped: keys.length - written.length },
        "turn mirrored to transcript",
      );
      return {
        appended: written.length,
        skipped: keys.length - written.length,
        entryIds: keys.map((k) => sn.keys.get(k) ?? ""),
        entryCount: sn.entries.length,
        ...(sn.entries.length > 0 ? { lastEntryId: sn.entries.at(-1)!.id } : {}),
      };
    },
    // The current generation's entries, as the JSONL store scans its file (an archived generation is another transcript).
    findRequest: async (requestId: string) => findRequestInEntries((await current()).entries, requestId),
    appendMessage: async (input: AppendMessageInput) => {
      const parsed = AppendMessageSchema.safeParse(input);
      if (!parsed.success) throw invalid(address, "message", parsed.error);
      writeToken();
      const key = input.idempotencyKey;
      const { written, sn } = await appendDrafts(
        "message append",
        (cur) => (cur.keys.has(key) ? [] : [{ type: "message", idempotencyKey: key, message: { ...input.message, idempotencyKey: key } as AgentMessage }]),
        input.cwd,
      );
      if (written.length === 0) return { entryId: sn.keys.get(key)!, appended: false };
      logger.info({ event: "transcript.message_appended", sessionId, entryId: written[0]!.id }, "message appended");
      return { entryId: written[0]!.id, appended: true };
    },
    appendCompaction: async (entry: CompactionEntryInput) => {
      const parsed = CompactionSchema.safeParse(entry);
      if (!parsed.success) throw invalid(address, "compaction entry", parsed.error);
      writeToken();
      const { details, ...rest } = parsed.data;
      const { written } = await appendDrafts(
        "compaction append",
        (cur) => {
          if (!cur.byId.has(rest.firstKeptEntryId)) {
            throw new SessionFileError(
              "SESSION_INVALID_ARGUMENT",
              address,
              `compaction for session ${address}: firstKeptEntryId ${JSON.stringify(rest.firstKeptEntryId)} is not an entry of the transcript`,
            );
          }
          return [{ type: "compaction", ...rest, ...(details !== undefined ? { details } : {}) }];
        },
        undefined,
      );
      logger.info({ event: "transcript.compaction_appended", sessionId, entryId: written[0]!.id, tokensBefore: rest.tokensBefore }, "compaction entry appended");
      return written[0]!.id;
    },
    rewriteEntries: async (request: TranscriptRewriteRequest): Promise<TranscriptRewriteResult> => {
      const { replacements } = parseTranscriptRewriteRequest(request, address);
      writeToken();
      const sn = await current();
      if (!sn.header || sn.entries.length === 0) return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "empty session" };
      const lines: TranscriptLine[] = [{ text: JSON.stringify(sn.header) }, ...sn.entries.map((e) => ({ text: JSON.stringify(e), entry: e }))];
      const plan = planTranscriptRewrite(lines, replacements);
      if (!plan.lines) return plan.result;
      const texts = plan.lines.slice(1);
      const entries = texts.map((t) => JSON.parse(t) as SessionEntry);
      const l = writeToken();
      await d.migrate();
      const client = await pool.connect();
      try {
        await client.query("begin");
        const f = await client.query(`with ${fenceCte(s, l !== undefined)} select count(*)::int as fenced from fence`, [key, l?.token ?? null]);
        if (l && Number(f.rows[0]?.fenced) === 0) {
          await client.query("rollback");
          l.lose("a rewrite found the lease gone");
          throw new SessionFileError("SESSION_LOCK_COMPROMISED", address, `rewrite refused for session ${address}: the lease with fencing token ${l.token} is not held any more`);
        }
        const u = await client.query(
          `update ${s}.sessions set epoch = epoch + 1, entry_seq = $4, updated_at = now() where session_id = $1 and generation = $2 and epoch = $3 returning epoch`,
          [key, sn.generation, sn.epoch, entries.length],
        );
        if (u.rowCount !== 1) throw new SessionFileError("SESSION_WRITE_FAILED", address, `rewrite of session ${address}: the session changed under the lock`);
        await client.query(`delete from ${s}.entries where session_id = $1 and generation = $2`, [key, sn.generation]);
        await client.query(
          `insert into ${s}.entries (session_id, generation, seq, entry_id, idem_key, entry)
           select $1, $2, x.seq, x.id, x.key, x.entry::json from unnest($3::int[], $4::text[], $5::text[], $6::text[]) as x(seq, id, key, entry)`,
          [key, sn.generation, entries.map((_, i) => i + 1), entries.map((e) => e.id), entries.map((e) => entryIdempotencyKey(e) ?? null), texts],
        );
        await client.query("commit");
        const next: Snapshot = { ...emptySnapshot(), exists: true, generation: sn.generation, epoch: Number(u.rows[0]!.epoch), header: sn.header, bindingVersion: sn.bindingVersion, binding: sn.binding, hasPending: sn.hasPending };
        addEntries(next, entries);
        snap = next;
      } catch (err) {
        await client.query("rollback").catch(() => undefined);
        throw err instanceof SessionFileError ? err : wrapError(err, address, "rewrite");
      } finally {
        client.release();
      }
      logger.info(
        { event: "transcript.rewritten", sessionId, rewrittenEntries: plan.result.rewrittenEntries, reappended: plan.reappended, removed: plan.removed, bytesFreed: plan.result.bytesFreed },
        "transcript entries rewritten",
      );
      return plan.result;
    },
    readBinding: async (o) => {
      // Always asked of the database (one small statement; the jsonb only when its version changed): a binding is
      // what decides which Codex thread the turn resumes, so it is never served from an older snapshot.
      await d.migrate();
      const cur = snap;
      if (bindingJustRead && held()) {
        bindingJustRead = false;
        return bindingOf(cur.binding, o);
      }
      const { rows } = await withRetry(
        () =>
          pool.query<{ binding_version: string; binding: unknown }>(
            `select binding_version::text as binding_version, case when binding_version = $2 then null else binding end as binding from ${s}.sessions where session_id = $1`,
            [key, cur.bindingVersion],
          ),
        logger,
        "read",
      ).catch((err: unknown) => {
        throw wrapError(err, address, "read", "SESSION_UNREADABLE");
      });
      const bv = rows[0] ? Number(rows[0].binding_version) : 0;
      if (bv !== cur.bindingVersion) {
        if (snap === cur) snap = { ...cur, bindingVersion: bv, binding: rows[0]?.binding ?? null };
      }
      const sn = bv !== cur.bindingVersion ? { binding: rows[0]?.binding ?? null } : cur;
      return bindingOf(sn.binding, o);
    },
    writeBinding: async (binding: ThreadBinding) => {
      const sql = `with ${FENCE},
        up as (
          insert into ${s}.sessions as t (session_id, binding, binding_version, updated_at) select $1, $3::jsonb, 1, now() from fence
          on conflict (session_id) do update set binding = excluded.binding, binding_version = t.binding_version + 1, updated_at = now()
          returning binding_version)
        select (select count(*) from fence)::int as fenced, (select binding_version::text from up) as binding_version`;
      const row = await fencedQuery<{ binding_version: string | null }>("binding write", sql, [JSON.stringify(binding)]);
      const stored = JSON.parse(JSON.stringify(binding)) as unknown;
      if (held() && row.binding_version !== null) {
        snap = { ...snap, exists: true, binding: stored, bindingVersion: Number(row.binding_version) };
      }
    },
    recordPending: async (record: PendingFinalizeInput) => {
      const parsed = PendingInputSchema.safeParse(record);
      if (!parsed.success) throw invalid(address, "pending-finalize record", parsed.error);
      const full = { ...record, recordedAt: new Date().toISOString() };
      const sql = `with ${FENCE},
        up as (
          insert into ${s}.pending (session_id, turn_id, record, ingested) select $1, $3, $4::json, $5::jsonb from fence
          on conflict (session_id, turn_id) do update set record = excluded.record, ingested = excluded.ingested
          returning 1)
        select (select count(*) from fence)::int as fenced, (select count(*) from up)::int as written`;
      await fencedQuery("pending record", sql, [record.turnId, JSON.stringify(full), JSON.stringify(record.ingestedKeys ?? [])]);
      if (held()) snap = { ...snap, hasPending: true };
      logger.debug({ event: "transcript.pending.recorded", sessionId, turnId: record.turnId, messages: record.messageCount }, "pending finalize recorded");
    },
    markPendingIngested: async (turnId: string, messageKeys: readonly string[]) => {
      const keys = z.array(z.string().min(1)).safeParse(messageKeys);
      if (typeof turnId !== "string" || turnId.length === 0 || !keys.success) {
        throw new SessionFileError("SESSION_INVALID_ARGUMENT", address, `markPendingIngested for session ${address} needs a non-empty turnId and non-empty string keys`);
      }
      const sql = `with ${FENCE},
        up as (
          update ${s}.pending p set ingested = p.ingested || coalesce((
              select jsonb_agg(k order by n) from jsonb_array_elements_text($4::jsonb) with ordinality as a(k, n)
              where not (p.ingested ? k)), '[]'::jsonb)
          where p.session_id = $1 and p.turn_id = $3 and exists (select 1 from fence)
          returning 1)
        select (select count(*) from fence)::int as fenced, (select count(*) from up)::int as updated`;
      const row = await fencedQuery<{ updated: number }>("pending ingest update", sql, [turnId, JSON.stringify([...new Set(keys.data)])]);
      if (Number(row.updated) === 0) logger.warn({ event: "transcript.pending.ingest_unknown_turn", sessionId, turnId }, "no pending record for the turn; ingest progress not recorded");
    },
    completePending: async (turnId: string) => {
      if (typeof turnId !== "string" || turnId.length === 0) {
        throw new SessionFileError("SESSION_INVALID_ARGUMENT", address, `completePending for session ${address} needs a non-empty turnId`);
      }
      const sql = `with ${FENCE},
        del as (delete from ${s}.pending where session_id = $1 and turn_id = $3 and exists (select 1 from fence) returning 1)
        select (select count(*) from fence)::int as fenced, (select count(*) from del)::int as removed,
          exists (select 1 from ${s}.pending where session_id = $1 and turn_id <> $3) as others`;
      const row = await fencedQuery<{ removed: number; others: boolean }>("pending completion", sql, [turnId]);
      if (held()) snap = { ...snap, hasPending: row.others };
      return Number(row.removed) > 0;
    },
    hasPending: async () => {
      if (held()) return snap.hasPending;
      await d.migrate();
      const { rows } = await withRetry(() => pool.query<{ e: boolean }>(`select exists (select 1 from ${s}.pending where session_id = $1) as e`, [key]), logger, "read").catch(
        (err: unknown) => {
          throw wrapError(err, address, "read");
        },
      );
      return rows[0]!.e;
    },
    listPending: async (o) => {
      await d.migrate();
      const { rows } = await withRetry(
        () => pool.query<{ turn_id: string; record: string; ingested: string[] }>(`select turn_id, record::text as record, ingested from ${s}.pending where session_id = $1 order by ord`, [key]),
        logger,
        "read",
      ).catch((err: unknown) => {
        throw wrapError(err, address, "read");
      });
      const out: PendingFinalizeRecord[] = [];
      const bad: string[] = [];
      for (const r of rows) {
        let value: unknown;
        try {
          value = JSON.parse(r.record);
        } catch {
          value = undefined;
        }
        const ok = PendingRecordSchema.safeParse(value);
        if (!ok.success) {
          bad.push(r.turn_id);
          continue;
        }
        const rec = value as PendingFinalizeRecord;
        const ingested = r.ingested.length > 0 ? [...new Set([...(rec.ingestedKeys ?? []), ...r.ingested])] : rec.ingestedKeys;
        out.push({ ...rec, ...(ingested !== undefined ? { ingestedKeys: ingested } : {}) });
      }
      if (bad.length > 0) {
        if (o?.readOnly) {
          throw new SessionFileError("SESSION_PENDING_INVALID", address, `the pending-finalize records of session ${address} for turns ${bad.join(", ")} are not valid`);
        }
        const aside = await store.setAsidePending();
        logger.warn({ event: "pending record corrupt", sessionId, records: bad.length }, "unreadable pending-finalize records moved aside; their turns are not finalized again");
        d.sopts.onWarning?.(
          `the pending-finalize records of session ${address} could not be read; they were moved aside${aside ? ` to ${aside}` : ""} and the turns they held are not finalized again`,
        );
        return [];
      }
      return out;
    },
    acquireLock: async (o: AcquireLockOptions = {}) => {
      await d.migrate();
      // The snapshot is read in the lease attempt's round trip (a statement of its own after the upsert: it sees every
      // write committed before the lease became ours); literals inline, as that is one simple-protocol query.
      const cur = snap;
      let readRows: Record<string, unknown>[] | undefined;
      const literals = refreshParams(cur).map((v) => (typeof v === "string" ? escapeLiteral(v) : String(Math.trunc(Number(v)))));
      const handle = await acquireLease(
        { pool, schema: s, sessionId: key, address, owner: d.owner, timing: d.timing, notifier: d.notifier, logger },
        {
          signal: o.signal,
          timeoutMs: o.timeoutMs,
          logger: o.logger,
          read: {
            sql: (ours) => refreshSql(` and ${ours}`).replace(/\$([1-5])\b/g, (_, n: string) => literals[Number(n) - 1]!),
            take: (rows) => (readRows = rows),
          },
        },
      );
      lock = handle;
      snapUnder = undefined;
      try {
        if (snap !== cur || readRows === undefined || applyRefresh(cur, readRows[0] as RefreshRow | undefined) === "again") {
          snap = emptySnapshot();
          await refresh();
        }
      } catch (err) {
        await handle.release();
        throw err;
      }
      snapUnder = handle;
      bindingJustRead = true;
      return handle;
    },
    exportJsonl: async () => {
      const sn = await refresh();
      if (!sn.header) return "";
      return [sn.header, ...sn.entries].map((e) => `${JSON.stringify(e)}\n`).join("");
    },
    generation: async () => (await refresh()).generation,
    headerId: async () => (await refresh()).header?.id,
    setAsideBinding: async () => {
      const sql = `with ${FENCE},
        old as (select binding from ${s}.sessions where session_id = $1 and binding is not null and exists (select 1 from fence)),
        moved as (insert into ${s}.binding_aside (session_id, binding) select $1, binding from old returning id),
        cleared as (update ${s}.sessions set binding = null, binding_version = binding_version + 1, updated_at = now()
          where session_id = $1 and binding is not null and exists (select 1 from fence) returning binding_version)
        select (select count(*) from fence)::int as fenced, (select id::text from moved) as id, (select binding_version::text from cleared) as binding_version`;
      const row = await fencedQuery<{ id: string | null; binding_version: string | null }>("binding set-aside", sql, []);
      if (held() && row.binding_version !== null) snap = { ...snap, binding: null, bindingVersion: Number(row.binding_version) };
      if (row.id === null) return undefined;
      logger.warn({ event: "thread binding set aside", sessionId, asideId: row.id }, "thread binding moved aside");
      return `${address}#binding_aside/${row.id}`;
    },
    setAsidePending: async () => {
      const sql = `with ${FENCE},
        moved as (delete from ${s}.pending where session_id = $1 and exists (select 1 from fence) returning turn_id, record, ingested),
        ins as (insert into ${s}.pending_aside (session_id, turn_id, record)
          select $1, turn_id, json_build_object('record', record, 'ingested', ingested)::text from moved returning id)
        select (select count(*) from fence)::int as fenced, (select min(id)::text from ins) as first_id, (select count(*) from ins)::int as moved`;
      const row = await fencedQuery<{ first_id: string | null; moved: number }>("pending set-aside", sql, []);
      if (held()) snap = { ...snap, hasPending: false };
      return Number(row.moved) > 0 ? `${address}#pending_aside/${row.first_id}` : undefined;
    },
    reset: async (o: StoreResetOptions = {}) => {
      const parsed = ResetSchema.safeParse(o);
      if (!parsed.success) throw invalid(address, "reset options", parsed.error);
      const { archiveTranscript = false, nextSessionId, cwd } = parsed.data;
      const sn = await refresh();
      const archive = archiveTranscript && sn.header !== null;
      const header: SessionHeader | null =
        archive && nextSessionId !== undefined
          ? { type: "session", version: SESSION_FORMAT_VERSION, id: nextSessionId, timestamp: new Date().toISOString(), cwd: cwd ?? d.sopts.cwd ?? process.cwd() }
          : null;
      // One statement: the binding cleared and (when archiving) the generation bumped, both or neither.
      const sql = `with ${FENCE},
        old as (select generation, binding is not null as had_binding from ${s}.sessions where session_id = $1),
        up as (update ${s}.sessions t set
            binding = null, binding_version = t.binding_version + 1, updated_at = now(),
            generation = case when $3 then t.generation + 1 else t.generation end,
            header = case when $3 then $4::json else t.header end,
            entry_seq = case when $3 then 0 else t.entry_seq end,
            epoch = case when $3 then 0 else t.epoch end
          where t.session_id = $1 and exists (select 1 from fence) returning t.generation)
        select (select count(*) from fence)::int as fenced, (select had_binding from old) as had_binding, (select generation from old) as old_generation,
          (select count(*) from ${s}.pending where session_id = $1)::int as pending`;
      const row = await fencedQuery<{ had_binding: boolean | null; old_generation: number | null; pending: number }>("reset", sql, [
        archive,
        header === null ? null : JSON.stringify(header),
      ]);
      snap = emptySnapshot();
      await refresh();
      if (lock) snapUnder = lock;
      const out: StoreResetResult = { bindingCleared: row.had_binding === true, pendingFinalize: Number(row.pending) };
      if (archive) {
        out.archivedTo = `${address}@generation/${row.old_generation}`;
        if (header) out.sessionId = header.id;
      }
      logger.info({ event: "postgres.session_reset", sessionId, archived: archive, generation: snap.generation, bindingCleared: out.bindingCleared }, "session reset");
      return out;
    },
    deleteSession: async () => {
      // The row stays (its generation counter keeps archives apart); the current generation's entries go.
      const sql = `with ${FENCE},
        cur as (select generation from ${s}.sessions where session_id = $1),
        del as (delete from ${s}.entries e using cur where e.session_id = $1 and e.generation = cur.generation and exists (select 1 from fence) returning 1),
        pend as (delete from ${s}.pending where session_id = $1 and exists (select 1 from fence) returning 1),
        up as (update ${s}.sessions t set header = null, entry_seq = 0, epoch = t.epoch + 1, binding = null, binding_version = t.binding_version + 1, updated_at = now()
          where t.session_id = $1 and exists (select 1 from fence) returning 1)
        select (select count(*) from fence)::int as fenced, (select count(*) from del)::int as entries`;
      const row = await fencedQuery<{ entries: number }>("session delete", sql, []);
      snap = emptySnapshot();
      await refresh();
      if (lock) snapUnder = lock;
      logger.info({ event: "postgres.session_deleted", sessionId, entries: Number(row.entries) }, "session deleted");
    },
  };
  return store;
}

function addEntries(sn: Snapshot, entries: readonly SessionEntry[]): void {
  for (const e of entries) {
    deepFreeze(e);
    sn.entries.push(e);
    if (!sn.byId.has(e.id)) sn.byId.set(e.id, e);
    const key = entryIdempotencyKey(e);
    if (key !== undefined && !sn.keys.has(key)) sn.keys.set(key, e.id);
  }
}

function visibleEntries(sn: Snapshot): VisibleTranscriptEntry[] {
  const { messages, sources } = buildSessionContextFromEntries(sn.entries, undefined, sn.byId);
  return visibleEntriesOf(sn.entries, messages, sources, { copy: true });
}

/** Retry an idempotent statement on connection errors (a restarting server) for up to ~30 s, unless the lock is lost. */
async function withRetry<T>(fn: () => Promise<T>, logger: Logger, what: string, lock?: PostgresLockHandle): Promise<T> {
  const started = performance.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!isConnectionError(err) || performance.now() - started > 30_000 || lock?.signal.aborted) throw err;
      logger.warn({ event: "postgres.retry", what, attempt, err: (err as Error).message }, "PostgreSQL statement failed on the connection; retrying");
      await new Promise((r) => setTimeout(r, Math.min(1_000, 50 * 2 ** attempt)));
      lock?.assertHeld();
    }
  }
}

function wrapError(err: unknown, address: string, what: string, code: "SESSION_WRITE_FAILED" | "SESSION_UNREADABLE" = what === "read" ? "SESSION_UNREADABLE" : "SESSION_WRITE_FAILED"): SessionFileError {
  if (err instanceof SessionFileError) return err;
  return new SessionFileError(code, address, `PostgreSQL ${what} for session ${address} failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}
