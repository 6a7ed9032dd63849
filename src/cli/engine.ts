/**
 * Engine loading for `run`, `chat` and `compact`: `--engine <path | package | package#engine-id>` through the plugin
 * host's loader (src/openclaw; it loads bare engine modules too), bounded by `--engine-timeout` so a factory that never resolves cannot make the CLI
 * hang or exit silently. Without `--engine`, the built-in window engine.
 */
import { readRegularTextFile } from "../regular-file.js";
import JSON5 from "json5";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { Logger } from "pino";
import type { CodexAppServer } from "../codex/app-server.js";
import { assertContextEngine } from "../context-engine/contract.js";
import { createWindowEngine } from "../context-engine/engines/index.js";
import { loadOpenClawPlugins, OpenClawConfigError, PluginLoadError, readOpenClawConfigFile, type LoadedOpenClawPlugins, type OpenClawPluginSpec, type PluginApprovalCallback, type PluginWarning } from "../openclaw/index.js";
import type { ContextEngine } from "../context-engine/types.js";
import type { CodexTurnParams } from "../params.js";
import { CliError, envError } from "./errors.js";
import type { EngineOptionValues } from "./options.js";

/** What a command gets from engine loading; the shape of the plugin host's `loadContextEngine` result. */
export interface LoadedEngine {
  engine: ContextEngine;
  dynamicTools?: CodexTurnParams["dynamicTools"] | undefined;
  hooks?: CodexTurnParams["hooks"] | undefined;
  /** Extra runtime context the plugin host provides (passed to the turn as `runtimeContext`). */
  runtimeContext?: Record<string, unknown> | undefined;
  commands?: unknown[] | undefined;
  /** The plugin command a line invokes (absent without plugins). */
  findCommand?: LoadedOpenClawPlugins["findCommand"] | undefined;
  /** Answer a plugin command line (absent without plugins). */
  runCommand?: LoadedOpenClawPlugins["runCommand"] | undefined;
  /** The plugins' `session_start` handlers (absent without plugins). */
  sessionStart?: ((event: { sessionId: string; sessionKey?: string | undefined }) => Promise<void>) | undefined;
  /** The plugins' `session_end` handlers (absent without plugins). */
  sessionEnd?: LoadedOpenClawPlugins["sessionEnd"] | undefined;
  /** The plugins' `before_reset` handlers (absent without plugins). */
  beforeReset?: LoadedOpenClawPlugins["beforeReset"] | undefined;
  /** Releases what loading started (plugin `gateway_stop`, engine `dispose`). */
  close(): Promise<void>;
}

