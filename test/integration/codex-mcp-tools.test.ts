/**
 * MCP tools through `runCodexTurn` on the real `codex app-server` 0.169.0, offline, with a tiny MCP server of our own
 * (test/fixtures/mcp/echo-server.mjs). Codex asks before running an MCP tool, and it asks through an MCP elicitation
 * (`mcpServer/elicitation/request` marked `_meta.codex_approval_kind: "mcp_tool_call"`), not through the approval
 * methods. The harness runtime spec routes those to the host's approval flow and fails any other elicitation closed;
 * so must we: the turn's `onApproval` decides, and its decision is what Codex does.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { SessionManager } from "@mariozechner/pi-coding-agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CodexApprovalDecision, CodexApprovalRequest } from "../../src/codex/app-server.js";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { runCodexTurn } from "../../src/turn.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { disposeChecked, tempSessions } from "../helpers/turn-env.js";

const SERVER = path.join(import.meta.dirname, "..", "fixtures", "mcp", "echo-server.mjs");
let env: OfflineCodex;
let ws: string;
const sessions = tempSessions("mcp-tools-");

beforeAll(async () => {
  ws = mkdtempSync(path.join(tmpdir(), "ctm-mcp-ws-"));
  env = await startOfflineCodex({ codex: { env: { HOME: ws }, config: { mcp_servers: { echo: { command: process.execPath, args: [SERVER] } } } } });
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
  rmSync(ws, { recursive: true, force: true });
});

/** The model calls MCP tool `tool` (Codex offers MCP tools in the `mcp__<server>` namespace) `times` times, then answers. */
function scriptCalls(tool: string, args: Record<string, unknown>, times: number): void {
  env.fake.enqueue([
    ...Array.from({ length: times }, (_, i) => ({ functionCall: { name: tool, namespace: "mcp__echo", arguments: args, callId: `call_mcp_${i}` } })),
    { text: "done" },
  ]);
}

async function turn(name: string, decision: CodexApprovalDecision | undefined) {
  const asked: CodexApprovalRequest[] = [];
  const sessionFile = sessions.file(name);
  const result = await runCodexTurn({
    appServer: env.codex,
    sessionId: name,
    sessionFile,
    prompt: "Use the echo server.",
    cwd: ws,
    approvalPolicy: "on-request",
    ...(decision ? { onApproval: (r: CodexApprovalRequest) => (asked.push(r), decision) } : {}),
  });
  const messages = SessionManager.open(sessionFile, ws).buildSessionContext().messages as unknown as AgentMessage[];
  const results = messages.filter((m) => m.role === "toolResult") as Array<{ toolName: string; isError: boolean; content: Array<{ text?: string }> }>;
  return { result, asked, results: results.map((r) => ({ toolName: r.toolName, isError: r.isError, text: r.content[0]?.text })) };
}

describe("MCP tool calls ask the turn's onApproval", () => {
  it("approve: onApproval sees the server, tool and arguments; the tool runs and its result is in the transcript", async () => {
    scriptCalls("echo", { text: "hi" }, 1);
    const { result, asked, results } = await turn("approve", "approve");
    expect(result.status).toBe("completed");
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({
      kind: "mcpToolCall",
      method: "mcpServer/elicitation/request",
      threadId: result.threadId,
      server: "echo",
      tool: "echo",
      arguments: { text: "hi" },
      message: 'Allow the echo MCP server to run tool "echo"?',
      toolDescription: "Echo text back",
      persist: ["session", "always"],
    });
    expect(results).toEqual([{ toolName: "mcp:echo/echo", isError: false, text: "ECHO: hi" }]);
  });

  it("deny (and no callback at all): Codex does not run the tool and the model is told so", async () => {
    for (const decision of ["deny", undefined] as const) {
      scriptCalls("echo", { text: "no" }, 1);
      const { asked, results } = await turn(`deny-${decision ?? "none"}`, decision);
      expect(asked).toHaveLength(decision ? 1 : 0);
      expect(results).toEqual([{ toolName: "mcp:echo/echo", isError: true, text: "Error: user rejected MCP tool call" }]);
    }
  });

  it("approveForSession: Codex remembers it, so a second call of the tool in the session is not asked again", async () => {
    for (const decision of ["approve", "approveForSession"] as const) {
      scriptCalls("echo", { text: "again" }, 2);
      const { asked, results } = await turn(`twice-${decision}`, decision);
      expect(results.map((r) => r.text)).toEqual(["ECHO: again", "ECHO: again"]);
      expect(asked).toHaveLength(decision === "approve" ? 2 : 1);
    }
  });

  it("an elicitation that is not a tool approval (the server asks the user a question) is declined, not approved", async () => {
    scriptCalls("ask", {}, 1);
    const { asked, results } = await turn("ask", "approve");
    // Asked once: to run the tool. The server's own question never reached onApproval and was declined.
    expect(asked.map((r) => r.kind === "mcpToolCall" && r.tool)).toEqual(["ask"]);
    expect(results).toEqual([{ toolName: "mcp:echo/ask", isError: false, text: "elicitation decline" }]);
  });
});
