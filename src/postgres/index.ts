/**
 * `codex-turn-machine/postgres`: sessions in PostgreSQL (needs the optional peer dependency `pg`). See
 * docs/storage.md ("PostgreSQL").
 *
 * @example
 * ```ts
 * import { createPostgresSessionStores } from "codex-turn-machine/postgres";
 * const stores = createPostgresSessionStores({ connectionString: "postgres://127.0.0.1:5432/app" });
 * const store = stores.session("chat-42");
 * ```
 */
export {
  createPostgresSessionStore,
  createPostgresSessionStores,
  type PostgresSessionOptions,
  type PostgresSessionStore,
  type PostgresSessionStores,
  type PostgresSessionStoresOptions,
  type PostgresStoreConnection,
} from "./store.js";
export { migratePostgresSchema, POSTGRES_SCHEMA_VERSION } from "./schema.js";
export type { PostgresLockHandle } from "./lease.js";
