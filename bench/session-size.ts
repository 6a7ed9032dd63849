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
import type { AgentMessage, ContextEngine } from "../src/context-engine/types.js";
import { validateAssembleResult } from "../src/context-engine/contract.js";
import { createWindowEngine } from "../src/context-engine/engines/window.js";
import { createRebuildingEngine } from "./engines/index.js";
import { projectAssembledContext } from "../src/projection/index.js";
import type { ThreadBinding } from "../src/transcript/binding.js";
import { mirrorTurnToTranscript } from "../src/transcript/mirror.js";
import { createJsonlSessionStore, type SessionHistory } from "../src/store/session-store.js";
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
 * One engine's per-turn path after the history read: `assemble`, the result check, and the projection against a
 * thread that received the engine's first view as injected context (its ledger) and holds later turns by id.
 */
async function engineTurnCase(
  engine: ContextEngine,
  tokenBudget: number,
  initial: SessionHistory,
  fingerprints: { dynamicTools: string; engineId: string; policy: string },
): Promise<{ turn(h: SessionHistory, turnId: string): Promise<{ ms: number; viewMessages: number }> }> {
  const project = async (h: SessionHistory, binding: ThreadBinding | undefined) => {
    const view = validateAssembleResult(await engine.assemble({ sessionId: "size", messages: h.messages as AgentMessage[], tokenBudget }));
    const projection = projectAssembledContext({
      mode: "delta",
      prompt: "next question",
      history: h.messages as AgentMessage[],
      origins: h.origins as HistoryOrigins,
      assembled: view,
      binding,
      fingerprints,
      tokenBudget,
    });
    return { view, projection };
  };
  const first = await project(initial, undefined);
  const binding: ThreadBinding = { ...baseBinding(fingerprints), ledger: (first.projection.bindingUpdate as { ledgerAdd: string[] }).ledgerAdd, heldTurnIds: [] };
  return {
    async turn(h, turnId) {
      const t0 = performance.now();
      const { view, projection } = await project(h, { ...binding, heldTurnIds: binding.heldTurnIds.concat(turnId) });
      const ms = performance.now() - t0;
      if (projection.reason !== "threadHoldsContext" || projection.thread.action !== "resume") {
        throw new Error(`session-size bench: unexpected ${engine.info.id} projection ${projection.reason}`);
      }
      binding.heldTurnIds.push(turnId);
      return { ms, viewMessages: view.messages.length };
    },
  };
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
      // Each engine case runs on a session of its own (a copy of the transcript): the projection keeps what the bound
      // thread holds per session (src/projection/held.ts), and one session has one binding. Three bindings taking
      // turns on one session's history would rebuild that memo on every projection, which no real turn does.
      const windowFile = path.join(dir, "window.jsonl");
      const rebuildingFile = path.join(dir, "rebuilding.jsonl");
      await fsp.copyFile(sessionFile, windowFile);
      await fsp.copyFile(sessionFile, rebuildingFile);
      const store = createJsonlSessionStore({ sessionFile, sessionId: "size" });
      const windowStore = createJsonlSessionStore({ sessionFile: windowFile, sessionId: "size" });
      const rebuildingStore = createJsonlSessionStore({ sessionFile: rebuildingFile, sessionId: "size" });
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
      // Each engine's thread: a fresh thread received the engine's first view as injected context (its ledger).
      const windowCase = await engineTurnCase(createWindowEngine({ tokenBudget: WINDOW_BUDGET }), WINDOW_BUDGET, await windowStore.readHistory(), fingerprints);
      const rebuildingCase = await engineTurnCase(createRebuildingEngine(), 10_000_000, await rebuildingStore.readHistory(), fingerprints);
      const windowMs: number[] = [];
      const rebuildingMs: number[] = [];
      let viewMessages = 0;
      for (let s = 0; s < samples + 2; s++) {
        // The previous turn is mirrored (untimed), then the next turn reads its history.
        const turnId = `turn-${turns + s}`;
        await store.appendTurn({ threadId: "thr-size", turnId, messages: turnMessages(turns + s) });
        await windowStore.appendTurn({ threadId: "thr-size", turnId, messages: turnMessages(turns + s) });
        await rebuildingStore.appendTurn({ threadId: "thr-size", turnId, messages: turnMessages(turns + s) });
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
        const windowTurn = await windowCase.turn(await windowStore.readHistory(), turnId);
        viewMessages = windowTurn.viewMessages;
        const rebuildingTurn = await rebuildingCase.turn(await rebuildingStore.readHistory(), turnId);
        const f0 = performance.now();
        const full = await fullParse();
        const f1 = performance.now();
        if (full.messages.length !== h.messages.length) throw new Error("session-size bench: store and full parse disagree");
        if (s >= 2) {
          readMs.push(t1 - t0);
          projectMs.push(t2 - t1);
          windowMs.push(windowTurn.ms);
          rebuildingMs.push(rebuildingTurn.ms);
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
