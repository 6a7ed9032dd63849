/**
 * The frame the local checks against the real lossless-claw share (scripts/lossless-claw-*-check.ts): lossless-claw is
 * not on npm and needs Node >= 22.5 for node:sqlite, so they run by hand with `LCM_DIR` naming a built checkout, never
 * in CI. The frame checks `LCM_DIR`, makes a temporary directory and an offline Codex, prints OK or FAILED and cleans up.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startOfflineCodex, type OfflineCodex, type StartOfflineCodexOptions } from "../src/testing/index.js";

/** What a check is given: the built plugin, a directory of its own, and an offline Codex. */
export interface LosslessClawCheckContext {
  lcmDir: string;
  dir: string;
  offline: OfflineCodex;
}

/**
 * Run one check; the exit code: 0 when it returned true, 1 when false, 2 without `LCM_DIR`.
 *
 * @example
 * ```ts
 * process.exitCode = await runLosslessClawCheck("overflow", () => ({}), async ({ lcmDir, dir, offline }) => true);
 * ```
 */
export async function runLosslessClawCheck(
  name: string,
  offlineOptions: (dir: string) => StartOfflineCodexOptions,
  check: (ctx: LosslessClawCheckContext) => Promise<boolean>,
): Promise<number> {
  const lcmDir = process.env.LCM_DIR;
  if (!lcmDir) {
    console.error("set LCM_DIR to a built lossless-claw checkout (npm ci --ignore-scripts && npm run build:plugin)");
    return 2;
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), `lcm-${name}-check-`));
  const offline = await startOfflineCodex(offlineOptions(dir));
  try {
    const ok = await check({ lcmDir, dir, offline });
    console.log(ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
  } finally {
    await offline.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}
