/**
 * Over a session: engines that rebuild, summarize or drop what the thread holds. The host loop is simulated: each
 * accepted turn adds its user+assistant pair to the history, held by the thread it ran on.
 */
import { describe, expect, it } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import type { HistoryOutput, ProjectionOutput } from "../../machines/turn.contract.js";
import { projectAssembledContext, renderMessageBlock, estimateTokens, type ProjectAssembledContextParams } from "../../src/projection/index.js";
import { applyBindingUpdate, type ThreadBinding } from "../../src/transcript/binding.js";
import { ledgerUnit } from "../../src/projection/entries.js";

const fingerprints = { dynamicTools: "t", engineId: "e", policy: "p" };
type View = (history: AgentMessage[], turn: number) => { messages: AgentMessage[]; systemPromptAddition?: string };

function runSession(turns: number, view: View, extra: Partial<ProjectAssembledContextParams> = {}) {
  const history: AgentMessage[] = [];
  const origins: HistoryOutput["origins"] = [];
  let binding: ThreadBinding | undefined;
  const outs: ProjectionOutput[] = [];
  for (let turn = 1; turn <= turns; turn++) {
    const prompt = `prompt ${turn} ${"p".repeat(80)}`;
    const v = view(history, turn);
    const out = projectAssembledContext({
      mode: "delta",
      prompt,
      history: [...history],
      origins: [...origins],
      assembled: { messages: [...v.messages, { role: "user", content: prompt, timestamp: turn * 10 }], estimatedTokens: 1, ...(v.systemPromptAddition ? { systemPromptAddition: v.systemPromptAddition } : {}) },
      fingerprints,
      ...(binding ? { binding } : {}),
      ...extra,
    });
    outs.push(out);
    const threadId = out.thread.threadId ?? `thread-${turn}`;
    binding = applyBindingUpdate(binding, { threadId, turnId: `turn-${turn}`, update: out.bindingUpdate, dynamicToolsFingerprint: "t", engineId: "e", policyFingerprint: "p", projectionMode: out.mode });
    history.push({ role: "user", content: prompt, timestamp: turn * 10 }, {
      role: "assistant",
      content: [{ type: "text", text: `reply ${turn} ${"r".repeat(300)}` }],
      usage: { input: turn, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: turn + 1 },
      timestamp: turn * 10 + 1,
    });
    origins.push({ threadId, turnId: `turn-${turn}` }, { threadId, turnId: `turn-${turn}` });
  }
  return outs;
}

/** What lossless-claw does: messages rebuilt from its own store, without timestamps and with other usage figures. */
const rebuild = (m: AgentMessage): AgentMessage => {
  const { timestamp: _t, usage: _u, ...rest } = m as Record<string, unknown>;
  return (m.role === "assistant" ? { ...rest, usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0 } } : rest) as AgentMessage;
};

