/**
 * MCP tool-call approvals as typed requests and their answers (the real binary's behaviour is in
 * test/integration/codex-mcp-tools.test.ts): only an elicitation Codex marks `codex_approval_kind: "mcp_tool_call"` is
 * an approval; any other elicitation is not turned into one.
 */
import { describe, expect, it } from "vitest";
import { approvalResponse, toApprovalRequest, type CodexApprovalRequest } from "../../src/codex/approvals.js";

const METHOD = "mcpServer/elicitation/request";
/** Codex 0.169.0's params for an MCP tool approval (recorded from the real binary, ids shortened). */
const toolApproval = (meta: Record<string, unknown> = {}) => ({
  threadId: "thr",
  turnId: "turn",
  serverName: "docs",
  mode: "form",
  _meta: {
    codex_approval_kind: "mcp_tool_call",
    persist: ["session", "always"],
    tool_name: "search",
    tool_description: "Search the docs",
    tool_params: { q: "lock" },
    tool_params_display: [{ name: "q", value: "lock", display_name: "q" }],
    ...meta,
  },
  message: 'Allow the docs MCP server to run tool "search"?',
  requestedSchema: { type: "object", properties: {} },
});
const typed = (params: unknown) => toApprovalRequest({ method: METHOD, params }, () => []);

describe("MCP tool-call approvals", () => {
  it("become a typed mcpToolCall request with the server, tool, arguments and what Codex offers to remember", () => {
    expect(typed(toolApproval())).toEqual({
      method: METHOD,
      threadId: "thr",
      turnId: "turn",
      itemId: "",
      kind: "mcpToolCall",
      server: "docs",
      tool: "search",
      arguments: { q: "lock" },
      message: 'Allow the docs MCP server to run tool "search"?',
      toolDescription: "Search the docs",
      persist: ["session", "always"],
    });
  });

  it("any other elicitation (a form for the user, a URL, a tool suggestion) is not an approval", () => {
    expect(typed({ ...toolApproval(), _meta: null })).toBeUndefined();
    expect(typed({ ...toolApproval(), _meta: { codex_approval_kind: "tool_suggestion" } })).toBeUndefined();
    expect(typed({ threadId: "thr", turnId: null, serverName: "docs", mode: "url", _meta: null, message: "log in", url: "http://127.0.0.1/", elicitationId: "e" })).toBeUndefined();
  });

  it("answers: accept, accept remembered for the session when offered, decline", () => {
    const request = typed(toolApproval()) as CodexApprovalRequest;
    expect(approvalResponse(request, "approve", "")).toEqual({ action: "accept", content: {}, _meta: null });
    expect(approvalResponse(request, "approveForSession", "")).toEqual({ action: "accept", content: {}, _meta: { persist: "session" } });
    expect(approvalResponse(request, "deny", "no")).toEqual({ action: "decline", content: null, _meta: null });
    // Codex did not offer to remember: approved for this call only.
    const once = typed(toolApproval({ persist: [] })) as CodexApprovalRequest;
    expect(approvalResponse(once, "approveForSession", "")).toEqual({ action: "accept", content: {}, _meta: null });
  });
});

describe("command approvals", () => {
  // The request as codex app-server 0.169.0 sends it under approvals "untrusted" (captured offline).
  const command = {
    kind: "command",
    threadId: "thr",
    turnId: "turn",
    itemId: "call_0_0",
    startedAtMs: 1,
    environmentId: "local",
    command: "/bin/bash -c 'echo hi > out.txt'",
    cwd: "/w",
    commandActions: [{ type: "unknown", command: "echo hi > out.txt" }],
    availableDecisions: ["accept", { acceptWithExecpolicyAmendment: { execpolicy_amendment: ["/bin/bash", "-c", "echo hi > out.txt"] } }, "cancel"],
  };
  const typedCommand = (params: unknown) => toApprovalRequest({ method: "item/commandExecution/requestApproval", params }, () => []);

  it("carry the command, its cwd and what is asked; a network approval names the host and protocol", () => {
    expect(typedCommand(command)).toEqual({
      method: "item/commandExecution/requestApproval",
      threadId: "thr",
      turnId: "turn",
      itemId: "call_0_0",
      kind: "commandExecution",
      command: "/bin/bash -c 'echo hi > out.txt'",
      cwd: "/w",
      commandKind: "command",
    });
    const network = typedCommand({ ...command, networkApprovalContext: { host: "registry.npmjs.org", protocol: "https" } });
    expect(network).toMatchObject({ kind: "commandExecution", network: { host: "registry.npmjs.org", protocol: "https" } });
    // An incomplete context is no network request.
    expect(typedCommand({ ...command, networkApprovalContext: { host: "x" } })).not.toHaveProperty("network");
    expect(typedCommand({ ...command, kind: "writeStdin" })).toMatchObject({ commandKind: "writeStdin" });
  });

  it("answers in the v2 shape: accept, acceptForSession (honoured by Codex 0.169 for the thread even when not listed), decline", () => {
    const request = typedCommand(command) as CodexApprovalRequest;
    expect(approvalResponse(request, "approve", "")).toEqual({ decision: "accept" });
    expect(approvalResponse(request, "approveForSession", "")).toEqual({ decision: "acceptForSession" });
    expect(approvalResponse(request, "deny", "no")).toEqual({ decision: "decline" });
  });
});
