/**
 * The accordion in an autonomous loop: 60 tool-calling turns (two model requests each) against the real codex
 * app-server with a small context window, the fake reporting usage that grows with the real request size.
 *
 * Window arithmetic (catalog context_window 10,000):
 * - Codex reports `modelContextWindow` = 95% = 9,500; the accordion compares against that.
 * - Codex auto-compacts when a response's total_tokens >= min(model_auto_compact_token_limit, 90% of the catalog
 *   window) = 9,000 (observed: a larger configured limit is clamped to 9,000), i.e. ratio 0.947 of 9,500.
 * - The accordion compacts in the engine at ratio 0.9 (8,550) before the next turn and rotates the thread, so with it
 *   ON Codex's lossy compaction never gets to run; with it OFF Codex compacts natively.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWindowEngine } from "../../src/context-engine/engines/index.js";
import { readThreadBinding } from "../../src/transcript/binding.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { runCodexTurn } from "../../src/turn.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";

const TURNS = 60;
const CATALOG_WINDOW = 10_000;
const MODEL_CONTEXT_WINDOW = 9_500; // what Codex reports: 95% of the catalog window
const NATIVE_LIMIT = 9_000; // Codex's effective auto-compaction limit (see the header)
const THRESHOLD = 0.9;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-compaction-loop-"));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Deterministic tool output (~1.2 KB) so every turn adds a few hundred tokens to the thread. */
function notes(turn: number): string {
  const line = (i: number) => `note ${turn}.${i}: observation ${(turn * 31 + i * 7) % 97} recorded for the running task.`;
  return Array.from({ length: 18 }, (_, i) => line(i)).join("\n");
}

interface EngineCompaction {
  turn: number;
  ratio: number;
  totalTokens: number;
  currentTokenCount?: number;
  inputTokens: number;
}

interface LoopStats {
  statuses: string[];
  requestKinds: Record<string, number>;
  nativeCompactions: number;
  engineCompactions: EngineCompaction[];
  threads: number;
  maxLastCallTotal: number;
  /** The bound thread's usage ratio (totalTokens / modelContextWindow) after each turn, index 0 = turn 1. */
  ratioAfter: number[];
  /** How many turns took each projection path (`mode/reason`). */
  projections: Record<string, number>;
  /** Context windows seen in turn results and recorded in the binding's lastUsage. */
  modelContextWindows: number[];
  promptsMirrored: number;
  ms: number;
}

async function runLoop(accordion: boolean, threadBootstrap = true, mode: "auto" | "threadBootstrap" = "auto"): Promise<LoopStats> {
  const env: OfflineCodex = await startOfflineCodex({
    offline: { lean: true, contextWindow: CATALOG_WINDOW, autoCompactTokenLimit: NATIVE_LIMIT },
  });
  const started = Date.now();
  try {
    const sessionId = `loop-${accordion ? "on" : "off"}-${mode}`;
    const sessionFile = path.join(dir, `${sessionId}.jsonl`);
    const state = { turn: 0, toolPending: false };
    // First request of a turn calls the tool; every later one answers. Usage is the fake's default: input tokens =
    // ceil(request input bytes / 4), so it grows with what the thread really replays.
    env.fake.setDefault(() => {
      if (state.toolPending) {
        state.toolPending = false;
        return { functionCall: { name: "fetch_notes", arguments: { turn: state.turn } } };
      }
      return { text: `Turn ${state.turn}: notes reviewed, continuing.` };
    });

    const engine = createWindowEngine({ ownsCompaction: true, threadBootstrap });
    const compactions: EngineCompaction[] = [];
    const innerCompact = engine.compact.bind(engine);
    engine.compact = async (p) => {
      // What evaluateAccordion saw: the binding's last usage against the window Codex reported.
      const usage = (await readThreadBinding(sessionFile))?.lastUsage;
      compactions.push({
        turn: state.turn,
        ratio: usage && usage.modelContextWindow ? usage.totalTokens / usage.modelContextWindow : Number.NaN,
        totalTokens: usage?.totalTokens ?? Number.NaN,
        inputTokens: usage?.inputTokens ?? Number.NaN,
        ...(p.currentTokenCount !== undefined ? { currentTokenCount: p.currentTokenCount } : {}),
      });
      return innerCompact(p);
    };

    const statuses: string[] = [];
    const threads = new Set<string>();
    const windows = new Set<number>();
    let nativeCompactions = 0;
    let maxLastCallTotal = 0;
    const ratioAfter: number[] = [];
    const projections: Record<string, number> = {};
    for (let turn = 1; turn <= TURNS; turn++) {
      state.turn = turn;
      state.toolPending = true;
      const r = await runCodexTurn({
        appServer: env.codex,
        sessionId,
        sessionFile,
        prompt: `LOOP-PROMPT-${turn}: continue the task, step ${turn}.`,
        contextEngine: engine,
        // `auto` is the native sync (the accordion still rotates, docs/projection.md); `threadBootstrap` the engine's ask.
        projection: { mode },
        contextTokenBudget: MODEL_CONTEXT_WINDOW,
        dynamicTools: [
          {
            name: "fetch_notes",
            description: "Fetch the notes for a step",
            inputSchema: { type: "object", properties: { turn: { type: "number" } } },
            handler: (args) => notes(Number((args as { turn?: unknown }).turn ?? 0)),
          },
        ],
        compaction: accordion ? { contextThreshold: THRESHOLD } : { enabled: false },
      });
      statuses.push(r.status);
      if (r.threadId) threads.add(r.threadId);
      nativeCompactions += r.nativeCompactions.length;
      if (r.usage?.modelContextWindow) windows.add(r.usage.modelContextWindow);
      maxLastCallTotal = Math.max(maxLastCallTotal, r.usage?.lastCallTotalTokens ?? r.usage?.totalTokens ?? 0);
      const key = `${r.projection?.mode}/${r.projection?.reason}`;
      projections[key] = (projections[key] ?? 0) + 1;
      const usage = (await readThreadBinding(sessionFile))?.lastUsage;
      if (usage?.modelContextWindow) windows.add(usage.modelContextWindow);
      ratioAfter.push(usage?.modelContextWindow ? usage.totalTokens / usage.modelContextWindow : Number.NaN);
    }

    const requestKinds: Record<string, number> = {};
    for (const q of env.fake.requests) requestKinds[q.requestKind] = (requestKinds[q.requestKind] ?? 0) + 1;
    const history = await readSessionHistory(sessionFile, { sessionId });
    const userTexts = history.messages
      .filter((m) => (m as { role?: string }).role === "user")
      .map((m) => JSON.stringify((m as { content?: unknown }).content));
    let promptsMirrored = 0;
    for (let turn = 1; turn <= TURNS; turn++) {
      if (userTexts.some((t) => t.includes(`LOOP-PROMPT-${turn}:`))) promptsMirrored++;
    }
    return {
      statuses,
      requestKinds,
      nativeCompactions,
      engineCompactions: compactions,
      threads: threads.size,
      maxLastCallTotal,
      ratioAfter,
      projections,
      modelContextWindows: [...windows],
      promptsMirrored,
      ms: Date.now() - started,
    };
  } finally {
    await env.dispose();
  }
}

