/**
 * The session lock of the PostgreSQL store: a lease row per session on the database clock (`clock_timestamp()`), taken
 * with an upsert that only replaces an expired row, and carrying a fencing token from a sequence. The holder renews it
 * (heartbeat); every write of the store carries the token in its own statement (see `store.ts`), so a holder that lost
 * its lease (paused past it, partitioned) writes 0 rows. Waiters are woken by LISTEN/NOTIFY on a dedicated connection,
 * with a poll as the fallback. The host's wall clock is never used: expiry is the database's, local bookkeeping is
 * monotonic (`performance.now()`).
 */
import { createHash } from "node:crypto";
import { performance } from "node:perf_hooks";
import { escapeLiteral, type Pool, type PoolClient, type QueryResult } from "pg";
import type { Logger } from "pino";
import { SessionFileError } from "../transcript/errors.js";
import type { SessionLockHandle } from "../transcript/lock.js";

/** Timing of the lease (ms). */
export interface LeaseTiming {
  leaseMs: number;
  heartbeatMs: number;
  pollMs: number;
}

/** Wakes waiters on a session when its lease row is released (one LISTEN connection per store factory). */
export class LeaseNotifier {
  private client: PoolClient | undefined;
  private connecting: Promise<void> | undefined;
  private readonly waiters = new Map<string, Set<() => void>>();
  private closed = false;

  constructor(
    private readonly pool: Pool,
    readonly channel: string,
    private readonly logger: Logger,
  ) {}

  /** A promise that resolves on the next release of `sessionId` (register before trying, so none is missed). */
  arm(sessionId: string): { woken: Promise<void>; cancel: () => void } {
    let wake!: () => void;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    let set = this.waiters.get(sessionId);
    if (!set) this.waiters.set(sessionId, (set = new Set()));
    set.add(wake);
    const cancel = (): void => {
      const s = this.waiters.get(sessionId);
      s?.delete(wake);
      if (s && s.size === 0) this.waiters.delete(sessionId);
    };
    return { woken, cancel };
  }

  /** Make sure the LISTEN connection is up (a failure is logged; waiters then rely on polling). */
  async listen(): Promise<void> {
    if (this.client || this.closed) return;
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    await this.connecting;
  }

  private async connect(): Promise<void> {
    let client: PoolClient | undefined;
    try {
      client = await this.pool.connect();
      client.on("notification", (n) => {
        if (n.channel !== this.channel || n.payload === undefined) return;
        const set = this.waiters.get(n.payload);
        if (!set) return;
        for (const wake of [...set]) wake();
      });
      client.on("error", (err) => this.drop(client!, err));
      client.on("end", () => this.drop(client!, new Error("LISTEN connection ended")));
      await client.query(`listen ${this.channel}`);
      if (this.closed) {
        client.release();
        return;
      }
      this.client = client;
      this.logger.debug({ event: "postgres.listen", channel: this.channel }, "listening for lease releases");
    } catch (err) {
      if (client) client.release(err instanceof Error ? err : true);
      this.logger.warn({ event: "postgres.listen_failed", err: errorText(err) }, "LISTEN failed; lock waiters poll");
    }
  }

  private drop(client: PoolClient, err: unknown): void {
    if (this.client !== client) return;
    this.client = undefined;
    try {
      client.release(err instanceof Error ? err : true);
    } catch {
      // already released
    }
    this.logger.warn({ event: "postgres.listen_lost", err: errorText(err) }, "LISTEN connection lost; reconnects on the next wait");
    // Waiters may have missed a release while the connection was down: wake them all to try again.
    for (const set of this.waiters.values()) for (const wake of [...set]) wake();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.connecting;
    const client = this.client;
    this.client = undefined;
    if (client) {
      await client.query(`unlisten ${this.channel}`).catch(() => undefined);
      client.release();
    }
  }
}

/** What the lease module needs from the store. */
export interface LeaseDeps {
  pool: Pool;
  schema: string;
  sessionId: string;
  address: string;
  owner: string;
  timing: LeaseTiming;
  notifier: LeaseNotifier;
  logger: Logger;
}

/**
 * A read made in the lease attempt's round trip: `sql(ours)` is a statement (literals inline, no parameters) that must
 * return no rows unless the SQL condition `ours` (the lease was just taken by this attempt) holds; it runs as its own
 * statement after the upsert, so in READ COMMITTED it sees every write committed before the lease became ours.
 * `take` gets its rows when the lease was taken.
 */
