/**
 * `loadContextEngine(spec, opts)`: load an OpenClaw plugin (or a bare engine module) and return the engine it
 * registered, with the dynamic tools, turn hooks and runtime context the turn host passes to `runCodexTurn`.
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { Logger } from "pino";
import { z } from "zod";
import type { CodexAppServer } from "../codex/app-server.js";
import { assertContextEngine } from "../context-engine/contract.js";
import type { ContextEngine } from "../context-engine/types.js";
import type { CodexTurnHooks } from "../hooks/types.js";
import { silentLogger } from "../log/logger.js";
import { createPluginApi, type HostOpenClawConfig } from "./api.js";
import { validatePluginConfig } from "./config.js";
import { classifyEntry, type PluginEntryShape } from "./entry.js";
import { PluginLoadError, errorText } from "./errors.js";
import { createPluginTurnHooks, runPluginHook } from "./hook-bridge.js";
import { CODEX_DEFAULT_MODEL, CODEX_LLM_PROVIDER, DEFAULT_LLM_POLICY, createCodexLlm, type CodexLlm, type LlmPolicy } from "./llm.js";
import { locatePlugin, parsePluginSpec, type LocatedPlugin } from "./locate.js";
import { createPluginRegistry, type PluginRegistry } from "./registry.js";
import { describeUnmet, hostCapabilities, unmetHostRequirements } from "./requirements.js";
import { setSdkHostLogger } from "./sdk/index.js";
import { installOpenClawSdkResolver, nativeImport } from "./sdk-resolver.js";
import { createSubagentHost, type HostSubagentRuntime, type SubagentTurnWiring } from "./subagent.js";
import { resolvePluginTools, type PluginDynamicTool } from "./tools.js";

/** What the turn host needs from a loaded plugin. */
export interface LoadedContextEngine {
  engine: ContextEngine;
  dynamicTools: PluginDynamicTool[];
  hooks: CodexTurnHooks;
  /** Merged into every engine call's runtime context: `provider`, `model`, `llm` (and `tokenBudget` when given). */
  runtimeContext: Record<string, unknown>;
  commands: ReadonlyArray<{ name: string; description?: string }>;
  pluginId?: string;
  /** Registration methods the plugin called that this host records without acting on, with counts. */
  recordedRegistrations: ReadonlyMap<string, number>;
  /** Fire the plugin's `session_end` handlers (e.g. when a host retires a session). */
  sessionEnd(event: { sessionId: string; sessionKey?: string; messageCount: number; reason?: string; sessionFile?: string }): Promise<void>;
  /** Fire the plugin's `before_reset` handlers (before a host resets a session's transcript). */
  beforeReset(event: { sessionId: string; sessionKey?: string; sessionFile?: string; reason?: string }): Promise<void>;
  /** `gateway_stop` handlers, then the engine's `dispose()`. Idempotent. */
  close(): Promise<void>;
}

/** Options of {@link loadContextEngine}. */
export interface LoadContextEngineOptions {
  /** Resolves relative paths and installed package names. */
  cwd: string;
  /** The plugin's config (`api.pluginConfig`), checked against its schema. */
  pluginConfig?: unknown;
  /** Backs `runtime.llm.complete`; without it the `runtime-llm-complete` host requirement is unmet. */
  appServer?: CodexAppServer;
  logger?: Logger;
  /** The model turns run with; `runtime.llm.complete` uses it unless the request names one. */
  model?: string;
  /**
   * Which models `runtime.llm.complete` may run when a request names one (OpenClaw's `plugins.entries.<id>.llm`, which
   * the plugin sees in `api.config`). Default: any (`{ allowModelOverride: true, allowedModels: ["*"] }`).
   */
  llmPolicy?: Partial<LlmPolicy>;
  tokenBudget?: number;
  signal?: AbortSignal;
  /**
   * The session the load-time tools are built for (OpenClaw binds plugin tools to a session). A call from a turn of
   * another session gets that session's own tools (the factory is called again for it), so one load serves many.
   */
  sessionId?: string;
  sessionKey?: string;
  /**
   * Where `runtime.subagent` keeps its child sessions' transcripts (lossless-claw's `lcm_expand_query` delegates to
   * one child session per query, then deletes it). Default: a temporary directory made at the first run and removed
   * by `close()`. Without `appServer` there is no `runtime.subagent` (plugins detect its absence).
   */
  subagentSessionDir?: string;
}

