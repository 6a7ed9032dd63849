/**
 * The frame the local checks against the real lossless-claw share (scripts/lossless-claw-*-check.ts), run by hand on a
 * Node with node:sqlite (>= 22.13). `LCM_DIR` names a built lossless-claw; without it the vendored 1.x build
 * (test/fixtures/lossless-claw/next-1.0/) is used. CI runs the real plugin through test/openclaw/lossless-claw-real/
 * instead. The frame makes a temporary directory and an offline Codex, prints OK or FAILED and cleans up.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startOfflineCodex, type OfflineCodex, type StartOfflineCodexOptions } from "../src/testing/index.js";

/** What a check is given: the built plugin, a directory of its own, and an offline Codex. */
export interface LosslessClawCheckContext {
  lcmDir: string;
  dir: string;
  offline: OfflineCodex;
}

/**
 * Run one check; the exit code: 0 when it returned true, 1 when false.
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
  const lcmDir = process.env.LCM_DIR || fileURLToPath(new URL("../test/fixtures/lossless-claw/next-1.0/", import.meta.url));
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
