/**
 * The OpenClaw plugin API object handed to `register(api)`: identity (`id`, `name`, `source`, `rootDir`,
 * `registrationMode: "full"`), configuration (`config`, `pluginConfig`), `runtime` (`version`, `config.current()`,
 * `logging`, `llm`, and `subagent` when the host has a Codex app-server), `logger`, `resolvePath`, and the registration methods this host implements
 * (`registerContextEngine`, `registerTool`, `registerCommand`, `on`, `session.controls.registerSessionAction`). Other
 * registration methods OpenClaw offers are accepted and recorded, so a plugin that also registers, say, a service
 * still loads; they are listed in the loaded result and logged.
 */
import path from "node:path";
import type { Logger } from "pino";
import type { CodexLlm } from "./llm.js";
import type { HostSubagentRuntime } from "./subagent.js";
import { hookPolicyRefusal, type ContextEngineFactory, type PluginHookHandler, type PluginHookPolicy, type PluginRegistry } from "./registry.js";
import { toSdkLogger, type SdkLogger, type SdkWarningReport } from "./sdk/index.js";

/** The OpenClaw plugin-API version this host implements (the `openclaw` release its types are checked against). */
export const OPENCLAW_PLUGIN_API_VERSION = "2026.9.6";

/** OpenClaw's `config` as this host builds it: the plugin's entry (its config and llm policy), and the model when known. */
export type HostOpenClawConfig = Record<string, unknown> & {
  plugins: {
    entries: Record<string, { enabled: boolean; config?: unknown; hooks?: PluginHookPolicy | undefined; llm?: { allowModelOverride: boolean; allowedModels: string[] } | undefined }>;
    /** OpenClaw's slots: `contextEngine` (the engine the turns run with, "legacy" for none), `memory` (a memory plugin). */
    slots?: { contextEngine?: string | undefined; memory?: string | undefined } | undefined;
  };
};

/** The runtime helpers plugins use. */
export interface HostPluginRuntime {
  version: string;
  config: { current: () => HostOpenClawConfig; loadConfig: () => HostOpenClawConfig };
  logging: { getChildLogger: (bindings?: Record<string, unknown>) => SdkLogger; shouldLogVerbose: () => boolean };
  llm: CodexLlm;
  /** Delegated runs on child sessions (`src/openclaw/subagent.ts`); absent without an app-server, as plugins detect. */
  subagent?: HostSubagentRuntime | undefined;
}

/** The plugin API surface this host implements (checked against OpenClaw's `OpenClawPluginApi` in test/openclaw). */
export interface HostPluginApi {
  id: string;
  name: string;
  version?: string | undefined;
  description?: string | undefined;
  source: string;
  rootDir: string;
  registrationMode: "full";
  config: HostOpenClawConfig;
  pluginConfig?: Record<string, unknown> | undefined;
  runtime: HostPluginRuntime;
  logger: SdkLogger;
  resolvePath: (input: string) => string;
  registerContextEngine: (id: string, factory: ContextEngineFactory) => void;
  registerTool: (tool: unknown, opts?: { name?: string | undefined; names?: string[] | undefined; optional?: boolean | undefined }) => void;
  registerCommand: (command: { name?: string | undefined; description?: string | undefined; [key: string]: unknown }) => void;
  on: (hookName: string, handler: PluginHookHandler, opts?: { priority?: number | undefined; timeoutMs?: number | undefined }) => void;
  session: { controls: { registerSessionAction: (action: unknown) => void } };
  registerSessionAction: (action: unknown) => void;
  [method: string]: unknown;
}

/** Registration methods accepted and recorded without effect here (OpenClaw gateway features this host lacks). */
const RECORDED_ONLY = [
  "registerHook",
  "registerService",
  "registerCli",
  "registerHttpRoute",
  "registerGatewayMethod",
  "registerInteractiveHandler",
  "registerRuntimeLifecycle",
  "registerAgentEventSubscription",
  "registerToolMetadata",
  "registerMemoryPromptSupplement",
  "registerMemoryCorpusSupplement",
  "registerProvider",
  "registerChannel",
] as const;

