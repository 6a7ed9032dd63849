/**
 * Local check, not part of CI (lossless-claw is not on npm and needs Node >= 22.5 for node:sqlite): one host serving
 * many sessions through the real lossless-claw (its engine, tools and hooks, loaded once) keeps a flat heap.
 *
 *   LCM_DIR=/path/to/built/lossless-claw /path/to/node24 --expose-gc --import tsx scripts/lossless-claw-memory-check.ts [sessions]
 *
 * Runs `sessions` (default 200) sessions of two turns each on one app-server that releases threads idle for 2 s, and
 * measures the heap after a full GC at session 20 and at the end. Exits 1 when it grew by more than 2 MiB. The offline
 * fake model keeps every request body it received; the check clears that log after each session, since it is the test
 * server's memory, not the host's.
 */
import path from "node:path";
import { pino } from "pino";
import { loadContextEngine } from "../src/openclaw/index.js";
import { runCodexTurn } from "../src/turn.js";
import { runLosslessClawCheck } from "./lossless-claw-check.js";

const sessions = Number(process.argv[2] ?? 200);
const MAX_GROWTH_MIB = 2;
const BASELINE_SESSION = 20;

process.exitCode = await runLosslessClawCheck("memory", () => ({ codex: { releaseIdleThreadsAfterMs: 2_000 } }), async ({ lcmDir, dir, offline }) => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc || !(sessions > BASELINE_SESSION)) {
    console.error(`run with --expose-gc and more than ${BASELINE_SESSION} sessions`);
    return false;
  }
  const heapMiB = () => {
    gc();
    gc();
    return process.memoryUsage().heapUsed / 2 ** 20;
  };
  const logger = pino({ level: "warn" }, { write: () => undefined });
  const loaded = await loadContextEngine(lcmDir, { cwd: dir, appServer: offline.codex, tokenBudget: 8_000, logger, pluginConfig: { databasePath: path.join(dir, "lcm.db") } });
  try {
    let baseline = 0;
    for (let i = 1; i <= sessions; i++) {
      const sessionId = `lcm-memory-${i}`;
      for (let t = 1; t <= 2; t++) {
        const result = await runCodexTurn({
          appServer: offline.codex,
          sessionId,
          sessionKey: sessionId,
          sessionFile: path.join(dir, `${sessionId}.jsonl`),
          cwd: dir,
          contextEngine: loaded.engine,
          contextTokenBudget: 8_000,
          runtimeContext: loaded.runtimeContext,
          hooks: loaded.hooks,
          dynamicTools: loaded.dynamicTools,
          logger,
          prompt: `session ${i} turn ${t}: ${"please keep these notes. ".repeat(200)}`,
        });
        if (result.status !== "completed") throw new Error(`session ${i} turn ${t} ended ${result.status}`);
      }
      offline.fake.requests.length = 0;
      if (i === BASELINE_SESSION) baseline = heapMiB();
      if (i % 50 === 0) console.log(`${i} sessions: heap ${heapMiB().toFixed(1)} MiB`);
    }
    const growth = heapMiB() - baseline;
    console.log(`heap growth from session ${BASELINE_SESSION} to ${sessions}: ${growth.toFixed(2)} MiB (limit ${MAX_GROWTH_MIB})`);
    return growth <= MAX_GROWTH_MIB;
  } finally {
    await loaded.close();
  }
});
