import { describe, expect, it } from "vitest";
import { approvalPolicyCall, approvalPolicyOutcome, nativeCallKey, sameParams } from "../../src/codex/approval-policy.js";

describe("approvalPolicyCall (OpenClaw's tool policy request for a Codex approval)", () => {
  it("a command: shell with its command, cwd and the request itself", () => {
    const req = { threadId: "t", turnId: "u", itemId: "call_1", command: "rm -rf build", cwd: "/w" };
    expect(approvalPolicyCall("item/commandExecution/requestApproval", req)).toEqual({ tool: "shell", arguments: { command: "rm -rf build", cwd: "/w", approval: req } });
  });

  it("a command named only by its parsed actions, or as argv, is joined; a network approval is its own tool", () => {
    const actions = { commandActions: [{ type: "read", command: "cat a" }, { type: "unknown", command: "ls" }, { type: "x" }] };
    expect(approvalPolicyCall("item/commandExecution/requestApproval", actions)?.arguments).toMatchObject({ command: "cat a && ls" });
    expect(approvalPolicyCall("item/commandExecution/requestApproval", { command: ["git", "push"] })?.arguments).toMatchObject({ command: "git push" });
    const network = { command: "curl x", networkApprovalContext: { host: "example.org", protocol: "https" } };
    expect(approvalPolicyCall("item/commandExecution/requestApproval", network)).toEqual({ tool: "codex_network_approval", arguments: { approval: network } });
  });

  it("a patch and extra permissions pass the request as the params; other requests are not covered", () => {
    const patch = { threadId: "t", itemId: "call_2", grantRoot: "/w" };
    expect(approvalPolicyCall("item/fileChange/requestApproval", patch)).toEqual({ tool: "apply_patch", arguments: patch });
    expect(approvalPolicyCall("item/permissions/requestApproval", { permissions: {} })).toEqual({ tool: "codex_permission_approval", arguments: { permissions: {} } });
    for (const method of ["execCommandApproval", "applyPatchApproval", "mcpServer/elicitation/request"]) expect(approvalPolicyCall(method, {})).toBeUndefined();
    expect(approvalPolicyCall("item/fileChange/requestApproval", null)).toEqual({ tool: "apply_patch", arguments: {} });
  });
});

describe("approvalPolicyOutcome", () => {
  const asked = { command: "make", cwd: "/w" };

  it("a block declines with its reason (a default one without)", () => {
    expect(approvalPolicyOutcome({ block: true, blockReason: "no" }, asked)).toEqual({ outcome: "deny", reason: "no", rewritten: false });
    expect(approvalPolicyOutcome({ block: true }, asked)).toMatchObject({ outcome: "deny", reason: "blocked by a beforeToolCall hook" });
  });

  it("changed params refuse the request; the same params in another key order are no rewrite", () => {
    expect(approvalPolicyOutcome({ arguments: { ...asked, command: "make safe" } }, asked)).toMatchObject({ outcome: "deny", rewritten: true });
    expect(approvalPolicyOutcome({ arguments: { cwd: "/w", command: "make" } }, asked)).toEqual({ outcome: "ask" });
    expect(sameParams({ a: [1, { b: 2, c: 3 }] }, { a: [1, { c: 3, b: 2 }] })).toBe(true);
    expect(sameParams({ a: [1, 2] }, { a: [2, 1] })).toBe(false);
  });

  it("approved grants once; nothing decided leaves it to onApproval", () => {
    expect(approvalPolicyOutcome({ approved: true }, asked)).toEqual({ outcome: "approve" });
    expect(approvalPolicyOutcome({}, asked)).toEqual({ outcome: "ask" });
    // A block wins over an approval given in the same answer.
    expect(approvalPolicyOutcome({ block: true, approved: true }, asked)).toMatchObject({ outcome: "deny" });
  });

  it("calls are told apart by thread too (a sub-agent's call ids may repeat the parent's)", () => {
    expect(nativeCallKey({ callId: "call_0" }, "parent")).not.toBe(nativeCallKey({ callId: "call_0", threadId: "child" }, "parent"));
    expect(nativeCallKey({ callId: "call_0" }, "parent")).toBe(nativeCallKey({ callId: "call_0", threadId: "parent" }, "other"));
  });
});
