/**
 * What a plugin's `register(api)` registered: engine factories by id, tools, commands, hook handlers, and the names
 * of registrations this host records but does not run (services, CLI commands, HTTP routes, ...).
 */

/** OpenClaw's `ContextEngineFactory` context. */
export interface ContextEngineFactoryContext {
  config?: Record<string, unknown> | undefined;
  agentDir?: string | undefined;
  workspaceDir?: string | undefined;
}
/** An engine factory as plugins register it (may be async). */
export type ContextEngineFactory = (ctx: ContextEngineFactoryContext) => unknown;

/** A hook handler as plugins register it: `(event, ctx) => result`. */
export type PluginHookHandler = (event: never, ctx: never) => unknown;

/** One `api.on(name, handler, opts)` registration. */
export interface HookRegistration {
  name: string;
  handler: PluginHookHandler;
  priority: number;
  order: number;
  /** The plugin that registered it (named in hook failures when several plugins are loaded together). */
  pluginId?: string | undefined;
  /** The registration's own bound (`api.on(name, handler, { timeoutMs })`): a handler slower than this fails. */
  timeoutMs?: number | undefined;
}

/** One `api.registerTool(toolOrFactory, opts)` registration. */
export interface ToolRegistration {
  tool: unknown;
  opts?: { name?: string | undefined; names?: string[] | undefined; optional?: boolean | undefined } | undefined;
}

/** A registered command, as the CLI may list it. */
export interface PluginCommandInfo {
  name: string;
  description?: string | undefined;
}

/** Everything one plugin registered. */
export interface PluginRegistry {
  engines: Map<string, ContextEngineFactory>;
  tools: ToolRegistration[];
  commands: Array<PluginCommandInfo & { definition: unknown }>;
  hooks: HookRegistration[];
  /** Registration methods the plugin called that this host accepts but does not act on, with counts. */
  recordedOnly: Map<string, number>;
  /** Hook registrations the plugin's hook policy refused (OpenClaw's `plugins.entries.<id>.hooks`), with why. */
  blockedHooks: Array<{ pluginId: string; hook: string; reason: string }>;
}

/** An empty registry. */
export function createPluginRegistry(): PluginRegistry {
  return { engines: new Map(), tools: [], commands: [], hooks: [], recordedOnly: new Map(), blockedHooks: [] };
}

/**
 * The handlers registered for one hook, highest `priority` first, then in registration order (as OpenClaw runs them).
 *
 * @example
 * ```ts
 * for (const h of hookHandlers(registry, "agent_end")) await h.handler(event, ctx);
 * ```
 */
export function hookHandlers(registry: PluginRegistry, name: string): HookRegistration[] {
  return registry.hooks.filter((h) => h.name === name).sort((a, b) => b.priority - a.priority || a.order - b.order);
}

/**
 * Several plugins' registrations as one registry, as OpenClaw keeps them: hooks from every plugin in one list, run by
 * priority and then in load order (the first plugin's handlers before the second's at equal priority); commands in
 * load order, a later plugin's command of an already registered name dropped (returned in `commandConflicts`).
 * Engines and tools stay per plugin (the loader picks the engine and resolves tools plugin by plugin).
 *
 * @example
 * ```ts
 * const { registry } = mergePluginRegistries([{ pluginId: "a", registry: ra }, { pluginId: "b", registry: rb }]);
 * hookHandlers(registry, "agent_end"); // a's and b's handlers
 * ```
 */
export function mergePluginRegistries(parts: ReadonlyArray<{ pluginId: string; registry: PluginRegistry }>): {
  registry: PluginRegistry;
  commandConflicts: Array<{ pluginId: string; command: string }>;
} {
  const merged = createPluginRegistry();
  const commandConflicts: Array<{ pluginId: string; command: string }> = [];
  const commandNames = new Set<string>();
  let order = 0;
  for (const { pluginId, registry } of parts) {
    for (const hook of [...registry.hooks].sort((a, b) => a.order - b.order)) merged.hooks.push({ ...hook, pluginId, order: order++ });
    for (const command of registry.commands) {
      if (commandNames.has(command.name)) {
        commandConflicts.push({ pluginId, command: command.name });
        continue;
      }
      commandNames.add(command.name);
      merged.commands.push(command);
    }
    for (const [method, count] of registry.recordedOnly) merged.recordedOnly.set(method, (merged.recordedOnly.get(method) ?? 0) + count);
    merged.blockedHooks.push(...registry.blockedHooks);
  }
  return { registry: merged, commandConflicts };
}

/** OpenClaw's per-plugin hook policy (`plugins.entries.<id>.hooks`). */
export interface PluginHookPolicy {
  /** `false`: the plugin's conversation hooks (`llm_input`, `llm_output`, `before_agent_finalize`, `agent_end`, ...) are not registered. */
  allowConversationAccess?: boolean | undefined;
  /** `false`: the plugin's prompt-changing hooks (`before_prompt_build`, `before_agent_start`) are not registered. */
  allowPromptInjection?: boolean | undefined;
}

/** The hooks OpenClaw counts as raw conversation access. */
export const CONVERSATION_HOOKS: ReadonlySet<string> = new Set([
  "before_model_resolve",
  "before_agent_reply",
  "llm_input",
  "llm_output",
  "before_agent_finalize",
  "agent_end",
  "before_agent_run",
]);

/** The hooks that change what the model is prompted with. */
export const PROMPT_INJECTION_HOOKS: ReadonlySet<string> = new Set(["before_prompt_build", "before_agent_start"]);

/**
 * Why `policy` refuses a registration of `hook` by `pluginId`, or undefined when it may register.
 *
 * @example
 * ```ts
 * hookPolicyRefusal("mem", "agent_end", { allowConversationAccess: false }); // "blocked by plugins.entries.mem.hooks.allowConversationAccess=false"
 * ```
 */
export function hookPolicyRefusal(pluginId: string, hook: string, policy: PluginHookPolicy | undefined): string | undefined {
  if (policy?.allowConversationAccess === false && CONVERSATION_HOOKS.has(hook)) return `blocked by plugins.entries.${pluginId}.hooks.allowConversationAccess=false`;
  if (policy?.allowPromptInjection === false && PROMPT_INJECTION_HOOKS.has(hook)) return `blocked by plugins.entries.${pluginId}.hooks.allowPromptInjection=false`;
  return undefined;
}