/** Inputs of {@link loadCliEngine}. */
export interface LoadCliEngineOptions {
  /** `--engine` value; undefined for the default window engine (unless a `--plugin` registers an engine). */
  spec: string | undefined;
  /** `--plugin` values: plugins loaded beside the engine. */
  plugins?: readonly string[] | undefined;
  /** `--plugins-config`: configurations by plugin id. */
  pluginConfigs?: Record<string, unknown> | undefined;
  /** `--context-engine`: the engine id to use when the plugins register several. */
  contextEngine?: string | undefined;
  /** `--openclaw-config`: an OpenClaw config whose `plugins` section configures the loaded plugins. */
  openClawConfig?: Record<string, unknown> | undefined;
  /** Decides plugins' `requireApproval` (from `--approve`). */
  onPluginApproval?: PluginApprovalCallback | undefined;
  /** Each warning or error a plugin logs, as it happens (the CLI prints it on stderr). */
  onPluginWarning?: ((warning: PluginWarning) => void) | undefined;
  /** The default engine's options when no `--engine` is given. */
  defaultEngine: Parameters<typeof createWindowEngine>[0];
  appServer: CodexAppServer;
  pluginConfig?: Record<string, unknown> | undefined;
  tokenBudget?: number | undefined;
  model?: string | undefined;
  logger?: Logger | undefined;
  /** Passed to plugin tool factories (OpenClaw binds plugin tools to a session). */
  sessionId?: string | undefined;
  sessionKey?: string | undefined;
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

/** The flag a plugin load error is about: `--engine X`, `--plugin X`, or the plugin set as a whole. */
function flagOf(err: unknown, options: LoadCliEngineOptions): string {
  const spec = err instanceof PluginLoadError ? err.spec : undefined;
  if (spec !== undefined && spec === options.spec) return `--engine ${spec}`;
  if (spec !== undefined && options.plugins?.includes(spec)) return `--plugin ${spec}`;
  return options.spec !== undefined && !options.plugins?.length ? `--engine ${options.spec}` : "plugins";
}

async function loadSpecs(options: LoadCliEngineOptions, signal: AbortSignal): Promise<LoadedEngine> {
  const specs: OpenClawPluginSpec[] = [
    ...(options.spec !== undefined ? [{ spec: options.spec, ...(options.pluginConfig ? { config: options.pluginConfig } : {}), engine: true }] : []),
    ...(options.plugins ?? []).map((spec) => ({ spec })),
  ];
  try {
    const loaded = await loadOpenClawPlugins(specs, {
      cwd: process.cwd(),
      appServer: options.appServer,
      signal,
      ...(options.pluginConfigs ? { pluginConfigs: options.pluginConfigs } : {}),
      ...(options.contextEngine !== undefined ? { contextEngine: options.contextEngine } : {}),
      ...(options.openClawConfig ? { openClawConfig: options.openClawConfig } : {}),
      ...(options.onPluginApproval ? { onPluginApproval: options.onPluginApproval } : {}),
      ...(options.onPluginWarning ? { onPluginWarning: options.onPluginWarning } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.model ? { model: options.model } : {}),
      ...(options.tokenBudget !== undefined ? { tokenBudget: options.tokenBudget } : {}),
      ...(options.sessionId !== undefined ? { sessionId: options.sessionId } : {}),
      ...(options.sessionKey !== undefined ? { sessionKey: options.sessionKey } : {}),
    });
    return {
      // No plugin registered an engine: the default engine, with the plugins' hooks and tools (OpenClaw's legacy engine).
      engine: loaded.engine ?? createWindowEngine(options.defaultEngine),
      dynamicTools: loaded.dynamicTools as CodexTurnParams["dynamicTools"],
      hooks: loaded.hooks,
      runtimeContext: loaded.runtimeContext,
      commands: [...loaded.commands],
      findCommand: (line) => loaded.findCommand(line),
      runCommand: (line, session) => loaded.runCommand(line, session),
      sessionStart: (event) => loaded.sessionStart(event),
      sessionEnd: (event) => loaded.sessionEnd(event),
      beforeReset: (event) => loaded.beforeReset(event),
      close: () => loaded.close(),
    };
  } catch (err) {
    if (err instanceof CliError) throw err;
    const code = (err as { code?: unknown } | null)?.code;
    const where = typeof code === "string" ? ` (${code})` : "";
    throw envError(`${flagOf(err, options)}${where}: ${(err as Error)?.message ?? String(err)}`, "ENGINE_LOAD_FAILED");
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
  if (spec === undefined && !options.plugins?.length) {
    if (options.contextEngine !== undefined) throw envError("--context-engine needs plugins to choose from (--engine or --plugin)", "ENGINE_LOAD_FAILED");
    if (options.openClawConfig !== undefined) throw envError("--openclaw-config configures the plugins given with --engine or --plugin; none was given", "ENGINE_LOAD_FAILED");
    const engine = createWindowEngine(options.defaultEngine);
    return { engine, close: async () => undefined };
  }
  const what = spec !== undefined && !options.plugins?.length ? `--engine ${spec}: the engine did not load` : "plugins: the plugins did not load";
  let timer: NodeJS.Timeout | undefined;
  const ac = new AbortController();
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      ac.abort();
      reject(envError(`${what} within ${options.timeoutMs} ms (--engine-timeout)`, "ENGINE_TIMEOUT"));
    }, options.timeoutMs);
  });
  try {
    return await Promise.race([loadSpecs(options, ac.signal), timeout]);
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
export async function readPluginConfig(file: string, flag = "--plugin-config"): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readRegularTextFile(file);
  } catch (err) {
    throw envError(`${flag} ${file}: cannot read: ${(err as Error).message}`, "PLUGIN_CONFIG_INVALID");
  }
  let value: unknown;
  try {
    // JSON5, as OpenClaw's own config files (plain JSON is JSON5 too).
    value = JSON5.parse(text);
  } catch (err) {
    throw envError(`${flag} ${file}: not JSON5: ${(err as Error).message.replace(/^JSON5: /, "")}`, "PLUGIN_CONFIG_INVALID");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw envError(`${flag} ${file}: must be a JSON object`, "PLUGIN_CONFIG_INVALID");
  }
  return value as Record<string, unknown>;
}

