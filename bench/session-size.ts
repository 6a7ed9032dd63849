/**
 * Per-turn host work that grows with the session: what a turn does over the whole transcript.
 * For a transcript of about N messages (3-message turns mirrored as the turn mirrors them):
 * - history read, store: `SessionStore.readHistory()` right after the previous turn was mirrored (the steady state:
 *   the cache parses only that turn's lines);
 * - history read, full parse: `readSessionTranscript` + `historyFromTranscript` (what every turn did before the
 *   store: parses the whole file), and the store's first read in a process (cold, also the whole file);
 * - projection: `projectAssembledContext` in `delta` mode over the store's history when the engine's view is the whole
 *   history and the bound thread holds all of it (nothing to send, but every message compared);
 * - window engine turn: what a turn with the window engine (100,000-token budget) does after the read: `assemble`,
 *   the assemble result check, and the projection when the bound thread received the view as injected context (its
 *   ledger holds the view, later turns are held by turn id): the path a long session takes on every turn;
 * - rebuilding engine turn: the same with the lossless-claw-shaped engine of `bench/engines/` (every turn the whole
 *   history as NEW message objects, metadata changed): nothing can be recognized by reference, every message of the
 *   view is rendered and hashed each turn.
 * In process, no app-server; medians of several samples.
 */
import { promises as fsp } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { AgentMessage } from "../src/context-engine/types.js";
import { validateAssembleResult } from "../src/context-engine/contract.js";
import { createWindowEngine } from "../src/context-engine/engines/window.js";
import { createRebuildingEngine } from "./engines/index.js";
import { projectAssembledContext } from "../src/projection/index.js";
import type { ThreadBinding } from "../src/transcript/binding.js";
import { mirrorTurnToTranscript } from "../src/transcript/mirror.js";
import { createJsonlSessionStore } from "../src/store/session-store.js";
import { historyFromTranscript, invalidateSessionIndex, readSessionTranscript } from "../src/transcript/session-file.js";
import { median, modelReply, round, table, userPrompt } from "./lib.js";

type HistoryOrigins = Parameters<typeof projectAssembledContext>[0]["origins"];

function baseBinding(fingerprints: { dynamicTools: string; engineId: string; policy: string }): ThreadBinding {
  return {
    version: 1,
    threadId: "thr-size",
    dynamicToolsFingerprint: fingerprints.dynamicTools,
    engineId: fingerprints.engineId,
    policyFingerprint: fingerprints.policy,
    projectionMode: "delta",
    heldTurnIds: [],
    ledger: [],
  } as ThreadBinding;
}

export interface SessionSizeFigures {
  messages: number;
  fileBytes: number;
  /** Store read after one more turn was mirrored (incremental). */
  historyReadMs: number;
  /** Whole-file parse, as every turn did before the store. */
  fullParseMs: number;
  /** The store's first read in a process (whole file, then cached). */
  coldReadMs: number;
  projectionMs: number;
  /** Window engine assemble + result check + projection against a ledger-held view (absent in older results). */
  windowTurnMs?: number;
  /** Messages in the window engine's view. */
  windowViewMessages?: number;
  /** The same with the rebuilding engine (its view: the whole history, rebuilt; absent in older results). */
  rebuildingTurnMs?: number;
  samples: number;
}

/** The window engine's budget in the window-turn figure: a long session's view is a tail of its history. */
const WINDOW_BUDGET = 100_000;

function turnMessages(i: number): AgentMessage[] {
  const t = 1_700_000_000_000 + i * 1000;
  return [
    { role: "user", content: [{ type: "text", text: userPrompt(i) }], timestamp: t },
    { role: "assistant", content: [{ type: "thinking", thinking: `Thinking about turn ${i + 1}.` }], timestamp: t + 1 },
    {
      role: "assistant",
      content: [{ type: "text", text: modelReply(i) }],
      api: "openai-responses",
      provider: "codex",
      model: "bench",
      stopReason: "stop",
      usage: { input: 100, output: 50, cacheRead: 0, cacheWrite: 0, totalTokens: 150 },
      timestamp: t + 2,
    },
  ] as AgentMessage[];
}

