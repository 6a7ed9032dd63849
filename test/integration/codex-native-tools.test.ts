/**
 * Codex doing real work, offline: the fake model asks the real `codex app-server` 0.169.0 to update its plan, run a
 * shell command that writes a file and apply a patch, in a temp workspace with sandbox "workspace-write". The command
 * really runs, the patch is really applied, approval requests reach the host's handler and its decision is honoured,
 * and the turn record's `messagesSnapshot` holds the tool call and tool result messages.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { SessionManager } from "@mariozechner/pi-coding-agent";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { CodexApprovalDecision, CodexApprovalRequest } from "../../src/codex/app-server.js";
import { validateNotification } from "../../src/codex/rpc.js";
import { waitFor } from "../codex/helpers.js";
import { TurnProjector, UNFINISHED_TOOL_RESULT, type TurnRecordCore } from "../../src/codex/turn-projector.js";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { mirrorTurnToTranscript } from "../../src/transcript/mirror.js";
import {
  applyPatchCall,
  execCommandCall,
  startOfflineCodex,
  toolOutputs,
  updatePlanCall,
  type OfflineCodex,
} from "../../src/testing/index.js";

let env: OfflineCodex;
let decision: CodexApprovalDecision = "approve";
const approvals: CodexApprovalRequest[] = [];
const raw: Array<{ method: string; params: unknown; emittedAtMs?: number }> = [];
const workspaces: string[] = [];

/** The host's approval callback of the turn (`StartTurnOptions.onApproval`). */
const onApproval = async (request: CodexApprovalRequest): Promise<CodexApprovalDecision> => {
  approvals.push(request);
  return decision;
};

beforeAll(async () => {
  // `update_plan` is offered to the model only with this config switch (read from the binary's `tools` array).
  // A HOME of its own keeps the machine's shell startup files out of the commands (they printed into the output, and
  // a pyenv rehash in them waited ~4 s per sandboxed command on the development machine).
  const home = workspace();
  env = await startOfflineCodex({ codex: { config: { tools: { update_plan: { enabled: true } } }, env: { HOME: home } } });
  env.codex.onNotification((n) => raw.push(n));
});
afterAll(async () => {
  await env?.dispose();
  for (const ws of workspaces) rmSync(ws, { recursive: true, force: true });
});
afterEach(() => {
  approvals.length = 0;
  raw.length = 0;
  decision = "approve";
  env.fake.reset();
});

function workspace(): string {
  const ws = mkdtempSync(path.join(tmpdir(), "ctm-native-ws-"));
  workspaces.push(ws);
  return ws;
}

/** Queue: plan update; text + shell command writing out.txt; a patch adding added.txt and updating out.txt; final text. */
function scriptWork(ws: string, options: { updateOutTxt: boolean }): void {
  const patch = applyPatchCall([
    { kind: "add", path: "added.txt", content: "one\ntwo\n" },
    ...(options.updateOutTxt ? [{ kind: "update" as const, path: "out.txt", lines: ["-hello", "+hello patched"] }] : []),
  ]);
  env.fake.enqueue([
    { functionCall: updatePlanCall([{ step: "write out.txt", status: "in_progress" }, { step: "patch", status: "pending" }], "starting") },
    { text: "running it", functionCall: execCommandCall("echo hello > out.txt && echo WROTE-OUT", { workdir: ws }) },
    { customToolCall: patch },
    { text: "all done" },
  ]);
}

async function runTurn(ws: string, approvalPolicy: "never" | "untrusted"): Promise<TurnRecordCore> {
  const { threadId } = await env.codex.startThread({ cwd: ws, sandbox: "workspace-write", approvalPolicy });
  const turn = await env.codex.startTurn({ threadId, text: "do the work", onApproval });
  return turn.completion;
}

