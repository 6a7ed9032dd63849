import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { resolveCodexCommand } from "../../src/codex/binary.js";
import { codexConfigArgs, offlineCodexConfig } from "../../src/codex/config.js";
import { codexHomeTempBase } from "../../src/codex/app-server.js";

const run = promisify(execFile);

/** `codex app-server --print-startup-config --strict-config` rejects unknown keys and bad values (notes §1.3). */
async function strictCheck(config: Record<string, unknown>, catalog?: unknown): Promise<{ ok: boolean; out: string }> {
  const home = mkdtempSync(path.join(codexHomeTempBase(), "codex-config-test-"));
  try {
    const extra: Record<string, unknown> = {};
    if (catalog) {
      const p = path.join(home, "model-catalog.json");
      writeFileSync(p, JSON.stringify(catalog));
      extra.model_catalog_json = p;
    }
    const { command, prefixArgs } = resolveCodexCommand();
    const args = [...prefixArgs, "app-server", "--print-startup-config", "--strict-config", ...codexConfigArgs({ ...config, ...extra })];
    try {
      const { stdout, stderr } = await run(command, args, { env: { PATH: process.env.PATH ?? "", CODEX_HOME: home }, timeout: 15_000 });
      return { ok: true, out: stdout + stderr };
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string };
      return { ok: false, out: `${e.stdout ?? ""}${e.stderr ?? ""}` };
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

describe("offline config against the real binary's strict config check", () => {
  it("accepts the full offline settings (lean, auto-compaction, catalog)", async () => {
    const s = offlineCodexConfig({ baseUrl: "http://127.0.0.1:9/v1", autoCompactTokenLimit: 5000, lean: true, instantInterrupt: true });
    const r = await strictCheck(s.config, s.modelCatalog);
    expect(r.out).toContain("appServerVersion");
    expect(r.ok).toBe(true);
  });

  it("rejects an unknown key (so the check can fail)", async () => {
    const r = await strictCheck({ bogus_key_for_test: true });
    expect(r.ok).toBe(false);
    expect(r.out).toContain("bogus_key_for_test");
  });

  it("is the pinned version", async () => {
    const { command, prefixArgs } = resolveCodexCommand();
    const { stdout } = await run(command, [...prefixArgs, "--version"], { timeout: 15_000 });
    expect(stdout.trim()).toBe("codex-cli 0.171.0");
  });
});
