import { describe, expect, it } from "vitest";
import { describeApproval } from "../../src/cli/turn-setup.js";

describe("describeApproval (the CLI's one-line approval question)", () => {
  const base = { method: "item/commandExecution/requestApproval", threadId: "t", itemId: "call_0" } as const;

  it("a command: what runs and where; input to a running command says so", () => {
    expect(describeApproval({ ...base, kind: "commandExecution", command: "make test", cwd: "/w", commandKind: "command" })).toBe('run "make test" in /w');
    expect(describeApproval({ ...base, kind: "commandExecution", command: "y", commandKind: "writeStdin" })).toBe('send input to "y"');
  });

  it("a network approval names the host and protocol, not only the command", () => {
    expect(describeApproval({ ...base, kind: "commandExecution", command: "npm ci", cwd: "/w", network: { host: "localhost", protocol: "https" } })).toBe(
      'network access to https://localhost for "npm ci"',
    );
  });
});
