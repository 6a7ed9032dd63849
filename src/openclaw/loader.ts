/**
 * `loadContextEngine(spec, opts)`: load an OpenClaw plugin (or a bare engine module) and return the engine it
 * registered, with the dynamic tools, turn hooks and runtime context the turn host passes to `runCodexTurn`.
 * `loadOpenClawPlugins(plugins, opts)`: several plugins at once, as OpenClaw runs them (a context engine beside memory,
 * guard and tool plugins): one engine (or none), every plugin's hooks, tools and commands together.
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { Logger } from "pino";
import { z } from "zod";
import type { CodexAppServer } from "../codex/app-server.js";
import { assertContextEngine } from "../context-engine/contract.js";
import type { ContextEngine } from "../context-engine/types.js";
import type { SessionStore } from "../store/session-store.js";
import type { CodexTurnHooks } from "../hooks/types.js";
import { silentLogger } from "../log/logger.js";
import { createPluginApi, type HostOpenClawConfig } from "./api.js";
import { validatePluginConfig } from "./config.js";
import { classifyEntry, type EngineModuleShape, type PluginEntryShape } from "./entry.js";
import { PluginLoadError, errorText } from "./errors.js";
import { createPluginTurnHooks, runPluginHook } from "./hook-bridge.js";
import { CODEX_DEFAULT_MODEL, CODEX_LLM_PROVIDER, DEFAULT_LLM_POLICY, createCodexLlm, type CodexLlm, type LlmPolicy } from "./llm.js";
import { locatePlugin, parsePluginSpec, type LocatedPlugin } from "./locate.js";
import { createPluginRegistry, mergePluginRegistries, type PluginHookPolicy, type PluginRegistry } from "./registry.js";
import { matchPluginCommand, runPluginCommand, type PluginCommandInvocation, type PluginCommandOutcome, type PluginCommandSession } from "./commands.js";
import type { PluginApprovalCallback } from "./tool-approval.js";
import { engineCandidates, selectEngine, type EngineCandidate, type EngineOffer } from "./engine-choice.js";
import { describeUnmet, hostCapabilities, unmetHostRequirements } from "./requirements.js";
import { setSdkHostLogger } from "./sdk/index.js";
import { installOpenClawSdkResolver, nativeImport } from "./sdk-resolver.js";
import { importModuleFile } from "../typescript-import.js";
import { createSubagentHost, type HostSubagentRuntime, type SubagentTurnWiring } from "./subagent.js";
import { createPluginWarningLog, type PluginWarning, type PluginWarningLog } from "./plugin-warnings.js";
import { resolvePluginTools, type PluginDynamicTool } from "./tools.js";

/** What the turn host needs from a loaded plugin. */
export interface LoadedContextEngine {
  engine: ContextEngine;
  dynamicTools: PluginDynamicTool[];
  hooks: CodexTurnHooks;
  /** Merged into every engine call's runtime context: `provider`, `model`, `llm` (and `tokenBudget` when given). */
  runtimeContext: Record<string, unknown>;
  commands: ReadonlyArray<{ name: string; description?: string | undefined }>;
  /** The plugin command a user's line invokes (`/name args`), or undefined for an ordinary prompt. */
  findCommand(line: string): PluginCommandInvocation | undefined;
  /**
   * Answer a user's `/name args` line with the plugin's command handler (no model), as OpenClaw's chat surfaces do;
   * undefined when the line is no command. A failing handler rejects with an error naming the command.
   */
  runCommand(line: string, session: PluginCommandSession): Promise<PluginCommandOutcome | undefined>;
  pluginId?: string | undefined;
  /** Registration methods the plugin called that this host records without acting on, with counts. */
  recordedRegistrations: ReadonlyMap<string, number>;
  /**
   * Fire the plugin's `session_start` handlers when a host begins a new session (OpenClaw fires it when a session is
   * created; `resumedFrom` names the session it continues, e.g. after a reset). The CLI calls it before a new session
   * file's first turn.
   */
  sessionStart(event: { sessionId: string; sessionKey?: string | undefined; resumedFrom?: string | undefined }): Promise<void>;
  /**
   * Fire the plugin's `session_end` handlers (e.g. when a host retires a session; after a `/new` or `/reset`, with
   * `reason` and the session that follows, as OpenClaw fires it).
   */
  sessionEnd(event: {
    sessionId: string;
    sessionKey?: string | undefined;
    messageCount: number;
    reason?: string | undefined;
    sessionFile?: string | undefined;
    transcriptArchived?: boolean | undefined;
    nextSessionId?: string | undefined;
    nextSessionKey?: string | undefined;
  }): Promise<void>;
  /**
   * Fire the plugin's `before_reset` handlers before a host resets a session (`reason` "new" or "reset" for the chat
   * commands). As OpenClaw: the event is `{ sessionFile, messages, reason }` (the messages of the transcript being
   * reset), the session's id and key go in the hook context.
   */
  beforeReset(event: { sessionId: string; sessionKey?: string | undefined; sessionFile?: string | undefined; messages?: unknown[] | undefined; reason?: string | undefined }): Promise<void>;
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
  appServer?: CodexAppServer | undefined;
  logger?: Logger | undefined;
  /** The model turns run with; `runtime.llm.complete` uses it unless the request names one. */
  model?: string | undefined;
  /**
   * Which models `runtime.llm.complete` may run when a request names one (OpenClaw's `plugins.entries.<id>.llm`, which
   * the plugin sees in `api.config`). Default: any (`{ allowModelOverride: true, allowedModels: ["*"] }`).
   */
  llmPolicy?: Partial<LlmPolicy> | undefined;
  tokenBudget?: number | undefined;
  signal?: AbortSignal | undefined;
  /**
   * The session the load-time tools are built for (OpenClaw binds plugin tools to a session). A call from a turn of
   * another session gets that session's own tools (the factory is called again for it), so one load serves many.
   */
  sessionId?: string | undefined;
  sessionKey?: string | undefined;
  /**
   * Where `runtime.subagent` keeps its child sessions' transcripts (lossless-claw's `lcm_expand_query` delegates to
   * one child session per query, then deletes it). Default: a temporary directory made at the first run and removed
   * by `close()`. Without `appServer` there is no `runtime.subagent` (plugins detect its absence).
   */
  subagentSessionDir?: string | undefined;
  /** The store of a `runtime.subagent` child session (instead of `subagentSessionDir`): see `SubagentHostOptions.storeFor`. */
  subagentStore?: ((child: { sessionId: string; sessionKey: string }) => SessionStore) | undefined;
  /**
   * Decides what a plugin's `before_tool_call` sends for approval (`requireApproval`): `"allow-once"`,
   * `"allow-always"` (remembered for that plugin, tool and title while loaded) or `"deny"`. Without it such calls are
   * blocked ("Plugin approval unavailable (no approval route)"), as OpenClaw does with no approval route. An approval
   * unanswered within the request's `timeoutMs` (default 120 s), at most `pluginApprovalTimeoutMs`, blocks the call.
   */
  onPluginApproval?: PluginApprovalCallback | undefined;
  /** The longest a plugin approval may wait, ms (default 120,000, OpenClaw's default). */
  pluginApprovalTimeoutMs?: number | undefined;
  /**
   * Called with each warning or error a plugin logs (its `api.logger`, `runtime.logging` child loggers, the SDK's
   * `logging-core`), as it happens; the CLI prints them on stderr. Whatever this does, the warnings also reach the next
   * turn's `result.warnings` (deduplicated) through the loaded `hooks`.
   */
  onPluginWarning?: ((warning: PluginWarning) => void) | undefined;
}

