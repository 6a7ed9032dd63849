/**
 * The vendored lossless-claw builds (test/fixtures/lossless-claw/<line>/) are what their PROVENANCE.md says: every file
 * there, with the recorded sha256, from the recorded commit. Runs on every Node line (no `node:sqlite` needed).
 */
import { mkdtemp, cp, writeFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { LOSSLESS_CLAW_LINES, parseProvenance, verifyVendored } from "../../scripts/vendor-lossless-claw.js";

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/lossless-claw");

describe("vendored lossless-claw", () => {
  it.each(Object.keys(LOSSLESS_CLAW_LINES))("%s: every file matches its PROVENANCE.md, which names a commit", async (line) => {
    const dir = path.join(FIXTURES, line);
    expect(verifyVendored(dir)).toEqual([]);
    const { readFile } = await import("node:fs/promises");
    const provenance = parseProvenance(await readFile(path.join(dir, "PROVENANCE.md"), "utf8"));
    expect(provenance.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(Object.keys(provenance.sha256).sort()).toEqual(["LICENSE", "dist/index.js", "openclaw.plugin.json", "package.json"]);
  });

  it("a changed file is named as a mismatch", async () => {
    const copy = await mkdtemp(path.join(os.tmpdir(), "ctm-lcm-vendored-"));
    try {
      await cp(path.join(FIXTURES, "main"), copy, { recursive: true });
      await writeFile(path.join(copy, "LICENSE"), "changed\n");
      const bad = verifyVendored(copy);
      expect(bad).toHaveLength(1);
      expect(bad[0]).toMatch(/^LICENSE \(sha256 [0-9a-f]{64}, recorded [0-9a-f]{64}\)$/);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });
});
