/**
 * A database of its own for one PostgreSQL test file, on the server named by CODEX_TURN_TEST_PG_URL (set by
 * `postgres-setup.ts` or CI): `createTestDatabase()` in beforeAll, `drop()` in afterAll.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

export function testServerUrl(): string {
  const url = process.env.CODEX_TURN_TEST_PG_URL;
  if (!url) throw new Error("CODEX_TURN_TEST_PG_URL is not set (vitest's postgres-setup.ts sets it)");
  return url;
}

/** A fresh database `ctm_test_<hex>` on the test server. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const server = testServerUrl();
  const name = `ctm_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: async () => {
      const c = new pg.Client({ connectionString: server });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}
