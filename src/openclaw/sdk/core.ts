/**
 * Our implementation of the `openclaw/plugin-sdk/core` helpers context-engine plugins call at run time. OpenClaw's own
 * versions talk to its gateway (memory plugins, the embedded runtime's compaction); this host has neither, so each
 * helper does the honest equivalent and says so.
 */
import type { CompactResult } from "../../context-engine/types.js";

/** What OpenClaw passes to the memory prompt helpers (tool names decide which memory guidance applies). */
export interface MemoryPromptSectionParams {
  availableTools: Set<string>;
  citationsMode?: string | undefined;
  [key: string]: unknown;
}

/**
 * The memory-supplement text OpenClaw appends for active memory plugins. This host runs no memory plugins, so there is
 * nothing to add: `undefined`, exactly what OpenClaw returns when none is active.
 *
 * @example
 * ```ts
 * buildMemorySystemPromptAddition({ availableTools: new Set() }); // undefined
 * ```
 */
export function buildMemorySystemPromptAddition(_params: MemoryPromptSectionParams): string | undefined {
  return undefined;
}

/**
 * Async variant of {@link buildMemorySystemPromptAddition}.
 *
 * @example
 * ```ts
 * await prepareMemorySystemPromptAddition({ availableTools: new Set() }); // undefined
 * ```
 */
export async function prepareMemorySystemPromptAddition(params: MemoryPromptSectionParams): Promise<string | undefined> {
  return buildMemorySystemPromptAddition(params);
}

/** The reason {@link delegateCompactionToRuntime} reports. */
export const RUNTIME_COMPACTION_NOT_DELEGATED =
  "codex-turn-machine runs the runtime's compaction itself (Codex native compaction); nothing was delegated";

/**
 * OpenClaw hands an engine's compaction back to its embedded runtime here. In this host the runtime's compaction is
 * Codex's own native compaction, which the turn host runs on its own schedule, so the call does not compact.
 *
 * @example
 * ```ts
 * await delegateCompactionToRuntime({ sessionId: "s1" }); // { ok: true, compacted: false, reason: "…" }
 * ```
 */
export async function delegateCompactionToRuntime(_params: Record<string, unknown>): Promise<CompactResult> {
  return { ok: true, compacted: false, reason: RUNTIME_COMPACTION_NOT_DELEGATED };
}

/** A plugin definition as `definePluginEntry` receives it. */
export interface PluginEntryDefinition {
  id: string;
  name: string;
  description?: string | undefined;
  configSchema?: unknown;
  register: (api: never) => void;
  [key: string]: unknown;
}

/**
 * Returns the plugin object unchanged, with an empty config schema when none is given (what OpenClaw's helper does
 * for loading purposes).
 *
 * @example
 * ```ts
 * export default definePluginEntry({ id: "x", name: "X", register(api) { api.registerContextEngine("x", factory); } });
 * ```
 */
export function definePluginEntry<T extends PluginEntryDefinition>(definition: T): T {
  return { ...definition, configSchema: definition.configSchema ?? emptyPluginConfigSchema() };
}

/** A config schema: `safeParse` like OpenClaw's, plus the JSON Schema it stands for. */
export interface PluginConfigSchemaLike {
  safeParse: (value: unknown) => { success: boolean; data?: unknown; error?: { issues: Array<{ path: Array<string | number>; message: string }> } | undefined };
  jsonSchema: Record<string, unknown>;
}

/**
 * A schema accepting only an absent or empty config object.
 *
 * @example
 * ```ts
 * emptyPluginConfigSchema().safeParse({}).success; // true
 * ```
 */
export function emptyPluginConfigSchema(): PluginConfigSchemaLike {
  return {
    jsonSchema: { type: "object", additionalProperties: false, properties: {} },
    safeParse(value: unknown) {
      const empty = value === undefined || (isRecord(value) && Object.keys(value).length === 0);
      return empty
        ? { success: true, data: value ?? {} }
        : { success: false, error: { issues: [{ path: [], message: "this plugin takes no configuration" }] } };
    },
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
