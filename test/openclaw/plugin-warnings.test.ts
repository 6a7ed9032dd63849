/**
 * A plugin's logger warnings and errors reach the host (src/openclaw/plugin-warnings.ts): through `api.logger`,
 * `runtime.logging.getChildLogger()` and the SDK's `logging-core`, each is handed to `onPluginWarning` as it happens
 * and, deduplicated, to the next turn through the loaded hooks' `takeWarnings` (joined to `result.warnings`).
 */
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadContextEngine, type PluginWarning } from "../../src/openclaw/index.js";
import { createPluginWarningLog, PLUGIN_WARNING_MAX_CHARS } from "../../src/openclaw/plugin-warnings.js";
import { testTempDir } from "../helpers/temp-dir.js";

const PLUGIN = `
import { createSubsystemLogger } from "openclaw/plugin-sdk/logging-core";
export default {
  id: "noisy", name: "Noisy",
  register(api) {
    const child = api.runtime.logging.getChildLogger({ part: "store" });
    const sdk = createSubsystemLogger("noisy-sdk");
    api.registerContextEngine("noisy", () => ({
      info: { id: "noisy", name: "Noisy" },
      async ingest() { return { ingested: true }; },
      async assemble({ messages }) {
        api.logger.info("assembled");
        api.logger.warn("[noisy] afterTurn: skipped persisting the turn");
        api.logger.warn("[noisy] afterTurn: skipped persisting the turn");
        child.error("store unavailable");
        sdk.warn("sdk says hello");
        return { messages, estimatedTokens: 0 };
      },
      async compact() { return { ok: true, compacted: false }; },
    }));
  },
};
`;

describe("plugin warnings", () => {
  it("every warn/error of a plugin's loggers reaches onPluginWarning and, once each, the next takeWarnings", async () => {
    const dir = await testTempDir("ctm-plugin-warnings-");
    await writeFile(path.join(dir, "package.json"), JSON.stringify({ name: "noisy", type: "module", openclaw: { extensions: ["./index.js"] } }));
    await writeFile(path.join(dir, "index.js"), PLUGIN);
    const seen: PluginWarning[] = [];
    const loaded = await loadContextEngine(dir, { cwd: dir, onPluginWarning: (w) => seen.push(w) });
    try {
      await loaded.engine.assemble({ sessionId: "s1", messages: [] });
      expect(seen).toEqual([
        { pluginId: "noisy", level: "warn", message: "[noisy] afterTurn: skipped persisting the turn" },
        { pluginId: "noisy", level: "warn", message: "[noisy] afterTurn: skipped persisting the turn" },
        { pluginId: "noisy", level: "error", message: "store unavailable" },
        { pluginId: "noisy", level: "warn", message: "sdk says hello" },
      ]);
      expect(loaded.hooks.takeWarnings?.()).toEqual([
        "plugin noisy: [noisy] afterTurn: skipped persisting the turn",
        "plugin noisy error: store unavailable",
        "plugin noisy: sdk says hello",
      ]);
      // Taken: the next turn gets only what is logged after.
      expect(loaded.hooks.takeWarnings?.()).toEqual([]);
    } finally {
      await loaded.close();
    }
  });

  it("caps a long message, holds a bounded number, and survives a throwing callback", () => {
    const log = createPluginWarningLog(() => {
      throw new Error("display broke");
    });
    log.report("p", "warn", "x".repeat(PLUGIN_WARNING_MAX_CHARS + 10));
    for (let i = 0; i < 60; i++) log.report("p", "warn", `w${i}`);
    const taken = log.take();
    expect(taken).toHaveLength(50);
    expect(taken.at(-1)).toBe("plugin p: w59");
    expect(taken[0]).toBe("plugin p: w10");
    const first = createPluginWarningLog();
    first.report("p", "error", new Error("e".repeat(PLUGIN_WARNING_MAX_CHARS + 1)));
    expect(first.take()[0]).toBe(`plugin p error: ${"e".repeat(PLUGIN_WARNING_MAX_CHARS)}…`);
  });
});
