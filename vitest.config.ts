import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The integration suites spawn real `codex app-server` processes; keep parallelism modest on 2-core machines.
    maxWorkers: 2,
    reporters: ["default"],
  },
});
