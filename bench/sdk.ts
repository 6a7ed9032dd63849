/**
 * Peer comparison: a 10-turn conversation with `@openai/codex-sdk` (it spawns `codex exec` per turn and resumes the
 * thread by id) versus `runCodexTurn` on a warm app-server and the bare client, all against the same fake model,
 * interleaved turn by turn.
 *
 * Offline wiring of the SDK: `config` carries the same hardened offline `-c` overrides as the app-server
 * (`offlineCodexConfig`, plus `model_catalog_json` pointing at a generated one-model catalog in a fresh CODEX_HOME);
 * `env` REPLACES the inherited environment (the SDK then passes nothing else), so the child sees only PATH, a temp
 * HOME, CODEX_HOME and the fake key. As a belt-and-braces guard every proxy variable points at a loopback "trap"
 * listener (loopback itself is exempted via NO_PROXY): a stray attempt to reach any other host lands on the trap,
 * which counts and drops it, instead of leaving the machine.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createServer, type Server, type Socket } from "node:net";
import path from "node:path";
import { runCodexTurn } from "../src/turn.js";
import { offlineCodexConfig } from "../src/codex/config.js";
import { resolveCodexCommand } from "../src/codex/binary.js";
import { startFakeResponsesServer, startOfflineCodex } from "../src/testing/index.js";
import { bounded, carryoverBalancedRounds, median, round, table, tempDir, userPrompt } from "./lib.js";

/** Where the SDK is installed on demand (`npm run bench:sdk-install`): its own package, outside the repository's install. */
export const CODEX_SDK_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "codex-sdk");

/** The part of `@openai/codex-sdk`'s `Codex` class the comparison uses (the package is not installed for type-checking). */
type CodexSdkClass = new (options: { codexPathOverride?: string; config?: unknown; env?: Record<string, string> }) => {
  startThread(options: { workingDirectory: string; skipGitRepoCheck: boolean; sandboxMode: string; approvalPolicy: string }): {
    readonly id: string | null;
    run(prompt: string): Promise<{ finalResponse: string }>;
  };
};

/**
 * Load `@openai/codex-sdk` from {@link CODEX_SDK_DIR} (its entry read from its package.json `exports`, which has only
 * an `import` condition); throws when it is not installed there.
 */
async function loadCodexSdk(): Promise<{ Codex: CodexSdkClass; version: string }> {
  const pkgDir = path.join(CODEX_SDK_DIR, "node_modules", "@openai", "codex-sdk");
  const pkg = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8")) as { version: string; exports: { ".": { import: string } } };
  const mod = (await import(pathToFileURL(path.join(pkgDir, pkg.exports["."].import)).href)) as { Codex: CodexSdkClass };
  return { Codex: mod.Codex, version: pkg.version };
}

export interface SdkResults {
  turns: number;
  available: boolean;
  skipReason?: string;
  sdkVersion?: string;
  medianMs?: { sdk: number; machine: number; direct: number };
  firstTurnMs?: { sdk: number; machine: number; direct: number };
  ratio?: { sdkOverMachine: number; sdkOverDirect: number; machineOverDirect: number };
  sdkRequestsSeen?: number;
  trapConnections?: number;
}

const REPLY = "Done. The change is in place and the tests pass.";

