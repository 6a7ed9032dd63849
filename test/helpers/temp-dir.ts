import { promises as fsp } from "node:fs";
import os from "node:os";
import path from "node:path";
import { onTestFinished } from "vitest";

/**
 * A fresh temp directory (realpath'd, so comparisons with canonical paths hold where /tmp is a link) that is removed
 * when the current test finishes, pass or fail. Call it inside a test (or a `beforeEach`); code in `beforeAll` removes
 * its own directories in `afterAll`. The run's global setup fails the run on any `ctm-` leftover.
 */
export async function testTempDir(prefix: string): Promise<string> {
  const dir = await fsp.realpath(await fsp.mkdtemp(path.join(os.tmpdir(), prefix)));
  onTestFinished(() => fsp.rm(dir, { recursive: true, force: true }));
  return dir;
}
