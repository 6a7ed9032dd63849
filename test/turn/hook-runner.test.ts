import pino from "pino";
import { describe, expect, it } from "vitest";
import type { BeforeAgentFinalizeEvent, BeforeToolCallResult, CodexTurnHooks } from "../../src/hooks/types.js";
import { createHookRunner } from "../../src/turn/hook-runner.js";

const event: BeforeAgentFinalizeEvent = { sessionId: "s", runId: "run-1", threadId: "th", turnId: "tu", assistantText: "done", codexStatus: "inProgress", stopHookActive: false };

function runner(hooks: CodexTurnHooks) {
  const warnings: string[] = [];
  const r = createHookRunner({ hooks, timeoutMs: 200, logger: pino({ level: "silent" }), ids: {}, warn: (w) => warnings.push(w) });
  return { r, warnings };
}

describe("deciding hooks (beforeAgentFinalize, beforeToolCall)", () => {
  it("a revision request passes; nothing, a malformed answer, a throw or a hang is no decision, the last three with a warning", async () => {
    expect(await runner({ beforeAgentFinalize: () => ({ action: "revise", reason: "cite it" }) }).r.beforeAgentFinalize(event)).toEqual({ action: "revise", reason: "cite it" });
    const quiet = runner({ beforeAgentFinalize: () => undefined });
    expect(await quiet.r.beforeAgentFinalize(event)).toBeUndefined();
    expect(quiet.warnings).toEqual([]);
    for (const hook of [
      () => ({ action: "revise", reason: "   " }),
      () => ({ action: "rewrite", reason: "x" }),
      () => {
        throw new Error("boom");
      },
      () => new Promise<never>(() => undefined),
    ] as Array<CodexTurnHooks["beforeAgentFinalize"]>) {
      const bad = runner({ beforeAgentFinalize: hook });
      expect(await bad.r.beforeAgentFinalize(event)).toBeUndefined();
      expect(bad.warnings).toHaveLength(1);
      expect(bad.warnings[0]).toMatch(/^beforeAgentFinalize hook failed \(/);
    }
    expect(await runner({}).r.beforeAgentFinalize(event)).toBeUndefined();
  });

  it("beforeToolCall: a block passes; a malformed answer is no decision, with a warning", async () => {
    const call = { sessionId: "s", runId: "run-1", threadId: "th", turnId: "tu", callId: "c", toolName: "shell", native: true, params: {} };
    expect(await runner({ beforeToolCall: () => ({ block: true, blockReason: "no" }) }).r.beforeToolCall(call)).toEqual({ block: true, blockReason: "no" });
    const bad = runner({ beforeToolCall: () => ({ block: "yes" }) as never });
    expect(await bad.r.beforeToolCall(call)).toBeUndefined();
    expect(bad.warnings[0]).toMatch(/^beforeToolCall hook failed \(malformed result/);
  });
});

describe("beforePromptBuild", () => {
  it("applies a result that reports warnings and turns each warning into a turn warning", async () => {
    const ctx = { sessionId: "s", runId: "run-1", prompt: "question", messages: [] };
    const partly = runner({ beforePromptBuild: () => ({ prompt: "ctx\n\nquestion", warnings: ["plugin a before_agent_start hook failed: offline"] }) });
    expect(await partly.r.beforePromptBuild(ctx)).toMatchObject({ prompt: "ctx\n\nquestion" });
    expect(partly.warnings).toEqual(["beforePromptBuild hook: plugin a before_agent_start hook failed: offline"]);
    const clean = runner({ beforePromptBuild: () => ({ prompt: "other" }) });
    await clean.r.beforePromptBuild(ctx);
    expect(clean.warnings).toEqual([]);
    await expect(runner({ beforePromptBuild: () => ({ warnings: "not a list" }) as never }).r.beforePromptBuild(ctx)).rejects.toThrow(/^malformed result: warnings:/);
  });
});

describe("beforeToolCallFailure", () => {
  it("\"block\": a hook that throws, hangs or answers nonsense blocks the call (OpenClaw's fail-closed policy), with a warning", async () => {
    const call = { sessionId: "s", runId: "run-1", threadId: "th", turnId: "tu", callId: "c", toolName: "shell", native: true, params: {} };
    for (const hook of [
      () => {
        throw new Error("guard crashed");
      },
      () => new Promise<never>(() => undefined),
      () => ({ block: "maybe" }) as never,
    ] as Array<CodexTurnHooks["beforeToolCall"]>) {
      const closed = runner({ beforeToolCall: hook, beforeToolCallFailure: "block" });
      expect(await closed.r.beforeToolCall(call)).toEqual({ block: true, blockReason: "Tool call blocked because before_tool_call hook failed" });
      expect(closed.warnings).toHaveLength(1);
      const open = runner({ beforeToolCall: hook });
      expect(await open.r.beforeToolCall(call)).toBeUndefined();
    }
    // A hook that answers is unaffected by the policy.
    expect(await runner({ beforeToolCall: () => undefined, beforeToolCallFailure: "block" }).r.beforeToolCall(call)).toBeUndefined();
  });
});

describe("beforeToolCallTimeoutMs", () => {
  it("bounds beforeToolCall instead of the engine-call bound: a person may take longer than an engine call", async () => {
    const call = { sessionId: "s", runId: "run-1", threadId: "th", turnId: "tu", callId: "c", toolName: "shell", native: true, params: {} };
    const slow = () => new Promise<BeforeToolCallResult>((resolve) => setTimeout(() => resolve({ block: true, blockReason: "decided late" }), 300));
    const patient = createHookRunner({ hooks: { beforeToolCall: slow, beforeToolCallTimeoutMs: 2_000 }, timeoutMs: 100, logger: pino({ level: "silent" }), ids: {}, warn: () => undefined });
    expect(await patient.beforeToolCall(call)).toEqual({ block: true, blockReason: "decided late" });
    const hasty = createHookRunner({ hooks: { beforeToolCall: slow }, timeoutMs: 100, logger: pino({ level: "silent" }), ids: {}, warn: () => undefined });
    expect(await hasty.beforeToolCall(call)).toBeUndefined();
  });
});

describe("beforeModelResolve", () => {
  it("a chosen model passes; nothing keeps the turn's; a malformed answer or a throw is no choice, with a warning", async () => {
    const ctx = { sessionId: "s", runId: "run-1", prompt: "p" };
    expect(await runner({ beforeModelResolve: () => ({ model: "gpt-mini" }) }).r.beforeModelResolve(ctx)).toBe("gpt-mini");
    expect(await runner({ beforeModelResolve: () => undefined }).r.beforeModelResolve(ctx)).toBeUndefined();
    for (const hook of [() => ({ model: "" }), () => ({ model: "x", provider: "y" }) as never, () => { throw new Error("router down"); }] as Array<CodexTurnHooks["beforeModelResolve"]>) {
      const bad = runner({ beforeModelResolve: hook });
      expect(await bad.r.beforeModelResolve(ctx)).toBeUndefined();
      expect(bad.warnings[0]).toMatch(/^beforeModelResolve hook failed \(/);
    }
  });
});

describe("beforeAgentRun (the admission gate)", () => {
  const turn = { sessionId: "s", runId: "run-1", prompt: "p", messages: [] };
  it("no gate, nothing or { block: false } admits; a block is rendered as OpenClaw renders it, with its warnings", async () => {
    expect(await runner({}).r.beforeAgentRun(turn)).toEqual({ admitted: true });
    expect(await runner({ beforeAgentRun: () => undefined }).r.beforeAgentRun(turn)).toEqual({ admitted: true });
    expect(await runner({ beforeAgentRun: () => ({ block: false }) }).r.beforeAgentRun(turn)).toEqual({ admitted: true });
    expect(await runner({ beforeAgentRun: () => ({ block: true, message: "Too long", blockedBy: "len" }) }).r.beforeAgentRun(turn)).toEqual({
      admitted: false,
      blockedBy: "len",
      message: "Your message could not be sent: Too long (blocked by len)",
    });
    const warned = runner({ beforeAgentRun: () => ({ block: true, warnings: ["plugin x before_agent_run hook failed: down"] }) });
    expect(await warned.r.beforeAgentRun(turn)).toEqual({ admitted: false, blockedBy: "beforeAgentRun", message: "Your message could not be sent: blocked by beforeAgentRun" });
    expect(warned.warnings).toEqual(["beforeAgentRun hook: plugin x before_agent_run hook failed: down"]);
  });

  it("a throw, a hang or a malformed answer rejects (the machine then refuses the turn: fail-closed)", async () => {
    for (const hook of [
      () => {
        throw new Error("policy down");
      },
      () => new Promise<never>(() => undefined),
      () => ({ block: "yes" }),
      () => null,
      () => ({ block: true, reason: "internal" }),
    ] as Array<CodexTurnHooks["beforeAgentRun"]>) {
      await expect(runner({ beforeAgentRun: hook }).r.beforeAgentRun(turn)).rejects.toThrow();
    }
  });
});

describe("beforeMessageWrite", () => {
  const event = { sessionId: "s", runId: "run-1", message: { role: "user", content: "x", timestamp: 1 } as never };
  it("a rewrite or a block passes, with its warnings; a malformed answer or a throw stores the message as it is, with a warning", async () => {
    expect(await runner({ beforeMessageWrite: () => ({ block: true }) }).r.beforeMessageWrite(event)).toEqual({ block: true });
    const rewritten = runner({ beforeMessageWrite: () => ({ message: { role: "user", content: "y" } as never, warnings: ["plugin a failed"] }) });
    expect(await rewritten.r.beforeMessageWrite(event)).toMatchObject({ message: { role: "user", content: "y" } });
    expect(rewritten.warnings).toEqual(["beforeMessageWrite hook: plugin a failed"]);
    for (const hook of [() => ({ message: { content: "no role" } }), () => ({ block: "yes" }), () => { throw new Error("boom"); }] as unknown as Array<CodexTurnHooks["beforeMessageWrite"]>) {
      const bad = runner({ beforeMessageWrite: hook });
      expect(await bad.r.beforeMessageWrite(event)).toBeUndefined();
      expect(bad.warnings[0]).toMatch(/^beforeMessageWrite hook failed \(/);
    }
  });
});

describe("observation hooks started in the background (llmInput, llmOutput)", () => {
  const input = { sessionId: "s", runId: "run-1", threadId: "th", prompt: "p", contextEntries: 0, imagesCount: 0, historyMessages: [], tools: [] };
  it("returns at once while the hook runs; drain waits for it, and its failure is a warning", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const calls: string[] = [];
    const { r, warnings } = runner({
      llmInput: async () => {
        calls.push("llmInput started");
        await gate;
        calls.push("llmInput done");
        throw new Error("trace backend down");
      },
    });
    r.observeInBackground("llmInput", input);
    calls.push("caller went on");
    let drained = false;
    const draining = r.drain().then(() => (drained = true));
    await new Promise((res) => setTimeout(res, 20));
    expect(drained).toBe(false);
    release();
    await draining;
    expect(calls).toEqual(["llmInput started", "caller went on", "llmInput done"]);
    expect(warnings).toEqual(["llmInput hook failed (trace backend down); ignored"]);
  });

  it("a hook that never settles is bounded by the hook timeout; nothing registered means nothing to wait for", async () => {
    const { r, warnings } = runner({ llmOutput: () => new Promise<never>(() => undefined) });
    r.observeInBackground("llmOutput", { sessionId: "s", runId: "run-1", threadId: "th", turnId: "tu", assistantText: "a", codexStatus: "completed" });
    r.observeInBackground("llmInput", input);
    await r.drain();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^llmOutput hook failed \(/);
    await runner({}).r.drain();
  });
});
