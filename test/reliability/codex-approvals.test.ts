/**
 * Codex doing real work through the client, on the real `codex app-server` against the fake Responses API: the fake
 * model asks for a shell command; approvals reach the host's `onApproval` as a typed request and its decision (or
 * the default, or a timeout) is what Codex does. Also: the sandbox and reasoning settings are accepted by the binary.
 * Also: in Plan collaboration mode (`collaborationMode: "plan"`) the model's `request_user_input` question reaches
 * `onUserInput` and the host's answer reaches the model; Codex 0.169.0 offers the tool in every mode but answers it
 * itself outside Plan mode ("request_user_input is unavailable in Default mode").
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { CodexApprovalRequest } from "../../src/codex/approvals.js";
import type { CodexUserInputRequest } from "../../src/codex/options.js";
import { runCodexTurn } from "../../src/turn.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";

let env: OfflineCodex;
const workspaces: string[] = [];

beforeAll(async () => {
  env = await startOfflineCodex({});
});
afterAll(async () => {
  await env?.dispose();
});
afterEach(() => {
  for (const ws of workspaces.splice(0)) rmSync(ws, { recursive: true, force: true });
});

function workspace(): string {
  const ws = mkdtempSync(path.join(os.tmpdir(), "codex-approvals-ws-"));
  workspaces.push(ws);
  return ws;
}

/** The `function_call_output` text of the last model request. */
function toolOutput(request: RecordedRequest | undefined): string {
  const input = (request?.body?.input ?? []) as Array<{ type?: string; output?: unknown }>;
  const out = input.filter((i) => i.type === "function_call_output").at(-1)?.output;
  return typeof out === "string" ? out : JSON.stringify(out);
}

/** One turn in which the model runs `touch made.txt` in `ws` (approval policy "untrusted": Codex asks first). */
async function touchTurn(ws: string, turnOptions: Record<string, unknown>) {
  const { codex, fake } = env;
  const { threadId } = await codex.startThread({ cwd: ws, sandbox: "workspace-write", approvalPolicy: "untrusted" });
  fake.enqueue([{ functionCall: { name: "exec_command", arguments: { cmd: "touch made.txt", workdir: ws } } }, { text: "done" }]);
  const turn = await codex.startTurn({ threadId, text: "make the file", ...turnOptions });
  const record = await turn.completion;
  return { threadId, record, turn, made: existsSync(path.join(ws, "made.txt")), output: toolOutput(fake.requests.at(-1)) };
}

describe("approvals reach the host and its decision is honoured (real app-server)", () => {
  it("approve: the host sees a typed command request and the command runs", async () => {
    const ws = workspace();
    const seen: CodexApprovalRequest[] = [];
    const r = await touchTurn(ws, { onApproval: (req: CodexApprovalRequest) => (seen.push(req), "approve") });
    expect(r.record.codexStatus).toBe("completed");
    expect(seen).toEqual([
      expect.objectContaining({ kind: "commandExecution", method: "item/commandExecution/requestApproval", threadId: r.threadId, turnId: r.turn.turnId, cwd: ws }),
    ]);
    expect(seen[0]!.kind === "commandExecution" && seen[0]!.command).toContain("touch made.txt");
    expect(seen[0]!.itemId).not.toBe("");
    expect(r.made).toBe(true);
  });

  it("deny: the command does not run and Codex reports it rejected", async () => {
    const ws = workspace();
    const r = await touchTurn(ws, { onApproval: () => "deny" });
    expect(r.record.codexStatus).toBe("completed");
    expect(r.made).toBe(false);
    expect(r.output).toMatch(/rejected/i);
  });

  it("no callback: denied by default", async () => {
    const ws = workspace();
    const before = env.codex.stats().approvalsDeclined;
    const r = await touchTurn(ws, {});
    expect(r.made).toBe(false);
    expect(env.codex.stats().approvalsDeclined).toBe(before + 1);
  });

  it("a callback that never decides is denied after approvalTimeoutMs, with a warning", async () => {
    const ws = workspace();
    const r = await touchTurn(ws, { onApproval: () => new Promise(() => undefined), approvalTimeoutMs: 300 });
    expect(r.record.codexStatus).toBe("completed");
    expect(r.made).toBe(false);
    expect(r.turn.warnings).toEqual([expect.objectContaining({ code: "approvalTimeout" })]);
  });
});

