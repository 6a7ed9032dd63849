/**
 * The admission gate (`hooks.beforeAgentRun`, OpenClaw's `before_agent_run`) against the real `codex app-server` and
 * the fake model: a refused turn starts no Codex work (no thread, no model request, no llmInput), is recorded as a
 * redacted user message (never the prompt), reaches agentEnd as `blocked`, and leaves the session usable: the next
 * admitted turn resumes the same thread. A gate that fails refuses the turn (fail-closed). The OpenClaw plugin gate
 * sees the final prompt (after another plugin's recall block), and a blocked turn is not captured by a memory plugin.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentEndEvent } from "../../src/hooks/types.js";
import { loadOpenClawPlugins } from "../../src/openclaw/index.js";
import { readSessionTranscript } from "../../src/transcript/session-file.js";
import { inputMessageTexts, startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { runCodexTurn } from "../../src/turn.js";
import { fixture } from "../openclaw/helpers.js";
import { captureLogger, disposeChecked, tempSessions } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("ctm-admission-");

beforeAll(async () => {
  env = await startOfflineCodex();
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

/** The user texts of a transcript's message entries, in order. */
async function userTexts(file: string): Promise<string[]> {
  const t = await readSessionTranscript(file);
  return t.entries
    .filter((e) => e.type === "message" && (e["message"] as { role?: string }).role === "user")
    .map((e) => {
      const content = (e["message"] as { content: unknown }).content;
      return typeof content === "string" ? content : (content as Array<{ text?: string }>).map((c) => c.text ?? "").join("");
    });
}

