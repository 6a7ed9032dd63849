/**
 * What a plugin's `register(api)` registered: engine factories by id, tools, commands, hook handlers, and the names
 * of registrations this host records but does not run (services, CLI commands, HTTP routes, ...).
 */

/** OpenClaw's `ContextEngineFactory` context. */
export interface ContextEngineFactoryContext {
  config?: Record<string, unknown>;
  agentDir?: string;
  workspaceDir?: string;
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
}

/** One `api.registerTool(toolOrFactory, opts)` registration. */
export interface ToolRegistration {
  tool: unknown;
  opts?: { name?: string; names?: string[]; optional?: boolean };
}

/** A registered command, as the CLI may list it. */
export interface PluginCommandInfo {
  name: string;
  description?: string;
}

/** Everything one plugin registered. */
export interface PluginRegistry {
  engines: Map<string, ContextEngineFactory>;
  tools: ToolRegistration[];
  commands: Array<PluginCommandInfo & { definition: unknown }>;
  hooks: HookRegistration[];
  /** Registration methods the plugin called that this host accepts but does not act on, with counts. */
  recordedOnly: Map<string, number>;
}

/** An empty registry. */
export function createPluginRegistry(): PluginRegistry {
  return { engines: new Map(), tools: [], commands: [], hooks: [], recordedOnly: new Map() };
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
