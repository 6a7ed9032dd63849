import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Each run has its own TMPDIR, removed at the end; leftovers under the ctm- prefix fail the run (see the file).
    globalSetup: ["test/helpers/global-tmpdir.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The integration suites spawn real `codex app-server` processes; keep parallelism modest on 2-core machines.
    maxWorkers: 2,
    reporters: ["default"],
  },
});
