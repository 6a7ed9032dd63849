/**
 * Native tool calls put to the host before they run (`nativeToolHooks`), on the real `codex app-server` 0.169.0,
 * offline: Codex's `PreToolUse` hook reaches the turn's `beforeToolCall` through the relay, which may block a shell
 * command or a patch (Codex then runs nothing and tells the model why) or let it run. Each call is put to the hook
 * once; MCP calls are blocked by server, tool and arguments; the relayed `Stop` hook lets `beforeAgentFinalize` ask
 * for one more model pass (capped); a turn without `beforeToolCall` runs its calls; the hooks' trust is computed as
 * Codex computes it, so no app-server restarts to learn it (the fallback is in codex-native-hooks-trust.test.ts).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import type { BeforeAgentFinalizeEvent, ToolCallHookEvent } from "../../src/hooks/types.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { applyPatchCall, execCommandCall, startOfflineCodex, toolOutputs, type OfflineCodex } from "../../src/testing/index.js";
import { captureLogger, disposeChecked, messageText, tempSessions } from "../helpers/turn-env.js";

let env: OfflineCodex;
let home: string;
const log = captureLogger();
const sessions = tempSessions("native-hooks-");
const workspaces: string[] = [];

function workspace(): string {
  const ws = mkdtempSync(path.join(tmpdir(), "ctm-native-hooks-ws-"));
  workspaces.push(ws);
  return ws;
}

beforeAll(async () => {
  // A HOME of its own keeps the machine's shell startup files out of the commands.
  home = workspace();
  const mcp = { echo: { command: process.execPath, args: [path.join(import.meta.dirname, "..", "fixtures", "mcp", "echo-server.mjs")] } };
  env = await startOfflineCodex({ codex: { nativeToolHooks: true, env: { HOME: home }, logger: log.logger, config: { mcp_servers: mcp } } });
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
  for (const ws of workspaces) rmSync(ws, { recursive: true, force: true });
});

/** Every output Codex sent back to the model for a tool call, across the turn's requests. */
function outputsSince(from: number): string[] {
  return env.fake.requests.slice(from).flatMap((r) => toolOutputs(r.body).map((o) => o.output));
}

