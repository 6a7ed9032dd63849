/**
 * Vitest global setup: the whole run gets its own temp directory (TMPDIR, inherited by the test workers and by every
 * process they spawn, Codex included), removed when the run ends. Before removing it, the teardown lists what tests
 * left behind under this project's `ctm-` prefix: a test that creates a temp directory must remove it, and the run fails
 * naming the leftovers when one does not (Codex's own scratch files are not ours to police and go with the directory).
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/** Entries a test run left in its temp directory under the project's prefix. */
export function leakedTestEntries(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => name.startsWith("ctm-"))
    .sort();
}

export default function setup(): () => void {
  const previous = process.env.TMPDIR;
  const dir = mkdtempSync(path.join(os.tmpdir(), "codex-turn-machine-test-"));
  process.env.TMPDIR = dir;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    const leaked = leakedTestEntries(dir);
    rmSync(dir, { recursive: true, force: true });
    if (leaked.length > 0) {
      // A throw here is only printed by vitest ("error during close") and the run still exits 0; the exit code is what CI reads.
      process.exitCode = 1;
      console.error(`FAIL: tests left ${leaked.length} temp entries behind (each test must remove what it creates): ${leaked.join(", ")}`);
    }
  };
}
