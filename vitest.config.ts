import { configDefaults, defineConfig } from "vitest/config";

// The real lossless-claw (test/openclaw/lossless-claw-real/) needs `node:sqlite`, unflagged from Node 22.13: on older
// Node (CI's Node 20 leg) the suite is left out of the run rather than shown as skipped; Node 22, 24 and 26 run it.
const [nodeMajor = 0, nodeMinor = 0] = process.versions.node.split(".").map(Number);
const hasNodeSqlite = nodeMajor > 22 || (nodeMajor === 22 && nodeMinor >= 13);

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: [...configDefaults.exclude, ...(hasNodeSqlite ? [] : ["test/openclaw/lossless-claw-real/**"])],
    // Each run has its own TMPDIR, removed at the end; leftovers under the ctm- prefix fail the run (see the file).
    globalSetup: ["test/helpers/global-tmpdir.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The integration suites spawn real `codex app-server` processes; keep parallelism modest on 2-core machines.
    maxWorkers: 2,
    reporters: ["default"],
  },
});
