/**
 * The engine actor's calls carry what OpenClaw passes: `citationsMode` (a turn parameter) on `assemble`, and the
 * session target (`sessionTarget`, also in the runtime context) with the store remembered under it, so that
 * `openclaw/plugin-sdk/session-transcript-runtime` finds the session.
 */
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import type { ContextEngine } from "../../../src/context-engine/types.js";
import { parseCodexTurnParams } from "../../../src/params.js";
import { findSessionStore, forgetSessionStores } from "../../../src/store/session-directory.js";
import { assembleContext } from "../../../src/turn/actors/engine.js";
import { createTurnDeps } from "../../../src/turn/create-deps.js";
import { createTurnEventStream } from "../../../src/turn/event-stream.js";

const appServer = { startThread: async () => ({}), resumeThread: async () => ({}), startTurn: async () => ({}) };

function engineRecording() {
  const assemble = vi.fn<ContextEngine["assemble"]>(async ({ messages }) => ({ messages, estimatedTokens: 0 }));
  const engine: ContextEngine = { info: { id: "rec", name: "rec" }, ingest: async () => ({ ingested: true }), assemble, compact: async () => ({ ok: true, compacted: false }) };
  return { engine, assemble };
}

function depsFor(engine: ContextEngine, extra: Record<string, unknown>) {
  const params = parseCodexTurnParams({ appServer, sessionId: "s1", sessionFile: path.join("/tmp", "ctm-engine-actor", "s1.jsonl"), prompt: "hi", contextEngine: engine, ...extra });
  return createTurnDeps(params, createTurnEventStream());
}

describe("assembleContext", () => {
  it("passes the turn's citationsMode to assemble, and no citationsMode when the turn has none", async () => {
    const { engine, assemble } = engineRecording();
    const history = { messages: [], origins: [], entryCount: 0, lastEntryId: undefined, skippedEntries: 0, warnings: [] } as never;
    await assembleContext(depsFor(engine, { citationsMode: "on" }), { history, prompt: "hi" }, new AbortController().signal);
    expect(assemble.mock.calls[0]![0]).toMatchObject({ citationsMode: "on" });
    await assembleContext(depsFor(engine, {}), { history, prompt: "hi" }, new AbortController().signal);
    expect(assemble.mock.calls[1]![0]).not.toHaveProperty("citationsMode");
  });

  it("rejects a citationsMode OpenClaw does not have, naming the field", () => {
    expect(() => depsFor(engineRecording().engine, { citationsMode: "always" })).toThrow(/citationsMode/);
  });

  it("gives assemble the session target (the id as its key when the turn has none) and remembers the store under it", async () => {
    forgetSessionStores();
    const { engine, assemble } = engineRecording();
    const deps = depsFor(engine, {});
    const history = { messages: [], origins: [], entryCount: 0, lastEntryId: undefined, skippedEntries: 0, warnings: [] } as never;
    await assembleContext(deps, { history, prompt: "hi" }, new AbortController().signal);
    const target = { sessionId: "s1", sessionKey: "s1", storePath: deps.store.sessionFile };
    expect(assemble.mock.calls[0]![0]).toMatchObject({ sessionTarget: target, runtimeContext: { sessionTarget: target } });
    expect(findSessionStore({ sessionKey: "s1" })).toBe(deps.store);
    forgetSessionStores();
  });
});
