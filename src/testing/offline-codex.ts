import { CodexAppServer, type CodexAppServerOptions } from "../codex/app-server.js";
import { offlineCodexConfig, type OfflineCodexConfigOptions, type OfflineCodexSettings } from "../codex/config.js";
import { startFakeResponsesServer, type FakeResponsesServer } from "./fake-responses-server.js";

export interface StartOfflineCodexOptions {
  /** Reuse a running fake server (it is then NOT closed by dispose). */
  fake?: FakeResponsesServer;
  /** Offline settings besides `baseUrl` (model, autoCompactTokenLimit, lean, ...). */
  offline?: Omit<OfflineCodexConfigOptions, "baseUrl">;
  /** Extra spawn options; `config` and `env` are merged over the offline ones. */
  codex?: Omit<CodexAppServerOptions, "modelCatalog">;
}

export interface OfflineCodex {
  fake: FakeResponsesServer;
  codex: CodexAppServer;
  /** The offline settings used (config record, env, catalog). */
  settings: OfflineCodexSettings;
  /** Close the app-server, then the fake server (if this call started it). Idempotent. */
  dispose(): Promise<void>;
}

/**
 * Start a fake Responses API on loopback and a real `codex app-server` wired to it with the hardened offline config.
 *
 * @example
 * ```ts
 * const { fake, codex, dispose } = await startOfflineCodex({ offline: { autoCompactTokenLimit: 5000 } });
 * fake.enqueue({ text: "hi there" });
 * const { threadId } = await codex.startThread();
 * const record = await (await codex.startTurn({ threadId, text: "hello" })).completion;
 * await dispose();
 * ```
 */
export async function startOfflineCodex(options: StartOfflineCodexOptions = {}): Promise<OfflineCodex> {
  const ownsFake = options.fake === undefined;
  const fake = options.fake ?? (await startFakeResponsesServer());
  try {
    const settings = offlineCodexConfig({ ...(options.offline ?? {}), baseUrl: fake.baseUrl });
    const codex = await CodexAppServer.spawn({
      ...(options.codex ?? {}),
      config: { ...settings.config, ...(options.codex?.config ?? {}) },
      env: { ...settings.env, ...(options.codex?.env ?? {}) },
      ...(settings.modelCatalog ? { modelCatalog: settings.modelCatalog } : {}),
    });
    let disposed: Promise<void> | undefined;
    return {
      fake,
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
