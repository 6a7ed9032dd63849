import { writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadContextEngine, PluginLoadError, type LoadedContextEngine } from "../../src/openclaw/index.js";
import { nativeImport } from "../../src/openclaw/sdk-resolver.js";
import { fixture, loadError, installFixturesAsPackages, resetSummarizerRecord, scriptedAppServer, summarizerRecord } from "./helpers.js";
import { testTempDir } from "../helpers/temp-dir.js";

const cwd = process.cwd();
let loaded: LoadedContextEngine | undefined;

beforeEach(() => resetSummarizerRecord());
afterEach(async () => {
  await loaded?.close();
  loaded = undefined;
});

describe("loadContextEngine: OpenClaw plugins", () => {
  it("loads the full plugin object by path: engine, tool, command, hooks, runtime context", async () => {
    const { server } = scriptedAppServer();
    loaded = await loadContextEngine(fixture("summarizer"), { cwd, appServer: server, model: "gpt-test", tokenBudget: 900 });
    expect(loaded.pluginId).toBe("summarizer");
    expect(loaded.engine.info.id).toBe("summarizer");
    expect(loaded.dynamicTools.map((t) => t.name)).toEqual(["summary_status"]);
    expect(loaded.dynamicTools[0]!.inputSchema).toEqual({ type: "object", properties: {}, additionalProperties: false });
    expect(await loaded.dynamicTools[0]!.handler({}, { callId: "c1" })).toBe("summaries=0 call=c1 workspace=yes session=none");
    expect(loaded.commands).toEqual([{ name: "summary", description: "Show the summarizer's state" }]);
    expect(loaded.recordedRegistrations.get("registerService")).toBe(1);
    expect(Object.keys(loaded.hooks).sort()).toEqual(
      ["afterCompaction", "afterToolCall", "agentEnd", "beforeAgentFinalize", "beforeCompaction", "beforePromptBuild", "beforeToolCall", "beforeToolCallFailure", "llmInput", "llmOutput", "takeWarnings"].sort(),
    );
    // OpenClaw's before_tool_call is fail-closed.
    expect(loaded.hooks.beforeToolCallFailure).toBe("block");
    expect(loaded.runtimeContext).toMatchObject({ provider: "codex", model: "gpt-test", tokenBudget: 900 });
    expect(typeof (loaded.runtimeContext.llm as { complete?: unknown }).complete).toBe("function");
    const rec = summarizerRecord();
    expect(rec.registeredWith).toMatchObject({ id: "summarizer", registrationMode: "full", version: "2026.9.6", source: path.join(fixture("summarizer"), "index.js") });
    expect(rec.hooks.map((h) => h.name)).toEqual(["gateway_start"]);
  });

  it("resolves openclaw/plugin-sdk/core for the plugin (assemble calls buildMemorySystemPromptAddition)", async () => {
    loaded = await loadContextEngine(fixture("summarizer"), { cwd, appServer: scriptedAppServer().server });
    const out = await loaded.engine.assemble({ sessionId: "s", messages: [] });
    expect(out).toMatchObject({ messages: [], estimatedTokens: 0, contextProjection: { mode: "thread_bootstrap", epoch: "summarizer-0" } });
  });

  it("backs runtime.llm.complete with an ephemeral, tool-less, read-only Codex thread", async () => {
    const scripted = scriptedAppServer("they talked about cats");
    loaded = await loadContextEngine(fixture("summarizer"), { cwd, appServer: scripted.server, pluginConfig: { keepMessages: 1, tokenBudget: 40 } });
    const message = (text: string) => ({ role: "user", content: text.repeat(20), timestamp: 0 });
    await loaded.engine.afterTurn!({ sessionId: "s", sessionFile: "f", messages: [message("cats "), message("more cats ")], prePromptMessageCount: 0 });
    expect(scripted.threads).toHaveLength(1);
    expect(scripted.threads[0]).toMatchObject({ ephemeral: true, sandbox: "read-only", approvalPolicy: "never" });
    expect(scripted.threads[0]!.dynamicTools).toBeUndefined();
    expect(String(scripted.threads[0]!.developerInstructions)).toContain("You write short summaries of conversations.");
    expect(String(scripted.turns[0]!.text)).toContain("Summarize this conversation");
    expect(summarizerRecord().completions).toEqual([{ sessionId: "s", provider: "fakeresp", model: "fake-model", chars: "they talked about cats".length }]);
    const assembled = await loaded.engine.assemble({ sessionId: "s", messages: [] });
    expect(assembled.messages[0]).toMatchObject({ content: "Summary of the earlier conversation: they talked about cats" });
  });

  it("shows the plugin the llm policy it applies (plugins.entries.<id>.llm), and enforces it in runtime.llm.complete", async () => {
    const scripted = scriptedAppServer();
    loaded = await loadContextEngine(fixture("summarizer"), { cwd, appServer: scripted.server });
    const entry = (c: unknown) => (c as { plugins: { entries: Record<string, { llm?: unknown }> } }).plugins.entries["summarizer"];
    // Default: any model (what lossless-claw checks before using its summaryModel).
    expect(entry(summarizerRecord().registeredWith?.config)?.llm).toEqual({ allowModelOverride: true, allowedModels: ["*"] });
    await loaded.close();
    resetSummarizerRecord();
    loaded = await loadContextEngine(fixture("summarizer"), { cwd, appServer: scripted.server, model: "gpt-host", llmPolicy: { allowedModels: ["codex/gpt-small"] } });
    expect(entry(summarizerRecord().registeredWith?.config)?.llm).toEqual({ allowModelOverride: true, allowedModels: ["codex/gpt-small"] });
    const llm = loaded.runtimeContext.llm as { complete(r: unknown): Promise<{ text: string }> };
    const ask = (model?: string) => llm.complete({ messages: [{ role: "user", content: "hi" }], ...(model ? { model } : {}) });
    await expect(ask("codex/gpt-large")).rejects.toThrow(
      "runtime.llm.complete: model codex/gpt-large is not in allowedModels (codex/gpt-small) (the host's plugins.entries.summarizer.llm policy)",
    );
    expect(scripted.threads).toHaveLength(0); // refused before any Codex thread
    await ask("codex/gpt-small");
    await ask(); // the host's own model is never an override
    await ask("codex/gpt-host");
    expect(scripted.threads.map((t) => t.model)).toEqual(["gpt-small", "gpt-host", "gpt-host"]);
    await loaded.close();
    loaded = await loadContextEngine(fixture("summarizer"), { cwd, appServer: scripted.server, llmPolicy: { allowModelOverride: false } });
    await expect((loaded.runtimeContext.llm as typeof llm).complete({ messages: [{ role: "user", content: "hi" }], model: "o3" })).rejects.toThrow(
      "model overrides are not allowed (allowModelOverride is false; asked for o3)",
    );
    // A malformed policy is refused before the plugin is imported, naming the field.
    const bad = await loadError(loadContextEngine(fixture("summarizer"), { cwd, appServer: scripted.server, llmPolicy: { allowedModels: "*" } as never }));
    expect(bad.code).toBe("CONFIG_INVALID");
    expect(bad.message).toMatch(/^plugin .*summarizer: llmPolicy\.allowedModels: /);
  });

  it("loads `export default function register(api)` by path", async () => {
    loaded = await loadContextEngine(fixture("register-only"), { cwd });
    expect(loaded.engine.info).toMatchObject({ id: "register-only", turnMaintenanceMode: "background" });
    expect(loaded.pluginId).toBe("register-only");
    expect(loaded.dynamicTools).toEqual([]);
    // No turn hooks: only the plugin warning channel every load has.
    expect(Object.keys(loaded.hooks)).toEqual(["takeWarnings"]);
  });

  it("loads installed packages by name, with and without #engine-id", async () => {
    const dir = await installFixturesAsPackages([
      { fixture: "register-only", packageName: "ctm-register-only-plugin" },
      { fixture: "summarizer", packageName: "@ctm-test/summarizer" },
    ]);
    const nested = path.join(dir, "work", "sub");
    loaded = await loadContextEngine("ctm-register-only-plugin", { cwd: dir });
    expect(loaded.engine.info.id).toBe("register-only");
    await loaded.close();
    loaded = await loadContextEngine("@ctm-test/summarizer#summarizer", { cwd: nested, appServer: scriptedAppServer().server });
    expect(loaded.engine.info.id).toBe("summarizer");
    expect(summarizerRecord().registeredWith?.source).toBe(path.join(dir, "node_modules", "@ctm-test", "summarizer", "index.js"));
  });

  it("close() fires gateway_stop, then disposes the engine, once", async () => {
    loaded = await loadContextEngine(fixture("summarizer"), { cwd, appServer: scriptedAppServer().server });
    await Promise.all([loaded.close(), loaded.close()]);
    expect(summarizerRecord().hooks.map((h) => h.name)).toEqual(["gateway_start", "gateway_stop"]);
    expect(summarizerRecord().disposed).toBe(1);
  });

  it("fires session_end and before_reset on request", async () => {
    loaded = await loadContextEngine(fixture("summarizer"), { cwd, appServer: scriptedAppServer().server });
    await loaded.sessionEnd({ sessionId: "s1", messageCount: 3, reason: "shutdown" });
    await loaded.beforeReset({ sessionId: "s1", reason: "reset" });
    expect(summarizerRecord().hooks.slice(1)).toEqual([
      { name: "session_end", sessionId: "s1" },
      { name: "before_reset", sessionId: "s1" },
    ]);
  });
});

