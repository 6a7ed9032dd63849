/**
 * removeOnExit: a tracked directory goes when the process exits without its owner's close(); an untracked one stays
 * (its owner removes it). Run in a child process, which then exits.
 */
import { execFile } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const SRC = path.join(import.meta.dirname, "../src/temp-dirs.ts");

/** Make two directories in a child, track both, untrack the second, then end the child as `end` says. */
function runChild(end: "exit" | "throw"): Promise<{ tracked: string; untracked: string }> {
  const script = `import { mkdtempSync } from "node:fs";
    import os from "node:os";
    import path from "node:path";
    const { removeOnExit } = await import(${JSON.stringify(SRC)});
    const tracked = mkdtempSync(path.join(os.tmpdir(), "ctm-exit-tracked-"));
    const untracked = mkdtempSync(path.join(os.tmpdir(), "ctm-exit-untracked-"));
    removeOnExit(tracked);
    removeOnExit(untracked)();
    console.log(JSON.stringify({ tracked, untracked }));
    ${end === "exit" ? "process.exit(0);" : 'setTimeout(() => { throw new Error("host failed"); }, 0);'}`;
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { timeout: 20_000 }, (_err, stdout) => {
      try {
        resolve(JSON.parse(stdout.trim()) as { tracked: string; untracked: string });
      } catch (e) {
        reject(e as Error);
      }
    }),
  );
}

describe("removeOnExit", () => {
  it.each([["exit"], ["throw"]] as const)("removes a tracked directory when the process ends by %s, and leaves an untracked one", async (end) => {
    const { tracked, untracked } = await runChild(end);
    try {
      expect(existsSync(tracked)).toBe(false);
      expect(existsSync(untracked)).toBe(true);
    } finally {
      rmSync(untracked, { recursive: true, force: true });
    }
  });
});