/**
 * @example
 * ```ts
 * const rows = await measureSessionSizeCosts([100, 1000], 10);
 * console.log(rows[1]!.historyReadMs, rows[1]!.projectionMs);
 * ```
 */
export async function measureSessionSizeCosts(messageCounts: readonly number[], samples: number): Promise<SessionSizeFigures[]> {
  const out: SessionSizeFigures[] = [];
  for (const entries of messageCounts) {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), "ctm-bench-size-"));
    const sessionFile = path.join(dir, "session.jsonl");
    try {
      const turns = Math.max(1, Math.ceil(entries / 3));
      for (let i = 0; i < turns; i++) {
        await mirrorTurnToTranscript({ sessionFile, sessionId: "size", threadId: "thr-size", turnId: `turn-${i}`, messages: turnMessages(i), locked: true });
      }
      const store = createJsonlSessionStore({ sessionFile, sessionId: "size" });
      const fullParse = async () => historyFromTranscript(await readSessionTranscript(sessionFile, { sessionId: "size" }));
      invalidateSessionIndex();
      const c0 = performance.now();
      await store.readHistory();
      const coldReadMs = performance.now() - c0;
      const fingerprints = { dynamicTools: "tools", engineId: "window", policy: "policy" };
      const heldTurnIds = Array.from({ length: turns }, (_, i) => `turn-${i}`);
      const readMs: number[] = [];
      const fullMs: number[] = [];
      const projectMs: number[] = [];
      const windowMs: number[] = [];
      // The window engine's thread: a fresh thread received the engine's view as injected context (its ledger).
      const engine = createWindowEngine({ tokenBudget: WINDOW_BUDGET });
      const initial = await store.readHistory();
      const injectedView = validateAssembleResult(await engine.assemble({ sessionId: "size", messages: initial.messages as AgentMessage[], tokenBudget: WINDOW_BUDGET }));
      const bootstrap = projectAssembledContext({
        mode: "delta",
        prompt: "first question",
        history: initial.messages as AgentMessage[],
        origins: initial.origins as HistoryOrigins,
        assembled: injectedView,
        binding: undefined,
        fingerprints,
        tokenBudget: WINDOW_BUDGET,
      });
      const windowBinding: ThreadBinding = { ...baseBinding(fingerprints), ledger: (bootstrap.bindingUpdate as { ledgerAdd: string[] }).ledgerAdd, heldTurnIds: [] };
      let viewMessages = injectedView.messages.length;
      const rebuilding = createRebuildingEngine();
      const rebuildingMs: number[] = [];
      const rebuildingView = validateAssembleResult(await rebuilding.assemble({ sessionId: "size", messages: initial.messages as AgentMessage[] }));
      const rebuildingBootstrap = projectAssembledContext({
        mode: "delta",
        prompt: "first question",
        history: initial.messages as AgentMessage[],
        origins: initial.origins as HistoryOrigins,
        assembled: rebuildingView,
        binding: undefined,
        fingerprints,
        tokenBudget: 10_000_000,
      });
      const rebuildingBinding: ThreadBinding = { ...baseBinding(fingerprints), ledger: (rebuildingBootstrap.bindingUpdate as { ledgerAdd: string[] }).ledgerAdd, heldTurnIds: [] };
      for (let s = 0; s < samples + 2; s++) {
        // The previous turn is mirrored (untimed), then the next turn reads its history.
        const turnId = `turn-${turns + s}`;
        await store.appendTurn({ threadId: "thr-size", turnId, messages: turnMessages(turns + s) });
        heldTurnIds.push(turnId);
        const t0 = performance.now();
        const h = await store.readHistory();
        const t1 = performance.now();
        const binding: ThreadBinding = { ...baseBinding(fingerprints), heldTurnIds: heldTurnIds.slice() };
        const projection = projectAssembledContext({
          mode: "delta",
          prompt: "next question",
          history: h.messages as AgentMessage[],
          origins: h.origins as HistoryOrigins,
          assembled: { messages: h.messages as AgentMessage[], estimatedTokens: 1 },
          binding,
          fingerprints,
          tokenBudget: 1_000_000,
        });
        const t2 = performance.now();
        if (projection.reason !== "threadHoldsContext") throw new Error(`session-size bench: unexpected projection ${projection.reason}`);
        const w0 = performance.now();
        const view = validateAssembleResult(await engine.assemble({ sessionId: "size", messages: h.messages as AgentMessage[], tokenBudget: WINDOW_BUDGET }));
        const windowProjection = projectAssembledContext({
          mode: "delta",
          prompt: "next question",
          history: h.messages as AgentMessage[],
          origins: h.origins as HistoryOrigins,
          assembled: view,
          binding: { ...windowBinding, heldTurnIds: windowBinding.heldTurnIds.concat(turnId) },
          fingerprints,
          tokenBudget: WINDOW_BUDGET,
        });
        const w1 = performance.now();
        if (windowProjection.reason !== "threadHoldsContext" || windowProjection.thread.action !== "resume") {
          throw new Error(`session-size bench: unexpected window projection ${windowProjection.reason}`);
        }
        windowBinding.heldTurnIds.push(turnId);
        viewMessages = view.messages.length;
        const r0 = performance.now();
        const rebuilt = validateAssembleResult(await rebuilding.assemble({ sessionId: "size", messages: h.messages as AgentMessage[] }));
        const rebuiltProjection = projectAssembledContext({
          mode: "delta",
          prompt: "next question",
          history: h.messages as AgentMessage[],
          origins: h.origins as HistoryOrigins,
          assembled: rebuilt,
          binding: { ...rebuildingBinding, heldTurnIds: rebuildingBinding.heldTurnIds.concat(turnId) },
          fingerprints,
          tokenBudget: 10_000_000,
        });
        const r1 = performance.now();
        if (rebuiltProjection.reason !== "threadHoldsContext") throw new Error(`session-size bench: unexpected rebuilding projection ${rebuiltProjection.reason}`);
        rebuildingBinding.heldTurnIds.push(turnId);
        const f0 = performance.now();
        const full = await fullParse();
        const f1 = performance.now();
        if (full.messages.length !== h.messages.length) throw new Error("session-size bench: store and full parse disagree");
        if (s >= 2) {
          readMs.push(t1 - t0);
          projectMs.push(t2 - t1);
          windowMs.push(w1 - w0);
          rebuildingMs.push(r1 - r0);
          fullMs.push(f1 - f0);
        }
      }
      const history = await store.readHistory();
      out.push({
        messages: history.messages.length,
        fileBytes: (await fsp.stat(sessionFile)).size,
        historyReadMs: round(median(readMs), 2),
        fullParseMs: round(median(fullMs), 2),
        coldReadMs: round(coldReadMs, 2),
        projectionMs: round(median(projectMs), 2),
        windowTurnMs: round(median(windowMs), 2),
        windowViewMessages: viewMessages,
        rebuildingTurnMs: round(median(rebuildingMs), 2),
        samples,
      });
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  }
  return out;
}

export function formatSessionSize(rows: readonly SessionSizeFigures[]): string {
  const lines = [
    "\nPer-turn work that grows with the session (in process; projection: delta, engine view = whole history, all held by turn id;",
    `window turn: window engine (${WINDOW_BUDGET.toLocaleString("en-US")}-token budget) assemble + result check + projection, view held by the ledger;`,
    "rebuilding turn: the same with the lossless-claw-shaped engine, whose view is the whole history as new objects):",
  ];
  lines.push(
    table([
      ["messages", "file bytes", "history read ms (store)", "full parse ms (before)", "cold read ms", "projection ms", "window turn ms", "window view", "rebuilding turn ms", "samples"],
      ...rows.map((r) => [
        r.messages,
        r.fileBytes,
        r.historyReadMs,
        r.fullParseMs,
        r.coldReadMs,
        r.projectionMs,
        r.windowTurnMs ?? "-",
        r.windowViewMessages ?? "-",
        r.rebuildingTurnMs ?? "-",
        r.samples,
      ]),
    ]),
  );
  return lines.join("\n");
}