async function importEntry(located: LocatedPlugin, spec: string): Promise<Record<string, unknown>> {
  try {
    return (await nativeImport(pathToFileURL(located.entry).href)) as Record<string, unknown>;
  } catch (error) {
    // e.g. lossless-claw on Node 20: `node:sqlite` arrived in Node 22.5; say that it is the Node, not the plugin.
    const hint = (error as { code?: unknown })?.code === "ERR_UNKNOWN_BUILTIN_MODULE" ? ` (Node ${process.version} lacks this built-in module: the plugin needs a newer Node; OpenClaw runs on Node 24)` : "";
    throw new PluginLoadError("IMPORT_FAILED", spec, `cannot import ${located.entry}: ${errorText(error)}${hint}`, { cause: error });
  }
}

async function createEngine(create: () => unknown, spec: string, engineId?: string): Promise<ContextEngine> {
  let value: unknown;
  try {
    value = await create();
  } catch (error) {
    throw new PluginLoadError("ENGINE_INVALID", spec, `engine ${engineId ?? ""} factory failed: ${errorText(error)}`.replace("  ", " "), { cause: error });
  }
  try {
    return assertContextEngine(value);
  } catch (error) {
    throw new PluginLoadError("ENGINE_INVALID", spec, `not a context engine: ${errorText(error)}`, { cause: error });
  }
}

function pickEngineId(registry: PluginRegistry, spec: string, requested: string | undefined, manifestId: string | undefined): string {
  const ids = [...registry.engines.keys()];
  if (ids.length === 0) throw new PluginLoadError("NO_ENGINE", spec, "register(api) registered no context engine");
  if (requested !== undefined) {
    if (registry.engines.has(requested)) return requested;
    throw new PluginLoadError("UNKNOWN_ENGINE_ID", spec, `no engine ${requested}; registered: ${ids.join(", ")}`);
  }
  if (ids.length === 1) return ids[0]!;
  if (manifestId !== undefined && registry.engines.has(manifestId)) return manifestId;
  throw new PluginLoadError("UNKNOWN_ENGINE_ID", spec, `registers ${ids.length} engines (${ids.join(", ")}); pick one with ${spec}#<engine-id>`);
}

function checkRequirements(engine: ContextEngine, spec: string, hasLlm: boolean): void {
  const unmet = unmetHostRequirements((engine.info as { hostRequirements?: unknown }).hostRequirements, hostCapabilities({ llm: hasLlm }));
  if (unmet.length === 0) return;
  const why = { "runtime-llm-complete": "no Codex app-server was given to the loader" };
  throw new PluginLoadError("REQUIREMENT_UNMET", spec, describeUnmet(engine.info.id, unmet, why));
}

const llmPolicySchema = z
  .object({ allowModelOverride: z.boolean().optional(), allowedModels: z.array(z.string().min(1)).optional() })
  .strict();

/** The host's llm policy: the default with the caller's fields over it. Throws `CONFIG_INVALID` naming the field. */
function resolveLlmPolicy(spec: string, policy: unknown): LlmPolicy {
  const parsed = llmPolicySchema.safeParse(policy ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new PluginLoadError("CONFIG_INVALID", spec, `llmPolicy.${issue.path.join(".") || "(policy)"}: ${issue.message}`);
  }
  return {
    allowModelOverride: parsed.data.allowModelOverride ?? DEFAULT_LLM_POLICY.allowModelOverride,
    allowedModels: [...(parsed.data.allowedModels ?? DEFAULT_LLM_POLICY.allowedModels)],
  };
}

function buildConfig(pluginId: string, pluginConfig: unknown, model: string | undefined, llmPolicy: LlmPolicy): HostOpenClawConfig {
  return {
    plugins: { entries: { [pluginId]: { enabled: true, ...(pluginConfig !== undefined ? { config: pluginConfig } : {}), llm: llmPolicy } } },
    ...(model ? { agents: { defaults: { model: { primary: `${CODEX_LLM_PROVIDER}/${model}` } } } } : {}),
  };
}

