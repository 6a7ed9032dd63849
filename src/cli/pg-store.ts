/**
 * `--pg URL` (or CODEX_TURN_PG_URL): the CLI's sessions in PostgreSQL (`codex-turn-machine/postgres`, which needs the
 * optional package `pg`). With it, `--session` names the session id (its row key) instead of a file.
 */
import type { PostgresSessionStore, PostgresSessionStores } from "../postgres/index.js";
import { envError, usageError } from "./errors.js";
import { importOptional } from "./optional.js";

/** The PostgreSQL URL from `--pg`, else CODEX_TURN_PG_URL; undefined for the file store. */
export function pgUrlOf(opts: { pg?: string | undefined }): string | undefined {
  const url = opts.pg ?? process.env.CODEX_TURN_PG_URL;
  if (url === undefined || url === "") return undefined;
  if (!/^postgres(ql)?:\/\//.test(url)) throw usageError(`--pg must be a postgres:// or postgresql:// URL (got ${JSON.stringify(url.replace(/:[^:@/]*@/, ":***@"))})`);
  return url;
}

/**
 * Open the store of `sessionId` in the database at `url` (migrating its schema); `close()` ends the pool.
 *
 * @example
 * ```ts
 * const { store, close } = await openPgSession(url, "chat-42");
 * ```
 */
export async function openPgSession(url: string, sessionId: string): Promise<{ store: PostgresSessionStore; stores: PostgresSessionStores; close: () => Promise<void> }> {
  const mod = await importOptional("pg", "--pg", () => import("../postgres/index.js"));
  const stores = mod.createPostgresSessionStores({ connectionString: url, maxConnections: 4 });
  try {
    await stores.migrate();
  } catch (err) {
    await stores.close().catch(() => undefined);
    throw envError(`--pg: cannot use the database: ${(err as Error).message}`, "SESSION_UNREADABLE");
  }
  // The session goes on under the id its header names (a /new or /reset gives it a fresh one), as a file's does.
  let headerId: string | undefined;
  try {
    headerId = await stores.session(sessionId).headerId();
  } catch (err) {
    await stores.close().catch(() => undefined);
    throw envError(`--pg: cannot read session ${sessionId}: ${(err as Error).message}`, "SESSION_UNREADABLE");
  }
  return { store: stores.session(sessionId, { sessionId: headerId ?? sessionId }), stores, close: () => stores.close() };
}