export interface LeaseRead {
  sql(ours: string): string;
  take(rows: Record<string, unknown>[]): void;
}

/** The handle of a held lease, with the token every write carries. */
export interface PostgresLockHandle extends SessionLockHandle {
  /** The fencing token (from a sequence: a later holder always has a larger one). */
  readonly token: string;
  /** Mark the lease lost (a fenced write found it gone): aborts `signal`. */
  lose(reason: string): void;
}

function compromised(address: string, reason: string): SessionFileError {
  return new SessionFileError("SESSION_LOCK_COMPROMISED", address, `the PostgreSQL lease of session ${address} is not held any more: ${reason}`);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Take the session's lease: try the upsert; when another holder's lease is live, wait for its release (NOTIFY), its
 * expiry or the poll interval, whichever comes first, and try again.
 */
export async function acquireLease(
  deps: LeaseDeps,
  opts: { signal?: AbortSignal | undefined; timeoutMs?: number | undefined; logger?: Logger | undefined; read?: LeaseRead | undefined },
): Promise<PostgresLockHandle> {
  const { pool, schema: s, sessionId, address, timing, notifier } = deps;
  const logger = opts.logger ?? deps.logger;
  const started = performance.now();
  const deadline = started + (opts.timeoutMs ?? 600_000);
  const trySql = `
    with ins as (
      insert into ${s}.leases as l (session_id, token, owner, acquired_at, expires_at)
      values ($1, nextval('${s}.fence_seq'), $2, clock_timestamp(), clock_timestamp() + $3 * interval '1 millisecond')
      on conflict (session_id) do update
        set token = excluded.token, owner = excluded.owner, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
        where l.expires_at <= clock_timestamp()
      returning token)
    select (select token from ins)::text as token,
      (select greatest(0, extract(epoch from (l.expires_at - clock_timestamp())) * 1000)::float8 from ${s}.leases l where l.session_id = $1) as wait_ms`;
  const literals = [escapeLiteral(sessionId), escapeLiteral(deps.owner), String(Math.trunc(timing.leaseMs))];
  await notifier.listen();
  let attempts = 0;
  for (;;) {
    if (opts.signal?.aborted) {
      throw new SessionFileError("SESSION_LOCK_ABORTED", address, `waiting for the lock of session ${address} was aborted`, { cause: opts.signal.reason });
    }
    const armed = notifier.arm(sessionId);
    let waitMs: number;
    try {
      attempts++;
      const sentAt = performance.now();
      let rows: { token: string | null; wait_ms: number | null }[];
      let readRows: Record<string, unknown>[] = [];
      if (opts.read) {
        // One round trip: the upsert, then (a statement of its own, so a snapshot taken after the lease is ours) the read.
        const text = `set transaction isolation level read committed;
          ${trySql.replace(/\$([123])\b/g, (_, n: string) => literals[Number(n) - 1]!)};
          ${opts.read.sql(`exists (select 1 from ${s}.leases where session_id = ${escapeLiteral(sessionId)} and token = currval('${s}.fence_seq'))`)}`;
        const results = (await pool.query(text)) as unknown as QueryResult[];
        rows = results[1]!.rows as typeof rows;
        readRows = results[2]!.rows as Record<string, unknown>[];
      } else {
        rows = (await pool.query<{ token: string | null; wait_ms: number | null }>(prepared(trySql, [sessionId, deps.owner, timing.leaseMs]))).rows;
      }
      const token = rows[0]?.token ?? null;
      if (token !== null) {
        opts.read?.take(readRows);
        armed.cancel();
        logger.info(
          { event: "postgres.lease_acquired", sessionId, token, attempts, waitedMs: Math.round(performance.now() - started) },
          "session lease acquired",
        );
        return startHeld(deps, token, sentAt, logger);
      }
      waitMs = Math.max(1, Math.ceil(rows[0]?.wait_ms ?? timing.pollMs));
    } catch (err) {
      armed.cancel();
      if (!isConnectionError(err)) throw err;
      logger.warn({ event: "postgres.lease_retry", sessionId, err: errorText(err) }, "lease attempt failed on the connection; retrying");
      waitMs = timing.pollMs;
    }
    const remaining = deadline - performance.now();
    if (remaining <= 0) {
      armed.cancel();
      throw new SessionFileError("SESSION_LOCK_TIMEOUT", address, `timed out after ${opts.timeoutMs ?? 600_000} ms waiting for the lock of session ${address}`);
    }
    await waitFor(armed.woken, Math.min(waitMs, timing.pollMs, remaining), opts.signal);
    armed.cancel();
  }
}

function waitFor(woken: Promise<void>, ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    void woken.then(done);
  });
}

