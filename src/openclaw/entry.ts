/**
 * What a loaded entry module is: an OpenClaw plugin (`export default { id, name, configSchema, register(api) }`,
 * `export default function register(api)`, or a named `register` export), or a bare engine module (today's
 * `--engine` modules: `createContextEngine()`, or a default export that is an engine or a function returning one).
 */

/** An OpenClaw plugin entry. */
export interface PluginEntryShape {
  kind: "plugin";
  register: (api: unknown) => unknown;
  id?: string | undefined;
  name?: string | undefined;
  description?: string | undefined;
  version?: string | undefined;
  configSchema?: unknown;
  /** The plugin object's own `kind` (OpenClaw's plugin kinds: "memory", "context-engine", ...). */
  pluginKind?: string | string[] | undefined;
}

/** A bare engine module: `create()` yields the engine (maybe a promise). */
export interface EngineModuleShape {
  kind: "engine";
  create: () => unknown;
}

const str = (v: unknown) => (typeof v === "string" ? v : undefined);

function pluginFromObject(def: Record<string, unknown>): PluginEntryShape {
  return {
    kind: "plugin",
    register: (def.register as (api: unknown) => unknown).bind(def),
    ...(str(def.id) !== undefined ? { id: str(def.id) } : {}),
    ...(str(def.name) !== undefined ? { name: str(def.name) } : {}),
    ...(str(def.description) !== undefined ? { description: str(def.description) } : {}),
    ...(str(def.version) !== undefined ? { version: str(def.version) } : {}),
    ...(def.configSchema !== undefined ? { configSchema: def.configSchema } : {}),
    ...(typeof def.kind === "string" || (Array.isArray(def.kind) && def.kind.every((k) => typeof k === "string")) ? { pluginKind: def.kind as string | string[] } : {}),
  };
}

/**
 * Classify an imported entry module. `declaredPlugin` (a manifest was found) makes a default-exported function a
 * `register(api)`; without a manifest a function is `register` only when named so or when it takes a parameter,
 * else it is an engine factory. Returns undefined when the module exports nothing usable.
 *
 * @example
 * ```ts
 * classifyEntry({ default: { id: "x", register() {} } }, true); // { kind: "plugin", ... }
 * classifyEntry({ createContextEngine: () => engine }, false);  // { kind: "engine", ... }
 * ```
 */
export function classifyEntry(mod: Record<string, unknown>, declaredPlugin: boolean): PluginEntryShape | EngineModuleShape | undefined {
  const def = mod.default;
  if (typeof mod.createContextEngine === "function") {
    const create = mod.createContextEngine as () => unknown;
    return { kind: "engine", create: () => create() };
  }
  if (typeof def === "object" && def !== null) {
    const record = def as Record<string, unknown>;
    if (typeof record.register === "function") return pluginFromObject(record);
    if (typeof record.info === "object" && record.info !== null) return { kind: "engine", create: () => def };
  }
  if (typeof mod.register === "function") return pluginFromObject(mod);
  if (typeof def === "function") {
    const fn = def as (...args: unknown[]) => unknown;
    if (declaredPlugin || fn.name === "register" || fn.length >= 1) return { kind: "plugin", register: (api) => fn(api) };
    return { kind: "engine", create: () => fn() };
  }
  if (def !== undefined) return { kind: "engine", create: () => def };
  return undefined;
}
