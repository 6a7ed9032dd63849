/**
 * Codex's own tools that are neither commands nor patches, through `runCodexTurn` on the real `codex app-server`
 * 0.169.0, offline: the model views a local image (`view_image`) and delegates to a sub-agent (`spawn_agent`, then
 * `wait_agent`; the sub-agent is a second Codex thread whose model requests go to the same fake). Codex runs them and
 * reports `imageView` and `collabAgentToolCall` items; the session transcript must hold each call and its result, so
 * that what the sub-agent answered survives into the history an engine (or a fresh thread) is given. A sub-agent works
 * for the turn that waits on it: its approval requests reach that turn's `onApproval`, and its progress keeps that
 * turn's idle watchdog from firing.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { deflateSync } from "node:zlib";
import { SessionManager } from "@mariozechner/pi-coding-agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import type { CodexApprovalDecision, CodexApprovalRequest } from "../../src/codex/app-server.js";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";
import { disposeChecked, tempSessions } from "../helpers/turn-env.js";

let env: OfflineCodex;
let ws: string;
const sessions = tempSessions("agent-tools-");

beforeAll(async () => {
  ws = mkdtempSync(path.join(tmpdir(), "ctm-agent-tools-ws-"));
  // A model that accepts images: Codex refuses `view_image` for a text-only model and reports no item.
  env = await startOfflineCodex({ offline: { inputModalities: ["text", "image"] }, codex: { env: { HOME: ws } } });
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
  rmSync(ws, { recursive: true, force: true });
});

/** A tiny valid PNG (solid red), so Codex can read and send it. */
function redPng(size: number): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf: Buffer) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8);
  const rows = Buffer.concat(Array.from({ length: size }, () => Buffer.from([0, ...Array.from({ length: size }, () => [255, 0, 0]).flat()])));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", header), chunk("IDAT", deflateSync(rows)), chunk("IEND", Buffer.alloc(0))]);
}

type Item = Record<string, unknown> & { type?: string };
const inputOf = (r: RecordedRequest): Item[] => ((r.body as { input?: Item[] } | undefined)?.input ?? []) as Item[];
const outputsOf = (r: RecordedRequest) => inputOf(r).filter((i) => i.type === "function_call_output");

/** Messages of the session as pi reads them back, with the tool calls and results flattened for assertions. */
function transcript(sessionFile: string): AgentMessage[] {
  return SessionManager.open(sessionFile, ws).buildSessionContext().messages as unknown as AgentMessage[];
}
const toolCalls = (messages: AgentMessage[]) =>
  messages.flatMap((m) => (m.role === "assistant" && Array.isArray(m.content) ? m.content.filter((p) => p.type === "toolCall") : [])) as Array<{
    id: string;
    name: string;
    arguments: Record<string, unknown>;
  }>;
const toolResults = (messages: AgentMessage[]) =>
  messages.filter((m) => m.role === "toolResult") as Array<{ toolCallId: string; toolName: string; content: Array<{ type: string; text?: string }>; isError: boolean }>;