/**
 * A named (server-side prepared) statement for `text`: parsed and planned once per connection instead of on every
 * call (the store's statements are CTEs, whose parse and plan cost as much as a round trip).
 */
export function prepared(text: string, values: unknown[]): { name: string; text: string; values: unknown[] } {
  return { name: `ctm_${createHash("sha256").update(text).digest("hex").slice(0, 24)}`, text, values };
}

/** Errors of the connection rather than of the statement: the operation may be retried. */
export function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string") {
    if (code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03" || code === "53300") return true;
    if (code === "ECONNREFUSED" || code === "ECONNRESET" || code === "EPIPE" || code === "ETIMEDOUT" || code === "ENOTFOUND") return true;
  }
  const msg = err instanceof Error ? err.message : "";
  return /Connection terminated|connection error|Client has encountered a connection error|timeout exceeded when trying to connect/i.test(msg);
}

function startHeld(deps: LeaseDeps, token: string, sentAt: number, logger: Logger): PostgresLockHandle {
  const { pool, schema: s, sessionId, address, timing, notifier } = deps;
  const controller = new AbortController();
  /** The lease is known to run at least until here (monotonic): it was renewed by a statement sent at `confirmedAt`. */
  let confirmedAt = sentAt;
  let released = false;
  let lostReason: string | undefined;
  const lose = (reason: string): void => {
    if (lostReason !== undefined || released) return;
    lostReason = reason;
    clearInterval(beat);
    logger.warn({ event: "postgres.lease_lost", sessionId, token, reason }, "session lease lost");
    controller.abort(compromised(address, reason));
  };
  const renewSql = `update ${s}.leases set expires_at = clock_timestamp() + $3 * interval '1 millisecond'
    where session_id = $1 and token = $2 and expires_at > clock_timestamp() returning 1`;
  let renewing = false;
  const renew = async (): Promise<void> => {
    if (renewing || released || lostReason !== undefined) return;
    renewing = true;
    const at = performance.now();
    try {
      // Past the lease by our own monotonic clock: the database may have given it away already.
      if (at - confirmedAt >= timing.leaseMs) return lose(`not renewed for ${Math.round(at - confirmedAt)} ms (lease ${timing.leaseMs} ms)`);
      const { rowCount } = await pool.query(prepared(renewSql, [sessionId, token, timing.leaseMs]));
      if (released) return;
      if (rowCount === 0) return lose("the lease expired or was taken by another holder");
      confirmedAt = at;
    } catch (err) {
      logger.warn({ event: "postgres.lease_renew_failed", sessionId, token, err: errorText(err) }, "lease renewal failed; retrying");
      if (performance.now() - confirmedAt >= timing.leaseMs) lose(`renewal failed past the lease (${errorText(err)})`);
    } finally {
      renewing = false;
    }
  };
  const beat = setInterval(() => void renew(), timing.heartbeatMs);
  beat.unref();

  return {
    lockPath: address,
    token,
    signal: controller.signal,
    lose,
    assertHeld(): void {
      if (released) throw compromised(address, "the lock was released");
      if (lostReason !== undefined) throw compromised(address, lostReason);
      const age = performance.now() - confirmedAt;
      if (age >= timing.leaseMs) {
        lose(`not renewed for ${Math.round(age)} ms (lease ${timing.leaseMs} ms)`);
        throw compromised(address, lostReason!);
      }
    },
    runHeld: (fn) => fn(),
    async release(): Promise<void> {
      if (released) return;
      released = true;
      clearInterval(beat);
      try {
        await pool.query(
          prepared(`with d as (delete from ${s}.leases where session_id = $1 and token = $2 returning session_id) select pg_notify($3, session_id) from d`, [
            sessionId,
            token,
            notifier.channel,
          ]),
        );
        logger.info({ event: "postgres.lease_released", sessionId, token }, "session lease released");
      } catch (err) {
        // Never rejects: the lease then expires on its own.
        logger.warn({ event: "postgres.lease_release_failed", sessionId, token, err: errorText(err) }, "lease release failed; it expires on its own");
      }
    },
  };
}
