/**
 * The plugin host type-checks against OpenClaw's published plugin-sdk types (openclaw 2026.9.6), without network and
 * without installing `openclaw` (a 644 MB, 329-package tree that needs Node >= 24.16): the declaration files reachable
 * from `openclaw/plugin-sdk/core` and `/agent-harness-runtime` are vendored from the pinned tarball (integrity and
 * per-file SHA-256 in the manifest; re-vendor with `vendor-sdk-types.ts`), extracted to a temp directory, and a
 * conformance module is compiled against them with the TypeScript compiler API. A control module with a deliberate
 * mismatch must fail, proving the declarations resolved (an unresolved type would be `any` and pass anything).
 */
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const VENDOR = path.join(REPO, "test/fixtures/openclaw-plugins/sdk-types");
const src = (p: string) => JSON.stringify(path.join(REPO, "src", p));

/** Ours must satisfy theirs, member by member; their engines must satisfy our contract. */
const CONFORMANCE = `
import type { OpenClawPluginApi, PluginRuntime, PluginLogger } from "./openclaw/dist/plugin-sdk/core.js";
import type { HarnessContextEngine } from "./openclaw/dist/plugin-sdk/agent-harness-runtime.js";
import type * as TheirCore from "./openclaw/dist/plugin-sdk/core.js";
import type { HostPluginApi } from ${src("openclaw/api.js")};
import type { ContextEngine, ContextEngineLlm } from ${src("context-engine/types.js")};
import type * as OurCore from ${src("openclaw/sdk/core.js")};
import type { RewriteTranscriptEntries } from ${src("context-engine/transcript-rewriter.js")};
import { createDurableTurnsEngine } from ${JSON.stringify(path.join(REPO, "test/fixtures/openclaw-plugins/durable-turns/index.js"))};

type NotAny<T> = 0 extends 1 & T ? never : T;
export const apiIsTyped: NotAny<OpenClawPluginApi> = {} as OpenClawPluginApi;
export const engineIsTyped: NotAny<HarnessContextEngine> = {} as HarnessContextEngine;

type Implemented = "id" | "name" | "version" | "description" | "source" | "rootDir" | "registrationMode" | "pluginConfig"
  | "resolvePath" | "registerContextEngine" | "registerTool" | "registerCommand" | "on";
export const api: Pick<OpenClawPluginApi, Implemented> = {} as HostPluginApi;
export const logger: PluginLogger = {} as HostPluginApi["logger"];
export const llm: PluginRuntime["llm"]["complete"] = {} as HostPluginApi["runtime"]["llm"]["complete"];
export const version: PluginRuntime["version"] = {} as HostPluginApi["runtime"]["version"];
export const childLogger: PluginRuntime["logging"]["getChildLogger"] = {} as HostPluginApi["runtime"]["logging"]["getChildLogger"];
type OurSubagent = NonNullable<HostPluginApi["runtime"]["subagent"]>;
export const subagentComplete: PluginRuntime["subagent"]["complete"] = {} as OurSubagent["complete"];
export const subagentRun: PluginRuntime["subagent"]["run"] = {} as OurSubagent["run"];
export const subagentWait: PluginRuntime["subagent"]["waitForRun"] = {} as OurSubagent["waitForRun"];
export const subagentMessages: PluginRuntime["subagent"]["getSessionMessages"] = {} as OurSubagent["getSessionMessages"];
export const subagentDelete: PluginRuntime["subagent"]["deleteSession"] = {} as OurSubagent["deleteSession"];

// An engine written to OpenClaw's ContextEngine type runs here: its info is ours (turnMaintenanceMode is a string,
// hostRequirements typed), every parameter the host passes is one the engine accepts, every result it returns is one
// the host reads. Messages are left out: pi-ai's message interfaces have no index signature and ours do (see
// docs/engines.md), so the two AgentMessage types are not mutually assignable although the runtime shapes agree.
type P<E, M extends keyof E> = E[M] extends ((p: infer A) => unknown) | undefined ? A : never;
type R<E, M extends keyof E> = E[M] extends ((...a: never[]) => Promise<infer T>) | undefined ? T : never;
type NoMsg<T> = Omit<T, "messages" | "message">;
type Theirs = HarnessContextEngine;
type Ours = ContextEngine;
export const info: Ours["info"] = {} as Theirs["info"];
export const assembleIn: NoMsg<P<Theirs, "assemble">> = {} as NoMsg<P<Ours, "assemble">>;
export const afterTurnIn: NoMsg<P<Theirs, "afterTurn">> = {} as NoMsg<P<Ours, "afterTurn">>;
export const maintainIn: P<Theirs, "maintain"> = {} as P<Ours, "maintain">;
export const bootstrapIn: P<Theirs, "bootstrap"> = {} as P<Ours, "bootstrap">;
export const ingestIn: NoMsg<P<Theirs, "ingest">> = {} as NoMsg<P<Ours, "ingest">>;
export const ingestBatchIn: NoMsg<P<Theirs, "ingestBatch">> = {} as NoMsg<P<Ours, "ingestBatch">>;
// OpenClaw requires sessionKey on compact; our hosts pass it when they have one (the CLI's --session-key).
export const compactIn: P<Theirs, "compact"> = {} as P<Ours, "compact"> & { sessionKey: string };
export const assembleOut: NoMsg<R<Ours, "assemble">> = {} as NoMsg<R<Theirs, "assemble">>;
export const compactOut: R<Ours, "compact"> = {} as R<Theirs, "compact">;
export const maintainOut: R<Ours, "maintain"> = {} as R<Theirs, "maintain">;
export const bootstrapOut: R<Ours, "bootstrap"> = {} as R<Theirs, "bootstrap">;
export const ingestOut: R<Ours, "ingest"> = {} as R<Theirs, "ingest">;
// Durable turns (OpenClaw 2026.8.1+): what we hand commitTurn is what theirs takes, what it answers is what we read.
export const commitTurnIn: NoMsg<P<Theirs, "commitTurn">> = {} as NoMsg<P<Ours, "commitTurn">>;
export const commitTurnOut: R<Ours, "commitTurn"> = {} as R<Theirs, "commitTurn">;
// The durable-turns test plugin (plain JavaScript, as published plugins are; types inferred) is an OpenClaw engine.
export const durableTurnsFixture: HarnessContextEngine = createDurableTurnsEngine({ ledgerPath: "ledger.jsonl" });
export const durableTurnsFixtureIsOurs: Ours = createDurableTurnsEngine({ ledgerPath: "ledger.jsonl" });
export const llmInContext: NonNullable<P<Theirs, "assemble">["runtimeContext"]>["llm"] = {} as ContextEngineLlm;
// The transcript rewrite helper we put in runtimeContext is OpenClaw's.
type TheirRewrite = NonNullable<NonNullable<P<Theirs, "maintain">["runtimeContext"]>["rewriteTranscriptEntries"]>;
export const rewriteHelper: TheirRewrite = {} as RewriteTranscriptEntries;
export const rewriteInContext: TheirRewrite = {} as NonNullable<NonNullable<P<Ours, "maintain">["runtimeContext"]>["rewriteTranscriptEntries"]>;

// Our openclaw/plugin-sdk/core helpers have OpenClaw's signatures.
export const build: typeof TheirCore.buildMemorySystemPromptAddition = {} as typeof OurCore.buildMemorySystemPromptAddition;
export const prepare: typeof TheirCore.prepareMemorySystemPromptAddition = {} as typeof OurCore.prepareMemorySystemPromptAddition;
export const delegate: typeof TheirCore.delegateCompactionToRuntime = {} as typeof OurCore.delegateCompactionToRuntime;
`;

