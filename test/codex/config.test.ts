import { describe, expect, it } from "vitest";
import {
  OFFLINE_KEY_ENV,
  buildModelCatalog,
  codexConfigArgs,
  encodeTomlValue,
  flattenCodexConfig,
  offlineCodexConfig,
} from "../../src/codex/config.js";
import { CodexAppServerError } from "../../src/codex/errors.js";

describe("TOML value encoding for -c overrides", () => {
  it("quotes strings with JSON-style escapes", () => {
    expect(encodeTomlValue("fake-model")).toBe('"fake-model"');
    expect(encodeTomlValue('a "quoted" \\ path\nline\ttab')).toBe('"a \\"quoted\\" \\\\ path\\nline\\ttab"');
    expect(encodeTomlValue("\u0001\u007f")).toBe('"\\u0001\\u007f"');
    expect(encodeTomlValue("ünïcödé ✓")).toBe('"ünïcödé ✓"');
  });

  it("writes numbers, booleans and bigints bare", () => {
    expect(encodeTomlValue(0)).toBe("0");
    expect(encodeTomlValue(5000)).toBe("5000");
    expect(encodeTomlValue(-1.5)).toBe("-1.5");
    expect(encodeTomlValue(true)).toBe("true");
    expect(encodeTomlValue(false)).toBe("false");
    expect(encodeTomlValue(10n)).toBe("10");
  });

  it("writes arrays and nested objects inline", () => {
    expect(encodeTomlValue(["a", 1, false])).toBe('["a", 1, false]');
    expect(encodeTomlValue({ "x-a.b": "1", plain: 2 })).toBe('{ "x-a.b" = "1", plain = 2 }');
    expect(encodeTomlValue({})).toBe("{}");
  });

  it("rejects values TOML cannot express", () => {
    for (const bad of [null, Number.NaN, Number.POSITIVE_INFINITY, () => 1, Symbol("s"), "\ud800"]) {
      expect(() => encodeTomlValue(bad)).toThrow(CodexAppServerError);
    }
  });
});

describe("flattening config records", () => {
  it("turns nested objects into dotted keys in insertion order and skips undefined", () => {
    expect(
      flattenCodexConfig({
        model: "m",
        features: { plugins: false, shell_snapshot: false },
        model_providers: { fakeresp: { base_url: "http://127.0.0.1:1/v1", request_max_retries: 0 } },
        skipped: undefined,
      }),
    ).toEqual([
      ["model", '"m"'],
      ["features.plugins", "false"],
      ["features.shell_snapshot", "false"],
      ["model_providers.fakeresp.base_url", '"http://127.0.0.1:1/v1"'],
      ["model_providers.fakeresp.request_max_retries", "0"],
    ]);
  });

  it("writes an object whose keys a dotted path cannot address as one inline table", () => {
    expect(flattenCodexConfig({ p: { http_headers: { "x-a.b": "1" } } })).toEqual([["p.http_headers", '{ "x-a.b" = "1" }']]);
  });

  it("rejects top-level keys codex cannot address", () => {
    expect(() => flattenCodexConfig({ "a.b": 1 })).toThrow(/cannot be addressed/);
  });

  it("produces -c argument pairs", () => {
    expect(codexConfigArgs({ model: "m", analytics: { enabled: false } })).toEqual(["-c", 'model="m"', "-c", "analytics.enabled=false"]);
  });
});

describe("offlineCodexConfig", () => {
  it("returns the hardened recipe, the key env and a one-model catalog", () => {
    const s = offlineCodexConfig({ baseUrl: "http://127.0.0.1:4010/v1/", autoCompactTokenLimit: 5000 });
    const flat = Object.fromEntries(flattenCodexConfig(s.config));
    expect(flat).toMatchObject({
      model: '"fake-model"',
      model_provider: '"fakeresp"',
      "model_providers.fakeresp.base_url": '"http://127.0.0.1:4010/v1"',
      "model_providers.fakeresp.wire_api": '"responses"',
      "model_providers.fakeresp.env_key": `"${OFFLINE_KEY_ENV}"`,
      "model_providers.fakeresp.request_max_retries": "0",
      "model_providers.fakeresp.stream_max_retries": "0",
      "features.plugins": "false",
      "features.shell_snapshot": "false",
      "features.unbounded_connection_retries": "false",
      "analytics.enabled": "false",
      check_for_update_on_startup: "false",
      "feedback.enabled": "false",
      "otel.exporter": '"none"',
      model_auto_compact_token_limit: "5000",
    });
    // Not "OpenAI": that name switches compaction to the remote protocol (P6).
    expect(flat["model_providers.fakeresp.name"]).not.toBe('"OpenAI"');
    expect(s.env).toEqual({ FAKE_RESPONSES_API_KEY: "sk-fake-local" });
    expect(s.modelCatalog?.models[0]).toMatchObject({ slug: "fake-model", context_window: 200_000 });
    expect(flat.model_catalog_json).toBeUndefined();
  });

  it("uses a given catalog path instead of generating one", () => {
    const s = offlineCodexConfig({ baseUrl: "http://localhost:1/v1", modelCatalogPath: "/abs/catalog.json" });
    expect(s.config.model_catalog_json).toBe("/abs/catalog.json");
    expect(s.modelCatalog).toBeUndefined();
  });

  it("refuses a base URL that is not on loopback", () => {
    expect(() => offlineCodexConfig({ baseUrl: "https://api.openai.com/v1" })).toThrow(/loopback/);
    expect(() => offlineCodexConfig({ baseUrl: "http://10.0.0.1/v1" })).toThrow(CodexAppServerError);
  });

  it("builds the same catalog for the same inputs (byte-identical)", () => {
    const a = JSON.stringify(buildModelCatalog({ slug: "m", baseInstructions: "b", contextWindow: 1000 }));
    const b = JSON.stringify(buildModelCatalog({ slug: "m", baseInstructions: "b", contextWindow: 1000 }));
    expect(a).toBe(b);
  });
});
