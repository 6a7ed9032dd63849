import { describe, expect, it } from "vitest";
import { offlineCodexConfig } from "../../src/codex/config.js";
import { mergeCodexConfig } from "../../src/testing/offline-codex.js";

describe("mergeCodexConfig (startOfflineCodex's config overrides)", () => {
  it("keeps the offline hardening when an override touches the same table", () => {
    const base = offlineCodexConfig({ baseUrl: "http://127.0.0.1:9/v1" }).config;
    const merged = mergeCodexConfig(base, { features: { unified_exec: false }, tools: { update_plan: { enabled: true } } });
    expect(merged.features).toEqual({ plugins: false, shell_snapshot: false, unbounded_connection_retries: false, unified_exec: false });
    expect(merged.tools).toEqual({ update_plan: { enabled: true } });
    expect(merged.model_providers).toEqual(base.model_providers);
  });

  it("lets scalars and arrays replace, and changes neither input", () => {
    const base = { a: { b: 1, c: [1, 2] }, d: "x" };
    const override = { a: { c: [3] }, d: { e: true } };
    expect(mergeCodexConfig(base, override)).toEqual({ a: { b: 1, c: [3] }, d: { e: true } });
    expect(base).toEqual({ a: { b: 1, c: [1, 2] }, d: "x" });
    expect(override).toEqual({ a: { c: [3] }, d: { e: true } });
  });
});
