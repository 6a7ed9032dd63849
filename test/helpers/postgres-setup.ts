/**
 * Vitest global setup for the PostgreSQL suites: CODEX_TURN_TEST_PG_URL when set (CI starts one cluster in .ci/run),
 * else a temporary cluster started here and removed at teardown. vitest.config.ts leaves the PostgreSQL suites out of
 * the run (one printed line) when neither is available, and this setup is then not installed.
 */
import { startTempCluster } from "./postgres-cluster.js";

export default async function setup(): Promise<() => void> {
  if (process.env.CODEX_TURN_TEST_PG_URL) return () => undefined;
  const cluster = await startTempCluster();
  process.env.CODEX_TURN_TEST_PG_URL = cluster.url;
  return () => {
    delete process.env.CODEX_TURN_TEST_PG_URL;
    cluster.stop();
  };
}
