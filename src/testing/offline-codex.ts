import { CodexAppServer, type CodexAppServerOptions } from "../codex/app-server.js";
import { offlineCodexConfig, type OfflineCodexConfigOptions, type OfflineCodexSettings } from "../codex/config.js";
import { startFakeResponsesServer, type FakeResponsesServer } from "./fake-responses-server.js";

export interface StartOfflineCodexOptions {
  /** Reuse a running fake server (it is then NOT closed by dispose). */
  fake?: FakeResponsesServer | undefined;
  /** Offline settings besides `baseUrl` (model, autoCompactTokenLimit, lean, ...). */
  offline?: Omit<OfflineCodexConfigOptions, "baseUrl"> | undefined;
  /**
   * Extra spawn options; `env` is merged over the offline one and `config` deep-merged (nested tables key by key, so
   * `{ features: { unified_exec: false } }` keeps the offline hardening such as `features.plugins = false`).
   */
  codex?: Omit<CodexAppServerOptions, "modelCatalog"> | undefined;
}

export interface OfflineCodex {
  /** The fake Responses API the app-server talks to (queue replies with `fake.enqueue`). */
  fake: FakeResponsesServer;
  /** The started app-server: pass it as `appServer` to `runCodexTurn` / `createCodexSession`. */
  appServer: CodexAppServer;
  /** The same app-server as {@link OfflineCodex.appServer} (the earlier name). */
  codex: CodexAppServer;
  /** The offline settings used (config record, env, catalog). */
  settings: OfflineCodexSettings;
  /** Close the app-server, then the fake server (if this call started it). Idempotent. */
  dispose(): Promise<void>;
}

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * `override` over `base`, merging nested tables key by key (arrays and other values replace). Neither input changes.
 *
 * @example
 * ```ts
 * mergeCodexConfig({ features: { plugins: false } }, { features: { unified_exec: false } });
 * // => { features: { plugins: false, unified_exec: false } }
 * ```
 */
export function mergeCodexConfig(base: Record<string, unknown>, override: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(override)) {
    const current = out[key];
    out[key] = isTable(current) && isTable(value) ? mergeCodexConfig(current, value) : value;
  }
  return out;
}

/**
 * Start a fake Responses API on loopback and a real `codex app-server` wired to it with the hardened offline config.
 *
 * @example
 * ```ts
 * const { fake, appServer, dispose } = await startOfflineCodex();
 * fake.enqueue({ text: "hi there" });
 * const result = await runCodexTurn({ appServer, sessionId: "s1", sessionFile: "/tmp/s1.jsonl", prompt: "hello" });
 * await dispose();
 * ```
 */
export async function startOfflineCodex(options: StartOfflineCodexOptions = {}): Promise<OfflineCodex> {
  const ownsFake = options.fake === undefined;
  const fake = options.fake ?? (await startFakeResponsesServer());
  try {
    const settings = offlineCodexConfig({ ...(options.offline ?? {}), baseUrl: fake.baseUrl });
    const codex = await CodexAppServer.spawn({
      // The fake model needs no account: never asked (a caller may still turn it on to test it).
      accountPreflight: false,
      ...(options.codex ?? {}),
      config: mergeCodexConfig(settings.config, options.codex?.config ?? {}),
      env: { ...settings.env, ...(options.codex?.env ?? {}) },
      ...(settings.modelCatalog ? { modelCatalog: settings.modelCatalog } : {}),
    });
    let disposed: Promise<void> | undefined;
    return {
      fake,
      appServer: codex,
      codex,
      settings,
      dispose() {
        disposed ??= (async () => {
          await codex.close();
          if (ownsFake) await fake.close();
        })();
        return disposed;
      },
    };
  } catch (err) {
    if (ownsFake) await fake.close();
    throw err;
  }
}
