import { existsSync, readdirSync } from "node:fs";
import { configDefaults, defineConfig } from "vitest/config";

// The real lossless-claw (test/openclaw/lossless-claw-real/) needs `node:sqlite`, unflagged from Node 22.13: on older
// Node (CI's Node 20 leg) the suite is left out of the run rather than shown as skipped; Node 22, 24 and 26 run it.
const [nodeMajor = 0, nodeMinor = 0] = process.versions.node.split(".").map(Number);
const hasNodeSqlite = nodeMajor > 22 || (nodeMajor === 22 && nodeMinor >= 13);

// The PostgreSQL suites need a server: CODEX_TURN_TEST_PG_URL (CI starts one), else test/helpers/postgres-setup.ts starts a
// temporary cluster when PostgreSQL is installed. With neither, they are left out of the run, saying so once.
const postgresSuites = ["test/postgres/**", "test/cli/postgres*.test.ts", "test/integration/postgres*.test.ts"];
const hasPostgres =
  Boolean(process.env.CODEX_TURN_TEST_PG_URL) ||
  (existsSync("/usr/lib/postgresql") && readdirSync("/usr/lib/postgresql").some((v) => existsSync(`/usr/lib/postgresql/${v}/bin/initdb`)));
if (!hasPostgres) console.log("PostgreSQL suites left out: CODEX_TURN_TEST_PG_URL is not set and no /usr/lib/postgresql/*/bin/initdb");

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: [...configDefaults.exclude, ...(hasNodeSqlite ? [] : ["test/openclaw/lossless-claw-real/**"]), ...(hasPostgres ? [] : postgresSuites)],
    // Each run has its own TMPDIR, removed at the end; leftovers under the ctm- prefix fail the run (see the file).
    globalSetup: ["test/helpers/global-tmpdir.ts", ...(hasPostgres ? ["test/helpers/postgres-setup.ts"] : [])],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The integration suites spawn real `codex app-server` processes; keep parallelism modest on 2-core machines.
    maxWorkers: 2,
    reporters: ["default"],
  },
});