export interface CreatePluginApiOptions {
  id: string;
  /** OpenClaw's `plugins.entries.<id>.hooks`: which hooks the plugin may register. */
  hookPolicy?: PluginHookPolicy | undefined;
  name: string;
  version?: string | undefined;
  description?: string | undefined;
  /** The entry file the plugin was loaded from. */
  source: string;
  rootDir: string;
  pluginConfig?: Record<string, unknown> | undefined;
  config: HostOpenClawConfig;
  llm: CodexLlm;
  subagent?: HostSubagentRuntime | undefined;
  logger: Logger;
  /** Where the plugin's logger warnings and errors are reported beside the log (`./plugin-warnings.ts`). */
  reportWarning?: SdkWarningReport | undefined;
  registry: PluginRegistry;
}

/**
 * Build the API object for one plugin; its registration methods write into `opts.registry`.
 *
 * @example
 * ```ts
 * const registry = createPluginRegistry();
 * plugin.register(createPluginApi({ id, name, source, rootDir, config, llm, logger, registry }));
 * registry.engines.keys();
 * ```
 */
export function createPluginApi(opts: CreatePluginApiOptions): HostPluginApi {
  const { registry, logger } = opts;
  const sdkLogger = toSdkLogger(logger, opts.reportWarning);
  let order = 0;
  const record = (method: string) => {
    registry.recordedOnly.set(method, (registry.recordedOnly.get(method) ?? 0) + 1);
    logger.debug({ event: "openclaw.plugin.registration.recorded", pluginId: opts.id, method }, "registration recorded only");
  };
  const registerSessionAction = () => record("registerSessionAction");
  const api: HostPluginApi = {
    id: opts.id,
    name: opts.name,
    ...(opts.version !== undefined ? { version: opts.version } : {}),
    ...(opts.description !== undefined ? { description: opts.description } : {}),
    source: opts.source,
    rootDir: opts.rootDir,
    registrationMode: "full",
    config: opts.config,
    ...(opts.pluginConfig !== undefined ? { pluginConfig: opts.pluginConfig } : {}),
    runtime: {
      version: OPENCLAW_PLUGIN_API_VERSION,
      config: { current: () => opts.config, loadConfig: () => opts.config },
      logging: {
        getChildLogger: (bindings) => toSdkLogger(logger.child(bindings ?? {}), opts.reportWarning),
        shouldLogVerbose: () => logger.isLevelEnabled("debug"),
      },
      llm: opts.llm,
      ...(opts.subagent ? { subagent: opts.subagent } : {}),
    },
    logger: sdkLogger,
    resolvePath: (input) => path.resolve(opts.rootDir, input),
    registerContextEngine(id, factory) {
      if (typeof id !== "string" || id === "") throw new TypeError("registerContextEngine: id must be a non-empty string");
      if (typeof factory !== "function") throw new TypeError(`registerContextEngine(${id}): factory must be a function`);
      registry.engines.set(id, factory);
    },
    registerTool(tool, toolOpts) {
      if (tool === null || (typeof tool !== "object" && typeof tool !== "function")) {
        throw new TypeError("registerTool: expected a tool object or a tool factory");
      }
      registry.tools.push({ tool, ...(toolOpts ? { opts: toolOpts } : {}) });
    },
    registerCommand(command) {
      const name = typeof command?.name === "string" ? command.name : undefined;
      if (!name) throw new TypeError("registerCommand: command.name must be a non-empty string");
      registry.commands.push({ name, ...(typeof command.description === "string" ? { description: command.description } : {}), definition: command });
    },
    on(hookName, handler, hookOpts) {
      if (typeof handler !== "function") throw new TypeError(`on(${String(hookName)}): handler must be a function`);
      // As OpenClaw: a refused hook is not registered (the plugin loads; the refusal is logged and listed).
      const refusal = hookPolicyRefusal(opts.id, hookName, opts.hookPolicy);
      if (refusal) {
        registry.blockedHooks.push({ pluginId: opts.id, hook: hookName, reason: refusal });
        logger.warn({ event: "openclaw.plugin.hook.blocked", pluginId: opts.id, hook: hookName }, `typed hook "${hookName}" ${refusal}`);
        return;
      }
      const timeoutMs = typeof hookOpts?.timeoutMs === "number" && Number.isFinite(hookOpts.timeoutMs) && hookOpts.timeoutMs > 0 ? hookOpts.timeoutMs : undefined;
      registry.hooks.push({ name: hookName, handler, priority: hookOpts?.priority ?? 0, order: order++, pluginId: opts.id, ...(timeoutMs !== undefined ? { timeoutMs } : {}) });
    },
    session: { controls: { registerSessionAction } },
    registerSessionAction,
  };
  for (const method of RECORDED_ONLY) api[method] = () => record(method);
  return api;
}