/** `--openclaw-config FILE`: read as OpenClaw reads its config (JSON5, `$include`, `${VAR}`); a problem is exit 3 naming it. */
function readOpenClawConfig(file: string): Record<string, unknown> {
  try {
    return readOpenClawConfigFile(file);
  } catch (err) {
    if (err instanceof OpenClawConfigError) throw envError(`--openclaw-config ${err.message}`, "PLUGIN_CONFIG_INVALID");
    throw err;
  }
}

/**
 * Reads `--plugins-config FILE`: a JSON object of plugin configurations by plugin id (each value a JSON object).
 *
 * @example
 * ```ts
 * const pluginConfigs = await readPluginsConfig("./plugins.json"); // { "recall-memory": { dbPath: "./mem.json" } }
 * ```
 */
export async function readPluginsConfig(file: string): Promise<Record<string, Record<string, unknown>>> {
  const value = await readPluginConfig(file, "--plugins-config");
  for (const [id, config] of Object.entries(value)) {
    if (typeof config !== "object" || config === null || Array.isArray(config)) {
      throw envError(`--plugins-config ${file}: ${id}: must be a JSON object (that plugin's configuration)`, "PLUGIN_CONFIG_INVALID");
    }
  }
  return value as Record<string, Record<string, unknown>>;
}

/**
 * The engine options of a command (`--engine`, `--plugin-config`, `--plugin`, `--plugins-config`, `--openclaw-config`, `--context-engine`,
 * `--budget`, `--engine-timeout`) as {@link loadCliEngine} takes them, the config files read and checked.
 *
 * @example
 * ```ts
 * const loaded = await loadCliEngine({ ...(await engineLoadInputs(opts)), defaultEngine: {}, appServer });
 * ```
 */
export async function engineLoadInputs(
  opts: EngineOptionValues,
): Promise<Pick<LoadCliEngineOptions, "spec" | "plugins" | "pluginConfig" | "pluginConfigs" | "openClawConfig" | "contextEngine" | "tokenBudget" | "timeoutMs">> {
  const pluginConfig = opts.pluginConfig !== undefined ? await readPluginConfig(opts.pluginConfig) : undefined;
  const openClawConfig = opts.openclawConfig !== undefined ? readOpenClawConfig(opts.openclawConfig) : undefined;
  const pluginConfigs = opts.pluginsConfig !== undefined ? await readPluginsConfig(opts.pluginsConfig) : undefined;
  return {
    spec: opts.engine,
    timeoutMs: opts.engineTimeout,
    ...(opts.plugin?.length ? { plugins: opts.plugin } : {}),
    ...(pluginConfig ? { pluginConfig } : {}),
    ...(pluginConfigs ? { pluginConfigs } : {}),
    ...(openClawConfig ? { openClawConfig } : {}),
    ...(opts.contextEngine !== undefined ? { contextEngine: opts.contextEngine } : {}),
    ...(opts.budget !== undefined ? { tokenBudget: opts.budget } : {}),
  };
}
