/**
 * The hook surface end to end (issue 16), real app-server and fake model: one turn with an accordion compaction, a
 * dynamic tool call and a native command, with every hook recording when it ran; hooks that throw or hang leave the
 * turn completed with warnings; `handle.events` yields the turn's stream and ends when it settles; a blocked dynamic
 * tool call never reaches its handler.
 */
import { mkdtempSync, rmSync, existsSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn, startCodexTurn } from "../../src/turn.js";
import { createWindowEngine } from "../../src/context-engine/engines/index.js";
import type { ContextEngine } from "../../src/context-engine/types.js";
import type { CodexTurnHooks, CompactionHookEvent } from "../../src/hooks/types.js";
import type { TurnStreamEvent } from "../../src/params.js";
import { readThreadBinding, writeThreadBinding } from "../../src/transcript/binding.js";
import { readSessionTranscript } from "../../src/transcript/session-file.js";
import { execCommandCall, startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { disposeChecked, tempSessions, turnParams } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("turn-hooks-");
const workspaces: string[] = [];

beforeAll(async () => {
  // A HOME of its own keeps the machine's shell startup files out of the sandboxed command.
  const home = mkdtempSync(path.join(os.tmpdir(), "turn-hooks-home-"));
  workspaces.push(home);
  env = await startOfflineCodex({ codex: { env: { HOME: home } } });
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
  for (const w of workspaces) rmSync(w, { recursive: true, force: true });
});

/** A window engine that owns compaction and, when compacted, reports a summary keeping the last entry. */
function compactingEngine(sessionFile: string): ContextEngine {
  const inner = createWindowEngine({ ownsCompaction: true });
  return {
    ...inner,
    info: { ...inner.info, id: "compacting", ownsCompaction: true },
    async compact() {
      const t = await readSessionTranscript(sessionFile);
      const last = t.entries.at(-1)!;
      return { ok: true, compacted: true, result: { summary: "summary of the earlier turns", firstKeptEntryId: last.id, tokensBefore: 95 } };
    },
  };
}

const tool = (calls: unknown[]) => ({
  name: "lookup",
  description: "look something up",
  inputSchema: { type: "object", properties: { q: { type: "string" } } },
  handler: (args: unknown) => {
    calls.push(args);
    return "looked up";
  },
});

describe("the hook surface", () => {
  it("fires every hook in the spec's order on a turn with an accordion compaction, a dynamic tool call and a native command", async () => {
    const file = sessions.file();
    const ws = mkdtempSync(path.join(os.tmpdir(), "turn-hooks-ws-"));
    workspaces.push(ws);
    const engine = compactingEngine(file);
    expect((await runCodexTurn(turnParams(env, file, "first", { contextEngine: engine, cwd: ws }))).status).toBe("completed");
    // The bound thread reported usage past the accordion threshold (90% of its window).
    const binding = (await readThreadBinding(file))!;
    await writeThreadBinding(file, { ...binding, lastUsage: { inputTokens: 90, totalTokens: 95, modelContextWindow: 100 } });

    const order: string[] = [];
    const runIds = new Set<string | undefined>();
    const compactions: CompactionHookEvent[] = [];
    const record = (name: string) => (event: object) => {
      const e = event as { backend?: string; toolName?: string; runId?: string };
      runIds.add(e.runId);
      order.push(e.backend ? `${name}(${e.backend})` : e.toolName ? `${name}(${e.toolName})` : name);
    };
    const toolsAsked: unknown[] = [];
    const hooks: CodexTurnHooks = {
      beforePromptBuild: () => void order.push("beforePromptBuild"),
      llmInput: (e) => {
        record("llmInput")(e);
        toolsAsked.push(e.tools);
      },
      beforeToolCall: record("beforeToolCall"),
      afterToolCall: record("afterToolCall"),
      beforeCompaction: (e) => {
        record("beforeCompaction")(e);
        compactions.push(e);
      },
      afterCompaction: (e) => {
        record("afterCompaction")(e);
        compactions.push(e);
      },
      llmOutput: record("llmOutput"),
      beforeAgentFinalize: record("beforeAgentFinalize"),
      agentEnd: record("agentEnd"),
    };
    const handlerCalls: unknown[] = [];
    env.fake.enqueue([
      { functionCall: { name: "lookup", arguments: { q: "x" } } },
      { functionCall: execCommandCall("echo ran > ran.txt", { workdir: ws }) },
      { text: "done" },
    ]);
    const r = await runCodexTurn(
      turnParams(env, file, "second", { contextEngine: engine, cwd: ws, hooks, dynamicTools: [tool(handlerCalls)], sandbox: "danger-full-access" }),
    );
    expect(r.status).toBe("completed");
    expect(r.trace).toContain("compactBeforeTurn");
    expect(readFileSync(path.join(ws, "ran.txt"), "utf8")).toBe("ran\n");
    expect(handlerCalls).toEqual([{ q: "x" }]);
    expect(order).toEqual([
      "beforeCompaction(context-engine)",
      "afterCompaction(context-engine)",
      "beforePromptBuild",
      "llmInput",
      "beforeToolCall(lookup)",
      "afterToolCall(lookup)",
      "beforeToolCall(shell)",
      "afterToolCall(shell)",
      "llmOutput",
      "beforeAgentFinalize",
      "agentEnd",
    ]);
    // The accordion's hooks got the transcript and the session as it stood (the first turn), the messages before only.
    expect(compactions.map((e) => [e.sessionFile, e.messageCount, e.messages?.map((m) => m.role), e.compacted])).toEqual([
      [file, 2, ["user", "assistant"], undefined],
      [file, 2, undefined, true],
    ]);
    // llmInput lists the turn's client-side tools as the model got them (no handler).
    const lookup = tool([]);
    expect(toolsAsked).toEqual([[{ name: lookup.name, description: lookup.description, inputSchema: lookup.inputSchema }]]);
    // One run id (a fresh UUID for this attempt) in every hook event, and in the result.
    expect([...runIds]).toEqual([r.runId]);
    expect(r.runId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    // The engine's compaction is in the transcript as a pi compaction entry.
    const entries = (await readSessionTranscript(file)).entries;
    expect(entries.some((e) => e.type === "compaction")).toBe(true);
  });

  it("llmInput and llmOutput never hold up the turn (as OpenClaw's harness fires them); the result waits for them; a host's runId is used", async () => {
    const file = sessions.file();
    const before = env.fake.requests.length;
    const seen: string[] = [];
    const hooks: CodexTurnHooks = {
      // Finishes only once the model was asked: a turn that waited for it before turn/start would time it out.
      llmInput: async (e) => {
        await env.fake.waitForRequests(before + 1, { timeoutMs: 5_000 });
        seen.push(`llmInput ${e.runId}: the model was asked`);
      },
      // Finishes only once the turn is in the transcript: a turn that waited for it before the mirror would time it out.
      llmOutput: async (e) => {
        for (let i = 0; i < 100 && !(await readSessionTranscript(file).catch(() => undefined))?.entries.some((x) => x.type === "message"); i++) {
          await new Promise((res) => setTimeout(res, 50));
        }
        seen.push(`llmOutput ${e.runId}: the turn was mirrored`);
      },
      agentEnd: (e) => void seen.push(`agentEnd ${e.runId}`),
    };
    const r = await runCodexTurn(turnParams(env, file, "do not wait for observers", { hooks, runId: "host-run-7", timeouts: { engineCallMs: 4_000 } }));
    expect(r.status).toBe("completed");
    expect(r.warnings).toEqual([]);
    expect(r.runId).toBe("host-run-7");
    expect(seen).toEqual(["llmInput host-run-7: the model was asked", "llmOutput host-run-7: the turn was mirrored", "agentEnd host-run-7"]);
  });

  it("a throwing hook and a hanging hook leave the turn completed, with warnings", async () => {
    const file = sessions.file();
    const hooks: CodexTurnHooks = {
      llmInput: () => {
        throw new Error("observer broke");
      },
      agentEnd: () => new Promise<void>(() => undefined),
      onState: () => {
        throw new Error("state observer broke");
      },
    };
    const started = Date.now();
    const r = await runCodexTurn(turnParams(env, file, "observe me", { hooks, timeouts: { engineCallMs: 300 } }));
    expect(r.status).toBe("completed");
    expect(r.assistantText).toBe("reply to: observe me");
    expect(r.warnings).toEqual(
      expect.arrayContaining([expect.stringMatching(/^llmInput hook failed \(observer broke\)/), expect.stringMatching(/^agentEnd hook failed \(.*300.*\)/), expect.stringMatching(/^onState hook failed/)]),
    );
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it("beforeToolCall may block a dynamic tool call: the handler never runs, Codex gets the reason", async () => {
    const file = sessions.file();
    const handlerCalls: unknown[] = [];
    env.fake.enqueue([{ functionCall: { name: "lookup", arguments: { q: "secret" } } }, { text: "understood" }]);
    const r = await runCodexTurn(
      turnParams(env, file, "try the tool", {
        dynamicTools: [tool(handlerCalls)],
        hooks: { beforeToolCall: (c) => (c.toolName === "lookup" ? { block: true, blockReason: "lookups are off today" } : undefined) },
      }),
    );
    expect(r.status).toBe("completed");
    expect(handlerCalls).toEqual([]);
    expect(JSON.stringify(env.fake.requests.at(-1)!.body)).toContain("lookups are off today");
  });

  it("a beforeToolCall still asking when the turn ends is withdrawn: its signal aborts, the turn settles at once, no warning", async () => {
    const file = sessions.file();
    const handlerCalls: unknown[] = [];
    env.fake.enqueue([{ functionCall: { name: "lookup", arguments: { q: "slow" } } }, { text: "never reached" }]);
    let asked: AbortSignal | undefined;
    let withdrawnAt: number | undefined;
    const handle = startCodexTurn(
      turnParams(env, file, "try the tool", {
        dynamicTools: [tool(handlerCalls)],
        hooks: {
          beforeToolCallTimeoutMs: 60_000,
          // A person is being asked: the answer would come much later.
          beforeToolCall: (_call, context) => {
            asked = context?.signal;
            context?.signal.addEventListener("abort", () => (withdrawnAt = performance.now()));
            return new Promise(() => undefined);
          },
        },
      }),
    );
    const deadline = Date.now() + 20_000;
    while (!asked && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(asked?.aborted).toBe(false);
    const abortedAt = performance.now();
    handle.abort();
    const r = await handle.result;
    expect(r.status).toBe("aborted");
    expect(asked?.aborted).toBe(true);
    expect(withdrawnAt! - abortedAt).toBeLessThan(10_000);
    expect(r.warnings.filter((w) => w.includes("beforeToolCall"))).toEqual([]);
    // Nobody decided the call may run: it never does.
    expect(handlerCalls).toEqual([]);
    // The model's second answer was never asked for.
    env.fake.reset();
  });

  it("a dynamic tool handler learns which session made the call (two sessions on one app-server)", async () => {
    const seen: Array<Record<string, unknown>> = [];
    const sessionTool = {
      name: "whoami",
      description: "reports the calling session",
      inputSchema: { type: "object", properties: {} },
      handler: (_args: unknown, ctx: { sessionId?: string; sessionKey?: string; threadId: string; callId: string }) => {
        seen.push({ sessionId: ctx.sessionId, sessionKey: ctx.sessionKey, callId: ctx.callId, hasThread: ctx.threadId.length > 0 });
        return `session ${ctx.sessionId}`;
      },
    };
    for (const [sessionId, sessionKey] of [["alpha", "key-a"], ["beta", undefined]] as const) {
      env.fake.enqueue([{ functionCall: { name: "whoami", arguments: {}, callId: `call_${sessionId}` } }, { text: "ok" }]);
      const r = await runCodexTurn({
        ...turnParams(env, sessions.file(), "who is calling?", { dynamicTools: [sessionTool] }),
        sessionId,
        ...(sessionKey ? { sessionKey } : {}),
      });
      expect(r.status).toBe("completed");
      expect(JSON.stringify(env.fake.requests.at(-1)!.body)).toContain(`session ${sessionId}`);
    }
    expect(seen).toEqual([
      { sessionId: "alpha", sessionKey: "key-a", callId: "call_alpha", hasThread: true },
      { sessionId: "beta", sessionKey: undefined, callId: "call_beta", hasThread: true },
    ]);
  });

  it("handle.events yields the turn's stream events and ends when the turn settles", async () => {
    const file = sessions.file();
    env.fake.enqueue({ text: ["one ", "two ", "three"], delayMs: 5 });
    const handle = startCodexTurn(turnParams(env, file, "stream it"));
    const seen: TurnStreamEvent[] = [];
    for await (const event of handle.events) seen.push(event);
    const result = await handle.result;
    expect(result.status).toBe("completed");
    const states = seen.filter((e) => e.type === "state").map((e) => (e as { state: string }).state);
    expect(states).toEqual(result.trace);
    const text = seen.filter((e) => e.type === "agentMessageDelta").map((e) => (e as { delta: string }).delta).join("");
    expect(text).toBe(result.assistantText);
    expect(existsSync(`${file}.lock`)).toBe(false);
  });
});
