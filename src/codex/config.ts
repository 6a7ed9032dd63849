/**
 * Codex `-c key=value` override encoding and the hardened offline configuration (see
 * the team notes' codex-app-server.md §1–§3): a custom Responses provider on loopback, no plugin sync, no login-shell
 * snapshot, no unbounded reconnects, no retries, analytics/feedback/otel off.
 */
import { z } from "zod";
import { CodexAppServerError, invalidArgument } from "./errors.js";

/** A value that can be written as a Codex config override. */
export type CodexConfigValue = string | number | boolean | bigint | CodexConfigValue[] | { [key: string]: CodexConfigValue | undefined };

/** Keys Codex's `-c` parser can address in a dotted path (it splits on "." and does not understand quoted keys). */
const PATH_SAFE_KEY = /^[A-Za-z0-9_-]+$/;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function encodeTomlString(value: string): string {
  if (LONE_SURROGATE.test(value)) {
    throw new CodexAppServerError("INVALID_ARGUMENT", "config string contains a lone UTF-16 surrogate (not representable in TOML)");
  }
  // JSON escapes are a subset of TOML basic-string escapes, except that TOML also forbids a raw DEL.
  return JSON.stringify(value).replace(/\u007f/g, "\\u007f");
}

function encodeTomlKey(key: string): string {
  return PATH_SAFE_KEY.test(key) ? key : encodeTomlString(key);
}

/**
 * Encode one value as TOML (strings quoted with JSON-style escapes, numbers/booleans bare, arrays and nested
 * objects inline). Throws INVALID_ARGUMENT for values TOML cannot express (null, NaN, Infinity).
 *
 * @example
 * ```ts
 * encodeTomlValue("a\"b"); // => "\"a\\\"b\""
 * encodeTomlValue([1, true]); // => "[1, true]"
 * ```
 */
