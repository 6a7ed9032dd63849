/**
 * An MCP server that fails to start, against the real app-server: Codex 0.169 starts the configured MCP servers when a
 * thread loads, and a failed one's tools are simply absent; the turn completes and Codex says so only in an
 * `mcpServer/startupStatus/updated` notification (observed: a server whose command does not exist fails within a few
 * ms, one that exits before the MCP handshake within ~150 ms). Every turn on the thread reports each failed server as
 * a warning (`mcpServerFailed`, Codex's error as the message); the log names the server once, never Codex's text.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CodexTurnWarning } from "../../src/codex/warnings.js";
import { runCodexTurn } from "../../src/turn.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { captureLogger, disposeChecked, tempSessions, turnParams } from "../helpers/turn-env.js";

const ECHO_SERVER = path.join(import.meta.dirname, "..", "fixtures", "mcp", "echo-server.mjs");
let env: OfflineCodex;
let ws: string;
const log = captureLogger();
const sessions = tempSessions("mcp-startup-");

beforeAll(async () => {
  ws = mkdtempSync(path.join(tmpdir(), "ctm-mcp-startup-ws-"));
  const mcp_servers = {
    echo: { command: process.execPath, args: [ECHO_SERVER] },
    missing: { command: path.join(ws, "no-such-mcp-server") },
    early_exit: { command: process.execPath, args: ["-e", "process.exit(3)"] },
  };
  env = await startOfflineCodex({ codex: { env: { HOME: ws }, config: { mcp_servers }, logger: log.logger } });
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
  rmSync(ws, { recursive: true, force: true });
});

/** The turn's warnings about MCP servers (Codex's error text: "MCP client for `<name>` failed to start: ..."), sorted. */
const mcpWarnings = (warnings: readonly string[]) => warnings.filter((w) => w.startsWith("MCP client for")).sort();

describe("MCP servers that fail to start", () => {
  it("every turn on the thread warns about each failed server; the working one is not named; the log names them once", async () => {
    const file = sessions.file();
    const first = await runCodexTurn(turnParams(env, file, "first"));
    expect(first.status).toBe("completed");
    const firstWarnings = mcpWarnings(first.warnings);
    expect(firstWarnings).toHaveLength(2);
    expect(firstWarnings[0]).toMatch(/^MCP client for `early_exit` failed to start: .*handshaking/);
    expect(firstWarnings[1]).toMatch(/^MCP client for `missing` failed to start: .*No such file/);
    expect(first.warnings.join("\n")).not.toContain("`echo`");

    const second = await runCodexTurn(turnParams(env, file, "second"));
    expect(second.threadId).toBe(first.threadId);
    expect(mcpWarnings(second.warnings)).toEqual(firstWarnings);

    const logged = log.events.filter((e) => e.event === "codex.mcpServer.failed");
    expect(logged.map((e) => e.server).sort()).toEqual(["early_exit", "missing"]);
    expect(logged.every((e) => e.threadId === first.threadId)).toBe(true);
    expect(JSON.stringify(log.events)).not.toContain("MCP client for");
  }, 60_000);

  it("the client's own turn carries typed warnings: code mcpServerFailed, the server's name, the thread", async () => {
    const { threadId } = await env.codex.startThread({ cwd: ws });
    const heard: CodexTurnWarning[] = [];
    const turn = await env.codex.startTurn({ threadId, text: "typed", onWarning: (w) => heard.push(w) });
    const record = await turn.completion;
    expect(record.codexStatus).toBe("completed");
    const failed = turn.warnings.filter((w) => w.code === "mcpServerFailed");
    expect(failed.map((w) => w.mcpServer).sort()).toEqual(["early_exit", "missing"]);
    expect(failed.every((w) => w.threadId === threadId)).toBe(true);
    expect(heard.filter((w) => w.code === "mcpServerFailed")).toHaveLength(2);
  }, 60_000);
});
