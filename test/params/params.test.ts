/**
 * Parameter validation at the boundary: every bad value is a CodexTurnParamsError naming the field, thrown before any
 * file is touched.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CodexTurnParamsError, parseCodexTurnParams, parseRecoverCodexSessionParams } from "../../src/params.js";
import { startCodexTurn } from "../../src/turn.js";
import { recoverCodexSession } from "../../src/recovery.js";
import type { CodexAppServer } from "../../src/codex/app-server.js";
import { createJsonlSessionStore } from "../../src/store/session-store.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "ctm-params-"));
writeFileSync(path.join(dir, "a-file"), "not a directory");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Validation never calls the app-server; it checks the methods a turn calls.
const noop = () => undefined;
const appServer = { startThread: noop, resumeThread: noop, startTurn: noop } as unknown as CodexAppServer;
const engine = { info: { id: "e", name: "e" }, ingest: noop, assemble: noop, compact: noop };
const tool = (name: string) => ({ name, description: "", inputSchema: {}, handler: () => "" });
const base = () => ({ appServer, sessionId: "s1", sessionFile: path.join(dir, "s1.jsonl"), prompt: "hello" });

describe("parseCodexTurnParams", () => {
  it("accepts minimal params and fills the accordion defaults", () => {
    const parsed = parseCodexTurnParams({ ...base(), compaction: {} });
    expect(parsed.compaction).toEqual({ contextThreshold: 0.9, compactionTargetFraction: 0.35 });
  });

  it("accepts an existing absolute working directory as it is", () => {
    expect(parseCodexTurnParams({ ...base(), cwd: dir }).cwd).toBe(dir);
  });

  it.each([
    [{ prompt: "" }, "prompt", "prompt must not be empty"],
    [{ sessionId: "" }, "sessionId", ""],
    [{ contextTokenBudget: -5 }, "contextTokenBudget", ""],
    [{ contextTokenBudget: 1.5 }, "contextTokenBudget", ""],
    [{ projection: { mode: "everything" } }, "projection.mode", ""],
    [{ timeouts: { engineCallMs: -1 } }, "timeouts.engineCallMs", ""],
    [{ compaction: { compactionTargetFraction: 0.01 } }, "compaction.compactionTargetFraction", "[0.05, 1]"],
    [{ compaction: { contextThreshold: 1.5 } }, "compaction.contextThreshold", ""],
    [{ compaction: { threshold: 0.8 } }, "compaction", "threshold"],
    [{ signal: "stop" }, "signal", "AbortSignal"],
    [{ unknownOption: true }, "(params)", "unknownOption"],
    // Node fires timers above 2^31-1 ms at once: rejected, naming the timeout.
    [{ timeouts: { engineCallMs: 2 ** 31 } }, "timeouts.engineCallMs", "2147483647"],
    [{ timeouts: { toolCallMs: 2 ** 40 } }, "timeouts.toolCallMs", "Node's timer limit"],
    [{ dynamicTools: [tool("lookup"), tool("lookup")] }, "dynamicTools", "unique"],
    [{ contextEngine: { foo: 1 } }, "contextEngine", "info.id, ingest(), assemble() and compact()"],
    [{ contextEngine: { ...engine, info: undefined } }, "contextEngine", "context engine"],
    [{ appServer: {} }, "appServer", "CodexAppServer.spawn()"],
    [{ sandbox: "everything" }, "sandbox", ""],
    [{ approvalPolicy: "on-failure" }, "approvalPolicy", ""],
    [{ writableRoots: ["relative/dir"] }, "writableRoots.0", "absolute"],
    [{ onApproval: "yes" }, "onApproval", "function"],
    // Codex would take these and every command of the turn would fail.
    [{ cwd: "relative/dir" }, "cwd", "must be an absolute path (got relative/dir)"],
    [{ cwd: path.join(dir, "missing") }, "cwd", "missing does not exist"],
    [{ cwd: path.join(dir, "a-file") }, "cwd", "a-file is not a directory"],
  ])("rejects %j naming `%s`", (extra, field, text) => {
    let error: unknown;
    try {
      parseCodexTurnParams({ ...base(), ...extra });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(CodexTurnParamsError);
    expect(error).toMatchObject({ code: "INVALID_TURN_PARAMS", field });
    expect((error as Error).message).toContain(`\`${field}\``);
    expect((error as Error).message).toContain(text);
  });

  it("a getter that throws is a typed error naming the field, not a raw TypeError", () => {
    const params = { ...base() } as Record<string, unknown>;
    Object.defineProperty(params, "contextEngine", { enumerable: true, get: () => { throw new TypeError("boom"); } });
    expect(() => parseCodexTurnParams(params)).toThrow(expect.objectContaining({ name: "CodexTurnParamsError", field: "contextEngine" }));
    const engineWithGetter = { ...engine } as Record<string, unknown>;
    Object.defineProperty(engineWithGetter, "assemble", { enumerable: true, get: () => { throw new Error("no"); } });
    expect(() => parseCodexTurnParams({ ...base(), contextEngine: engineWithGetter })).toThrow(expect.objectContaining({ field: "contextEngine" }));
  });

  it("accepts an engine shaped like OpenClaw's (turnMaintenanceMode as any string) and the Codex options", () => {
    const parsed = parseCodexTurnParams({
      ...base(),
      contextEngine: { ...engine, info: { id: "lossless", name: "l", turnMaintenanceMode: "inline-ish" } },
      sandbox: "workspace-write",
      writableRoots: [path.join(os.tmpdir(), "x")],
      approvalPolicy: "on-request",
      timeouts: { engineCallMs: 2_147_483_647 },
    });
    expect(parsed.sandbox).toBe("workspace-write");
  });

  it("startCodexTurn throws synchronously on bad params and writes nothing", () => {
    const sessionFile = path.join(dir, "bad.jsonl");
    expect(() => startCodexTurn({ ...base(), sessionFile, compaction: { compactionTargetFraction: 2 } })).toThrow(CodexTurnParamsError);
    expect(existsSync(sessionFile)).toBe(false);
    expect(existsSync(`${sessionFile}.codex-pending.json`)).toBe(false);
  });
});

describe("recoverCodexSession params", () => {
  it("validates the session fields and refuses turn-only options", async () => {
    expect(() => parseRecoverCodexSessionParams({ sessionId: "s", sessionFile: "" })).toThrow(expect.objectContaining({ field: "sessionFile" }));
    await expect(recoverCodexSession({ sessionId: "s", sessionFile: path.join(dir, "r.jsonl"), prompt: "x" } as never)).rejects.toBeInstanceOf(
      CodexTurnParamsError,
    );
  });

  it("on a session with nothing pending does nothing", async () => {
    const sessionFile = path.join(dir, "clean.jsonl");
    expect(await recoverCodexSession({ sessionId: "s", sessionFile })).toEqual({ pending: 0, mirroredMessages: 0, finalized: 0, dropped: 0 });
    expect(existsSync(sessionFile)).toBe(false);
  });
});

describe("the store option", () => {
  const store = createJsonlSessionStore({ sessionFile: path.join(dir, "stored.jsonl"), sessionId: "s1" });
  const { sessionFile: _omitted, ...withoutFile } = base();

  it("takes sessionFile from the store when only the store is given, and accepts both when they agree", () => {
    expect(parseCodexTurnParams({ ...withoutFile, store }).sessionFile).toBe(store.sessionFile);
    expect(parseCodexTurnParams({ ...withoutFile, store, sessionFile: store.sessionFile }).store).toBe(store);
    expect(parseRecoverCodexSessionParams({ sessionId: "s1", store }).sessionFile).toBe(store.sessionFile);
  });

  it("refuses neither, a store naming another session, and something that is not a store, naming the field", () => {
    const field = (p: unknown) => {
      try {
        parseCodexTurnParams(p);
      } catch (e) {
        expect(e).toBeInstanceOf(CodexTurnParamsError);
        return (e as CodexTurnParamsError).field;
      }
      return "(accepted)";
    };
    expect(field(withoutFile)).toBe("sessionFile");
    expect(field({ ...base(), store })).toBe("sessionFile");
    expect(field({ ...withoutFile, store: { sessionFile: "/x", readHistory: noop } })).toBe("store");
  });
});