function toolMessages(snapshot: AgentMessage[]): Array<{ role: string; name: string; isError?: boolean; text?: string }> {
  const out: Array<{ role: string; name: string; isError?: boolean; text?: string }> = [];
  for (const m of snapshot) {
    if (m.role === "assistant") {
      for (const part of m.content as Array<{ type: string; name?: string }>) if (part.type === "toolCall") out.push({ role: "toolCall", name: part.name! });
    } else if (m.role === "toolResult") {
      const r = m as { toolName: string; isError: boolean; content: Array<{ text?: string }> };
      out.push({ role: "toolResult", name: r.toolName, isError: r.isError, text: r.content[0]?.text ?? "" });
    }
  }
  return out;
}

describe("native tools on the real codex app-server (workspace-write sandbox)", () => {
  it("runs the shell command and applies the patch in the workspace, and records both as tool call/result messages", async () => {
    const ws = workspace();
    scriptWork(ws, { updateOutTxt: true });
    const record = await runTurn(ws, "never");
    expect(record.codexStatus).toBe("completed");
    // The command really ran inside the sandbox, then the patch changed what it wrote and added a file.
    expect(readFileSync(path.join(ws, "out.txt"), "utf8")).toBe("hello patched\n");
    expect(readFileSync(path.join(ws, "added.txt"), "utf8")).toBe("one\ntwo\n");
    expect(approvals).toEqual([]);

    const tools = toolMessages(record.messagesSnapshot);
    expect(tools.map((t) => `${t.role}:${t.name}`)).toEqual(["toolCall:shell", "toolResult:shell", "toolCall:apply_patch", "toolResult:apply_patch"]);
    expect(tools[1]).toMatchObject({ isError: false, text: expect.stringMatching(/^Exit code: 0\nOutput:\n/) });
    expect(tools[1]!.text).toContain("WROTE-OUT\n");
    expect(tools[3]!.text).toContain(`A ${path.join(ws, "added.txt")}\nM ${path.join(ws, "out.txt")}`);
    expect(tools[3]!.text).toContain("@@ -1 +1 @@\n-hello\n+hello patched\n");
    expect(record.messagesSnapshot.map((m) => m.role)).toEqual(["user", "custom", "assistant", "toolResult", "assistant", "toolResult", "assistant"]);
    expect(record.assistantText).toBe("all done");
    const commandItem = record.items.find((i) => i.kind === "commandExecution");
    expect(commandItem).toMatchObject({ status: "completed", exitCode: 0, cwd: ws });

    // What Codex sent back to the model: the command's exit and the patch's success.
    const outputs = toolOutputs(env.fake.requests.at(-1)!.body);
    expect(outputs.map((o) => o.output).join("\n")).toMatch(/Process exited with code 0[\s\S]*Success\. Updated the following files/);
  });

  it("projects the real turn/plan/updated notification as a codex.plan message; pi's SessionManager reads the mirror back", async () => {
    const ws = workspace();
    scriptWork(ws, { updateOutTxt: false });
    const record = await runTurn(ws, "never");
    // The app-server forwards turn/plan/updated to the turn's projector: the record holds the plan message, exactly as
    // projecting the raw notification stream gives it.
    const p = new TurnProjector({ threadId: record.threadId, turnId: record.turnId, originalPrompt: "do the work", model: "fake-model", provider: "fakeresp" });
    for (const n of raw) {
      const checked = validateNotification(n);
      if (checked.kind === "ok") p.apply(checked.notification);
    }
    const snapshot = p.finish().messagesSnapshot;
    expect(snapshot[1]).toEqual({
      role: "custom",
      customType: "codex.plan",
      content: "Plan: starting\n- [>] write out.txt\n- [ ] patch",
      display: true,
      timestamp: expect.any(Number),
    });
    expect(record.messagesSnapshot.slice(1)).toEqual(snapshot.slice(1));
    expect(record.messagesSnapshot.map((m) => m.role)).toEqual(["user", "custom", "assistant", "toolResult", "assistant", "toolResult", "assistant"]);

    // The mirror of these messages reads back in pi's SessionManager as the same messages (plan as custom_message).
    const sessionFile = path.join(workspace(), "session.jsonl");
    await mirrorTurnToTranscript({ sessionFile, sessionId: "native-1", cwd: ws, threadId: record.threadId, turnId: record.turnId, messages: snapshot });
    const pi = SessionManager.open(sessionFile, ws);
    expect(pi.buildSessionContext().messages).toEqual(snapshot);
    expect(pi.getEntries().map((e) => e.type)).toEqual(["message", "custom_message", ...Array(5).fill("message")]);
  });

  it("applies the sandbox: a write outside the workspace fails with Codex's Linux sandbox, inside it succeeds", async () => {
    const ws = workspace();
    const outside = workspace();
    env.fake.enqueue([
      { functionCall: execCommandCall(`echo x > ${path.join(outside, "o.txt")}; echo OUT-RC=$?; echo y > in.txt; echo IN-RC=$?`, { workdir: ws }) },
      { text: "ok" },
    ]);
    // Temp dirs are writable under workspace-write by default; exclude them so `outside` is outside every writable root.
    const config = { sandbox_workspace_write: { exclude_slash_tmp: true, exclude_tmpdir_env_var: true } };
    const { threadId } = await env.codex.startThread({ cwd: ws, sandbox: "workspace-write", approvalPolicy: "never", config });
    const record = await (await env.codex.startTurn({ threadId, text: "write", onApproval })).completion;
    expect(approvals).toEqual([]);
    expect(existsSync(path.join(ws, "in.txt"))).toBe(true);
    expect(existsSync(path.join(outside, "o.txt"))).toBe(false);
    const item = record.items.find((i) => i.kind === "commandExecution");
    // stdout and stderr are aggregated as they arrive, so their lines may interleave in either order.
    const output = item?.kind === "commandExecution" ? (item.aggregatedOutput ?? "") : "";
    expect(output).toContain(`${path.join(outside, "o.txt")}: Read-only file system`);
    expect(output).toContain("OUT-RC=1");
    expect(output).toContain("IN-RC=0");
  });

  it("a command the model asks to run outside the sandbox (on-request): the host sees its justification; approved it runs unsandboxed, denied it never runs", async () => {
    const ws = workspace();
    const outside = workspace();
    // As above: temp dirs excluded, so `outside` is writable only outside the sandbox.
    const config = { sandbox_workspace_write: { exclude_slash_tmp: true, exclude_tmpdir_env_var: true } };
    const justification = "Need to write the report outside the workspace";
    for (const asked of ["approve", "deny"] as const) {
      decision = asked;
      approvals.length = 0;
      const target = path.join(outside, `${asked}.txt`);
      env.fake.enqueue([
        { functionCall: execCommandCall(`echo escalated > ${target}`, { workdir: ws, sandboxPermissions: "require_escalated", justification, callId: `call_${asked}` }) },
        { text: "ok" },
      ]);
      const { threadId } = await env.codex.startThread({ cwd: ws, sandbox: "workspace-write", approvalPolicy: "on-request", config });
      const record = await (await env.codex.startTurn({ threadId, text: "write the report", onApproval })).completion;
      expect(record.codexStatus).toBe("completed");
      expect(approvals).toEqual([expect.objectContaining({ kind: "commandExecution", itemId: `call_${asked}`, reason: justification, command: expect.stringContaining(target) })]);
      expect(existsSync(target)).toBe(asked === "approve");
      const result = toolMessages(record.messagesSnapshot).find((t) => t.role === "toolResult");
      if (asked === "approve") expect(readFileSync(target, "utf8")).toBe("escalated\n");
      else expect(result).toEqual({ role: "toolResult", name: "shell", isError: true, text: "Command declined: it was not run." });
    }
  });

  it("asks the approval handler under approvals 'untrusted' and runs what it approves", async () => {
    const ws = workspace();
    scriptWork(ws, { updateOutTxt: true });
    const record = await runTurn(ws, "untrusted");
    expect(record.codexStatus).toBe("completed");
    expect(approvals.map((a) => a.kind)).toEqual(["commandExecution", "fileChange"]);
    expect(approvals[0]).toMatchObject({ method: "item/commandExecution/requestApproval", itemId: "call_1_0", cwd: ws, command: expect.stringContaining("echo hello > out.txt") });
    expect(approvals[1]).toMatchObject({ kind: "fileChange", itemId: "call_2_0", changes: [{ path: path.join(ws, "added.txt"), kind: "add" }, { path: path.join(ws, "out.txt"), kind: "update" }] });
    expect(readFileSync(path.join(ws, "out.txt"), "utf8")).toBe("hello patched\n");
    expect(toolMessages(record.messagesSnapshot).filter((t) => t.role === "toolResult").map((t) => t.isError)).toEqual([false, false]);
  });

  it("a host that takes longer than the idle timeout to decide is waited for: Codex is waiting on us, not idle", async () => {
    const ws = workspace();
    env.fake.enqueue([{ functionCall: execCommandCall("echo slow > slow.txt", { workdir: ws }) }, { text: "decided slowly" }]);
    const { threadId } = await env.codex.startThread({ cwd: ws, sandbox: "workspace-write", approvalPolicy: "untrusted" });
    const slowApproval = async (request: CodexApprovalRequest): Promise<CodexApprovalDecision> => {
      approvals.push(request);
      await new Promise((r) => setTimeout(r, 2_500)); // a person reading the command
      return "approve";
    };
    const turn = await env.codex.startTurn({ threadId, text: "write it", onApproval: slowApproval, idleTimeoutMs: 1_000 });
    const record = await turn.completion;
    expect(record.error).toBeUndefined();
    expect(record.codexStatus).toBe("completed");
    expect(approvals.map((a) => a.kind)).toEqual(["commandExecution"]);
    expect(readFileSync(path.join(ws, "slow.txt"), "utf8")).toBe("slow\n");
    expect(record.assistantText).toBe("decided slowly");
  });

  it("a command left running in the background when the turn ends is in the record where the model started it", async () => {
    const ws = workspace();
    // Codex hands the model the output after 300 ms with the process still running; the model answers; the turn ends.
    env.fake.enqueue([{ functionCall: execCommandCall("sleep 3 && echo LATER", { workdir: ws, yieldTimeMs: 300, callId: "call_bg" }) }, { text: "The server runs in the background." }]);
    const { threadId } = await env.codex.startThread({ cwd: ws, sandbox: "workspace-write", approvalPolicy: "never" });
    const turn = await env.codex.startTurn({ threadId, text: "start it" });
    const record = await turn.completion;
    expect(record.codexStatus).toBe("completed");
    // Codex reported the call's start but not its end (nor the output the model got).
    expect(record.items.find((i) => i.id === "call_bg")).toMatchObject({ kind: "commandExecution", completed: false });
    // Two responses: the call (its usage closed the response while the command ran), then the answer.
    expect(record.messagesSnapshot.map((m) => m.role)).toEqual(["user", "assistant", "toolResult", "assistant"]);
    type Assistant = { content: Array<{ type: string; id?: string; text?: string }>; stopReason: string };
    const [, assistant, result, answer] = record.messagesSnapshot as [AgentMessage, Assistant, { toolCallId: string; content: Array<{ text: string }> }, Assistant];
    expect(assistant.content.map((p) => p.type)).toEqual(["toolCall"]);
    expect(assistant.stopReason).toBe("toolUse");
    expect(assistant.content[0]).toMatchObject({ id: "call_bg", arguments: expect.objectContaining({ command: expect.stringContaining("sleep 3") }) });
    expect(answer.content).toEqual([{ type: "text", text: "The server runs in the background." }]);
    expect(record.assistantText).toBe("The server runs in the background.");
    expect(result).toMatchObject({ toolCallId: "call_bg", content: [{ type: "text", text: UNFINISHED_TOOL_RESULT }] });
    // pi reads the mirror back as the same messages.
    const sessionFile = path.join(workspace(), "session.jsonl");
    await mirrorTurnToTranscript({ sessionFile, sessionId: "native-bg", cwd: ws, threadId: record.threadId, turnId: record.turnId, messages: record.messagesSnapshot });
    expect(SessionManager.open(sessionFile, ws).buildSessionContext().messages).toEqual(record.messagesSnapshot);
  });

  it("a command Codex waits on in silence (an exec, then a write_stdin wait on it) does not trip the idle watchdog; after it, silence does", async () => {
    const ws = workspace();
    env.fake.enqueue([
      // Codex returns after 500 ms with the process still running, then the model waits on it: no notification for ~4 s.
      { functionCall: execCommandCall("sleep 4 && echo POLLED", { workdir: ws, yieldTimeMs: 500 }) },
      (req) => {
        const session = /session ID (\d+)/.exec(JSON.stringify(req.body?.input ?? []))?.[1];
        return { functionCall: { name: "write_stdin", arguments: { session_id: Number(session), chars: "", yield_time_ms: 300_000 } } };
      },
      { text: "it finished" },
    ]);
    const { threadId } = await env.codex.startThread({ cwd: ws, sandbox: "workspace-write", approvalPolicy: "never" });
    const turn = await env.codex.startTurn({ threadId, text: "run the long one", idleTimeoutMs: 1_000 });
    const record = await turn.completion;
    expect(record.error).toBeUndefined();
    expect(record.codexStatus).toBe("completed");
    expect(record.assistantText).toBe("it finished");
    expect(toolMessages(record.messagesSnapshot).filter((m) => m.role === "toolResult").some((m) => m.text?.includes("POLLED"))).toBe(true);

    // Once the command has ended, the watchdog is back: a model silent for 4 s ends the turn.
    env.fake.enqueue([{ functionCall: execCommandCall("echo quick", { workdir: ws }) }, { text: "late", delayMs: 4_000 }]);
    const silent = await env.codex.startTurn({ threadId, text: "then stall", idleTimeoutMs: 1_000 });
    const stalled = await silent.completion;
    expect(stalled.codexStatus).toBe("timedOut");
    expect(stalled.error).toMatchObject({ code: "idleTimeout" });
  });

  it("puts each approval request to beforeToolCall first (OpenClaw's tool policy): block declines, approved grants, a rewrite refuses, else onApproval", async () => {
    const ws = workspace();
    env.fake.enqueue([
      { functionCall: execCommandCall("echo a > blocked.txt", { workdir: ws }) },
      { functionCall: execCommandCall("echo b > granted.txt", { workdir: ws }) },
      { functionCall: execCommandCall("echo c > rewritten.txt", { workdir: ws }) },
      { customToolCall: applyPatchCall([{ kind: "add", path: "added.txt", content: "x\n" }]) },
      { text: "policy applied" },
    ]);
    const seen: Array<{ tool: string; approvalMethod?: string; arguments: unknown }> = [];
    const { threadId } = await env.codex.startThread({ cwd: ws, sandbox: "workspace-write", approvalPolicy: "untrusted" });
    const turn = await env.codex.startTurn({
      threadId,
      text: "apply the policy",
      onApproval,
      beforeToolCall: (call) => {
        seen.push({ tool: call.tool, arguments: call.arguments, ...(call.approvalMethod ? { approvalMethod: call.approvalMethod } : {}) });
        const args = call.arguments as { command?: string; approval?: unknown };
        if (call.tool === "apply_patch") return { arguments: Object.fromEntries(Object.entries(call.arguments as object).reverse()) }; // handed back: no rewrite
        if (args.command?.includes("blocked.txt")) return { block: true, blockReason: "not that file" };
        if (args.command?.includes("granted.txt")) return { approved: true };
        return { arguments: { ...args, command: "echo safe" } };
      },
    });
    const record = await turn.completion;
    expect(record.codexStatus).toBe("completed");
    expect(seen.map((c) => [c.tool, c.approvalMethod])).toEqual([
      ["shell", "item/commandExecution/requestApproval"],
      ["shell", "item/commandExecution/requestApproval"],
      ["shell", "item/commandExecution/requestApproval"],
      ["apply_patch", "item/fileChange/requestApproval"],
    ]);
    // OpenClaw's policy shape: the command and cwd, and the request as Codex sent it.
    expect(seen[0]!.arguments).toMatchObject({ command: expect.stringContaining("echo a > blocked.txt"), cwd: ws, approval: { itemId: "call_0_0", threadId } });
    expect(seen[3]!.arguments).toMatchObject({ itemId: "call_3_0", threadId });
    // Only the patch, which the policy left alone, reached onApproval.
    expect(approvals.map((a) => a.kind)).toEqual(["fileChange"]);
    expect(existsSync(path.join(ws, "blocked.txt"))).toBe(false);
    expect(readFileSync(path.join(ws, "granted.txt"), "utf8")).toBe("b\n");
    expect(existsSync(path.join(ws, "rewritten.txt"))).toBe(false);
    expect(readFileSync(path.join(ws, "added.txt"), "utf8")).toBe("x\n");
    expect(record.items.filter((i) => i.kind === "commandExecution").map((i) => (i as { status: string }).status)).toEqual(["declined", "completed", "declined"]);
    expect(turn.warnings.map((w) => w.message)).toContain("beforeToolCall rewrote the approval request's params; the original request was refused");
  });

  it("an approval still open when the turn is interrupted is withdrawn: Codex resolves it, the host's signal aborts at once", async () => {
    const ws = workspace();
    env.fake.enqueue([{ functionCall: execCommandCall("echo never > never.txt", { workdir: ws }) }, { text: "not reached" }]);
    const { threadId } = await env.codex.startThread({ cwd: ws, sandbox: "workspace-write", approvalPolicy: "untrusted" });
    let withdrawnAt = 0;
    let asked!: () => void;
    const askedNow = new Promise<void>((r) => (asked = r));
    const turn = await env.codex.startTurn({
      threadId,
      text: "write it",
      // A person who has not answered yet: the question stays open until it is withdrawn.
      onApproval: (_request, { signal }) => {
        asked();
        return new Promise((resolve) => signal.addEventListener("abort", () => ((withdrawnAt = Date.now()), resolve("approve")), { once: true }));
      },
    });
    await askedNow;
    const interruptedAt = Date.now();
    await turn.interrupt();
    const record = await turn.completion;
    expect(record.codexStatus).toBe("interrupted");
    await waitFor(() => withdrawnAt > 0, 5_000);
    expect(withdrawnAt - interruptedAt).toBeLessThan(5_000);
    // The late "approve" was not sent: nothing ran.
    expect(existsSync(path.join(ws, "never.txt"))).toBe(false);
  });

  it("honours a denial: Codex reports the command and the patch declined, nothing is written", async () => {
    const ws = workspace();
    decision = "deny";
    scriptWork(ws, { updateOutTxt: false });
    const record = await runTurn(ws, "untrusted");
    expect(record.codexStatus).toBe("completed");
    expect(approvals.map((a) => a.kind)).toEqual(["commandExecution", "fileChange"]);
    expect(existsSync(path.join(ws, "out.txt"))).toBe(false);
    expect(existsSync(path.join(ws, "added.txt"))).toBe(false);
    expect(record.items.filter((i) => i.kind === "commandExecution" || i.kind === "fileChange").map((i) => (i as { status: string }).status)).toEqual([
      "declined",
      "declined",
    ]);
    const results = toolMessages(record.messagesSnapshot).filter((t) => t.role === "toolResult");
    expect(results).toEqual([
      { role: "toolResult", name: "shell", isError: true, text: "Command declined: it was not run." },
      { role: "toolResult", name: "apply_patch", isError: true, text: expect.stringMatching(/^Patch declined: no file was changed\./) },
    ]);
    // The model was told: Codex's own rejection texts went back in the tool outputs.
    const outputs = toolOutputs(env.fake.requests.at(-1)!.body).map((o) => o.output);
    expect(outputs.join("\n")).toMatch(/rejected by user[\s\S]*patch rejected by user/);
  });
});