async function startTrap(): Promise<{ port: number; connections(): number; close(): Promise<void> }> {
  let count = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    count++;
    sockets.add(s);
    s.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    port,
    connections: () => count,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * @example
 * ```ts
 * const s = await runSdkComparison({ turns: 10, log: console.log });
 * if (s.available) console.log(s.ratio?.sdkOverMachine);
 * ```
 */
export async function runSdkComparison(opts: { turns: number; log: (l: string) => void }): Promise<SdkResults> {
  let CodexSdk: CodexSdkClass;
  let sdkVersion: string | undefined;
  try {
    ({ Codex: CodexSdk, version: sdkVersion } = await loadCodexSdk());
  } catch (err) {
    return { turns: opts.turns, available: false, skipReason: `@openai/codex-sdk could not be loaded (install it with \`npm run bench:sdk-install\`): ${String(err)}` };
  }
  const fake = await startFakeResponsesServer();
  fake.setDefault(() => ({ text: REPLY }));
  const trap = await startTrap();
  const env = await startOfflineCodex({ fake });
  const dirs = tempDir("ctm-bench-sdk-");
  const cwd = tempDir("ctm-bench-cwd-");
  try {
    // The SDK's codex child: same binary, same offline overrides, fresh CODEX_HOME with the generated catalog.
    const settings = offlineCodexConfig({ baseUrl: fake.baseUrl });
    const codexHome = path.join(dirs.dir, "codex-home");
    const home = path.join(dirs.dir, "home");
    mkdirSync(codexHome);
    mkdirSync(home);
    const catalogPath = path.join(codexHome, "model-catalog.json");
    writeFileSync(catalogPath, `${JSON.stringify(settings.modelCatalog, null, 2)}\n`);
    const codexCommand = resolveCodexCommand();
    const proxy = `http://127.0.0.1:${trap.port}`;
    const sdk = new CodexSdk({
      // The same native binary the app-server runs (undefined: let the SDK find its own when codex runs via node).
      ...(codexCommand.prefixArgs.length === 0 ? { codexPathOverride: codexCommand.command } : {}),
      config: { ...settings.config, model_catalog_json: catalogPath } as never,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: home,
        CODEX_HOME: codexHome,
        RUST_LOG: "warn",
        ...settings.env,
        HTTP_PROXY: proxy,
        HTTPS_PROXY: proxy,
        ALL_PROXY: proxy,
        http_proxy: proxy,
        https_proxy: proxy,
        all_proxy: proxy,
        NO_PROXY: "127.0.0.1,localhost,::1",
        no_proxy: "127.0.0.1,localhost,::1",
      },
    });
    const thread = sdk.startThread({
      workingDirectory: cwd.dir,
      skipGitRepoCheck: true,
      sandboxMode: "read-only",
      approvalPolicy: "never",
    });
    const { threadId } = await env.codex.startThread({ cwd: cwd.dir });
    const times = { sdk: [] as number[], machine: [] as number[], direct: [] as number[] };
    const sessionFile = path.join(dirs.dir, "machine.jsonl");

    // Each variant runs right after every other one equally often (a rotated order would keep who follows whom).
    const balanced = carryoverBalancedRounds(3);
    for (let i = 0; i < opts.turns; i++) {
      const prompt = userPrompt(i);
      const order = ["sdk", "machine", "direct"] as const;
      for (const v of balanced[i % balanced.length]!.map((k) => order[k]!)) {
        const t0 = performance.now();
        if (v === "sdk") {
          const before = fake.requests.length;
          let turn;
          try {
            turn = await bounded(`sdk turn ${i + 1}`, 60_000, thread.run(prompt));
          } catch (err) {
            const reason = `codex-sdk turn ${i + 1} failed against the fake: ${String(err).slice(0, 400)}; trap connections: ${trap.connections()}`;
            return { turns: opts.turns, available: false, skipReason: reason, sdkVersion };
          }
          if (fake.requests.length === before) {
            return { turns: opts.turns, available: false, skipReason: `codex-sdk turn ${i + 1} never reached the fake server`, sdkVersion };
          }
          if (turn.finalResponse !== REPLY) {
            return { turns: opts.turns, available: false, skipReason: `codex-sdk turn ${i + 1} returned an unexpected reply`, sdkVersion };
          }
        } else if (v === "machine") {
          const r = await bounded(`machine turn ${i + 1}`, 60_000,
            runCodexTurn({ appServer: env.codex, sessionId: "sdk-cmp", sessionFile, prompt, cwd: cwd.dir }),
          );
          if (r.status !== "completed") throw new Error(`machine turn ${i + 1} ended ${r.status}`);
        } else {
          const turn = await env.codex.startTurn({ threadId, text: prompt });
          const rec = await bounded(`direct turn ${i + 1}`, 60_000, turn.completion);
          if (rec.codexStatus !== "completed") throw new Error(`direct turn ${i + 1} ended ${rec.codexStatus}`);
        }
        times[v].push(performance.now() - t0);
      }
    }
    const m = { sdk: median(times.sdk), machine: median(times.machine), direct: median(times.direct) };
    const sdkRequests = fake.requests.filter((r) => String(r.turnMetadata?.thread_id ?? "") === thread.id).length;
    return {
      turns: opts.turns,
      available: true,
      sdkVersion,
      medianMs: { sdk: round(m.sdk, 1), machine: round(m.machine, 1), direct: round(m.direct, 1) },
      firstTurnMs: { sdk: round(times.sdk[0]!, 1), machine: round(times.machine[0]!, 1), direct: round(times.direct[0]!, 1) },
      ratio: {
        sdkOverMachine: round(m.sdk / m.machine, 2),
        sdkOverDirect: round(m.sdk / m.direct, 2),
        machineOverDirect: round(m.machine / m.direct, 2),
      },
      sdkRequestsSeen: sdkRequests,
      trapConnections: trap.connections(),
    };
  } finally {
    await env.dispose();
    await fake.close();
    await trap.close();
    dirs.cleanup();
    cwd.cleanup();
  }
}

export function formatSdk(s: SdkResults): string {
  const lines = [`\n## 4. Peer comparison: @openai/codex-sdk vs runCodexTurn (${s.turns}-turn conversation, same fake model)`];
  if (!s.available) {
    lines.push(`SKIPPED: ${s.skipReason}`);
    return lines.join("\n");
  }
  lines.push(
    table([
      ["variant", "median ms/turn", "turn 1 ms", "x runCodexTurn"],
      [`codex-sdk ${s.sdkVersion} thread.run() (codex exec per turn)`, s.medianMs!.sdk, s.firstTurnMs!.sdk, s.ratio!.sdkOverMachine],
      ["runCodexTurn, warm app-server, no engine", s.medianMs!.machine, s.firstTurnMs!.machine, 1],
      ["bare client startTurn -> completion, warm app-server", s.medianMs!.direct, s.firstTurnMs!.direct, round(s.medianMs!.direct / s.medianMs!.machine, 2)],
    ]),
  );
  lines.push(
    `SDK / bare client = ${s.ratio!.sdkOverDirect}x; runCodexTurn / bare client = ${s.ratio!.machineOverDirect}x; ` +
      `SDK model requests seen by the fake: ${s.sdkRequestsSeen}; connections caught by the proxy trap: ${s.trapConnections}`,
  );
  return lines.join("\n");
}
