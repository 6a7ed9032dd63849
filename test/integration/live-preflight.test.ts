/**
 * The live preflight against the real `codex app-server`: an empty CODEX_HOME and no API key fail at once with
 * AUTH_REQUIRED (library) and exit 3 naming `codex login` (CLI), before Codex could try any network; the offline path
 * never asks. Nothing can leave loopback: the CLI runs in a network namespace of its own when `unshare -rn` works,
 * and every process here gets proxy variables pointing at a closed loopback port (Codex's HTTP client and git honour
 * them), with Codex's plugin sync off in the library cases.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import path from "node:path";
import { pino } from "pino";
import { Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { CodexAppServer, codexHomeTempBase } from "../../src/codex/app-server.js";
import { CodexAppServerError } from "../../src/codex/errors.js";
import { runCodexTurn } from "../../src/turn.js";
import { startOfflineCodex } from "../../src/testing/index.js";
import { cliBin, repoRoot } from "../helpers/cli.js";
import { testTempDir } from "../helpers/temp-dir.js";

const DEAD_PROXY = "http://127.0.0.1:9";
const PROXY_ENV = { HTTPS_PROXY: DEAD_PROXY, https_proxy: DEAD_PROXY, HTTP_PROXY: DEAD_PROXY, http_proxy: DEAD_PROXY, ALL_PROXY: DEAD_PROXY, NO_PROXY: "", no_proxy: "" };
/** Live settings with nothing that phones home at startup. */
const QUIET = { features: { plugins: false }, analytics: { enabled: false }, check_for_update_on_startup: false };

const homes: string[] = [];
afterAll(async () => {
  for (const h of homes.splice(0)) await rm(h, { recursive: true, force: true });
});
async function emptyHome(): Promise<string> {
  const home = await mkdtemp(path.join(codexHomeTempBase(), "ctm-preflight-"));
  homes.push(home);
  return home;
}

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split("\n")) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { logger: pino({ level: "info" }, stream), events: () => lines.map((l) => l.event) };
}

const canUnshare = (() => {
  try {
    execFileSync("unshare", ["-rn", "true"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

describe("live preflight (account/read)", () => {
  it("an empty Codex home and no key: startThread and the turn fail at once with AUTH_REQUIRED", async () => {
    const home = await emptyHome();
    const server = await CodexAppServer.spawn({ codexHome: home, config: QUIET, env: PROXY_ENV });
    try {
      const t0 = performance.now();
      const err = await server.startThread().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CodexAppServerError);
      expect((err as CodexAppServerError).code).toBe("AUTH_REQUIRED");
      expect((err as Error).message).toContain("npx codex login");
      expect((err as Error).message).toContain("OPENAI_API_KEY");
      // The README's embedding on such a machine: a failed result naming the cause, not a 90 s wait.
      const dir = await testTempDir("ctm-preflight-");
      const result = await runCodexTurn({ appServer: server, sessionId: "s1", sessionFile: path.join(dir, "s1.jsonl"), prompt: "hi" });
      expect(result.status).toBe("failed");
      expect(result.error?.code).toBe("AUTH_REQUIRED");
      expect(performance.now() - t0).toBeLessThan(10_000);
      expect(await server.readAccount()).toEqual({ accountType: null, requiresOpenaiAuth: true, apiKeyInEnv: false });
    } finally {
      await server.close();
    }
  });

  it("an API key in the app-server's environment passes the preflight (the turn decides)", async () => {
    const server = await CodexAppServer.spawn({ codexHome: await emptyHome(), config: QUIET, env: { ...PROXY_ENV, OPENAI_API_KEY: "sk-not-real" } });
    try {
      await expect(server.requireAccount()).resolves.toBeUndefined();
    } finally {
      await server.close();
    }
  });

  it("is asked once per app-server when it passes, and never on the offline path", async () => {
    const asked = capture();
    // Offline settings with the preflight forced on: the fake provider needs no OpenAI auth, so it passes, once.
    const forced = await startOfflineCodex({ codex: { accountPreflight: true, logger: asked.logger } });
    try {
      await forced.codex.startThread();
      await forced.codex.startThread();
      expect(asked.events().filter((e) => e === "codex.accountPreflight")).toHaveLength(1);
    } finally {
      await forced.dispose();
    }
    const offline = capture();
    const env = await startOfflineCodex({ codex: { logger: offline.logger } });
    try {
      env.fake.enqueue({ text: "ok" });
      const { threadId } = await env.codex.startThread();
      await (await env.codex.startTurn({ threadId, text: "hi" })).completion;
      expect(offline.events()).toContain("codex.spawned");
      expect(offline.events()).not.toContain("codex.accountPreflight");
    } finally {
      await env.dispose();
    }
  });

  it("CLI: `codex-turn run hi --session s.jsonl` with an empty Codex home and no key exits 3 within 10 s naming codex login", async () => {
    const home = await emptyHome();
    const dir = await testTempDir("ctm-preflight-cli-");
    const env: NodeJS.ProcessEnv = { ...process.env, ...PROXY_ENV, CODEX_HOME: home, CODEX_TURN_FROM_SOURCE: "1" };
    delete env.OPENAI_API_KEY;
    delete env.CODEX_API_KEY;
    const node = [process.execPath, cliBin, "run", "hi", "--session", path.join(dir, "s.jsonl")];
    const [cmd, ...args] = canUnshare ? ["unshare", "-rn", ...node] : node;
    const t0 = performance.now();
    const run = await new Promise<{ code: number | null; stderr: string; stdout: string }>((resolve) => {
      const child = spawn(cmd!, args, { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += String(d)));
      child.stderr.on("data", (d) => (stderr += String(d)));
      child.on("close", (code) => resolve({ code, stdout, stderr }));
    });
    const seconds = (performance.now() - t0) / 1000;
    expect(run.stderr).toContain("codex login");
    expect(run.stderr).toContain("OPENAI_API_KEY");
    expect(run.code).toBe(3);
    expect(seconds).toBeLessThanOrEqual(10);
  });
});
