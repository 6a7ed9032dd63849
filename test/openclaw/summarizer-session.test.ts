/**
 * Issue 17 done-when, library end: a 40-turn offline session driven by the real `codex app-server` against the fake
 * Responses API, with the summarizing test plugin loaded through `loadContextEngine`. Every turn completes, the
 * plugin's summaries come from `runtime.llm.complete` (model requests on the fake), and what the model sees stays
 * within the budget plus one turn.
 */
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadContextEngine, type LoadedContextEngine } from "../../src/openclaw/index.js";
import { LLM_COMPLETE_INSTRUCTIONS } from "../../src/openclaw/llm.js";
import { inputMessageTexts, startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";
import { runCodexTurn } from "../../src/turn.js";
import { fixture, resetSummarizerRecord, summarizerRecord } from "./helpers.js";
import { testTempDir } from "../helpers/temp-dir.js";

const TURNS = 40;
const BUDGET = 1_200; // tokens (the fixture estimates 4 chars per token)
const PROMPT_FILLER = "please keep track of the details in this message. ".repeat(4);
const REPLY_FILLER = "noted; here is a considered answer with some length to it. ".repeat(6);

const isSummaryRequest = (r: RecordedRequest) => JSON.stringify(r.body?.input ?? "").includes(LLM_COMPLETE_INSTRUCTIONS.slice(0, 60));
/** The conversation a request carries (user and assistant texts, Codex's environment context left out), in tokens. */
const conversationTokens = (r: RecordedRequest) =>
  Math.ceil(
    [...inputMessageTexts(r.body, "user").filter((t) => !t.startsWith("<environment_context>")), ...inputMessageTexts(r.body, "assistant")].join("\n")
      .length / 4,
  );

let offline: OfflineCodex;
let loaded: LoadedContextEngine;
let summaryCount = 0;

beforeAll(async () => {
  offline = await startOfflineCodex();
  offline.fake.setDefault((request) =>
    isSummaryRequest(request) ? { text: `summary ${++summaryCount}: the user asked a series of numbered questions.` } : { text: `reply. ${REPLY_FILLER}` },
  );
}, 60_000);

afterAll(async () => {
  await loaded?.close();
  await offline?.dispose();
});

beforeEach(() => resetSummarizerRecord());

describe("a 40-turn offline session with the summarizing OpenClaw plugin", () => {
  it("completes every turn; summaries come from runtime.llm.complete; the model input stays within budget + one turn", async () => {
    const dir = await testTempDir("ctm-openclaw-session-");
    const sessionFile = path.join(dir, "session.jsonl");
    loaded = await loadContextEngine(fixture("summarizer"), {
      cwd: process.cwd(),
      appServer: offline.codex,
      tokenBudget: BUDGET,
      pluginConfig: { tokenBudget: BUDGET, keepMessages: 4, triggerFraction: 0.6 },
    });
    const statuses: string[] = [];
    const warnings: string[][] = [];
    const threads: Array<{ threadId: string | undefined; epoch: number; reason: string | undefined }> = [];
    for (let i = 0; i < TURNS; i += 1) {
      // The summary epoch this turn's assemble sees (summaries are written in afterTurn, after the turn).
      const epoch = summarizerRecord().summaries;
      // Turn 1 calls the plugin's tool: built for this turn's session although the loader was given none.
      if (i === 1) offline.fake.enqueue([{ functionCall: { name: "summary_status", arguments: {}, callId: "call_status" } }, { text: `reply. ${REPLY_FILLER}` }]);
      const result = await runCodexTurn({
        appServer: offline.codex,
        sessionId: "s1",
        sessionFile,
        prompt: `question ${i}: ${PROMPT_FILLER}`,
        contextEngine: loaded.engine,
        contextTokenBudget: BUDGET,
        dynamicTools: loaded.dynamicTools,
        hooks: loaded.hooks,
        runtimeContext: loaded.runtimeContext,
      });
      statuses.push(result.status);
      warnings.push(result.warnings);
      threads.push({ threadId: result.threadId, epoch, reason: result.projection?.reason });
      await result.backgroundMaintenance;
    }
    expect(statuses).toEqual(Array(TURNS).fill("completed"));
    // No turn warns: the first turn's store is empty, and an empty assembly of an empty session is expected.
    expect(warnings.flat()).toEqual([]);

    const requests = offline.fake.requests;
    const summaryRequests = requests.filter(isSummaryRequest);
    const turnRequests = requests.filter((r) => !isSummaryRequest(r) && r.requestKind === "turn");
    const rec = summarizerRecord();
    // Every summary the engine wrote came back from runtime.llm.complete, each one a model request on the fake.
    expect(rec.summaries).toBeGreaterThanOrEqual(4);
    expect(rec.completions).toHaveLength(rec.summaries);
    expect(summaryRequests).toHaveLength(rec.summaries);
    expect(summaryRequests.every((r) => JSON.stringify(r.body?.input).includes("Summarize this conversation"))).toBe(true);
    // A summary request carries no tools: an ephemeral thread without dynamic tools.
    expect(summaryRequests.every((r) => !JSON.stringify(r.body?.tools ?? []).includes("summary_status"))).toBe(true);
    expect(turnRequests.every((r) => JSON.stringify(r.body?.tools ?? []).includes("summary_status"))).toBe(true);
    // The plugin saw the runtime context on assemble: provider, model and llm.
    expect(rec.runtimeContexts.length).toBe(TURNS);
    expect(rec.runtimeContexts.every((c) => c.provider === "codex" && c.hasLlm)).toBe(true);

    const oneTurn = Math.ceil((`question 39: ${PROMPT_FILLER}`.length + `reply. ${REPLY_FILLER}`.length) / 4);
    const largest = Math.max(...turnRequests.map(conversationTokens));
    expect(turnRequests).toHaveLength(TURNS + 1); // turn 1's tool call adds a follow-up request
    expect(largest).toBeLessThanOrEqual(BUDGET + oneTurn);
    // Without summaries the last request would carry all 40 turns.
    expect(TURNS * oneTurn).toBeGreaterThan(3 * (BUDGET + oneTurn));
    console.log(`[figures] turns=${TURNS} summaries=${rec.summaries} largestConversationTokens=${largest} budget=${BUDGET} oneTurn=${oneTurn} requests=${requests.length}`);

    // The plugin's before_prompt_build prepends a ~1,400-token policy every turn, which the thread decision must count
    // as what the thread holds (not as a stale copy), or every turn would cut or rotate. Under auto (the native sync)
    // the thread changes only when a summary written after the previous turn changed the view: each such turn cuts
    // the thread back (revert) or, when what sits before its first turn changed, starts a fresh one (rotate); every
    // other turn finds the thread holding the view (match).
    const rotatedAt = threads.flatMap((t, i) => (i > 0 && t.threadId !== threads[i - 1]!.threadId ? [i] : []));
    const epochChangedAt = threads.flatMap((t, i) => (i > 0 && t.epoch !== threads[i - 1]!.epoch ? [i] : []));
    expect(epochChangedAt.length).toBeGreaterThanOrEqual(4);
    for (const i of rotatedAt) expect(epochChangedAt, `turn ${i} rotated`).toContain(i);
    threads.forEach((t, i) => {
      if (i === 0) return;
      expect(t.reason, `turn ${i}`).toBe(epochChangedAt.includes(i) ? (rotatedAt.includes(i) ? "rotate" : "revert") : "match");
    });
    // The policy reached the model in the developer instructions of every turn request.
    expect(turnRequests.every((r) => inputMessageTexts(r.body, "developer").some((t) => t.includes("Recall policy for summarized sessions.")))).toBe(true);
    console.log(`[figures] threads=${new Set(threads.map((t) => t.threadId)).size} rotations at turns ${rotatedAt.join(",")}`);

    const statusOutput = JSON.stringify(requests.find((r) => JSON.stringify(r.body?.input ?? "").includes("call_status") && JSON.stringify(r.body?.input ?? "").includes("function_call_output"))?.body?.input);
    expect(statusOutput).toContain("session=s1");

    // Every hook the plugin listens to that a plain session exercises fired.
    const fired = new Set(rec.hooks.map((h) => h.name));
    for (const name of ["before_prompt_build", "llm_input", "llm_output", "before_agent_finalize", "agent_end"]) expect(fired, name).toContain(name);
  }, 300_000);
});