export function encodeTomlValue(value: unknown, path = "(value)"): string {
  switch (typeof value) {
    case "string":
      return encodeTomlString(value);
    case "boolean":
      return value ? "true" : "false";
    case "bigint":
      return value.toString();
    case "number":
      if (!Number.isFinite(value)) {
        throw new CodexAppServerError("INVALID_ARGUMENT", `config value at \`${path}\` is not a finite number`);
      }
      return String(value);
    case "object": {
      if (value === null) {
        throw new CodexAppServerError("INVALID_ARGUMENT", `config value at \`${path}\` is null (TOML has no null)`);
      }
      if (Array.isArray(value)) {
        return `[${value.map((v, i) => encodeTomlValue(v, `${path}[${i}]`)).join(", ")}]`;
      }
      const parts: string[] = [];
      for (const [k, v] of Object.entries(value)) {
        if (v === undefined) continue;
        parts.push(`${encodeTomlKey(k)} = ${encodeTomlValue(v, `${path}.${k}`)}`);
      }
      return parts.length === 0 ? "{}" : `{ ${parts.join(", ")} }`;
    }
    default:
      throw new CodexAppServerError("INVALID_ARGUMENT", `config value at \`${path}\` has unsupported type ${typeof value}`);
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Flatten a nested config record into `[dottedKey, tomlValue]` pairs, in insertion order. Nested objects become
 * dotted keys; an object with a key Codex cannot address in a dotted path (e.g. an HTTP header containing ".") is
 * written as one inline table instead. `undefined` values are skipped.
 *
 * @example
 * ```ts
 * flattenCodexConfig({ features: { plugins: false }, model: "m" });
 * // => [["features.plugins", "false"], ["model", "\"m\""]]
 * ```
 */
export function flattenCodexConfig(config: Record<string, unknown>): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const walk = (prefix: string, obj: Record<string, unknown>): void => {
    for (const [key, value] of Object.entries(obj)) {
      if (value === undefined) continue;
      if (!PATH_SAFE_KEY.test(key)) {
        throw new CodexAppServerError(
          "INVALID_ARGUMENT",
          `config key \`${prefix}${key}\` cannot be addressed with -c (allowed: [A-Za-z0-9_-]); nest it in an object value`,
        );
      }
      const path = `${prefix}${key}`;
      if (isPlainObject(value) && Object.keys(value).length > 0 && Object.keys(value).every((k) => PATH_SAFE_KEY.test(k))) {
        walk(`${path}.`, value);
      } else {
        out.push([path, encodeTomlValue(value, path)]);
      }
    }
  };
  walk("", config);
  return out;
}

/**
 * Turn a config record into `codex` CLI arguments (`-c key=value` pairs).
 *
 * @example
 * ```ts
 * codexConfigArgs({ model: "fake-model" }); // => ["-c", "model=\"fake-model\""]
 * ```
 */
export function codexConfigArgs(config: Record<string, unknown>): string[] {
  return flattenCodexConfig(config).flatMap(([k, v]) => ["-c", `${k}=${v}`]);
}

// ---------------------------------------------------------------------------------------------------------------
// Offline configuration

/** The provider id used by {@link offlineCodexConfig}. Not "OpenAI": that name switches compaction to the remote protocol. */
export const OFFLINE_PROVIDER_ID = "fakeresp";
/** Environment variable that carries the fake API key. */
export const OFFLINE_KEY_ENV = "FAKE_RESPONSES_API_KEY";
export const OFFLINE_KEY_VALUE = "sk-fake-local";
export const OFFLINE_MODEL = "fake-model";
/** Small, stable base instructions written into the generated model catalog (first developer message). */
export const OFFLINE_BASE_INSTRUCTIONS = "You are a helpful assistant. Answer the user's request directly and briefly.";

const loopbackHosts = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

const offlineOptionsSchema = z
  .object({
    /** Base URL of the fake Responses API, e.g. `http://127.0.0.1:4010/v1` (codex POSTs to `${baseUrl}/responses`). */
    baseUrl: z
      .string()
      .url()
      .refine((u) => {
        const url = new URL(u);
        return url.protocol === "http:" && loopbackHosts.has(url.hostname);
      }, "baseUrl must be an http URL on loopback (127.0.0.1, localhost or ::1)"),
    model: z.string().min(1).default(OFFLINE_MODEL),
    /** Use an existing catalog file instead of generating one. */
    modelCatalogPath: z.string().min(1).optional(),
    /** Generate a one-model catalog (default true unless modelCatalogPath is given). */
    generateModelCatalog: z.boolean().optional(),
    baseInstructions: z.string().default(OFFLINE_BASE_INSTRUCTIONS),
    /** Catalog context window; Codex reports 95% of it as `modelContextWindow`. */
    contextWindow: z.number().int().positive().default(200_000),
    /**
     * What the catalog says the model accepts. With `"image"` Codex runs the model's `view_image` calls (the image goes
     * to the model as input); with text only it refuses them ("you do not support image inputs").
     */
    inputModalities: z.array(z.enum(["text", "image"])).min(1).default(["text"]),
    autoCompactTokenLimit: z.number().int().positive().optional(),
    /** Provider display name. Must not be "OpenAI" unless you want remote compaction. */
    providerName: z.string().min(1).default("Fake Responses"),
    /**
     * Drop built-in tools and bundled skills so requests are small (notes §3.3 V14): only client dynamic tools and
     * `request_user_input` remain. Off by default to match the verified recipe.
     */
    lean: z.boolean().default(false),
    /** `features.instant_interrupt` (steer abandons the in-flight response when true, the Codex default). */
    instantInterrupt: z.boolean().optional(),
  })
  .strict();

export type OfflineCodexConfigOptions = z.input<typeof offlineOptionsSchema>;

/** One entry of a Codex model catalog (the field set of `codex debug models --bundled`). */
export type ModelCatalogEntry = Record<string, unknown> & { slug: string; base_instructions: string; context_window: number };
export interface ModelCatalog {
  models: ModelCatalogEntry[];
}

/** What {@link offlineCodexConfig} returns; spread it into `CodexAppServer.spawn`. */
export interface OfflineCodexSettings {
  config: Record<string, unknown>;
  /** Environment the app-server needs (the provider key variable). */
  env: Record<string, string>;
  /** A generated catalog for spawn to write into CODEX_HOME (absent when `modelCatalogPath` was given). */
  modelCatalog?: ModelCatalog | undefined;
}

/**
 * A one-model catalog with the field set Codex 0.169.0 bundles, so an unknown slug gets no "model metadata not found"
 * warning and the first developer message is our short `baseInstructions` instead of the 17 KB stock prompt.
 *
 * @example
 * ```ts
 * const catalog = buildModelCatalog({ slug: "fake-model", baseInstructions: "Be brief.", contextWindow: 200_000 });
 * ```
 */
export function buildModelCatalog(opts: {
  slug: string;
  baseInstructions: string;
  contextWindow: number;
  /** Default `["text"]`. */
  inputModalities?: ReadonlyArray<"text" | "image"> | undefined;
}): ModelCatalog {
  const levels = ["low", "medium", "high"].map((effort) => ({ effort, description: `${effort} reasoning` }));
  return {
    models: [
      {
        slug: opts.slug,
        display_name: opts.slug,
        description: "Offline fake model served by a local fake Responses API.",
        default_reasoning_level: "low",
        supported_reasoning_levels: levels,
        shell_type: "unified_exec",
        visibility: "list",
        supported_in_api: true,
        priority: 1,
        additional_speed_tiers: [],
        service_tiers: [],
        availability_nux: null,
        upgrade: null,
        model_messages: null,
        include_skills_usage_instructions: false,
        include_plugin_usage_instructions: false,
        include_apps_usage_instructions: false,
        default_reasoning_summary: "none",
        support_verbosity: false,
        default_verbosity: "low",
        apply_patch_tool_type: "freeform",
        web_search_tool_type: "text_and_image",
        truncation_policy: { mode: "tokens", limit: 10000 },
        supports_image_detail_original: false,
        context_window: opts.contextWindow,
        max_context_window: opts.contextWindow,
        comp_hash: "0",
        effective_context_window_percent: 95,
        experimental_supported_tools: [],
        input_modalities: [...(opts.inputModalities ?? ["text"])],
        supports_search_tool: false,
        supports_experimental_context: false,
        use_responses_lite: false,
        supports_reasoning_effort_updates: false,
        node_repl_auto_review_required: false,
        node_repl_disabled: true,
        base_instructions: opts.baseInstructions,
      },
    ],
  };
}

/**
 * The hardened offline settings for running the real `codex app-server` against a fake Responses API on loopback.
 * Everything Codex might fetch from the internet is switched off; retries are 0 so scripted failures fail fast.
 *
 * @example
 * ```ts
 * const fake = await startFakeResponsesServer();
 * const server = await CodexAppServer.spawn({ ...offlineCodexConfig({ baseUrl: fake.baseUrl }) });
 * ```
 */
export function offlineCodexConfig(options: OfflineCodexConfigOptions): OfflineCodexSettings {
  const parsed = offlineOptionsSchema.safeParse(options);
  if (!parsed.success) invalidArgument("offlineCodexConfig options", parsed.error.issues);
  const o = parsed.data;
  const features: Record<string, unknown> = {
    plugins: false,
    shell_snapshot: false,
    unbounded_connection_retries: false,
  };
  if (o.instantInterrupt !== undefined) features.instant_interrupt = o.instantInterrupt;
  if (o.lean) {
    Object.assign(features, {
      goals: false,
      multi_agent: false,
      view_image: false,
      shell_tool: false,
      unified_exec: false,
    });
  }
  const config: Record<string, unknown> = {
    model: o.model,
    model_provider: OFFLINE_PROVIDER_ID,
    model_providers: {
      [OFFLINE_PROVIDER_ID]: {
        name: o.providerName,
        base_url: o.baseUrl.replace(/\/+$/, ""),
        wire_api: "responses",
        env_key: OFFLINE_KEY_ENV,
        request_max_retries: 0,
        stream_max_retries: 0,
      },
    },
    features,
    analytics: { enabled: false },
    check_for_update_on_startup: false,
    feedback: { enabled: false },
    otel: { exporter: "none", metrics_exporter: "none", trace_exporter: "none" },
  };
  if (o.lean) {
    config.skills = { bundled: { enabled: false } };
    config.web_search = "disabled";
  }
  if (o.autoCompactTokenLimit !== undefined) config.model_auto_compact_token_limit = o.autoCompactTokenLimit;
  const settings: OfflineCodexSettings = { config, env: { [OFFLINE_KEY_ENV]: OFFLINE_KEY_VALUE } };
  if (o.modelCatalogPath !== undefined) {
    config.model_catalog_json = o.modelCatalogPath;
  } else if (o.generateModelCatalog !== false) {
    settings.modelCatalog = buildModelCatalog({
      slug: o.model,
      baseInstructions: o.baseInstructions,
      contextWindow: o.contextWindow,
      inputModalities: o.inputModalities,
    });
  }
  return settings;
}
