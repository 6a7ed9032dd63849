/**
 * Plugin configuration checked against the plugin's schema before `register(api)`: the entry's `configSchema` when it
 * can validate (`safeParse`, `parse` or `validate`, as OpenClaw's `OpenClawPluginConfigSchema`), else the manifest's
 * JSON Schema at the top level (`type: object`, `required`, `additionalProperties: false`, property primitive types).
 */
import { PluginLoadError, errorText } from "./errors.js";

type Issue = { path?: Array<string | number> | undefined; message?: string | undefined };

function firstIssue(issues: unknown): string {
  const issue = (Array.isArray(issues) ? issues[0] : undefined) as Issue | undefined;
  const field = issue?.path && issue.path.length > 0 ? issue.path.join(".") : "(config)";
  return `${field}: ${issue?.message ?? "invalid"}`;
}

const JSON_TYPES: Record<string, (v: unknown) => boolean> = {
  string: (v) => typeof v === "string",
  number: (v) => typeof v === "number" && Number.isFinite(v),
  integer: (v) => Number.isInteger(v),
  boolean: (v) => typeof v === "boolean",
  object: (v) => typeof v === "object" && v !== null && !Array.isArray(v),
  array: (v) => Array.isArray(v),
};

/** Top-level JSON Schema checks; returns the first problem or undefined. */
export function checkJsonSchemaTopLevel(schema: Record<string, unknown>, value: unknown): string | undefined {
  const config = value ?? {};
  if (!JSON_TYPES.object!(config)) return "(config): must be an object";
  const record = config as Record<string, unknown>;
  const properties = (JSON_TYPES.object!(schema.properties) ? schema.properties : {}) as Record<string, { type?: unknown }>;
  for (const key of Array.isArray(schema.required) ? schema.required.map(String) : []) {
    if (!(key in record)) return `${key}: is required`;
  }
  for (const [key, v] of Object.entries(record)) {
    const prop = properties[key];
    if (!prop) {
      if (schema.additionalProperties === false) return `${key}: is not a known option`;
      continue;
    }
    const types = Array.isArray(prop.type) ? prop.type.map(String) : typeof prop.type === "string" ? [prop.type] : [];
    if (types.length > 0 && !types.some((t) => JSON_TYPES[t]?.(v) ?? true)) return `${key}: must be ${types.join(" or ")}`;
  }
  return undefined;
}

/**
 * Validate `pluginConfig`; returns the (possibly parsed) config. Throws `CONFIG_INVALID` naming the field.
 *
 * @example
 * ```ts
 * validatePluginConfig("summarizer", plugin.configSchema, manifest.configSchema, { keepLast: 4 });
 * ```
 */
export function validatePluginConfig(spec: string, entrySchema: unknown, manifestSchema: unknown, config: unknown): unknown {
  const s = entrySchema as { safeParse?: unknown; parse?: unknown; validate?: unknown; jsonSchema?: unknown } | undefined;
  const fail = (detail: string): never => {
    throw new PluginLoadError("CONFIG_INVALID", spec, `config ${detail}`);
  };
  if (s && typeof s.safeParse === "function") {
    const r = (s.safeParse as (v: unknown) => { success: boolean; data?: unknown; error?: { issues?: unknown } | undefined })(config);
    if (!r.success) fail(firstIssue(r.error?.issues));
    return r.data ?? config;
  }
  if (s && typeof s.parse === "function") {
    try {
      return (s.parse as (v: unknown) => unknown)(config);
    } catch (error) {
      return fail(errorText(error));
    }
  }
  if (s && typeof s.validate === "function") {
    const r = (s.validate as (v: unknown) => { ok?: boolean | undefined; errors?: unknown; value?: unknown })(config);
    if (r && r.ok === false) fail(Array.isArray(r.errors) ? r.errors.map(String).join("; ") : "is invalid");
    return r && "value" in r && r.value !== undefined ? r.value : config;
  }
  const json = (s && typeof s.jsonSchema === "object" ? s.jsonSchema : manifestSchema) as Record<string, unknown> | undefined;
  if (json && typeof json === "object") {
    const problem = checkJsonSchemaTopLevel(json, config);
    if (problem) fail(problem);
  }
  return config;
}
