/**
 * Parameter validation at the boundary: every bad value is a CodexTurnParamsError naming the field, thrown before any
 * file is touched.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CodexTurnParamsError, parseCodexTurnParams, parseRecoverCodexSessionParams } from "../../src/params.js";
import { startCodexTurn } from "../../src/turn.js";
import { recoverCodexSession } from "../../src/recovery.js";
import type { CodexAppServer } from "../../src/codex/app-server.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "ctm-params-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Validation never calls the app-server; any object passes the `appServer` check.
const appServer = {} as CodexAppServer;
const base = () => ({ appServer, sessionId: "s1", sessionFile: path.join(dir, "s1.jsonl"), prompt: "hello" });

describe("parseCodexTurnParams", () => {
  it("accepts minimal params and fills the accordion defaults", () => {
    const parsed = parseCodexTurnParams({ ...base(), compaction: {} });
    expect(parsed.compaction).toEqual({ contextThreshold: 0.9, compactionTargetFraction: 0.35 });
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
