import { pathToFileURL } from "node:url";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { RUNTIME_COMPACTION_NOT_DELEGATED } from "../../src/openclaw/sdk/index.js";
import { installOpenClawSdkResolver, installSdkHooks, nativeImport, sdkModuleUrls } from "../../src/openclaw/sdk-resolver.js";
import { testTempDir } from "../helpers/temp-dir.js";

describe("openclaw/plugin-sdk resolution", () => {
  it("serves every implemented subpath to a plugin imported through Node's loader", async () => {
    expect(installOpenClawSdkResolver()).toBe(typeof (await import("node:module") as { registerHooks?: unknown }).registerHooks === "function" ? "registerHooks" : "register");
    const dir = await testTempDir("ctm-sdk-");
    const entry = path.join(dir, "plugin.mjs");
    await writeFile(
      entry,
      [
        `import { buildMemorySystemPromptAddition, delegateCompactionToRuntime } from "openclaw/plugin-sdk/core";`,
        `import * as root from "openclaw/plugin-sdk";`,
        `import { createSubsystemLogger } from "openclaw/plugin-sdk/logging-core";`,
        `import { definePluginEntry, emptyPluginConfigSchema } from "openclaw/plugin-sdk/plugin-entry";`,
        `export const memory = buildMemorySystemPromptAddition({ availableTools: new Set(["x"]) });`,
        `export const delegated = await delegateCompactionToRuntime({ sessionId: "s" });`,
        `export const rootHasCore = typeof root.buildMemorySystemPromptAddition === "function";`,
        `createSubsystemLogger("fixture").info("hello", { n: 1 });`,
        `export const entry = definePluginEntry({ id: "p", name: "P", register() {} });`,
        `export const emptyOk = emptyPluginConfigSchema().safeParse({}).success && !emptyPluginConfigSchema().safeParse({ a: 1 }).success;`,
      ].join("\n"),
    );
    const mod = (await nativeImport(pathToFileURL(entry).href)) as Record<string, unknown>;
    expect(mod.memory).toBeUndefined();
    expect(mod.delegated).toEqual({ ok: true, compacted: false, reason: RUNTIME_COMPACTION_NOT_DELEGATED });
    expect(mod.rootHasCore).toBe(true);
    expect(mod.entry).toMatchObject({ id: "p", name: "P" });
    expect(mod.emptyOk).toBe(true);
  });

  it("an unimplemented subpath still fails to resolve, as without OpenClaw", async () => {
    const dir = await testTempDir("ctm-sdk-");
    const entry = path.join(dir, "plugin.mjs");
    await writeFile(entry, `import { x } from "openclaw/plugin-sdk/agent-sessions";\nexport const y = x;\n`);
    installOpenClawSdkResolver();
    await expect(nativeImport(pathToFileURL(entry).href)).rejects.toThrow(/openclaw/);
  });

  it("uses registerHooks (Node >= 22.15 / 24) when present, else register (Node 20)", () => {
    const urls = sdkModuleUrls();
    const calls: string[] = [];
    let resolve: ((s: string, c: unknown, n: (s: string, c: unknown) => { url: string }) => { url: string }) | undefined;
    const sync = installSdkHooks(
      {
        registerHooks: (hooks) => ((resolve = hooks.resolve), calls.push("registerHooks")),
        register: () => void calls.push("register"),
      },
      urls,
    );
    expect([sync, calls]).toEqual(["registerHooks", ["registerHooks"]]);
    expect(resolve!("openclaw/plugin-sdk/core", {}, () => ({ url: "next" })).url).toBe(urls["openclaw/plugin-sdk/core"]);
    expect(resolve!("left-pad", {}, () => ({ url: "next" })).url).toBe("next");
    let data: unknown;
    expect(installSdkHooks({ register: (_s, options) => void (data = options.data) }, urls)).toBe("register");
    expect(data).toEqual({ urls });
    expect(() => installSdkHooks({}, urls)).toThrow(/no module loader hooks/);
  });
});
