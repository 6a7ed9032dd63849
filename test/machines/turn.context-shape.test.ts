/**
 * The turn machine's context stays a fast V8 object on every step. XState v5's `assign` copies the context with
 * `Object.assign({}, context, update)`, and V8 makes an object built that way a dictionary (a hash table, slow to copy
 * and to read) from 20 properties on; the context is grouped to stay under that (`MAX_CONTEXT_KEYS`). Checked in a
 * child Node with `--allow-natives-syntax` (V8's own `%HasFastProperties`), since the threshold is V8's, not ours.
 */
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../helpers/cli.js";

const run = promisify(execFile);

describe("turn machine context shape", () => {
  it("is a fast-properties object in every snapshot of a no-engine and a full-engine turn", async () => {
    const script = path.join(repoRoot, "test", "fixtures", "v8", "turn-context-shape.ts");
    const { stdout } = await run(process.execPath, ["--allow-natives-syntax", "--import", "tsx", script], { cwd: repoRoot, timeout: 60_000 });
    const turns = stdout.trim().split("\n").map((l) => JSON.parse(l) as { kind: string; status: string; shapes: string[] });
    expect(turns.map((t) => [t.kind, t.status])).toEqual([["noEngine", "completed"], ["fullEngine", "completed"]]);
    for (const t of turns) {
      expect(t.shapes.length, t.kind).toBeGreaterThan(5);
      // "D<n>" would be a dictionary-mode context with n keys.
      expect(t.shapes.filter((s) => !s.startsWith("F")), t.kind).toEqual([]);
    }
  }, 60_000);
});