describe("Codex's image and sub-agent tools in the transcript", () => {
  it("view_image: Codex sends the image to the model; the transcript holds the call and a result naming the file", async () => {
    const image = path.join(ws, "red.png");
    writeFileSync(image, redPng(4));
    env.fake.enqueue([{ functionCall: { name: "view_image", arguments: { path: image }, callId: "call_view" } }, { text: "The square is red." }]);
    const sessionFile = sessions.file("image");
    const result = await runCodexTurn({ appServer: env.codex, sessionId: "image", sessionFile, prompt: "What colour is red.png?", cwd: ws });
    expect(result.status).toBe("completed");

    // Codex really ran the tool: the model's next request carries the image itself.
    const followUp = env.fake.requests.at(-1)!;
    expect(JSON.stringify(outputsOf(followUp))).toContain("data:image/png;base64,");

    const messages = transcript(sessionFile);
    expect(toolCalls(messages)).toEqual([{ type: "toolCall", id: "call_view", name: "view_image", arguments: { path: image } }]);
    expect(toolResults(messages)).toMatchObject([
      { toolCallId: "call_view", toolName: "view_image", isError: false, content: [{ type: "text", text: `Viewed image: ${image}` }] },
    ]);
    // The call belongs to the response that made it, the answer to the next one: user, call, result, answer.
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "toolResult", "assistant"]);
    // Our own reader gives engines the same history.
    expect((await readSessionHistory(sessionFile)).messages).toEqual(messages);
  });

  it("spawn_agent + wait_agent: the sub-agent's answer is in the parent's transcript; its own items are not", async () => {
    let agentId = "";
    // One reply function for every request: the sub-agent's thread asks the same fake (its input holds only its task).
    env.fake.setDefault((req) => {
      const input = inputOf(req);
      if (!JSON.stringify(input).includes("Delegate the counting")) return { text: "one two three" };
      const outputs = outputsOf(req);
      if (outputs.length === 0) {
        return { functionCall: { name: "spawn_agent", namespace: "multi_agent_v1", arguments: { message: "count to three" }, callId: "call_spawn" } };
      }
      if (outputs.length === 1) {
        agentId = (JSON.parse(String(outputs[0]!.output)) as { agent_id: string }).agent_id;
        return { functionCall: { name: "wait_agent", namespace: "multi_agent_v1", arguments: { targets: [agentId], timeout_ms: 30_000 }, callId: "call_wait" } };
      }
      return { text: "The sub-agent counted to three." };
    });
    try {
      const sessionFile = sessions.file("agents");
      const result = await runCodexTurn({ appServer: env.codex, sessionId: "agents", sessionFile, prompt: "Delegate the counting.", cwd: ws });
      expect(result.status).toBe("completed");
      expect(agentId).not.toBe("");

      const messages = transcript(sessionFile);
      expect(toolCalls(messages).map((c) => [c.id, c.name])).toEqual([
        ["call_spawn", "spawn_agent"],
        ["call_wait", "wait_agent"],
      ]);
      expect(toolCalls(messages)[0]!.arguments).toMatchObject({ message: "count to three" });
      expect(toolCalls(messages)[1]!.arguments).toEqual({ targets: [agentId] });
      const results = toolResults(messages);
      expect(results.map((r) => [r.toolCallId, r.isError])).toEqual([
        ["call_spawn", false],
        ["call_wait", false],
      ]);
      expect(results[0]!.content[0]!.text).toContain(`Spawned agent ${agentId}`);
      // What the sub-agent answered, as the parent's model received it, is in the parent's history.
      expect(results[1]!.content[0]!.text).toBe(`Status: completed\nAgent ${agentId}: completed\none two three`);
      // The sub-agent's own thread (its task as a user message, its reply) stays out of the parent's transcript.
      expect(messages.filter((m) => m.role === "user").map((m) => m.content)).toEqual(["Delegate the counting."]);
      expect(messages.at(-1)).toMatchObject({ role: "assistant", content: [{ type: "text", text: "The sub-agent counted to three." }] });
    } finally {
      env.fake.setDefault(() => ({ text: "ok" }));
    }
  });

  /**
   * The parent spawns a sub-agent for `task` and waits for it; the sub-agent's replies come from `child` (by how many
   * tool outputs its own request holds). Returns the spawned agent's id once the turn ran.
   */
  function scriptDelegation(task: string, child: (outputs: Item[]) => Parameters<OfflineCodex["fake"]["enqueue"]>[0]) {
    const state = { agentId: "" };
    env.fake.setDefault((req) => {
      const input = inputOf(req);
      const outputs = outputsOf(req);
      if (!JSON.stringify(input).includes("Delegate:")) return child(outputs) as never;
      if (outputs.length === 0) return { functionCall: { name: "spawn_agent", namespace: "multi_agent_v1", arguments: { message: task }, callId: "call_spawn" } };
      if (outputs.length === 1) {
        state.agentId = (JSON.parse(String(outputs[0]!.output)) as { agent_id: string }).agent_id;
        return { functionCall: { name: "wait_agent", namespace: "multi_agent_v1", arguments: { targets: [state.agentId], timeout_ms: 60_000 }, callId: "call_wait" } };
      }
      return { text: "Parent done." };
    });
    return state;
  }

  it("a sub-agent's command approval goes to the turn's onApproval, whose decision Codex honours", async () => {
    for (const decision of ["approve", "deny"] as const) {
      const marker = path.join(ws, `child-${decision}.txt`);
      const state = scriptDelegation("write the file", (outputs) =>
        outputs.length === 0
          ? { functionCall: { name: "exec_command", arguments: { cmd: `echo CHILD-RAN > ${marker}`, workdir: ws } } }
          : { text: `child saw: ${String(outputs[0]!.output).slice(0, 80)}` },
      );
      const asked: CodexApprovalRequest[] = [];
      const onApproval = (r: CodexApprovalRequest): CodexApprovalDecision => {
        asked.push(r);
        return decision;
      };
      try {
        const sessionFile = sessions.file(`approval-${decision}`);
        // "untrusted": every command that is not known-safe needs an approval, the sub-agent's included.
        const result = await runCodexTurn({
          appServer: env.codex,
          sessionId: `approval-${decision}`,
          sessionFile,
          prompt: "Delegate: write the file.",
          cwd: ws,
          sandbox: "workspace-write",
          approvalPolicy: "untrusted",
          onApproval,
        });
        expect(result.status).toBe("completed");
        // Asked once, for the sub-agent's command, naming the sub-agent's thread (not the turn's).
        expect(asked.map((r) => [r.kind, r.threadId])).toEqual([["commandExecution", state.agentId]]);
        expect(asked[0]!.threadId).not.toBe(result.threadId);
        expect(asked[0]).toMatchObject({ command: expect.stringContaining("CHILD-RAN") });
        // Codex did what the host decided.
        expect(existsSync(marker)).toBe(decision === "approve");
        if (decision === "approve") expect(readFileSync(marker, "utf8")).toBe("CHILD-RAN\n");
      } finally {
        env.fake.setDefault(() => ({ text: "ok" }));
      }
    }
  });

  it("a sub-agent that keeps working keeps the waiting turn alive (its idle watchdog counts the sub-agent's progress)", async () => {
    // The sub-agent streams its answer for ~3 s; the parent, inside wait_agent, hears nothing of its own for that long.
    scriptDelegation("count slowly", () => ({ text: Array.from({ length: 12 }, (_, i) => `${i + 1} `), delayMs: 250 }));
    try {
      const sessionFile = sessions.file("slow-agent");
      const result = await runCodexTurn({
        appServer: env.codex,
        sessionId: "slow-agent",
        sessionFile,
        prompt: "Delegate: count slowly.",
        cwd: ws,
        timeouts: { turnIdleMs: 1_500 },
      });
      expect(result.error).toBeUndefined();
      expect(result.status).toBe("completed");
      const wait = toolResults(transcript(sessionFile)).find((r) => r.toolCallId === "call_wait");
      expect(wait?.content[0]?.text).toContain("1 2 3 4 5 6 7 8 9 10 11 12");
    } finally {
      env.fake.setDefault(() => ({ text: "ok" }));
    }
  });

  it("aborting the turn interrupts the sub-agents working for it (Codex alone leaves them running)", async () => {
    const state = scriptDelegation("count slowly", () => ({ text: Array.from({ length: 40 }, (_, i) => `${i + 1} `), delayMs: 100 }));
    const subAgentTurns: Array<{ threadId: string; status: string }> = [];
    let parentThread: string | undefined;
    const off = env.codex.onNotification((n) => {
      const p = n.params as { threadId?: string; turn?: { status?: string } };
      if (n.method === "turn/completed" && p.threadId !== parentThread) subAgentTurns.push({ threadId: p.threadId ?? "", status: p.turn?.status ?? "" });
    });
    const ac = new AbortController();
    try {
      const handle = runCodexTurn({
        appServer: env.codex,
        sessionId: "abort-agent",
        sessionFile: sessions.file("abort-agent"),
        prompt: "Delegate: count slowly.",
        cwd: ws,
        signal: ac.signal,
        onEvent: (e) => {
          // Abort once the parent is waiting on its sub-agent.
          if (e.type === "toolCall" && e.tool === "wait_agent") setTimeout(() => ac.abort(), 300);
        },
      });
      const result = await handle;
      parentThread = result.threadId;
      expect(result.status).toBe("aborted");
      // The sub-agent's 4-second answer was cut short: its turn ended interrupted, well before it could finish.
      const deadline = Date.now() + 5_000;
      while (!subAgentTurns.some((t) => t.threadId === state.agentId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(subAgentTurns.filter((t) => t.threadId === state.agentId)).toEqual([{ threadId: state.agentId, status: "interrupted" }]);
    } finally {
      off();
      env.fake.setDefault(() => ({ text: "ok" }));
    }
  });
});
