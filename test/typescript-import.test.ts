/**
 * TypeScript engines (`--engine ./my-engine.ts`): Node's own type stripping where it has it (22.18+, 24, 26), tsx's
 * loader registered on an older Node (20), and a clear error naming both fixes when neither is there. The installed
 * package (no tsx, compiled CLI) is checked on each Node line by the consumer test (scripts/consumer-test.ts).
 */
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { loadContextEngine } from "../src/openclaw/index.js";
import { importModuleFile, typeScriptLoaderFor, TypeScriptImportError, type TypeScriptRuntime } from "../src/typescript-import.js";
import { runCli } from "./helpers/cli.js";
import { testTempDir } from "./helpers/temp-dir.js";

/** An engine in TypeScript that only type erasure makes JavaScript (what Node's stripping accepts). */
const ENGINE_TS = `import type { ContextEngine } from "codex-turn-machine";

interface Options { id: string }

export function createContextEngine(options: Options = { id: "ts-engine" }): ContextEngine {
  const engine = {
    info: { id: options.id, name: "TypeScript engine" },
    async ingest(): Promise<{ ingested: boolean }> {
      return { ingested: true };
    },
    async assemble({ messages }: { messages: unknown[] }) {
      return { messages, estimatedTokens: messages.length as number, systemPromptAddition: "TS-ENGINE-MARKER" };
    },
    async compact() {
      return { ok: true, compacted: false, reason: "nothing to compact" };
    },
  };
  return engine as unknown as ContextEngine;
}
`;

function runtime(over: Partial<TypeScriptRuntime>): TypeScriptRuntime {
  return { version: "v20.20.2", typescript: undefined, tsImport: async () => ({ via: "tsx" }), ...over };
}

describe("importModuleFile", () => {
  it("imports JavaScript and, where Node strips types, TypeScript with Node's own loader", async () => {
    const tsImport = vi.fn(async () => ({ via: "tsx" }));
    const native = vi.fn(async (url: string) => ({ via: "native", url }));
    expect(await importModuleFile("/x/engine.mjs", native, runtime({ tsImport }))).toEqual({ via: "native", url: "file:///x/engine.mjs" });
    expect(await importModuleFile("/x/engine.ts", native, runtime({ version: "v24.21.0", typescript: "strip", tsImport }))).toMatchObject({ via: "native" });
    expect(tsImport).not.toHaveBeenCalled();
    expect(typeScriptLoaderFor("/x/a.mts", { typescript: "transform" })).toBe("native");
    expect(typeScriptLoaderFor("/x/a.cjs", { typescript: undefined })).toBeUndefined();
  });

  it("uses tsx on a Node without stripping, and says what to do when tsx is not installed", async () => {
    const native = vi.fn(async () => ({ via: "native" }));
    const tsImport = vi.fn(async () => ({ via: "tsx" }));
    expect(await importModuleFile("/x/engine.ts", native, runtime({ tsImport }))).toEqual({ via: "tsx" });
    expect(tsImport).toHaveBeenCalledWith("file:///x/engine.ts");
    expect(native).not.toHaveBeenCalled();
    const missing = runtime({ tsImport: async () => Promise.reject(new TypeScriptImportError("file:///x/engine.ts", "v20.20.2")) });
    const err = await importModuleFile("/x/engine.ts", native, missing).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TypeScriptImportError);
    expect((err as Error).message).toContain("/x/engine.ts is TypeScript");
    expect((err as Error).message).toContain("Node v20.20.2");
    expect((err as Error).message).toContain("22.18");
    expect((err as Error).message).toContain("npm install tsx");
  });

  it(`loads a TypeScript engine file on this Node (${process.version}: ${typeof (process.features as { typescript?: unknown }).typescript === "string" ? "native stripping" : "tsx's loader"})`, async () => {
    const dir = await testTempDir("ctm-ts-engine-");
    const file = path.join(dir, "my-engine.ts");
    await writeFile(file, ENGINE_TS);
    const loaded = await loadContextEngine(file, { cwd: dir });
    try {
      expect(loaded.engine.info.id).toBe("ts-engine");
      const view = await loaded.engine.assemble({ sessionId: "s", messages: [], prompt: "hi" } as never);
      expect(view.estimatedTokens).toBe(0);
    } finally {
      await loaded.close();
    }
  });

  it("codex-turn run --engine my-engine.ts runs a turn with it", async () => {
    const dir = await testTempDir("ctm-ts-engine-cli-");
    const file = path.join(dir, "my-engine.ts");
    await writeFile(file, ENGINE_TS);
    const requests = path.join(dir, "requests.jsonl");
    const r = await runCli(["run", "hi", "--session", path.join(dir, "s.jsonl"), "--offline", "--offline-requests", requests, "--engine", file, "--json"]);
    expect(r.stderr).not.toContain("Unknown file extension");
    expect(r.code).toBe(0);
    const result = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { status: string };
    expect(result.status).toBe("completed");
    // The engine's assemble ran: its system prompt addition reached the model.
    expect(await readFile(requests, "utf8")).toContain("TS-ENGINE-MARKER");
  });
});