async function importEntry(located: LocatedPlugin, spec: string): Promise<Record<string, unknown>> {
  try {
    // An entry in TypeScript: Node's own type stripping, or tsx on a Node without it (src/typescript-import.ts).
    return (await importModuleFile(located.entry, nativeImport)) as Record<string, unknown>;
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

/** OpenClaw's config as the plugins see it: every loaded plugin's entry (its config and llm policy), and the model. */
function buildConfig(entries: ReadonlyArray<{ pluginId: string; config: unknown; hooks?: PluginHookPolicy | undefined }>, model: string | undefined, llmPolicy: LlmPolicy): HostOpenClawConfig {
  const byId: HostOpenClawConfig["plugins"]["entries"] = {};
  for (const { pluginId, config, hooks } of entries) byId[pluginId] = { enabled: true, ...(config !== undefined ? { config } : {}), ...(hooks ? { hooks: { ...hooks } } : {}), llm: llmPolicy };
  return {
    plugins: { entries: byId },
    ...(model ? { agents: { defaults: { model: { primary: `${CODEX_LLM_PROVIDER}/${model}` } } } } : {}),
  };
}

/** One plugin to load, with its configuration (`api.pluginConfig`). */
export interface OpenClawPluginSpec {
  /** A plugin directory, entry file or bare engine module, or an installed package name; `#engine-id` picks its engine. */
  spec: string;
  /** The plugin's configuration, checked against its schema. */
  config?: unknown;
  /** Take the context engine from this plugin (its only engine, or the one named like its manifest id). */
  engine?: boolean | undefined;
  /**
   * OpenClaw's `plugins.entries.<id>.hooks`: `allowConversationAccess: false` refuses the plugin's conversation hooks
   * (`llm_input`, `llm_output`, `before_agent_finalize`, `agent_end`, ...), `allowPromptInjection: false` its
   * prompt-changing ones (`before_prompt_build`, `before_agent_start`). Both default to allowed here: the caller chose
   * the plugin (OpenClaw refuses conversation hooks of non-bundled plugins unless allowed).
   */
  hooks?: PluginHookPolicy | undefined;
}

/** Options of {@link loadOpenClawPlugins}: those of {@link loadContextEngine} (configuration is per plugin) and the engine choice. */
export interface LoadOpenClawPluginsOptions extends Omit<LoadContextEngineOptions, "pluginConfig"> {
  /**
   * The context engine's id (OpenClaw's `plugins.slots.contextEngine`). Default: the engine of the plugin marked
   * `engine: true` or named with `#engine-id`, else the only engine any plugin registered, else none (turns then run
   * without an engine, OpenClaw's legacy engine). Several candidates without a choice is `UNKNOWN_ENGINE_ID`.
   */
  contextEngine?: string | undefined;
  /**
   * Configurations by plugin id (OpenClaw's `plugins.entries.<id>.config`), for plugins given without `config`. An id
   * no loaded plugin has is `CONFIG_INVALID` (a misspelt id would otherwise leave a plugin unconfigured).
   */
  pluginConfigs?: Readonly<Record<string, unknown>> | undefined;
  /**
   * An OpenClaw config (e.g. the contents of `openclaw.json`, parsed); its `plugins` section is used:
   * `plugins.entries.<id>.config` and `.hooks` for the loaded plugins (entries of plugins not loaded are ignored; a
   * loaded plugin with `enabled: false` is `CONFIG_INVALID`), `plugins.slots.contextEngine` for the engine ("legacy":
   * none). A plugin's own `config`/`hooks`, `pluginConfigs`, `contextEngine` and a spec asking for the engine
   * (`engine: true`, `#engine-id`) take precedence.
   */
  openClawConfig?: unknown;
}

const openClawConfigSchema = z.looseObject({
  plugins: z
    .looseObject({
      entries: z
        .record(
          z.string(),
          z.looseObject({
            enabled: z.boolean().optional(),
            config: z.unknown().optional(),
            hooks: z.looseObject({ allowConversationAccess: z.boolean().optional(), allowPromptInjection: z.boolean().optional() }).optional(),
          }),
        )
        .optional(),
      slots: z.looseObject({ contextEngine: z.string().min(1).optional() }).optional(),
    })
    .optional(),
});

type OpenClawEntries = NonNullable<NonNullable<z.infer<typeof openClawConfigSchema>["plugins"]>["entries"]>;

/** The `plugins` section of an OpenClaw config; `CONFIG_INVALID` naming the field when it has the wrong shape. */
function openClawPlugins(config: unknown, specs: string): { entries: OpenClawEntries; contextEngine?: string | undefined } {
  if (config === undefined) return { entries: {} };
  const parsed = openClawConfigSchema.safeParse(config);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new PluginLoadError("CONFIG_INVALID", specs, `openClawConfig.${issue.path.join(".") || "(config)"}: ${issue.message}`);
  }
  const slot = parsed.data.plugins?.slots?.contextEngine;
  return { entries: parsed.data.plugins?.entries ?? {}, ...(slot !== undefined ? { contextEngine: slot } : {}) };
}

/** What {@link loadOpenClawPlugins} returns: {@link LoadedContextEngine} for several plugins, the engine optional. */
export interface LoadedOpenClawPlugins extends Omit<LoadedContextEngine, "engine"> {
  engine: ContextEngine | undefined;
  /** The loaded plugins' ids, in load order (a bare engine module has none). */
  pluginIds: string[];
  /** Tools and commands dropped because an earlier plugin registered the name (OpenClaw: "plugin tool name conflict"). */
  conflicts: Array<{ pluginId: string; tool?: string | undefined; command?: string | undefined }>;
  /** Hook registrations a plugin's hook policy refused. */
  blockedHooks: ReadonlyArray<{ pluginId: string; hook: string; reason: string }>;
}

/** One imported spec: an OpenClaw plugin (registered later) or a bare engine module. */
interface ImportedPlugin {
  input: OpenClawPluginSpec;
  requestedEngine: string | undefined;
  located: LocatedPlugin;
  shape: PluginEntryShape | EngineModuleShape;
  pluginId: string | undefined;
  config: unknown;
  /** The hook policy: the spec's, else the OpenClaw config entry's. */
  hooks?: PluginHookPolicy | undefined;
}

async function importPlugin(input: OpenClawPluginSpec, opts: LoadOpenClawPluginsOptions, entries: OpenClawEntries): Promise<ImportedPlugin> {
  const { target, engineId } = parsePluginSpec(input.spec);
  const located = await locatePlugin(target, opts.cwd, input.spec);
  opts.signal?.throwIfAborted();
  const mod = await importEntry(located, input.spec);
  const shape = classifyEntry(mod, located.manifest !== undefined || located.packageJson?.openclaw !== undefined);
  if (!shape) throw new PluginLoadError("ENTRY_INVALID", input.spec, `${located.entry} exports no plugin (register) and no engine`);
  if (shape.kind === "engine") return { input, requestedEngine: engineId, located, shape, pluginId: undefined, config: undefined };
  const pluginId = located.manifest?.id ?? shape.id ?? located.packageJson?.name ?? path.basename(located.rootDir);
  const entry = Object.hasOwn(entries, pluginId) ? entries[pluginId] : undefined;
  if (entry?.enabled === false) throw new PluginLoadError("CONFIG_INVALID", input.spec, `plugin ${pluginId} is disabled in the OpenClaw config (plugins.entries.${pluginId}.enabled = false)`);
  const byId = opts.pluginConfigs && Object.hasOwn(opts.pluginConfigs, pluginId) ? opts.pluginConfigs[pluginId] : entry?.config;
  const config = validatePluginConfig(input.spec, shape.configSchema, located.manifest?.configSchema, input.config !== undefined ? input.config : byId);
  const hooks = input.hooks ?? entry?.hooks;
  return { input, requestedEngine: engineId, located, shape, pluginId, config, ...(hooks ? { hooks } : {}) };
}

/** Call the plugin's `register(api)`; returns what it registered. */
async function registerPlugin(
  p: ImportedPlugin & { shape: PluginEntryShape; pluginId: string },
  hostConfig: HostOpenClawConfig,
  llm: CodexLlm,
  subagent: HostSubagentRuntime | undefined,
  logger: Logger,
  warnings: PluginWarningLog,
): Promise<PluginRegistry> {
  const registry = createPluginRegistry();
  const { located, shape, pluginId } = p;
  const version = located.manifest?.version ?? shape.version ?? located.packageJson?.version;
  const description = located.manifest?.description ?? shape.description;
  const api = createPluginApi({
    id: pluginId,
    name: located.manifest?.name ?? shape.name ?? pluginId,
    ...(version !== undefined ? { version } : {}),
    ...(description !== undefined ? { description } : {}),
    source: located.entry,
    rootDir: located.rootDir,
    ...(p.config !== undefined ? { pluginConfig: p.config as Record<string, unknown> } : {}),
    ...(p.hooks ? { hookPolicy: p.hooks } : {}),
    config: hostConfig,
    llm,
    ...(subagent ? { subagent } : {}),
    logger: logger.child({ pluginId }),
    reportWarning: (level, message) => warnings.report(pluginId, level, message),
    registry,
  });
  try {
    await shape.register(api);
  } catch (error) {
    throw new PluginLoadError("REGISTER_FAILED", p.input.spec, `register(api) threw: ${errorText(error)}`, { cause: error });
  }
  return registry;
}

/** Every plugin's tools, resolved plugin by plugin; a later plugin's tool of a taken name is dropped (OpenClaw's rule). */
function resolveAllTools(
  plugins: ReadonlyArray<{ spec: string; pluginId: string; registry: PluginRegistry }>,
  opts: LoadOpenClawPluginsOptions,
  hostConfig: HostOpenClawConfig,
  conflicts: LoadedOpenClawPlugins["conflicts"],
): PluginDynamicTool[] {
  const tools: PluginDynamicTool[] = [];
  const names = new Set<string>();
  for (const p of plugins) {
    let own: PluginDynamicTool[];
    try {
      own = resolvePluginTools(p.registry.tools, {
        config: hostConfig,
        workspaceDir: opts.cwd,
        ...(opts.sessionId !== undefined ? { sessionId: opts.sessionId } : {}),
        ...(opts.sessionKey !== undefined ? { sessionKey: opts.sessionKey } : {}),
      });
    } catch (error) {
      throw new PluginLoadError("REGISTER_FAILED", p.spec, errorText(error), { cause: error });
    }
    for (const tool of own) {
      if (names.has(tool.name)) {
        conflicts.push({ pluginId: p.pluginId, tool: tool.name });
        continue;
      }
      names.add(tool.name);
      tools.push(tool);
    }
  }
  return tools;
}

/**
 * The load's plugin warning log, and the SDK's loggers (`logging-core`) pointed at the host logger and the log. Those
 * loggers are bound to no plugin: their warnings are named after the loaded plugins, once known (`nameSdkLogs`).
 */
function startWarningLog(opts: LoadOpenClawPluginsOptions, logger: Logger): { warnings: PluginWarningLog; nameSdkLogs: (ids: string[]) => void } {
  const warnings = createPluginWarningLog(opts.onPluginWarning);
  let sdkLogId = "plugins";
  setSdkHostLogger(logger, (level, message) => warnings.report(sdkLogId, level, message));
  return { warnings, nameSdkLogs: (ids) => void (sdkLogId = ids.join("+") || "(engine module)") };
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
  const { pluginConfig, ...rest } = opts;
  const loaded = await loadOpenClawPlugins([{ spec, ...(pluginConfig !== undefined ? { config: pluginConfig } : {}), engine: true }], rest);
  const { engine, pluginIds: _ids, conflicts: _conflicts, blockedHooks: _blocked, ...result } = loaded;
  // `engine: true` made a plugin without one fail (NO_ENGINE) before anything started.
  return { ...result, engine: engine! };
}

/**
 * Load several OpenClaw plugins together, as OpenClaw runs them: a context engine (e.g. lossless-claw) beside memory
 * plugins (auto-recall through `before_agent_start` / `before_prompt_build`, auto-capture through `agent_end`), guard
 * plugins (`before_tool_call`) and tool plugins. Each plugin gets its own API and configuration (and sees every loaded
 * plugin's entry in `api.config`); plugins register in the given order; hooks of all plugins run by priority, then in
 * that order; a tool or command name taken by an earlier plugin is dropped from the later one (`conflicts`, and a
 * warning log). `close()` fires every plugin's `gateway_stop` (last loaded first), then disposes the engine.
 *
 * @example
 * ```ts
 * const loaded = await loadOpenClawPlugins(
 *   [{ spec: "@martian-engineering/lossless-claw", engine: true }, { spec: "./plugins/memory", config: { dbPath: "./mem.json" } }],
 *   { cwd: process.cwd(), appServer },
 * );
 * try {
 *   await runCodexTurn({ ...params, ...(loaded.engine ? { contextEngine: loaded.engine } : {}), dynamicTools: loaded.dynamicTools,
 *     hooks: loaded.hooks, runtimeContext: loaded.runtimeContext });
 * } finally {
 *   await loaded.close();
 * }
 * ```
 */
export async function loadOpenClawPlugins(plugins: readonly OpenClawPluginSpec[], opts: LoadOpenClawPluginsOptions): Promise<LoadedOpenClawPlugins> {
  const specs = plugins.map((p) => p.spec).join(", ");
  if (plugins.length === 0) throw new PluginLoadError("PLUGIN_NOT_FOUND", "(none)", "no plugin given");
  const logger = opts.logger ?? silentLogger;
  const policy = resolveLlmPolicy(plugins[0]!.spec, opts.llmPolicy);
  installOpenClawSdkResolver();
  const { warnings, nameSdkLogs } = startWarningLog(opts, logger);
  opts.signal?.throwIfAborted();
  const fromConfig = openClawPlugins(opts.openClawConfig, specs);
  // The config file's slot yields to an explicit choice: the option, or a spec asking for the engine.
  const asked = plugins.some((p) => p.engine === true || parsePluginSpec(p.spec).engineId !== undefined);
  const contextEngine = opts.contextEngine ?? (asked ? undefined : fromConfig.contextEngine);
  const imported: ImportedPlugin[] = [];
  for (const input of plugins) imported.push(await importPlugin(input, opts, fromConfig.entries));
  const asPlugins = imported.filter((p): p is ImportedPlugin & { shape: PluginEntryShape; pluginId: string } => p.shape.kind === "plugin");
  nameSdkLogs(asPlugins.map((p) => p.pluginId));
  const seen = new Set<string>();
  for (const p of asPlugins) {
    if (seen.has(p.pluginId)) throw new PluginLoadError("CONFIG_INVALID", p.input.spec, `plugin ${p.pluginId} is given twice`);
    seen.add(p.pluginId);
  }
  const stray = Object.keys(opts.pluginConfigs ?? {}).filter((id) => !seen.has(id));
  if (stray.length > 0) throw new PluginLoadError("CONFIG_INVALID", specs, `pluginConfigs names no loaded plugin: ${stray.join(", ")} (loaded: ${[...seen].join(", ") || "none"})`);
  const hostConfig = buildConfig(asPlugins.map((p) => ({ pluginId: p.pluginId, config: p.config, ...(p.hooks ? { hooks: p.hooks } : {}) })), opts.model, policy);
  // OpenClaw's slots as the plugins read them (lossless-claw's `/lcm status` reports whether it is the selected engine).
  const memoryPlugin = asPlugins.find((p) => [p.located.manifest?.kind, p.shape.pluginKind].flat().includes("memory"));
  hostConfig.plugins.slots = { ...(contextEngine !== undefined ? { contextEngine } : {}), ...(memoryPlugin ? { memory: memoryPlugin.pluginId } : {}) };
  const llmFor = (pluginId: string | undefined) => createCodexLlm({ ...(opts.appServer ? { appServer: opts.appServer } : {}), ...(opts.model ? { model: opts.model } : {}), ...(pluginId ? { pluginId } : {}), logger, policy });
  // Child runs use the loaded plugins' own wiring, which exists only once the load returns.
  let wiring: SubagentTurnWiring | undefined;
  const subagents = opts.appServer && asPlugins.length > 0
    ? createSubagentHost({
        appServer: opts.appServer,
        llm: llmFor(asPlugins[0]!.pluginId),
        cwd: opts.cwd,
        ...(opts.subagentSessionDir !== undefined ? { sessionDir: opts.subagentSessionDir } : {}), ...(opts.subagentStore ? { storeFor: opts.subagentStore } : {}),
        ...(opts.model ? { model: opts.model } : {}),
        policy,
        pluginId: asPlugins[0]!.pluginId,
        ...(opts.tokenBudget !== undefined ? { tokenBudget: opts.tokenBudget } : {}),
        logger,
        wiring: () => wiring,
      })
    : undefined;
  const registries = new Map<string, PluginRegistry>();
  for (const p of asPlugins) {
    registries.set(p.pluginId, await registerPlugin(p, hostConfig, llmFor(p.pluginId), subagents?.runtime, logger, warnings));
    opts.signal?.throwIfAborted();
  }
  const offers: EngineOffer[] = imported.map((p) => ({
    spec: p.input.spec,
    asked: p.input.engine === true,
    requestedEngine: p.requestedEngine,
    ...(p.shape.kind === "engine" ? { module: p.shape.create } : { pluginId: p.pluginId!, registry: registries.get(p.pluginId!)!, manifestId: p.located.manifest?.id }),
  }));
  const chosen = selectEngine(engineCandidates(offers, { config: hostConfig, workspaceDir: opts.cwd }), contextEngine, specs);
  hostConfig.plugins.slots.contextEngine = chosen?.engineId ?? (chosen ? undefined : "legacy");
  if (hostConfig.plugins.slots.contextEngine === undefined) delete hostConfig.plugins.slots.contextEngine;
  const engine = chosen ? await createEngine(chosen.create, chosen.spec, chosen.pluginId ? chosen.engineId : undefined) : undefined;
  try {
    if (engine) checkRequirements(engine, chosen!.spec, opts.appServer !== undefined);
    const runtimeContext: Record<string, unknown> = {
      provider: CODEX_LLM_PROVIDER,
      model: opts.model ?? CODEX_DEFAULT_MODEL,
      llm: llmFor(chosen?.pluginId ?? asPlugins[0]?.pluginId),
      ...(opts.tokenBudget !== undefined ? { tokenBudget: opts.tokenBudget } : {}),
    };
    const parts = asPlugins.map((p) => ({ spec: p.input.spec, pluginId: p.pluginId, registry: registries.get(p.pluginId)! }));
    const loaded = await assemblePlugins({ opts, logger, parts, hostConfig, engine, engineSpec: chosen, runtimeContext, warnings });
    wiring = { ...(engine ? { engine } : {}), dynamicTools: loaded.dynamicTools, hooks: loaded.hooks, runtimeContext };
    if (!subagents) return loaded;
    let closed: Promise<void> | undefined;
    // Child runs end before the plugins' gateway_stop and the engine's dispose.
    return { ...loaded, close: () => (closed ??= subagents.close().then(() => loaded.close())) };
  } catch (error) {
    await engine?.dispose?.().catch(() => undefined);
    await subagents?.close().catch(() => undefined);
    throw error;
  }
}

function approvalOptions(opts: LoadOpenClawPluginsOptions): { onPluginApproval?: PluginApprovalCallback | undefined; pluginApprovalTimeoutMs?: number | undefined } {
  return {
    ...(opts.onPluginApproval ? { onPluginApproval: opts.onPluginApproval } : {}),
    ...(opts.pluginApprovalTimeoutMs !== undefined ? { pluginApprovalTimeoutMs: opts.pluginApprovalTimeoutMs } : {}),
  };
}

async function assemblePlugins(p: {
  opts: LoadOpenClawPluginsOptions;
  logger: Logger;
  parts: ReadonlyArray<{ spec: string; pluginId: string; registry: PluginRegistry }>;
  hostConfig: HostOpenClawConfig;
  engine: ContextEngine | undefined;
  engineSpec: EngineCandidate | undefined;
  runtimeContext: Record<string, unknown>;
  warnings: PluginWarningLog;
}): Promise<LoadedOpenClawPlugins> {
  const { opts, parts, engine, logger } = p;
  const conflicts: LoadedOpenClawPlugins["conflicts"] = [];
  const dynamicTools = resolveAllTools(parts, opts, p.hostConfig, conflicts);
  const { registry, commandConflicts } = mergePluginRegistries(parts);
  conflicts.push(...commandConflicts);
  for (const c of conflicts) logger.warn({ event: "openclaw.plugin.conflict", pluginId: c.pluginId, ...(c.tool ? { tool: c.tool } : { command: c.command }) }, "plugin tool or command name conflict: the earlier plugin's is kept");
  const label = parts.map((x) => x.pluginId).join("+") || "(engine module)";
  const hookBase = () => ({
    modelProviderId: CODEX_LLM_PROVIDER,
    ...(opts.model ? { modelId: opts.model } : {}),
    ...(opts.tokenBudget !== undefined ? { contextTokenBudget: opts.tokenBudget } : {}),
    ...(opts.sessionKey !== undefined ? { sessionKey: opts.sessionKey } : {}),
    workspaceDir: opts.cwd,
  });
  const gatewayCtx = { config: p.hostConfig, workspaceDir: opts.cwd };
  const started: typeof parts[number][] = [];
  const stopAll = async () => {
    const failures: unknown[] = [];
    for (const part of [...started].reverse()) {
      await runPluginHook(part.registry, part.pluginId, "gateway_stop", { reason: "shutdown" }, gatewayCtx).catch((error: unknown) => failures.push(error));
    }
    return failures;
  };
  for (const part of parts) {
    try {
      await runPluginHook(part.registry, part.pluginId, "gateway_start", { port: 0 }, gatewayCtx);
      started.push(part);
    } catch (error) {
      await stopAll();
      throw new PluginLoadError("REGISTER_FAILED", part.spec, errorText(error), { cause: error });
    }
  }
  for (const part of parts) {
    logger.info(
      { event: "openclaw.plugin.loaded", pluginId: part.pluginId, ...(p.engineSpec?.pluginId === part.pluginId && engine ? { engineId: engine.info.id } : {}), toolRegistrations: part.registry.tools.length, hooks: part.registry.hooks.length, commands: part.registry.commands.length },
      "plugin loaded",
    );
  }
  let closed: Promise<void> | undefined;
  const close = async () => {
    const failures = await stopAll();
    await engine?.dispose?.();
    if (failures.length > 0) throw failures[0];
  };
  const enginePluginId = p.engineSpec?.pluginId;
  return {
    engine,
    dynamicTools,
    hooks: { ...createPluginTurnHooks(registry, label, hookBase, approvalOptions(opts)), takeWarnings: () => p.warnings.take() },
    runtimeContext: p.runtimeContext,
    commands: registry.commands.map(({ name, description }) => ({ name, ...(description !== undefined ? { description } : {}) })),
    findCommand: (line) => matchPluginCommand(registry.commands, line),
    runCommand: (line, session) => runPluginCommand(registry.commands, line, { config: p.hostConfig, session, runtimeContext: { llm: p.runtimeContext.llm } }),
    ...(enginePluginId !== undefined ? { pluginId: enginePluginId } : parts.length === 1 ? { pluginId: parts[0]!.pluginId } : {}),
    pluginIds: parts.map((x) => x.pluginId),
    conflicts,
    blockedHooks: registry.blockedHooks,
    recordedRegistrations: registry.recordedOnly,
    sessionStart: async (event) => void (await runPluginHook(registry, label, "session_start", event, { sessionId: event.sessionId, ...(event.sessionKey ? { sessionKey: event.sessionKey } : {}) })),
    sessionEnd: async (event) => void (await runPluginHook(registry, label, "session_end", event, { sessionId: event.sessionId, ...(event.sessionKey ? { sessionKey: event.sessionKey } : {}) })),
    beforeReset: async ({ sessionId, sessionKey, ...event }) =>
      void (await runPluginHook(registry, label, "before_reset", { messages: [], ...event }, { ...hookBase(), sessionId, ...(sessionKey ? { sessionKey } : {}) })),
    close: () => (closed ??= close()),
  };
}