const report = (label: string, s: LoopStats) =>
  // One line per loop so the counts show up in the test output.
  console.log(
    `[accordion ${label}] turns=${s.statuses.length} requests=${JSON.stringify(s.requestKinds)} nativeCompactions=${s.nativeCompactions} ` +
      `engineCompactions=${s.engineCompactions.length} ratios=${JSON.stringify(s.engineCompactions.map((c) => `t${c.turn}:${c.ratio.toFixed(4)}`))} ` +
      `threads=${s.threads} projections=${JSON.stringify(s.projections)} maxLastCallTotal=${s.maxLastCallTotal} promptsMirrored=${s.promptsMirrored} ms=${s.ms}`,
  );

describe.concurrent("60-turn autonomous loop with a small context window", () => {
  it.each([
    { projection: "threadBootstrap" as const, threadBootstrap: true },
    { projection: "auto" as const, threadBootstrap: false },
  ])("accordion ON ($projection): the engine compacts at the threshold each time and Codex's native compaction never fires", async ({ projection, threadBootstrap }) => {
    const s = await runLoop(true, threadBootstrap, projection);
    report(`ON ${projection}`, s);
    expect(s.statuses).toEqual(Array.from({ length: TURNS }, () => "completed"));
    expect(s.modelContextWindows).toEqual([MODEL_CONTEXT_WINDOW]);
    // Two requests per turn (tool call, answer) and not one compaction request.
    expect(s.requestKinds).toEqual({ turn: 2 * TURNS });
    expect(s.nativeCompactions).toBe(0);
    expect(s.engineCompactions.length).toBeGreaterThanOrEqual(2);
    // The engine compacted before exactly those turns whose previous turn left the thread at/over the threshold,
    // with the ratio that turn left behind (what evaluateAccordion read from the binding).
    const crossed = s.ratioAfter.flatMap((ratio, i) => (ratio >= THRESHOLD && i + 2 <= TURNS ? [i + 2] : []));
    expect(s.engineCompactions.map((c) => c.turn)).toEqual(crossed);
    for (const c of s.engineCompactions) {
      expect(c.ratio).toBeGreaterThanOrEqual(THRESHOLD);
      expect(c.ratio).toBe(s.ratioAfter[c.turn - 2]);
      expect(c.currentTokenCount).toBe(c.inputTokens);
    }
    // Every accordion compaction rotated to a fresh thread.
    expect(s.threads).toBeGreaterThan(s.engineCompactions.length);
    expect(s.promptsMirrored).toBe(TURNS);
  }, 120_000);

  it("accordion OFF: Codex compacts natively and the engine's compact() never runs", async () => {
    const s = await runLoop(false);
    report("OFF", s);
    expect(s.statuses).toEqual(Array.from({ length: TURNS }, () => "completed"));
    expect(s.modelContextWindows).toEqual([MODEL_CONTEXT_WINDOW]);
    expect(s.engineCompactions).toEqual([]);
    expect(s.requestKinds.compaction ?? 0).toBeGreaterThan(0);
    expect(s.nativeCompactions).toBe(s.requestKinds.compaction);
    expect(s.promptsMirrored).toBe(TURNS);
  }, 120_000);
});
