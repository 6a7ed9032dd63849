/**
 * The SessionStore contract suite (test/store/contract.ts) against the PostgreSQL store, on a database of its own
 * (test/helpers/postgres.ts), damaged from outside with SQL the way a foreign writer or another host would.
 */
import pg from "pg";
import { createPostgresSessionStores, type PostgresSessionStore } from "../../src/postgres/index.js";
import { createTestDatabase } from "../helpers/postgres.js";
import { describeSessionStoreContract } from "../store/contract.js";

describeSessionStoreContract("postgres", async () => {
  const db = await createTestDatabase();
  const pool = new pg.Pool({ connectionString: db.url, max: 6 });
  // Short lease so a lost lock is noticed quickly: renewed every 250 ms.
  const stores = createPostgresSessionStores({ pool, leaseMs: 2_000, heartbeatMs: 250, pollMs: 200 });
  await stores.migrate();
  const key = (store: unknown): string => (store as PostgresSessionStore).sessionKey;
  return {
    open: (sessionId) => stores.session(sessionId, { cwd: "/contract" }),
    reopen: (store, sessionId) => stores.session(key(store), { sessionId: sessionId ?? store.sessionId, cwd: "/contract" }),
    corruptBinding: async (store) => {
      await pool.query(`update codex_turn.sessions set binding = '{"version":"torn"}'::jsonb, binding_version = binding_version + 1 where session_id = $1`, [key(store)]);
    },
    corruptPending: async (store) => {
      await pool.query(`update codex_turn.pending set record = '{"torn":true}'::json where session_id = $1`, [key(store)]);
    },
    // Another host took the session over: the lease row carries another (newer) fencing token, still live.
    loseLock: async (store) => {
      await pool.query(`update codex_turn.leases set token = nextval('codex_turn.fence_seq'), owner = 'someone-else' where session_id = $1`, [key(store)]);
    },
    lossNoticedWithinMs: 3_000,
    close: async () => {
      await stores.close();
      await pool.end();
      await db.drop();
    },
  };
});