describe("the admission gate on the real app-server", () => {
  it("refuses a turn before any Codex work, records it redacted, and the next turn resumes the same thread", async () => {
    const file = sessions.file("gate.jsonl");
    const seen: Array<{ prompt: string; messages: number; developerInstructions?: string }> = [];
    const ends: AgentEndEvent[] = [];
    let llmInputs = 0;
    const { logger, events } = captureLogger();
    const hooks = {
      beforePromptBuild: ({ prompt }: { prompt: string }) => ({ prompt: `[policy v2] ${prompt}` }),
      beforeAgentRun: (e: { prompt: string; messages: readonly unknown[]; developerInstructions?: string }) => {
        seen.push({ prompt: e.prompt, messages: e.messages.length, ...(e.developerInstructions !== undefined ? { developerInstructions: e.developerInstructions } : {}) });
        return e.prompt.includes("forbidden topic") ? { block: true as const, message: "that topic is off limits", blockedBy: "topic-policy" } : undefined;
      },
      llmInput: () => void llmInputs++,
      agentEnd: (e: AgentEndEvent) => void ends.push(e),
    };
    const turn = (prompt: string) => runCodexTurn({ appServer: env.codex, sessionId: "gate", sessionFile: file, prompt, cwd: sessions.dir, hooks, logger });

    env.fake.enqueue({ text: "First answer." });
    const first = await turn("Say hello.");
    expect(first.status).toBe("completed");

    const requestsBefore = env.fake.requests.length;
    const blocked = await turn("Tell me about the forbidden topic.");
    expect(blocked.status).toBe("blocked");
    expect(blocked.blocked).toEqual({ blockedBy: "topic-policy", message: "Your message could not be sent: that topic is off limits (blocked by topic-policy)" });
    expect(blocked.error).toEqual({ phase: "hooks", message: blocked.blocked!.message, code: "turnBlocked" });
    // Nothing reached Codex: no model request, no thread, no llmInput, no engine finalize.
    expect(env.fake.requests.length).toBe(requestsBefore);
    expect(blocked.threadId).toBeUndefined();
    expect(llmInputs).toBe(1);
    expect(blocked.trace).toEqual(["loadHistory", "project", "hooks", "blocked"]);
    expect(blocked.engine).toMatchObject({ finalize: "skipped:blocked", maintenance: "skipped:blocked" });
    expect(blocked.warnings).toEqual([]);
    // The gate judged the final prompt (after beforePromptBuild) with the history of the first turn.
    expect(seen[1]).toEqual({ prompt: "[policy v2] Tell me about the forbidden topic.", messages: 2 });
    // The transcript records the refusal, never the refused prompt; the result's snapshot is that message.
    expect(await userTexts(file)).toEqual(["Say hello.", blocked.blocked!.message]);
    expect(readFileSync(file, "utf8")).not.toContain("forbidden topic");
    const recorded = (await readSessionTranscript(file)).entries.at(-1)!;
    expect((recorded["message"] as { __openclaw?: unknown }).__openclaw).toMatchObject({ beforeAgentRunBlocked: { blockedBy: "topic-policy" } });
    // Keyed by the run, as OpenClaw keys it.
    expect((recorded["message"] as { idempotencyKey?: string }).idempotencyKey).toBe(`hook-block:before_agent_run:user:${blocked.runId}`);
    expect(blocked.messagesSnapshot).toEqual([recorded["message"]]);
    // agentEnd saw the refusal; the log names who refused, never the prompt.
    expect(ends[1]).toMatchObject({ status: "blocked", error: { phase: "hooks", message: blocked.blocked!.message }, messages: [recorded["message"]] });
    expect(events.find((e) => e.event === "turn blocked")).toMatchObject({ blockedBy: "topic-policy" });
    expect(JSON.stringify(events)).not.toContain("forbidden topic");

    // The host retries the refused run (same runId): refused again, and the transcript still records it once.
    const retried = await runCodexTurn({ appServer: env.codex, sessionId: "gate", sessionFile: file, prompt: "Tell me about the forbidden topic.", cwd: sessions.dir, hooks, logger, runId: blocked.runId });
    expect(retried.status).toBe("blocked");
    expect(await userTexts(file)).toEqual(["Say hello.", blocked.blocked!.message]);

    env.fake.enqueue({ text: "Third answer." });
    const third = await turn("Say goodbye.");
    expect(third.status).toBe("completed");
    expect(third.threadId).toBe(first.threadId);
    expect(seen.length).toBe(4); // the retry asked the gate again
    expect(inputMessageTexts(env.fake.requests.at(-1)!.body).at(-1)).toBe("[policy v2] Say goodbye.");
  }, 120_000);

  it("a gate that throws or answers something malformed refuses the turn (fail-closed), with a warning", async () => {
    for (const [name, gate, why] of [
      ["throws", () => { throw new Error("policy service down"); }, "policy service down"],
      ["malformed", () => ({ block: "yes" }), "malformed result: "],
    ] as const) {
      const file = sessions.file(`gate-${name}.jsonl`);
      const before = env.fake.requests.length;
      const result = await runCodexTurn({ appServer: env.codex, sessionId: `gate-${name}`, sessionFile: file, prompt: "Hello there.", cwd: sessions.dir, hooks: { beforeAgentRun: gate as never } });
      expect(result.status).toBe("blocked");
      expect(result.blocked).toEqual({ blockedBy: "beforeAgentRun", message: "Your message could not be sent: blocked by beforeAgentRun" });
      expect(result.warnings).toHaveLength(1);
      expect(result.warnings[0]).toContain(`beforeAgentRun hook failed (${why}`);
      expect(env.fake.requests.length).toBe(before);
      expect(await userTexts(file)).toEqual(["Your message could not be sent: blocked by beforeAgentRun"]);
    }
  }, 60_000);

  it("an OpenClaw plugin's before_agent_run gate: sees the recalled prompt, refuses with its message, fails closed; nothing is captured", async () => {
    const dir = sessions.dir;
    const db = path.join(dir, "memories.json");
    const gateLog = path.join(dir, "gate-log.jsonl");
    const file = sessions.file("plugins.jsonl");
    const loaded = await loadOpenClawPlugins(
      [{ spec: fixture("recall-memory"), config: { dbPath: db } }, { spec: fixture("input-gate"), config: { logPath: gateLog, maxPromptChars: 400 } }],
      { cwd: dir, appServer: env.codex },
    );
    try {
      const turn = (prompt: string) =>
        runCodexTurn({ appServer: env.codex, sessionId: "plugins", sessionFile: file, prompt, cwd: dir, dynamicTools: loaded.dynamicTools, hooks: loaded.hooks, runtimeContext: loaded.runtimeContext });
      env.fake.enqueue({ text: "Noted." });
      expect((await turn("Remember that my deploy target is staging.")).status).toBe("completed");

      const before = env.fake.requests.length;
      const refused = await turn("Remember that my deploy secret is hunter2.");
      expect(refused.status).toBe("blocked");
      // OpenClaw's rendering: the plugin's user-facing message, attributed; its private reason appears nowhere.
      expect(refused.blocked).toEqual({ blockedBy: "input-gate", message: "Your message could not be sent: requests for secrets are not allowed (blocked by input-gate)" });
      expect(JSON.stringify(refused)).not.toContain("rule 7");
      expect(env.fake.requests.length).toBe(before);
      // The gate ran after the memory plugin's recall (before_agent_start): it saw the prompt Codex would have got.
      const entries = () => readFileSync(gateLog, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { hook: string; prompt: string; messages: number; sessionId: string; history: number; last: string; success?: boolean });
      const log = entries().filter((e) => e.hook === "before_agent_run");
      expect(log[1]!.prompt).toMatch(/^<relevant-memories>[\s\S]*deploy target is staging[\s\S]*<\/relevant-memories>\n\nRemember that my deploy secret is hunter2\.$/);
      expect(log[1]).toMatchObject({ messages: 2, sessionId: "plugins" });
      // agent_end reported failure, so the memory plugin did not capture the refused request.
      const memories = (JSON.parse(readFileSync(db, "utf8")) as { memories: Array<{ text: string }> }).memories.map((m) => m.text);
      expect(memories).toEqual(["Remember that my deploy target is staging."]);

      // A long prompt: refused without a message (OpenClaw's generic text); a crashing gate: refused, attributed to the gate.
      expect((await turn(`Summarize: ${"x".repeat(500)}`)).blocked).toEqual({ blockedBy: "input-gate", message: "Your message could not be sent: blocked by input-gate" });
      const crashed = await turn("Run the gate-crash check.");
      expect(crashed.blocked).toEqual({ blockedBy: "before_agent_run", message: "Your message could not be sent: blocked by before_agent_run" });
      expect(crashed.warnings).toEqual(["beforeAgentRun hook: plugin input-gate before_agent_run hook failed: policy service unavailable"]);
      expect(env.fake.requests.length).toBe(before);
      expect((await userTexts(file)).slice(-3)).toEqual([
        "Your message could not be sent: requests for secrets are not allowed (blocked by input-gate)",
        "Your message could not be sent: blocked by input-gate",
        "Your message could not be sent: blocked by before_agent_run",
      ]);
      // llm_input fired for admitted turns only, with the session's history (the refusals included) as OpenClaw hands it.
      env.fake.enqueue({ text: "Done." });
      const thanks = await turn("Thanks.");
      expect(thanks.status).toBe("completed");
      // Every hook of that run, event and context, carried its one run id (a tracer pairs llm_input with llm_output by it).
      const ofRun = (runId: string) => entries().filter((e) => (e as { ctxRunId?: string }).ctxRunId === runId);
      expect(ofRun(thanks.runId).map((e) => [e.hook, (e as { runId?: string }).runId ?? thanks.runId])).toEqual([
        ["before_agent_run", thanks.runId],
        ["llm_input", thanks.runId],
        ["llm_output", thanks.runId],
        ["agent_end", thanks.runId],
      ]);
      expect(ofRun(refused.runId).map((e) => e.hook)).toEqual(["before_agent_run", "agent_end"]);
      expect(new Set(entries().map((e) => (e as { ctxRunId?: string }).ctxRunId)).size).toBe(5);
      expect(entries().filter((e) => e.hook === "llm_input").map((e) => [e.history, e.last])).toEqual([
        [0, ""],
        [5, "Your message could not be sent: blocked by before_agent_run"],
      ]);
      // agent_end got the conversation as OpenClaw's harness hands it: the history, then this turn (a refusal: its record).
      expect(entries().filter((e) => e.hook === "agent_end").map((e) => [e.messages, e.success])).toEqual([
        [2, true],
        [3, false],
        [4, false],
        [5, false],
        [7, true],
      ]);
    } finally {
      await loaded.close();
    }
  }, 120_000);
});
