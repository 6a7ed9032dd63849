/**
 * The PostgreSQL store's schema: versioned migrations applied under a transaction-scoped advisory lock, so several
 * processes may start at once (one migrates, the others wait and then find nothing to do). Every table lives in one
 * schema (default `codex_turn`), named by the store's options.
 */
import type { Pool } from "pg";
import { SessionFileError } from "../transcript/errors.js";

/** The newest schema version this library writes; a database at a newer version is refused (rollback safety). */
export const POSTGRES_SCHEMA_VERSION = 1;

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/** Validate a schema name (it is put into SQL text, so only plain lowercase identifiers are accepted). */
export function checkSchemaName(schema: string): string {
  if (!IDENTIFIER.test(schema)) {
    throw new SessionFileError(
      "SESSION_INVALID_ARGUMENT",
      `postgres:${schema}`,
      `invalid PostgreSQL schema name ${JSON.stringify(schema)}: use lowercase letters, digits and _ (at most 63, not starting with a digit)`,
    );
  }
  return schema;
}

/**
 * Migration n brings the schema from version n-1 to n; never edit one that shipped, add the next.
 * Entries, headers and pending records are `json` (the text as written: key order kept, so what is read back and
 * exported is byte-identical to what the file store writes); the binding is `jsonb` (never sent to the model).
 */
function migrations(s: string): string[] {
  return [
    `
    create sequence ${s}.fence_seq;
    create table ${s}.sessions (
      session_id text primary key,
      generation integer not null default 0,
      header json,
      entry_seq integer not null default 0,
      epoch integer not null default 0,
      binding jsonb,
      binding_version bigint not null default 0,
      updated_at timestamptz not null default now()
    );
    create table ${s}.entries (
      session_id text not null,
      generation integer not null,
      seq integer not null,
      entry_id text not null,
      idem_key text,
      entry json not null,
      primary key (session_id, generation, seq),
      unique (session_id, generation, entry_id),
      unique (session_id, generation, idem_key)
    );
    create table ${s}.pending (
      session_id text not null,
      turn_id text not null,
      ord bigserial,
      record json not null,
      ingested jsonb not null default '[]'::jsonb,
      primary key (session_id, turn_id)
    );
    create table ${s}.pending_aside (
      id bigserial primary key,
      session_id text not null,
      turn_id text not null,
      record text not null,
      moved_at timestamptz not null default now()
    );
    create table ${s}.binding_aside (
      id bigserial primary key,
      session_id text not null,
      binding jsonb,
      moved_at timestamptz not null default now()
    );
    create table ${s}.leases (
      session_id text primary key,
      token bigint not null,
      owner text not null,
      acquired_at timestamptz not null,
      expires_at timestamptz not null
    );
    `,
  ];
}

/**
 * Bring the schema to {@link POSTGRES_SCHEMA_VERSION}. Idempotent; safe to call from many processes at once (a
 * transaction-scoped advisory lock serializes them). Returns the version found before.
 */
export async function migratePostgresSchema(pool: Pool, schema: string): Promise<{ from: number; to: number }> {
  const s = checkSchemaName(schema);
  const client = await pool.connect();
  try {
    await client.query("begin");
    // One key per schema name: hashtext is stable across servers of the same major version.
    await client.query("select pg_advisory_xact_lock(hashtext($1))", [`codex-turn-machine:migrate:${s}`]);
    await client.query(`create schema if not exists ${s}`);
    await client.query(`create table if not exists ${s}.schema_version (version integer not null)`);
    const { rows } = await client.query<{ version: number }>(`select version from ${s}.schema_version`);
    const from = rows[0]?.version ?? 0;
    if (from > POSTGRES_SCHEMA_VERSION) {
      throw new SessionFileError(
        "SESSION_SIDECAR_VERSION_UNSUPPORTED",
        `postgres:${s}`,
        `PostgreSQL schema ${s} is at version ${from}, newer than this library's ${POSTGRES_SCHEMA_VERSION}: upgrade codex-turn-machine`,
      );
    }
    const steps = migrations(s);
    for (let v = from + 1; v <= POSTGRES_SCHEMA_VERSION; v++) await client.query(steps[v - 1]!);
    if (from === 0) await client.query(`insert into ${s}.schema_version (version) values ($1)`, [POSTGRES_SCHEMA_VERSION]);
    else if (from < POSTGRES_SCHEMA_VERSION) await client.query(`update ${s}.schema_version set version = $1`, [POSTGRES_SCHEMA_VERSION]);
    await client.query("commit");
    return { from, to: POSTGRES_SCHEMA_VERSION };
  } catch (err) {
    await client.query("rollback").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