describe("native tool calls put to beforeToolCall (nativeToolHooks)", () => {
  it("blocks a shell command and a patch the hook refuses, runs the command it allows; each call is asked once", async () => {
    const ws = workspace();
    env.fake.enqueue([
      { functionCall: execCommandCall("echo ok > allowed.txt", { workdir: ws }) },
      { functionCall: execCommandCall("echo no > forbidden.txt", { workdir: ws }) },
      { customToolCall: applyPatchCall([{ kind: "add", path: "patched.txt", content: "x\n" }]) },
      { text: "done with the work" },
    ]);
    const asked: ToolCallHookEvent[] = [];
    const from = env.fake.requests.length;
    const result = await runCodexTurn({
      appServer: env.codex,
      sessionId: "hooks",
      sessionFile: sessions.file("hooks"),
      prompt: "do the work",
      cwd: ws,
      sandbox: "workspace-write",
      hooks: {
        beforeToolCall: (e) => {
          asked.push(e);
          if (e.toolName === "apply_patch") return { block: true, blockReason: "no patches in this workspace" };
          const command = String((e.params as { command?: unknown }).command);
          return command.includes("forbidden") ? { block: true, blockReason: "forbidden files are off limits" } : undefined;
        },
      },
    });
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(result.assistantText).toBe("done with the work");
    expect(readFileSync(path.join(ws, "allowed.txt"), "utf8")).toBe("ok\n");
    expect(existsSync(path.join(ws, "forbidden.txt"))).toBe(false);
    expect(existsSync(path.join(ws, "patched.txt"))).toBe(false);

    // Asked before each call ran, once each (not again when its item started), as native calls.
    expect(asked.map((e) => [e.toolName, e.native, e.callId])).toEqual([
      ["shell", true, "call_0_0"],
      ["shell", true, "call_1_0"],
      ["apply_patch", true, "call_2_0"],
    ]);
    expect(asked[0]!.params).toEqual({ command: "echo ok > allowed.txt" });
    // Where the call runs, as Codex's hook input says (the thread's working directory).
    expect(asked.map((e) => e.cwd)).toEqual([ws, ws, ws]);
    expect(String((asked[2]!.params as { command: string }).command)).toContain("*** Add File: patched.txt");
    // The model was told why.
    const outputs = outputsSince(from).join("\n");
    expect(outputs).toContain("blocked by PreToolUse hook: forbidden files are off limits");
    expect(outputs).toContain("blocked by PreToolUse hook: no patches in this workspace");
    expect(log.events.filter((e) => e.event === "codex.nativeTool.decided").map((e) => e.blocked)).toEqual([false, true, true]);
  }, 90_000);

  it("under approvals, the relay's decision is the approval's: asked once per call, `approved` grants Codex's request without onApproval", async () => {
    const ws = workspace();
    env.fake.enqueue([
      { functionCall: execCommandCall("echo yes > approved.txt", { workdir: ws }) },
      { functionCall: execCommandCall("echo ask > asked.txt", { workdir: ws }) },
      { text: "both ran" },
    ]);
    const asked: ToolCallHookEvent[] = [];
    const onApproval: string[] = [];
    const result = await runCodexTurn({
      appServer: env.codex,
      sessionId: "hooks-approvals",
      sessionFile: sessions.file("hooks-approvals"),
      prompt: "write both",
      cwd: ws,
      sandbox: "workspace-write",
      approvalPolicy: "untrusted",
      onApproval: (r) => {
        onApproval.push(r.kind === "commandExecution" ? String(r.command) : r.kind);
        return "approve";
      },
      hooks: {
        beforeToolCall: (e) => {
          asked.push(e);
          return String((e.params as { command?: unknown }).command).includes("approved.txt") ? { approved: true } : undefined;
        },
      },
    });
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(readFileSync(path.join(ws, "approved.txt"), "utf8")).toBe("yes\n");
    expect(readFileSync(path.join(ws, "asked.txt"), "utf8")).toBe("ask\n");
    // Asked by the relay (PreToolUse), once each; the approval requests used those answers.
    expect(asked.map((e) => [e.toolName, e.approvalMethod])).toEqual([
      ["shell", undefined],
      ["shell", undefined],
    ]);
    expect(onApproval).toHaveLength(1);
    expect(onApproval[0]).toContain("asked.txt");
  });

  it("the client alone (startTurn) also asks once: the approval request after a relayed call uses the relay's answer", async () => {
    const ws = workspace();
    env.fake.enqueue([{ functionCall: execCommandCall("echo yes > client.txt", { workdir: ws }) }, { text: "ran" }]);
    const asked: Array<string | undefined> = [];
    let onApprovalCalls = 0;
    const { threadId } = await env.codex.startThread({ cwd: ws, sandbox: "workspace-write", approvalPolicy: "untrusted" });
    const turn = await env.codex.startTurn({
      threadId,
      text: "write it",
      onApproval: () => {
        onApprovalCalls++;
        return "deny";
      },
      beforeToolCall: (call) => {
        asked.push(call.approvalMethod);
        return { approved: true };
      },
    });
    expect((await turn.completion).codexStatus).toBe("completed");
    expect(asked).toEqual([undefined]);
    expect(onApprovalCalls).toBe(0);
    expect(readFileSync(path.join(ws, "client.txt"), "utf8")).toBe("yes\n");
  });

  it("blocks an MCP tool call by its server, tool and arguments", async () => {
    const ws = workspace();
    const echo = (text: string, i: number) => ({ functionCall: { name: "echo", namespace: "mcp__echo", arguments: { text }, callId: `call_mcp_${i}` } });
    env.fake.enqueue([echo("hello", 0), echo("forbidden words", 1), { text: "echoed" }]);
    const asked: ToolCallHookEvent[] = [];
    const from = env.fake.requests.length;
    const result = await runCodexTurn({
      appServer: env.codex,
      sessionId: "mcp",
      sessionFile: sessions.file("mcp"),
      prompt: "echo twice",
      cwd: ws,
      // Codex asks before any MCP tool: the allowed call is then approved; the blocked one never gets that far.
      approvalPolicy: "on-request",
      onApproval: () => "approve",
      hooks: {
        beforeToolCall: (e) => {
          asked.push(e);
          return JSON.stringify(e.params).includes("forbidden") ? { block: true, blockReason: "no forbidden words" } : undefined;
        },
      },
    });
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(asked.map((e) => [e.toolName, e.native, e.params])).toEqual([
      ["mcp:echo/echo", true, { text: "hello" }],
      ["mcp:echo/echo", true, { text: "forbidden words" }],
    ]);
    const outputs = outputsSince(from).join("\n");
    expect(outputs).toContain("ECHO: hello"); // the allowed call ran: the server echoed it
    expect(outputs).toContain("Tool call blocked by PreToolUse hook: no forbidden words");
    expect(outputs).not.toContain("ECHO: forbidden words");
  }, 90_000);

  it("sub-agent tools are put to beforeToolCall under their transcript names, once each; a blocked spawn starts no agent", async () => {
    const asked: ToolCallHookEvent[] = [];
    const from = env.fake.requests.length;
    env.fake.enqueue([
      { functionCall: { name: "spawn_agent", namespace: "multi_agent_v1", arguments: { message: "count to three" }, callId: "call_spawn" } },
      { text: "I will count myself: one two three." },
    ]);
    const result = await runCodexTurn({
      appServer: env.codex,
      sessionId: "agents",
      sessionFile: sessions.file("agents"),
      prompt: "Delegate the counting.",
      cwd: workspace(),
      hooks: {
        beforeToolCall: (e) => {
          asked.push(e);
          return e.toolName === "spawn_agent" ? { block: true, blockReason: "no sub-agents in this session" } : undefined;
        },
      },
    });
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(asked.map((e) => [e.toolName, e.native, e.callId])).toEqual([["spawn_agent", true, "call_spawn"]]);
    expect(outputsSince(from).join("\n")).toContain("no sub-agents in this session");
    // No sub-agent thread asked the model anything: every request since is this turn's own.
    expect(env.fake.requests.slice(from)).toHaveLength(2);
  }, 60_000);

  it("beforeAgentFinalize can ask for one more model pass: the reason reaches the model, the revised answer is final", async () => {
    const seen: BeforeAgentFinalizeEvent[] = [];
    const sessionFile = sessions.file("revise");
    env.fake.enqueue([{ text: "first answer" }, { text: "revised answer, with a summary" }]);
    const from = env.fake.requests.length;
    const result = await runCodexTurn({
      appServer: env.codex,
      sessionId: "revise",
      sessionFile,
      prompt: "answer me",
      hooks: {
        beforeAgentFinalize: (e) => {
          seen.push(e);
          return e.stopHookActive ? undefined : { action: "revise", reason: "Add a one-line summary." };
        },
      },
    });
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(result.assistantText).toBe("revised answer, with a summary");
    // Asked at each natural final answer, not again after the turn.
    expect(seen.map((e) => [e.assistantText, e.stopHookActive, e.codexStatus])).toEqual([
      ["first answer", false, "inProgress"],
      ["revised answer, with a summary", true, "inProgress"],
    ]);
    // Codex's own record of the thread, as its Stop hook names it (OpenClaw passes it on as transcriptPath).
    expect(seen[0]!.transcriptPath).toMatch(new RegExp(`rollout-.*${result.threadId}\\.jsonl$`));
    const requests = env.fake.requests.slice(from);
    expect(requests).toHaveLength(2);
    expect(JSON.stringify(requests[1]!.body)).toContain("Add a one-line summary.");
    // The transcript holds what the model saw, in order.
    const { messages } = await readSessionHistory(sessionFile);
    expect(messages.map((m) => [m.role, messageText(m)])).toEqual([
      ["user", "answer me"],
      ["assistant", "first answer"],
      ["user", "Add a one-line summary."],
      ["assistant", "revised answer, with a summary"],
    ]);
  }, 60_000);

  it("revisions are capped per turn, with a warning", async () => {
    env.fake.enqueue([{ text: "a1" }, { text: "a2" }, { text: "a3" }, { text: "a4" }]);
    let asked = 0;
    const result = await runCodexTurn({
      appServer: env.codex,
      sessionId: "cap",
      sessionFile: sessions.file("cap"),
      prompt: "never good enough",
      hooks: { beforeAgentFinalize: () => (asked++, { action: "revise", reason: `try again (${asked})` }) },
    });
    expect(result.status).toBe("completed");
    expect(result.assistantText).toBe("a4");
    expect(asked).toBe(4);
    expect(result.warnings.join("\n")).toMatch(/more than 3 extra model passes/);
  }, 60_000);

  it("a turn without beforeToolCall runs its native calls", async () => {
    const ws = workspace();
    env.fake.enqueue([{ functionCall: execCommandCall("echo free > free.txt", { workdir: ws }) }, { text: "ran" }]);
    const result = await runCodexTurn({ appServer: env.codex, sessionId: "free", sessionFile: sessions.file("free"), prompt: "go", cwd: ws, sandbox: "workspace-write" });
    expect(result.status).toBe("completed");
    expect(readFileSync(path.join(ws, "free.txt"), "utf8")).toBe("free\n");
  }, 60_000);

  it("the hooks' trust is computed as Codex computes it: every app-server starts trusted, without a restart", async () => {
    expect(log.events.filter((e) => e.event === "codex.hooks.trusted")).toHaveLength(0);
    expect(log.events.filter((e) => e.event === "codex.spawned")).toHaveLength(1);
    const second = captureLogger();
    const other = await startOfflineCodex({ fake: env.fake, codex: { nativeToolHooks: true, env: { HOME: home }, logger: second.logger } });
    try {
      expect(second.events.filter((e) => e.event === "codex.hooks.trusted")).toHaveLength(0);
      expect(second.events.filter((e) => e.event === "codex.spawned")).toHaveLength(1);
      const ws = workspace();
      env.fake.enqueue([{ functionCall: execCommandCall("echo two > two.txt", { workdir: ws }) }, { text: "blocked again" }]);
      const result = await runCodexTurn({
        appServer: other.codex,
        sessionId: "second",
        sessionFile: sessions.file("second"),
        prompt: "go",
        cwd: ws,
        sandbox: "workspace-write",
        hooks: { beforeToolCall: () => ({ block: true, blockReason: "nothing runs here" }) },
      });
      expect(result.status).toBe("completed");
      expect(existsSync(path.join(ws, "two.txt"))).toBe(false);
    } finally {
      await disposeChecked(other);
    }
  }, 90_000);
});
