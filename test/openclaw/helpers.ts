/** Shared helpers for the plugin-host tests: fixture paths, the fixture's record, a scripted app-server stand-in. */
import { cp, mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import type { CodexAppServer } from "../../src/codex/app-server.js";
import { PluginLoadError } from "../../src/openclaw/index.js";
import { testTempDir } from "../helpers/temp-dir.js";

export const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/openclaw-plugins");
export const fixture = (name: string) => path.join(FIXTURES, name);

/** What the summarizer fixture recorded (see its index.js). */
export interface SummarizerRecord {
  hooks: Array<{ name: string; sessionId?: string }>;
  completions: Array<{ sessionId: string; provider: string; model: string; chars: number }>;
  summaries: number;
  assembles: Array<{ sessionId: string; tokenBudget?: number; hasRuntimeContext: boolean }>;
  runtimeContexts: Array<{ provider?: string; model?: string; hasLlm: boolean }>;
  disposed: number;
  registeredWith?: { id: string; registrationMode: string; version: string; source: string; config: Record<string, unknown> };
}

const RECORD = Symbol.for("ctm.fixture.summarizer");

export function summarizerRecord(): SummarizerRecord {
  return (globalThis as Record<symbol, unknown>)[RECORD] as SummarizerRecord;
}

export function resetSummarizerRecord(): void {
  delete (globalThis as Record<symbol, unknown>)[RECORD];
}

/** A temp directory (removed when the test finishes) with the named fixtures installed as packages under `node_modules/<package name>`. */
export async function installFixturesAsPackages(entries: Array<{ fixture: string; packageName: string }>): Promise<string> {
  const dir = await testTempDir("ctm-openclaw-pkg-");
  for (const e of entries) {
    const target = path.join(dir, "node_modules", e.packageName);
    await mkdir(path.dirname(target), { recursive: true });
    await cp(fixture(e.fixture), target, { recursive: true });
  }
  return dir;
}

/** The requests a scripted app-server received. */
export interface ScriptedAppServer {
  server: CodexAppServer;
  threads: Array<Record<string, unknown>>;
  turns: Array<Record<string, unknown>>;
}

/** A unit-test stand-in for CodexAppServer's startThread/startTurn: every turn completes with `reply`. */
export function scriptedAppServer(reply = "a short summary", status: "completed" | "failed" = "completed"): ScriptedAppServer {
  const threads: Array<Record<string, unknown>> = [];
  const turns: Array<Record<string, unknown>> = [];
  const server = {
    async startThread(options: Record<string, unknown>) {
      threads.push(options);
      return { threadId: `thread-${threads.length}`, model: "fake-model", modelProvider: "fakeresp" };
    },
    async startTurn(options: Record<string, unknown>) {
      turns.push(options);
      const record = {
        threadId: options.threadId,
        turnId: `turn-${turns.length}`,
        codexStatus: status,
        assistantText: status === "completed" ? reply : "",
        messagesSnapshot: [],
        compactions: [],
        items: [],
        ...(status === "failed" ? { error: { message: "model overloaded" } } : {}),
      };
      return { threadId: options.threadId, turnId: record.turnId, completion: Promise.resolve(record), interrupt: async () => undefined, steer: async () => ({}), done: true };
    },
  };
  return { server: server as unknown as CodexAppServer, threads, turns };
}

/** The `PluginLoadError` a load rejects with (its message one line, as the CLI prints it). */
export async function loadError(promise: Promise<unknown>): Promise<PluginLoadError> {
  const caught = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(caught).toBeInstanceOf(PluginLoadError);
  const error = caught as PluginLoadError;
  expect(error.message).not.toContain("\n");
  return error;
}
