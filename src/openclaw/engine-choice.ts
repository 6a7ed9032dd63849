/**
 * Which context engine a set of loaded plugins runs with (OpenClaw's `plugins.slots.contextEngine`): the engines each
 * loaded spec offers, and the choice among them (an id, the spec asked for, the only one, or none).
 */
import type { HostOpenClawConfig } from "./api.js";
import { PluginLoadError } from "./errors.js";
import type { PluginRegistry } from "./registry.js";

/** The slot value naming OpenClaw's built-in engine (no plugin engine). */
export const LEGACY_ENGINE_ID = "legacy";

/** What one loaded spec offers: a registered plugin (its registry) or a bare engine module. */
export type EngineOffer = {
  spec: string;
  /** Given with `engine: true`. */
  asked: boolean;
  /** The spec's `#engine-id`. */
  requestedEngine: string | undefined;
} & ({ pluginId: string; registry: PluginRegistry; manifestId: string | undefined } | { module: () => unknown });

/** A context engine some loaded spec offers: a plugin's registration or a bare engine module. */
export interface EngineCandidate {
  spec: string;
  pluginId: string | undefined;
  engineId: string | undefined;
  create: () => unknown;
  /** The spec asked for this engine (`#engine-id`, or `engine: true` and it is that plugin's engine). */
  requested: boolean;
}

/**
 * The engines the offers make. A plugin asked for (`engine: true`) must offer one: its only engine, or the one named
 * like its manifest id; `#engine-id` must name a registered engine. Each failure is a `PluginLoadError` naming the spec.
 *
 * @example
 * ```ts
 * engineCandidates([{ spec: "./p", asked: true, requestedEngine: undefined, pluginId: "p", registry, manifestId: "p" }], ctx);
 * ```
 */
export function engineCandidates(offers: readonly EngineOffer[], factoryCtx: { config: HostOpenClawConfig; workspaceDir: string }): EngineCandidate[] {
  const out: EngineCandidate[] = [];
  for (const o of offers) {
    if ("module" in o) {
      out.push({ spec: o.spec, pluginId: undefined, engineId: o.requestedEngine, create: o.module, requested: o.asked || o.requestedEngine !== undefined });
      continue;
    }
    const ids = [...o.registry.engines.keys()];
    if (o.requestedEngine !== undefined && !o.registry.engines.has(o.requestedEngine)) {
      if (ids.length === 0) throw new PluginLoadError("NO_ENGINE", o.spec, "register(api) registered no context engine");
      throw new PluginLoadError("UNKNOWN_ENGINE_ID", o.spec, `no engine ${o.requestedEngine}; registered: ${ids.join(", ")}`);
    }
    // A plugin asked for with several engines offers the one named like its manifest id.
    const own = ids.length === 1 ? ids[0] : o.manifestId !== undefined && o.registry.engines.has(o.manifestId) ? o.manifestId : undefined;
    for (const id of ids) {
      const requested = o.requestedEngine !== undefined ? id === o.requestedEngine : o.asked && id === own;
      out.push({ spec: o.spec, pluginId: o.pluginId, engineId: id, create: () => o.registry.engines.get(id)!(factoryCtx), requested });
    }
    if (o.asked && o.requestedEngine === undefined && own === undefined) {
      if (ids.length === 0) throw new PluginLoadError("NO_ENGINE", o.spec, "register(api) registered no context engine");
      throw new PluginLoadError("UNKNOWN_ENGINE_ID", o.spec, `registers ${ids.length} engines (${ids.join(", ")}); pick one with ${o.spec}#<engine-id>`);
    }
  }
  return out;
}

/**
 * The engine the turns run with: none for `contextEngine` "legacy", the one with id `contextEngine` when given, else the one a spec asked for, else the
 * only candidate, else none (undefined). Several candidates and no choice is `UNKNOWN_ENGINE_ID`, naming them.
 *
 * @example
 * ```ts
 * selectEngine(candidates, undefined, "./a, ./b")?.engineId;
 * ```
 */
export function selectEngine(candidates: readonly EngineCandidate[], contextEngine: string | undefined, specs: string): EngineCandidate | undefined {
  // OpenClaw's "legacy" slot value is its built-in engine: no plugin engine.
  if (contextEngine === LEGACY_ENGINE_ID) return undefined;
  if (contextEngine !== undefined) {
    const match = candidates.filter((c) => c.engineId === contextEngine);
    if (match.length === 1) return match[0];
    const known = candidates.map((c) => c.engineId).filter((id) => id !== undefined);
    throw new PluginLoadError("UNKNOWN_ENGINE_ID", specs, match.length === 0 ? `no engine ${contextEngine}; registered: ${known.join(", ") || "none"}` : `engine ${contextEngine} is registered by several plugins`);
  }
  const requested = candidates.filter((c) => c.requested);
  if (requested.length === 1) return requested[0];
  if (requested.length > 1) throw new PluginLoadError("UNKNOWN_ENGINE_ID", specs, `several plugins were asked for the engine (${requested.map((c) => c.spec).join(", ")}); ask one`);
  if (candidates.length <= 1) return candidates[0];
  const names = candidates.map((c) => `${c.pluginId ?? c.spec}#${c.engineId ?? "(module)"}`);
  throw new PluginLoadError("UNKNOWN_ENGINE_ID", specs, `${candidates.length} context engines registered (${names.join(", ")}); pick one with contextEngine or <spec>#<engine-id>`);
}