/** Call the plugin's `register(api)`; returns what it registered. */
async function registerPlugin(
  entry: PluginEntryShape,
  located: LocatedPlugin,
  spec: string,
  opts: LoadContextEngineOptions,
  llm: { llm: CodexLlm; policy: LlmPolicy; subagent?: HostSubagentRuntime },
  logger: Logger,
) {
  const pluginId = located.manifest?.id ?? entry.id ?? located.packageJson?.name ?? path.basename(located.rootDir);
  const config = validatePluginConfig(spec, entry.configSchema, located.manifest?.configSchema, opts.pluginConfig);
  const registry = createPluginRegistry();
  const hostConfig = buildConfig(pluginId, config, opts.model, llm.policy);
  const version = located.manifest?.version ?? entry.version ?? located.packageJson?.version;
  const description = located.manifest?.description ?? entry.description;
  const api = createPluginApi({
    id: pluginId,
    name: located.manifest?.name ?? entry.name ?? pluginId,
    ...(version !== undefined ? { version } : {}),
    ...(description !== undefined ? { description } : {}),
    source: located.entry,
    rootDir: located.rootDir,
    ...(config !== undefined ? { pluginConfig: config as Record<string, unknown> } : {}),
    config: hostConfig,
    llm: llm.llm,
    ...(llm.subagent ? { subagent: llm.subagent } : {}),
    logger: logger.child({ pluginId }),
    registry,
  });
  try {
    await entry.register(api);
  } catch (error) {
    throw new PluginLoadError("REGISTER_FAILED", spec, `register(api) threw: ${errorText(error)}`, { cause: error });
  }
  return { pluginId, registry, hostConfig };
}

/**
 * Load a context engine from `spec`: a path (a plugin directory, an entry file, or a bare engine module), an
 * installed package name resolved from `opts.cwd`, either optionally followed by `#engine-id`.
 *
 * @example
 * ```ts
 * const loaded = await loadContextEngine("./plugins/summarizer", { cwd: process.cwd(), appServer, tokenBudget: 8000 });
 * try {
 *   await runCodexTurn({ ...params, contextEngine: loaded.engine, dynamicTools: loaded.dynamicTools, hooks: loaded.hooks,
 *     runtimeContext: loaded.runtimeContext });
 * } finally {
 *   await loaded.close();
 * }
 * ```
 */
export async function loadContextEngine(spec: string, opts: LoadContextEngineOptions): Promise<LoadedContextEngine> {
  const logger = opts.logger ?? silentLogger;
  const { target, engineId: requested } = parsePluginSpec(spec);
  const policy = resolveLlmPolicy(spec, opts.llmPolicy);
  const located = await locatePlugin(target, opts.cwd, spec);
  installOpenClawSdkResolver();
  setSdkHostLogger(logger);
  opts.signal?.throwIfAborted();
  const mod = await importEntry(located, spec);
  const shape = classifyEntry(mod, located.manifest !== undefined || located.packageJson?.openclaw !== undefined);
  if (!shape) throw new PluginLoadError("ENTRY_INVALID", spec, `${located.entry} exports no plugin (register) and no engine`);
  const model = opts.model;
  const pluginIdGuess = located.manifest?.id ?? (shape.kind === "plugin" ? shape.id : undefined);
  const llm = createCodexLlm({ ...(opts.appServer ? { appServer: opts.appServer } : {}), ...(model ? { model } : {}), ...(pluginIdGuess ? { pluginId: pluginIdGuess } : {}), logger, policy });
  const runtimeContext: Record<string, unknown> = {
    provider: CODEX_LLM_PROVIDER,
    model: model ?? CODEX_DEFAULT_MODEL,
    llm,
    ...(opts.tokenBudget !== undefined ? { tokenBudget: opts.tokenBudget } : {}),
  };
  if (shape.kind === "engine") {
    const engine = await createEngine(shape.create, spec);
    checkRequirements(engine, spec, opts.appServer !== undefined);
    return bareEngineResult(engine, runtimeContext);
  }
  // Child runs use the loaded plugin's own wiring, which exists only once the load returns.
  let wiring: SubagentTurnWiring | undefined;
  const subagents = opts.appServer
    ? createSubagentHost({
        appServer: opts.appServer,
        llm,
        cwd: opts.cwd,
        ...(opts.subagentSessionDir !== undefined ? { sessionDir: opts.subagentSessionDir } : {}),
        ...(model ? { model } : {}),
        policy,
        ...(pluginIdGuess ? { pluginId: pluginIdGuess } : {}),
        ...(opts.tokenBudget !== undefined ? { tokenBudget: opts.tokenBudget } : {}),
        logger,
        wiring: () => wiring,
      })
    : undefined;
  const { pluginId, registry, hostConfig } = await registerPlugin(shape, located, spec, opts, { llm, policy, ...(subagents ? { subagent: subagents.runtime } : {}) }, logger);
  opts.signal?.throwIfAborted();
  const engineId = pickEngineId(registry, spec, requested, located.manifest?.id);
  const engine = await createEngine(() => registry.engines.get(engineId)!({ config: hostConfig, workspaceDir: opts.cwd }), spec, engineId);
  try {
    checkRequirements(engine, spec, opts.appServer !== undefined);
    const loaded = await assemblePluginResult({ spec, opts, logger, pluginId, registry, hostConfig, engine, runtimeContext });
    wiring = loaded;
    if (!subagents) return loaded;
    let closed: Promise<void> | undefined;
    // Child runs end before the plugin's gateway_stop and the engine's dispose.
    return { ...loaded, close: () => (closed ??= subagents.close().then(() => loaded.close())) };
  } catch (error) {
    await engine.dispose?.().catch(() => undefined);
    throw error;
  }
}