/** Must NOT compile: registerContextEngine taking a number id. */
const CONTROL = `
import type { OpenClawPluginApi } from "./openclaw/dist/plugin-sdk/core.js";
import type { HarnessContextEngine } from "./openclaw/dist/plugin-sdk/agent-harness-runtime.js";
export const wrong: Pick<OpenClawPluginApi, "registerContextEngine"> = { registerContextEngine: (_id: number) => undefined };
export const wrongSemantics: HarnessContextEngine["info"] = { id: "x", name: "x", transcriptSemantics: { currentTurnFence: "before-current-turn-entry-v2" } };
`;

let dir: string;
let manifest: { version: string; integrity: string; sha256: Record<string, string> };

beforeAll(async () => {
  manifest = JSON.parse(await readFile(path.join(VENDOR, "manifest.json"), "utf8")) as typeof manifest;
  const files = JSON.parse(gunzipSync(await readFile(path.join(VENDOR, "openclaw-plugin-sdk.d.json.gz"))).toString("utf8")) as Record<string, string>;
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-openclaw-sdk-types-"));
  for (const [rel, text] of Object.entries(files)) {
    expect(createHash("sha256").update(text).digest("hex"), rel).toBe(manifest.sha256[rel]);
    const target = path.join(dir, "openclaw", rel);
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, text);
  }
  expect(Object.keys(files).sort()).toEqual(Object.keys(manifest.sha256).sort());
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** Compile both modules in one program (one pass over the declarations); diagnostics per file. */
async function compile(): Promise<Record<"conformance" | "control", string[]>> {
  const files = { conformance: path.join(dir, "conformance.ts"), control: path.join(dir, "control.ts") };
  await writeFile(files.conformance, CONFORMANCE);
  await writeFile(files.control, CONTROL);
  const program = ts.createProgram(Object.values(files), {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    // The durable-turns fixture is plain JavaScript: its types are inferred (its body is not checked).
    allowJs: true,
    types: ["node"],
    typeRoots: [path.join(REPO, "node_modules/@types")],
  });
  const diagnostics = (file: string) => {
    const sourceFile = program.getSourceFile(file)!;
    return [...program.getSyntacticDiagnostics(sourceFile), ...program.getSemanticDiagnostics(sourceFile)].map((d) =>
      ts.flattenDiagnosticMessageText(d.messageText, "\n"),
    );
  };
  return { conformance: diagnostics(files.conformance), control: diagnostics(files.control) };
}

describe("type conformance with OpenClaw's published plugin-sdk types", () => {
  it("vendors openclaw 2026.9.6 unchanged", () => {
    expect(manifest.version).toBe("2026.9.6");
    expect(manifest.integrity).toMatch(/^sha512-/);
  });

  it("our plugin API, runtime, SDK helpers and engine contract conform; a deliberate mismatch does not", async () => {
    const { conformance, control } = await compile();
    expect(conformance).toEqual([]);
    // The control proves the declarations resolved to real types (an unresolved type is any and passes anything).
    expect(control.join("\n")).toMatch(/not assignable/);
    expect(control.join("\n")).toMatch(/before-current-turn-entry-v2/);
  }, 180_000);
});