describe("stale context over a session", () => {
  it("a rebuilding engine never gets a held message re-sent, and carries no stale tokens", () => {
    const outs = runSession(12, (history) => ({ messages: history.map(rebuild) }));
    for (const out of outs.slice(1)) {
      expect(out).toMatchObject({ mode: "delta", reason: "threadHoldsContext", entriesSent: 0, staleTokens: 0, thread: { action: "resume" } });
    }
  });

  it("a summarizing engine: folded history is stale, reported per turn, and the rent-or-buy rule rotates", () => {
    const summaryOf = (n: number): AgentMessage => ({ role: "compactionSummary", summary: `summary of ${n} messages ${"s".repeat(200)}`, tokensBefore: n });
    // Keep the last 6 messages; fold the rest into one summary every 8 turns.
    let foldedAt = 0;
    const outs = runSession(40, (history, turn) => {
      if (turn % 8 === 0) foldedAt = Math.max(0, history.length - 6);
      return { messages: foldedAt > 0 ? [summaryOf(foldedAt), ...history.slice(foldedAt)] : history };
    });
    const reasons = outs.map((o) => o.reason);
    expect(reasons).toContain("staleCost");
    expect(outs.every((o) => o.staleTokens !== undefined)).toBe(true);
    // Turn 8 folds 10 messages the thread holds: they are stale from then on (until a rotation).
    const folded = outs[7]!;
    expect(folded).toMatchObject({ reason: "newContext", thread: { action: "resume" } });
    expect(folded.staleTokens).toBeGreaterThan(0);
    // Never more stale than the rule allows: the rent accrued before a turn is below the view's price.
    for (const out of outs) if (out.thread.action === "start") expect(out.staleTokens).toBe(0);
    const rotations = outs.filter((o) => o.thread.action === "start").length;
    expect(rotations).toBeGreaterThan(1);
    expect(rotations).toBeLessThan(10);
  });

  it("a recall engine's per-turn notes pile up as stale developer copies until the rule rotates", () => {
    const note = (turn: number) => `Recalled: the user mentioned item ${turn} ${"m".repeat(400)}`;
    const outs = runSession(30, (history, turn) => ({ messages: history, systemPromptAddition: note(turn) }));
    const copyTokens = estimateTokens(note(1));
    // Turn 2 resumes and carries one superseded copy, turn 3 two...
    expect(outs[1]!.staleTokens).toBe(copyTokens);
    expect(outs[2]!.staleTokens).toBe(2 * copyTokens);
    const firstRotation = outs.findIndex((o, i) => i > 0 && o.thread.action === "start");
    expect(firstRotation).toBeGreaterThan(2);
    expect(outs[firstRotation]!.reason).toBe("staleCost");
    expect(outs[firstRotation]!.staleTokens).toBe(0);
  });

  it("trust split: no history text in an application entry, in any mode", () => {
    const secret = "TOOL-OUTPUT-SENTINEL";
    const history: AgentMessage[] = [
      { role: "user", content: "USER-PROMPT-SENTINEL", timestamp: 1 },
      { role: "toolResult", toolCallId: "c1", toolName: "x", content: [{ type: "text", text: secret }], isError: false, timestamp: 2 },
    ];
    for (const mode of ["auto", "delta", "threadBootstrap", "prompt"] as const) {
      const out = projectAssembledContext({ mode, prompt: "now", history, origins: [null, null], assembled: { messages: history, estimatedTokens: 1, systemPromptAddition: "ADDITION" }, fingerprints });
      const text = JSON.stringify(out);
      expect(text).toContain("USER-PROMPT-SENTINEL"); // the history is sent: in the prompt text or untrusted entries
      for (const entry of Object.values(out.additionalContext ?? {})) {
        if (entry.kind === "application") {
          expect(entry.value).not.toContain("USER-PROMPT-SENTINEL");
          expect(entry.value).not.toContain(secret);
        }
      }
      expect(out.developerInstructions ?? "").not.toContain(secret);
      expect(renderMessageBlock(history[1]!)).toContain(secret);
    }
  });
});

describe("the ledger's stale units", () => {
  it("are counted afresh from a ledger array that can still change, and the same from a frozen one (kept by identity)", () => {
    const view: AgentMessage[] = [{ role: "user", content: `still shown ${"s".repeat(200)}`, timestamp: 1 }];
    const shown = ledgerUnit(renderMessageBlock(view[0]!)!);
    const gone = (n: number) => ledgerUnit(`[user]\ndropped ${n} ${"d".repeat(400)}`);
    const bound = applyBindingUpdate(undefined, { threadId: "thr", turnId: "t0", update: { reset: true, ledgerAdd: [shown] }, dynamicToolsFingerprint: "t", engineId: "e", policyFingerprint: "p", projectionMode: "delta" });
    const project = (ledger: readonly string[]) =>
      projectAssembledContext({ mode: "delta", prompt: "next", history: view, origins: [null], assembled: { messages: view, estimatedTokens: 1 }, fingerprints, binding: { ...bound, ledger: ledger as string[] } });
    const mutable = [shown, gone(1)];
    const one = project(mutable);
    expect(one).toMatchObject({ reason: "threadHoldsContext", entriesSent: 0 });
    const oneStale = one.staleTokens!;
    expect(oneStale).toBeGreaterThan(100);
    // The same array, changed: the new unit counts.
    mutable.push(gone(2));
    const two = project(mutable);
    expect(two.staleTokens).toBeGreaterThan(oneStale + 100);
    // A frozen copy of each gives the same figures, on its first and on a later projection.
    const frozenOne = Object.freeze([shown, gone(1)]);
    const frozenTwo = Object.freeze([...mutable]);
    for (let i = 0; i < 2; i++) {
      expect(project(frozenOne)).toEqual(one);
      expect(project(frozenTwo)).toEqual(two);
    }
  });
});
