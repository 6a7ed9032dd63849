/**
 * Codex's warnings about its own setup reach the host, against the real app-server. The case that matters: a rules
 * file Codex cannot parse. Codex 0.169 then runs without the user's exec-policy rules (a `forbidden` `git push` among
 * them) and says so only in a `configWarning` notification ("Error parsing rules; custom rules not applied."), which
 * this client used to drop. Now it is kept on `configWarnings` once, logged without its details (they quote the file)
 * and handed to `onConfigWarning`; the CLI, run against a user's own CODEX_HOME, prints it on stderr.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { buildModelCatalog, flattenCodexConfig, offlineCodexConfig, OFFLINE_MODEL } from "../../src/codex/config.js";
import type { CodexConfigWarning } from "../../src/codex/config-warnings.js";
import { startFakeResponsesServer, startOfflineCodex } from "../../src/testing/index.js";
import { runCli } from "../helpers/cli.js";
import { captureLogger } from "../helpers/turn-env.js";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const tempDir = (prefix: string) => {
  const d = mkdtempSync(path.join(os.tmpdir(), prefix));
  dirs.push(d);
  return d;
};

// A rule file whose second line is not Starlark: Codex drops every rule in it.
const BROKEN_RULES = 'prefix_rule(pattern = ["git", "push"], decision = "forbidden")\nthis is not starlark (\n';
const RULES_SUMMARY = "Error parsing rules; custom rules not applied.";

/** A CODEX_HOME holding the broken rules file; returns the home and the file. */
function homeWithBrokenRules(): { home: string; rulesFile: string } {
  const home = tempDir("ctm-cfgwarn-home-");
  mkdirSync(path.join(home, "rules"));
  const rulesFile = path.join(home, "rules", "default.rules");
  writeFileSync(rulesFile, BROKEN_RULES);
  return { home, rulesFile };
}

describe("Codex's setup warnings", () => {
  it("a rules file Codex cannot parse: kept once with its file and line, logged without details, told to the host", async () => {
    const { home, rulesFile } = homeWithBrokenRules();
    const log = captureLogger();
    const heard: CodexConfigWarning[] = [];
    const env = await startOfflineCodex({ codex: { codexHome: home, logger: log.logger, onConfigWarning: (w) => heard.push(w) } });
    try {
      const cwd = tempDir("ctm-cfgwarn-cwd-");
      for (let i = 0; i < 2; i++) await env.codex.startThread({ cwd });
      const rules = () => env.codex.configWarnings.filter((w) => w.summary === RULES_SUMMARY);
      for (let i = 0; i < 100 && rules().length === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(rules()).toHaveLength(1);
      const [w] = rules();
      expect(w).toMatchObject({ kind: "config", path: rulesFile, range: { start: { line: 2 } } });
      expect(w!.details).toContain("this is not starlark");
      expect(heard.filter((h) => h.summary === RULES_SUMMARY)).toEqual([w]);
      const logged = log.events.filter((e) => e.event === "codex.configWarning" && e.summary === RULES_SUMMARY);
      expect(logged).toHaveLength(1);
      expect(logged[0]).toMatchObject({ kind: "config", path: rulesFile, line: 2 });
      expect(JSON.stringify(log.events)).not.toContain("not starlark");
    } finally {
      await env.dispose();
    }
  }, 60_000);

  it("the CLI against the user's own CODEX_HOME prints it on stderr, and the turn still runs", async () => {
    const fake = await startFakeResponsesServer();
    try {
      fake.enqueue({ text: "live reply" });
      const { home, rulesFile } = homeWithBrokenRules();
      // The user's config.toml: a provider on loopback whose key comes from OPENAI_API_KEY (the one variable a live
      // run passes), and a catalog that names its model.
      const catalogFile = path.join(home, "catalog.json");
      const offline = offlineCodexConfig({ baseUrl: fake.baseUrl, modelCatalogPath: catalogFile });
      const config = structuredClone(offline.config) as { model_providers: Record<string, { env_key: string }> };
      for (const provider of Object.values(config.model_providers)) provider.env_key = "OPENAI_API_KEY";
      writeFileSync(catalogFile, JSON.stringify(buildModelCatalog({ slug: OFFLINE_MODEL, baseInstructions: "You are a test model.", contextWindow: 128_000 })));
      writeFileSync(path.join(home, "config.toml"), flattenCodexConfig(config).map(([k, v]) => `${k} = ${v}\n`).join(""));
      const session = path.join(tempDir("ctm-cfgwarn-session-"), "live.jsonl");
      const run = await runCli(["run", "hello", "--session", session], { env: { CODEX_HOME: home, OPENAI_API_KEY: "sk-test-not-a-key" } });
      expect(run.stdout).toContain("live reply");
      expect(run.code).toBe(0);
      expect(run.stderr).toContain(`codex warning: ${RULES_SUMMARY} (${rulesFile}:2)\n`);
      expect(run.stderr).toMatch(/^ {2}.*not starlark/m);
      expect(run.stderr.split(RULES_SUMMARY)).toHaveLength(2);
      expect(fake.requests.length).toBeGreaterThan(0);
    } finally {
      await fake.close();
    }
  }, 120_000);
});
