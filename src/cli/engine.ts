/**
 * Engine loading for `run`, `chat` and `compact`: `--engine <path | package | package#engine-id>` through the plugin
 * host's loader (src/openclaw; it loads bare engine modules too), bounded by `--engine-timeout` so a factory that never resolves cannot make the CLI
 * hang or exit silently. Without `--engine`, the built-in window engine.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { Logger } from "pino";
import type { CodexAppServer } from "../codex/app-server.js";
import { assertContextEngine } from "../context-engine/contract.js";
import { createWindowEngine } from "../context-engine/engines/index.js";
import { loadContextEngine } from "../openclaw/index.js";
import type { ContextEngine } from "../context-engine/types.js";
import type { CodexTurnParams } from "../params.js";
import { CliError, envError } from "./errors.js";

/** What a command gets from engine loading; the shape of the plugin host's `loadContextEngine` result. */
export interface LoadedEngine {
  engine: ContextEngine;
  dynamicTools?: CodexTurnParams["dynamicTools"];
  hooks?: CodexTurnParams["hooks"];
  /** Extra runtime context the plugin host provides (passed to the turn as `runtimeContext`). */
  runtimeContext?: Record<string, unknown>;
  commands?: unknown[];
  /** Releases what loading started (plugin `gateway_stop`, engine `dispose`). */
  close(): Promise<void>;
}

/** Inputs of {@link loadCliEngine}. */
export interface LoadCliEngineOptions {
  /** `--engine` value; undefined for the default window engine. */
  spec: string | undefined;
  /** The default engine's options when no `--engine` is given. */
  defaultEngine: Parameters<typeof createWindowEngine>[0];
  appServer: CodexAppServer;
  pluginConfig?: Record<string, unknown>;
  tokenBudget?: number;
  model?: string;
  logger?: Logger;
  /** Passed to plugin tool factories (OpenClaw binds plugin tools to a session). */
  sessionId?: string;
  sessionKey?: string;
  /** Bound on loading, ms. */
  timeoutMs: number;
}

/**
 * Load a bare engine module: its `createContextEngine()` when it exports one, else its default export (an engine,
 * or a function returning one); checked with `assertContextEngine`. Kept for library callers; the CLI loads
 * through the plugin host.
 *
 * @example
 * ```ts
 * const engine = await loadEngineModule("./my-engine.mjs");
 * ```
 */
export async function loadEngineModule(spec: string): Promise<ContextEngine> {
  const abs = path.resolve(spec);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(abs).href)) as Record<string, unknown>;
  } catch (err) {
    throw envError(`--engine ${spec}: cannot load module: ${(err as Error).message}`, "ENGINE_LOAD_FAILED");
  }
  let engine: unknown = mod.default;
  if (typeof mod.createContextEngine === "function") engine = await (mod.createContextEngine as () => unknown)();
  else if (typeof engine === "function") engine = await (engine as () => unknown)();
  try {
    assertContextEngine(engine);
  } catch (err) {
    throw envError(`--engine ${spec}: not a context engine: ${(err as Error).message}`, "ENGINE_LOAD_FAILED");
  }
  return engine as ContextEngine;
}

async function loadSpec(spec: string, options: LoadCliEngineOptions, signal: AbortSignal): Promise<LoadedEngine> {
  try {
    const loaded = await loadContextEngine(spec, {
      cwd: process.cwd(),
      appServer: options.appServer,
      signal,
      ...(options.pluginConfig ? { pluginConfig: options.pluginConfig } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.model ? { model: options.model } : {}),
      ...(options.tokenBudget !== undefined ? { tokenBudget: options.tokenBudget } : {}),
      ...(options.sessionId !== undefined ? { sessionId: options.sessionId } : {}),
      ...(options.sessionKey !== undefined ? { sessionKey: options.sessionKey } : {}),
    });
    return {
      engine: loaded.engine,
      dynamicTools: loaded.dynamicTools as CodexTurnParams["dynamicTools"],
      hooks: loaded.hooks,
      runtimeContext: loaded.runtimeContext,
      commands: [...loaded.commands],
      close: () => loaded.close(),
    };
  } catch (err) {
    if (err instanceof CliError) throw err;
    const code = (err as { code?: unknown } | null)?.code;
    const where = typeof code === "string" ? ` (${code})` : "";
    throw envError(`--engine ${spec}${where}: ${(err as Error)?.message ?? String(err)}`, "ENGINE_LOAD_FAILED");
  }
}

/**
 * Loads the command's engine, bounded by `timeoutMs` (exit 3, `ENGINE_TIMEOUT`, when it does not settle in time).
 *
 * @example
 * ```ts
 * const loaded = await loadCliEngine({ spec: "./plugin", defaultEngine: {}, appServer, timeoutMs: 30_000 });
 * try { ... } finally { await loaded.close(); }
 * ```
 */
export async function loadCliEngine(options: LoadCliEngineOptions): Promise<LoadedEngine> {
  const { spec } = options;
  if (spec === undefined) {
    const engine = createWindowEngine(options.defaultEngine);
    return { engine, close: async () => undefined };
  }
  let timer: NodeJS.Timeout | undefined;
  const ac = new AbortController();
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      ac.abort();
      reject(envError(`--engine ${spec}: the engine did not load within ${options.timeoutMs} ms (--engine-timeout)`, "ENGINE_TIMEOUT"));
    }, options.timeoutMs);
  });
  try {
    return await Promise.race([loadSpec(spec, options, ac.signal), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Reads `--plugin-config FILE`: a JSON object handed to the plugin as its configuration.
 *
 * @example
 * ```ts
 * const pluginConfig = await readPluginConfig("./lossless.json");
 * ```
 */
export async function readPluginConfig(file: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw envError(`--plugin-config ${file}: cannot read: ${(err as Error).message}`, "PLUGIN_CONFIG_INVALID");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw envError(`--plugin-config ${file}: not JSON: ${(err as Error).message}`, "PLUGIN_CONFIG_INVALID");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw envError(`--plugin-config ${file}: must be a JSON object`, "PLUGIN_CONFIG_INVALID");
  }
  return value as Record<string, unknown>;
}