/** The model asks one question with two options through `request_user_input`, then answers. */
function scriptQuestion(): void {
  env.fake.enqueue([
    {
      functionCall: {
        name: "request_user_input",
        arguments: {
          questions: [
            { id: "color", header: "Color", question: "Which color should the button be?", options: [{ label: "Blue (Recommended)", description: "matches the brand" }, { label: "Red", description: "stands out" }] },
          ],
        },
      },
    },
    { text: "Blue it is." },
  ]);
}

describe("request_user_input in Plan mode reaches onUserInput (real app-server)", () => {
  it("the client: in Plan mode the typed question reaches the host and its answer the model; in Default mode Codex refuses it", async () => {
    const { codex, fake } = env;
    const { threadId } = await codex.startThread({ cwd: workspace() });
    scriptQuestion();
    const asked: CodexUserInputRequest[] = [];
    const turn = await codex.startTurn({ threadId, text: "plan the button", collaborationMode: "plan", onUserInput: (req) => (asked.push(req), { color: { answers: ["Blue (Recommended)"] } }) });
    const record = await turn.completion;
    expect(record.codexStatus).toBe("completed");
    expect(record.assistantText).toBe("Blue it is.");
    expect(asked).toEqual([
      expect.objectContaining({
        threadId,
        turnId: turn.turnId,
        questions: [expect.objectContaining({ id: "color", question: "Which color should the button be?", options: [{ label: "Blue (Recommended)", description: "matches the brand" }, { label: "Red", description: "stands out" }] })],
      }),
    ]);
    expect(toolOutput(fake.requests.at(-1))).toContain("Blue (Recommended)");
    // Codex emits no item for it, but the model saw a tool call and its output: the record holds both, in order.
    const answer = JSON.stringify({ answers: { color: { answers: ["Blue (Recommended)"] } } });
    expect(toolOutput(fake.requests.at(-1))).toBe(answer);
    expect(record.messagesSnapshot).toMatchObject([
      { role: "user", content: "plan the button" },
      { role: "assistant", stopReason: "toolUse", content: [{ type: "toolCall", id: asked[0]!.itemId, name: "request_user_input", arguments: { questions: asked[0]!.questions } }] },
      { role: "toolResult", toolCallId: asked[0]!.itemId, toolName: "request_user_input", content: [{ type: "text", text: answer }], isError: false },
      { role: "assistant", content: [{ type: "text", text: "Blue it is." }] },
    ]);
    // In Default mode Codex offers the tool but refuses it itself: the host is not asked.
    scriptQuestion();
    const again = await (await codex.startTurn({ threadId, text: "and now?", collaborationMode: "default", onUserInput: (req) => (asked.push(req), undefined) })).completion;
    expect(again.codexStatus).toBe("completed");
    expect(asked).toHaveLength(1);
    expect(toolOutput(fake.requests.at(-1))).toBe("request_user_input is unavailable in Default mode");
  });

  it("runCodexTurn: collaborationMode and onUserInput as turn parameters", async () => {
    const file = path.join(workspace(), "plan.jsonl");
    scriptQuestion();
    const asked: string[] = [];
    const result = await runCodexTurn({
      appServer: env.codex,
      sessionId: "plan",
      sessionFile: file,
      prompt: "plan the button",
      collaborationMode: "plan",
      onUserInput: (req) => (asked.push(req.questions[0]!.id), { color: { answers: ["Red"] } }),
    });
    expect(result.status).toBe("completed");
    expect(asked).toEqual(["color"]);
    expect(toolOutput(env.fake.requests.at(-1))).toContain("Red");
    // The transcript records the question and the answer as the model saw them.
    const history = await readSessionHistory(file);
    expect(history.messages.map((m) => m.role)).toEqual(["user", "assistant", "toolResult", "assistant"]);
    expect(JSON.stringify(history.messages[2])).toContain('{\\"answers\\":{\\"color\\":{\\"answers\\":[\\"Red\\"]}}}');
  });

  it("runCodexTurn: the plan proposed in Plan mode is result.proposedPlan, out of assistantText, and in the transcript", async () => {
    const file = path.join(workspace(), "proposed.jsonl");
    env.fake.enqueue({ text: "Here is the plan.\n<proposed_plan>\n# Button\n1. Add a blue button\n2. Test it\n</proposed_plan>\n" });
    const result = await runCodexTurn({ appServer: env.codex, sessionId: "proposed", sessionFile: file, prompt: "plan the button", collaborationMode: "plan" });
    expect(result.status).toBe("completed");
    expect(result.proposedPlan).toBe("# Button\n1. Add a blue button\n2. Test it\n");
    expect(result.assistantText).toBe("Here is the plan.\n");
    const history = await readSessionHistory(file);
    expect(history.messages).toContainEqual(expect.objectContaining({ role: "custom", customType: "codex.plan", content: result.proposedPlan }));
  });

  it("runCodexTurn without collaborationMode keeps the thread's mode: Plan stays until a turn asks for Default", async () => {
    // Observed with 0.169: Codex adds a <collaboration_mode> developer message when a turn changes the mode, and none
    // when a turn names no mode; the mode the model works in is the latest one in its input.
    const latestMode = (request: RecordedRequest | undefined): string | undefined => {
      const input = (request?.body as { input?: Array<{ role?: string; content?: unknown }> } | undefined)?.input ?? [];
      const tags = input
        .filter((m) => m.role === "developer")
        .flatMap((m) => [...JSON.stringify(m.content).matchAll(/<collaboration_mode>(# Plan Mode|# Collaboration Mode: Default)/g)].map((x) => x[1]));
      return tags.at(-1) === undefined ? undefined : tags.at(-1) === "# Plan Mode" ? "plan" : "default";
    };
    const ws = workspace();
    const file = path.join(ws, "modes.jsonl");
    const seen: Array<string | undefined> = [];
    for (const mode of ["plan", undefined, "default", undefined] as const) {
      env.fake.enqueue({ text: "ok" });
      const result = await runCodexTurn({
        appServer: env.codex,
        sessionId: "modes",
        sessionFile: file,
        prompt: `turn in ${mode ?? "the thread's"} mode`,
        cwd: ws,
        ...(mode ? { collaborationMode: mode } : {}),
      });
      expect(result.status).toBe("completed");
      seen.push(latestMode(env.fake.requests.at(-1)));
    }
    expect(seen).toEqual(["plan", "plan", "default", "default"]);
  });

  it("a question nobody can answer (no onUserInput) is declined, and the record holds what the model then read", async () => {
    const { codex, fake } = env;
    const { threadId } = await codex.startThread({ cwd: workspace() });
    scriptQuestion();
    const record = await (await codex.startTurn({ threadId, text: "plan the button", collaborationMode: "plan" })).completion;
    expect(record.codexStatus).toBe("completed");
    // Observed with 0.169: a declined request reads to the model as an empty answer.
    expect(toolOutput(fake.requests.at(-1))).toBe('{"answers":{}}');
    const [call, result] = record.messagesSnapshot.slice(1, 3);
    expect(call).toMatchObject({ role: "assistant", content: [{ type: "toolCall", name: "request_user_input" }] });
    expect(result).toMatchObject({ role: "toolResult", toolName: "request_user_input", content: [{ type: "text", text: '{"answers":{}}' }], isError: true });
  });
});

describe("other host decisions and settings on the real binary", () => {
  it("workspace-write with writable roots and network, reasoning effort and summary are accepted; effort reaches the model", async () => {
    const { codex, fake } = env;
    const ws = workspace();
    const extra = workspace();
    const { threadId } = await codex.startThread({
      cwd: ws,
      sandbox: "workspace-write",
      writableRoots: [extra],
      networkAccess: false,
      reasoningEffort: "high",
      reasoningSummary: "concise",
    });
    fake.enqueue({ text: "ok" });
    const record = await (await codex.startTurn({ threadId, text: "hello" })).completion;
    expect(record.codexStatus).toBe("completed");
    expect(fake.requests.at(-1)!.body?.reasoning).toMatchObject({ effort: "high", summary: "concise" });
    // A real resume in the same process re-sends the settings (Codex accepts them again).
    await codex.resumeThread({ threadId, cwd: ws, sandbox: "workspace-write", writableRoots: [extra], reasoningEffort: "high" });
    fake.enqueue({ text: "ok again" });
    expect((await (await codex.startTurn({ threadId, text: "again" })).completion).codexStatus).toBe("completed");
  });
});