describe("loadContextEngine: one-line typed errors", () => {
  it("bad manifest: MANIFEST_INVALID naming the file and field", async () => {
    const error = await loadError(loadContextEngine(fixture("bad-manifest"), { cwd }));
    expect(error.code).toBe("MANIFEST_INVALID");
    expect(error.message).toMatch(/openclaw\.plugin\.json: id /);
  });

  it("a requirement the host cannot meet: REQUIREMENT_UNMET with the engine's own guidance; the engine is disposed", async () => {
    const error = await loadError(loadContextEngine(fixture("unmet-requirement"), { cwd }));
    expect(error.code).toBe("REQUIREMENT_UNMET");
    expect(error.message).toContain("agent-run needs gpu-embeddings: Run it on a host with GPU embeddings.");
    expect(error.message).not.toContain("assemble-before-prompt");
    // The plugin's own module instance (Node's loader, as the host imported it), not a test-runner copy.
    const mod = (await nativeImport(pathToFileURL(path.join(fixture("unmet-requirement"), "index.js")).href)) as { disposedCount(): number };
    expect(mod.disposedCount()).toBe(1);
  });

  it("runtime-llm-complete is unmet without an app-server", async () => {
    const error = await loadError(loadContextEngine(fixture("summarizer"), { cwd }));
    expect(error.code).toBe("REQUIREMENT_UNMET");
    expect(error.message).toContain("runtime-llm-complete (no Codex app-server was given to the loader)");
    expect(error.message).not.toContain("subagent-projection");
  });

  it("unknown engine id, missing plugin, bad config", async () => {
    const server = scriptedAppServer().server;
    expect((await loadError(loadContextEngine(`${fixture("summarizer")}#other`, { cwd, appServer: server }))).code).toBe("UNKNOWN_ENGINE_ID");
    const missing = await loadError(loadContextEngine("ctm-no-such-plugin", { cwd: os.tmpdir() }));
    expect(missing.code).toBe("PLUGIN_NOT_FOUND");
    const bad = await loadError(loadContextEngine(fixture("summarizer"), { cwd, appServer: server, pluginConfig: { keepMessages: -1 } }));
    expect(bad.code).toBe("CONFIG_INVALID");
    expect(bad.message).toContain("keepMessages: must be a positive integer");
  });

  it("a register(api) that throws, and a module that is neither plugin nor engine", async () => {
    const dir = await testTempDir("ctm-openclaw-bad-");
    await writeFile(path.join(dir, "throws.mjs"), `export default function register(api) { throw new Error("database locked"); }\n`);
    await writeFile(path.join(dir, "nothing.mjs"), `export const x = 1;\n`);
    await writeFile(path.join(dir, "not-engine.mjs"), `export default { hello: "world" };\n`);
    const thrown = await loadError(loadContextEngine(path.join(dir, "throws.mjs"), { cwd }));
    expect([thrown.code, thrown.message]).toEqual(["REGISTER_FAILED", `plugin ${path.join(dir, "throws.mjs")}: register(api) threw: database locked`]);
    expect((await loadError(loadContextEngine(path.join(dir, "nothing.mjs"), { cwd }))).code).toBe("ENTRY_INVALID");
    // A Node built-in this Node lacks (lossless-claw's node:sqlite on Node 20): the error says it is the Node.
    await writeFile(path.join(dir, "needs-builtin.mjs"), `import { x } from "node:ctm-missing-builtin";\nexport default function register(api) {}\n`);
    const builtin = await loadError(loadContextEngine(path.join(dir, "needs-builtin.mjs"), { cwd }));
    expect(builtin.code).toBe("IMPORT_FAILED");
    expect(builtin.message).toContain("node:ctm-missing-builtin");
    expect(builtin.message).toContain(`(Node ${process.version} lacks this built-in module: the plugin needs a newer Node; OpenClaw runs on Node 24)`);
    const notEngine = await loadError(loadContextEngine(path.join(dir, "not-engine.mjs"), { cwd }));
    expect(notEngine.code).toBe("ENGINE_INVALID");
    expect(notEngine.message).toContain("not a context engine: context engine does not satisfy the contract: info is missing");
  });
});

describe("loadContextEngine: bare engine modules keep working", () => {
  const engineSource = `{ info: { id: "bare", name: "Bare" }, async ingest() { return { ingested: true }; }, async assemble({ messages }) { return { messages, estimatedTokens: 0 }; }, async compact() { return { ok: true, compacted: false }; } }`;

  it.each([
    ["createContextEngine()", `export function createContextEngine() { return ${engineSource}; }`],
    ["a default engine object", `export default ${engineSource};`],
    ["a default factory", `export default async function make() { return ${engineSource}; }`],
  ])("%s", async (_label, source) => {
    const dir = await testTempDir("ctm-openclaw-bare-");
    await writeFile(path.join(dir, "engine.mjs"), source);
    loaded = await loadContextEngine("engine.mjs", { cwd: dir });
    expect(loaded.engine.info.id).toBe("bare");
    expect(loaded.pluginId).toBeUndefined();
    expect(loaded.runtimeContext).toMatchObject({ provider: "codex", model: "default" });
  });
});