function bareEngineResult(engine: ContextEngine, runtimeContext: Record<string, unknown>): LoadedContextEngine {
  let closed: Promise<void> | undefined;
  return {
    engine,
    dynamicTools: [],
    hooks: {},
    runtimeContext,
    commands: [],
    recordedRegistrations: new Map(),
    sessionEnd: async () => undefined,
    beforeReset: async () => undefined,
    close: () => (closed ??= Promise.resolve(engine.dispose?.()).then(() => undefined)),
  };
}

async function assemblePluginResult(p: {
  spec: string;
  opts: LoadContextEngineOptions;
  logger: Logger;
  pluginId: string;
  registry: PluginRegistry;
  hostConfig: HostOpenClawConfig;
  engine: ContextEngine;
  runtimeContext: Record<string, unknown>;
}): Promise<LoadedContextEngine> {
  const { spec, opts, registry, pluginId, engine } = p;
  let dynamicTools: PluginDynamicTool[];
  try {
    dynamicTools = resolvePluginTools(registry.tools, {
      config: p.hostConfig,
      workspaceDir: opts.cwd,
      ...(opts.sessionId !== undefined ? { sessionId: opts.sessionId } : {}),
      ...(opts.sessionKey !== undefined ? { sessionKey: opts.sessionKey } : {}),
    });
  } catch (error) {
    throw new PluginLoadError("REGISTER_FAILED", spec, errorText(error), { cause: error });
  }
  const hookBase = () => ({
    modelProviderId: CODEX_LLM_PROVIDER,
    ...(opts.model ? { modelId: opts.model } : {}),
    ...(opts.tokenBudget !== undefined ? { contextTokenBudget: opts.tokenBudget } : {}),
    ...(opts.sessionKey !== undefined ? { sessionKey: opts.sessionKey } : {}),
    workspaceDir: opts.cwd,
  });
  const gatewayCtx = { config: p.hostConfig, workspaceDir: opts.cwd };
  try {
    await runPluginHook(registry, pluginId, "gateway_start", { port: 0 }, gatewayCtx);
  } catch (error) {
    throw new PluginLoadError("REGISTER_FAILED", spec, errorText(error), { cause: error });
  }
  p.logger.info(
    { event: "openclaw.plugin.loaded", pluginId, engineId: engine.info.id, tools: dynamicTools.length, hooks: registry.hooks.length, commands: registry.commands.length },
    "plugin loaded",
  );
  let closed: Promise<void> | undefined;
  const close = async () => {
    let stopError: unknown;
    try {
      await runPluginHook(registry, pluginId, "gateway_stop", { reason: "shutdown" }, gatewayCtx);
    } catch (error) {
      stopError = error;
    }
    await engine.dispose?.();
    if (stopError) throw stopError;
  };
  return {
    engine,
    dynamicTools,
    hooks: createPluginTurnHooks(registry, pluginId, hookBase),
    runtimeContext: p.runtimeContext,
    commands: registry.commands.map(({ name, description }) => ({ name, ...(description !== undefined ? { description } : {}) })),
    pluginId,
    recordedRegistrations: registry.recordedOnly,
    sessionEnd: async (event) => void (await runPluginHook(registry, pluginId, "session_end", event, { sessionId: event.sessionId, ...(event.sessionKey ? { sessionKey: event.sessionKey } : {}) })),
    beforeReset: async (event) => void (await runPluginHook(registry, pluginId, "before_reset", event, { ...hookBase(), sessionId: event.sessionId })),
    close: () => (closed ??= close()),
  };
}
