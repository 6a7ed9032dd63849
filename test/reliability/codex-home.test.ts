/**
 * CODEX_HOME and environment of the app-server child: the user's home by default (like Codex and the CLI), temporary
 * homes removed on close, on process exit and on SIGTERM/SIGINT, proxy and certificate variables passed through, and
 * the binary's version checked at spawn.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { CodexAppServer } from "../../src/codex/app-server.js";
import { openTempCodexHomes } from "../../src/codex/codex-home.js";
import { CodexAppServerError } from "../../src/codex/errors.js";
import { startOfflineCodex } from "../../src/testing/index.js";
import { waitFor } from "../codex/helpers.js";

const FAKE = path.join(import.meta.dirname, "../codex/fixtures/fake-app-server.mjs");
const WORKER = path.join(import.meta.dirname, "fixtures", "codex-home-worker.ts");
const savedEnv = { ...process.env };
const cleanup: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
  for (const k of ["CODEX_HOME", "HTTPS_PROXY", "no_proxy", "SSL_CERT_DIR"]) {
    if (savedEnv[k] === undefined) delete process.env[k];
    else process.env[k] = savedEnv[k];
  }
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function introspect(server: CodexAppServer): Promise<{ envKeys: string[] }> {
  return (await server.request("test/introspect" as never, {} as never)) as { envKeys: string[] };
}

interface Worker {
  home: string;
  codexPid: number;
  lines: AsyncIterator<string>;
  stdin: NodeJS.WritableStream;
  kill(signal: NodeJS.Signals): void;
  exited: Promise<void>;
}

/** Start the worker (see the fixture) and read its first line: the home (checked to exist) and Codex's pid. */
async function startWorker(mode: "wait" | "exit" | "handle", codex: "fake" | "real" = "fake"): Promise<Worker> {
  const child = spawn(process.execPath, ["--import", "tsx", WORKER, mode, codex], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = await Promise.race([lines.next(), exited.then(() => ({ done: true as const, value: undefined }))]);
  if (first.done) throw new Error("worker exited before printing its home");
  const { home, codexPid } = JSON.parse(first.value) as { home: string; codexPid: number };
  // A test that fails half-way must not leave the worker (it runs until told), its Codex or its home behind.
  cleanup.push(() => {
    if (child.exitCode !== null || child.signalCode !== null) return; // ended as the test meant (no pid reuse risk)
    for (const pid of [child.pid, codexPid]) {
      try {
        if (pid !== undefined) process.kill(pid, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
    rmSync(home, { recursive: true, force: true });
  });
  expect(existsSync(home)).toBe(true);
  return { home, codexPid, lines, stdin: child.stdin, kill: (s) => child.kill(s), exited };
}

/** Start the worker, end it as `mode` says; resolves with the home once the worker is gone. */
async function workerHome(mode: "wait" | "exit", signal?: NodeJS.Signals): Promise<string> {
  const worker = await startWorker(mode);
  if (signal) worker.kill(signal);
  else worker.stdin.write("exit\n");
  await worker.exited;
  return worker.home;
}

/** Whether a process runs (a zombie does not: /proc says Z). */
function runs(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/s.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

describe("CODEX_HOME resolution at spawn", () => {
  it("uses $CODEX_HOME by default (not a temp dir) and leaves it in place on close", async () => {
    const home = tempDir("codex-home-user-");
    process.env.CODEX_HOME = home;
    const server = await CodexAppServer.spawn({ codexBin: FAKE, env: { FAKE_APP_SERVER_MODE: "quiet-turn" } });
    expect(server.codexHome).toBe(home);
    await server.close();
    expect(existsSync(home)).toBe(true);
  });

  it("a $CODEX_HOME that does not exist fails with SPAWN_FAILED naming it", async () => {
    process.env.CODEX_HOME = path.join(os.tmpdir(), "codex-home-missing-", String(process.pid));
    const err = (await CodexAppServer.spawn({ codexBin: FAKE }).catch((e: unknown) => e)) as CodexAppServerError;
    expect(err).toBeInstanceOf(CodexAppServerError);
    expect(err.code).toBe("SPAWN_FAILED");
    expect(err.message).toContain(process.env.CODEX_HOME);
  });

  it("offline settings keep a temporary home, removed on close; a failed start removes it at once", async () => {
    const env = await startOfflineCodex({ offline: { lean: true } });
    const home = env.codex.codexHome;
    expect(openTempCodexHomes()).toContain(home);
    await env.dispose();
    expect(existsSync(home)).toBe(false);
    expect(openTempCodexHomes()).not.toContain(home);
    const before = openTempCodexHomes().length;
    await expect(CodexAppServer.spawn({ codexBin: "/nonexistent/codex", temporaryHome: true })).rejects.toMatchObject({ code: "SPAWN_FAILED" });
    expect(openTempCodexHomes().length).toBe(before);
  });
});

describe("temporary homes of a host that ends without close()", () => {
  it.each([["SIGTERM"], ["SIGINT"]] as const)("are removed when the host is stopped by %s", async (signal) => {
    const home = await workerHome("wait", signal);
    await waitFor(() => !existsSync(home), 2_000, "the temp home to go");
  });

  it("are removed when the host calls process.exit()", async () => {
    const home = await workerHome("exit");
    expect(existsSync(home)).toBe(false);
  });

  it("are removed for good when the real Codex had a thread: Codex is stopped first, so it writes nothing there on its way out", async () => {
    // Left to exit on stdin EOF, codex 0.169 recreates thread-writer-locks/ in its home after the host removed it.
    for (const end of ["exit", "SIGTERM"] as const) {
      const worker = await startWorker(end === "exit" ? "exit" : "wait", "real");
      expect(runs(worker.codexPid)).toBe(true);
      if (end === "exit") worker.stdin.write("exit\n");
      else worker.kill(end);
      await worker.exited;
      await waitFor(() => !runs(worker.codexPid), 5_000, "codex to be gone");
      // Codex's own shutdown writes would land within this; the home must still be absent after it.
      await new Promise((r) => setTimeout(r, 300));
      expect(existsSync(worker.home), `${end}: ${worker.home}`).toBe(false);
    }
  }, 60_000);

  it("stay while a host that handles the signal itself goes on (a CLI aborting its turn); its exit removes them", async () => {
    const worker = await startWorker("handle", "real");
    worker.kill("SIGTERM");
    expect((await worker.lines.next()).value).toBe("handled");
    await new Promise((r) => setTimeout(r, 100));
    expect(existsSync(worker.home)).toBe(true);
    expect(runs(worker.codexPid)).toBe(true);
    worker.stdin.write("exit\n");
    await worker.exited;
    await waitFor(() => !runs(worker.codexPid), 5_000, "codex to be gone");
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(worker.home)).toBe(false);
  }, 60_000);
});

describe("environment and version of the child", () => {
  it("passes PATH, HOME, proxy and certificate variables, nothing else of the parent", async () => {
    process.env.HTTPS_PROXY = "http://127.0.0.1:9";
    process.env.no_proxy = "localhost";
    process.env.SSL_CERT_DIR = "/nonexistent/certs";
    const server = await CodexAppServer.spawn({ codexBin: FAKE, temporaryHome: true, env: { FAKE_APP_SERVER_MODE: "quiet-turn" } });
    cleanup.push(() => server.close());
    const { envKeys } = await introspect(server);
    expect(envKeys).toEqual(expect.arrayContaining(["PATH", "HTTPS_PROXY", "no_proxy", "SSL_CERT_DIR"]));
    expect(envKeys).not.toContain("VITEST");
  });

  it("warns through the logger when the binary's version is not the protocol's (the fake says 0.0.0)", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, { write: (s: string) => void lines.push(s) });
    const server = await CodexAppServer.spawn({ codexBin: FAKE, temporaryHome: true, logger, env: { FAKE_APP_SERVER_MODE: "quiet-turn" } });
    cleanup.push(() => server.close());
    expect(server.codexVersion).toBe("0.0.0");
    const warning = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.event === "codex.versionMismatch");
    expect(warning).toMatchObject({ codexVersion: "0.0.0", protocolVersion: "0.171.0" });
  });

  it("the pinned real binary matches and logs no warning", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, { write: (s: string) => void lines.push(s) });
    const env = await startOfflineCodex({ offline: { lean: true }, codex: { logger } });
    cleanup.push(() => env.dispose());
    expect(env.codex.codexVersion).toBe("0.171.0");
    expect(lines.join("")).not.toContain("codex.versionMismatch");
  });
});
