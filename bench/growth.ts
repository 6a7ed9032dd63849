/**
 * Model input growth and prompt-cache prefix reuse: the same deterministic 40-turn conversation through the real
 * `codex app-server` and the fake Responses API, once per projection mode, with a budget the conversation fits in
 * and one it outgrows. Each configuration gets a fresh fake server, a fresh app-server (own CODEX_HOME) and a fresh
 * session file, so no configuration sees another's threads or requests. All threads share one (non-git) cwd so the
 * `<environment_context>` block is byte-identical across configurations.
 */
import path from "node:path";
import { runCodexTurn } from "../src/turn.js";
import { createWindowEngine } from "../src/context-engine/engines/window.js";
import type { ContextEngine } from "../src/context-engine/types.js";
import type { ProjectionConfig } from "../src/params.js";
import { startFakeResponsesServer, startOfflineCodex, type RecordedRequest } from "../src/testing/index.js";
import { OFFLINE_BASE_INSTRUCTIONS } from "../src/codex/config.js";
import { readThreadBinding } from "../src/transcript/binding.js";
import { DEFAULT_CACHED_PRICE_RATIO } from "../src/projection/rotation.js";
import { bounded, effectiveInputCost, inputBytesOf, median, modelReply, prefixReuse, ratio, requestsCarryingTwice, round, table, tempDir, userPrompt } from "./lib.js";
import { createLosslessLikeEngine, createRebuildingEngine, createRecallEngine, createRecallItemEngine, createSummarizingEngine, recalledNote } from "./engines/index.js";

export type GrowthMode = "floor" | "anchor" | "delta" | "threadBootstrap" | "native" | "auto";

/** Realistic engine shapes (bench/engines/) run next to the window engine. */
export type EngineShape = "rebuilding" | "summarizing" | "recall" | "recallItem" | "lossless" | "window";

export const SHAPE_LABELS: Record<EngineShape, string> = {
  rebuilding: "rebuilding engine (lossless-claw-like: rebuilt messages, no timestamps)",
  summarizing: "summarizing engine (keep 6, fold the rest every 8 turns)",
  recall: "recall engine (per-turn recalled note in systemPromptAddition)",
  recallItem: "recall engine, note placed in the view (a custom message after the history: a user-role reference item)",
  lossless: "lossless-claw-like engine (rebuilt messages, leaf summaries that stay, fresh tail of 8, constant 1.2 KB policy addition)",
  window: "window engine (newest messages within the outgrow budget)",
};

function createShape(shape: EngineShape, budget: number): ContextEngine {
  if (shape === "window") return createWindowEngine({ tokenBudget: budget });
  if (shape === "rebuilding") return createRebuildingEngine();
  if (shape === "summarizing") return createSummarizingEngine();
  if (shape === "recallItem") return createRecallItemEngine();
  if (shape === "lossless") return createLosslessLikeEngine();
  return createRecallEngine();
}

export const MODE_LABELS: Record<GrowthMode, string> = {
  floor: "floor: plain Codex turns, no engine",
  anchor: "anchor: prompt projection, one thread",
  delta: "delta + window engine",
  threadBootstrap: "threadBootstrap + window engine",
  native: "native + window engine",
  auto: "auto + window engine",
};

export interface GrowthRun {
  mode: GrowthMode;
  /** The engine shape, when not the window engine (or no engine, for the floor). */
  shape?: EngineShape;
  budgetTokens: number | null;
  turns: number;
  /** Input bytes of each turn request, in order (one per turn here: the fake never calls tools). */
  turnInputBytes: number[];
  cumulative: Record<string, number>;
  cumulativeTotal: number;
  largestRequest: number;
  compactionRequests: number;
  compactionInputBytes: number;
  threads: number;
  /** Median share of each turn request that is a byte-identical prefix of the previous turn request. */
  reuseMedian: number;
  reuseMin: number;
  /** Median share of the PREVIOUS turn request that the next one repeats byte for byte as its prefix. */
  retainedMedian: number;
  /** Turn requests (after the first) that repeat less than half of the previous request as their prefix. */
  cacheBreaks: number;
  /** Composition of the largest turn request by raw input bytes (see {@link composition}). */
  largestComposition: RequestComposition;
  /** Request content (see {@link composition}) of each turn request, in order. */
  turnContentBytes: number[];
  /** The largest request content over all turn requests: what the outgrows check compares with its limit. */
  largestContent: number;
  /** Composition of the turn request with the largest content (not necessarily the raw-largest one). */
  largestContentComposition: RequestComposition;
  projectionModes: Record<string, number>;
  projectionReasons: Record<string, number>;
  /** Thread rotations: turn requests on a thread other than the previous request's. */
  rotations: number;
  /** Effective input cost in bytes: uncached + cachedPriceRatio x cached (prefix shared with the previous request). */
  effectiveCost: number;
  /** Turn requests that carry some earlier prompt or reply text in two items. */
  requestsCarryingTwice: number;
  /** Stale tokens of each accepted turn (the binding's `staleTokens`; 0 when not reported). */
  staleTokens: number[];
  staleMax: number;
  /** Developer items in the last turn request that hold a superseded recalled note (recall engine). */
  lastRequestStaleNotes: number;
  /** Bytes of every turn's recalled note (recall engine; 0 otherwise). */
  noteBytes: number;
  /** Per turn: the bytes of that turn's recalled note (recall engine; empty otherwise). */
  noteBytesPerTurn: number[];
  /** Turn requests with a developer-role item holding earlier transcript text (a prompt or a reply). */
  developerTranscriptRequests: number;
  /** Per turn request: bytes shared as a prefix with the previous request (what `effectiveCost` prices as cached). */
  cachedBytes: number[];
  /** Per turn request: JSON bytes of its input before the turn's own prompt item (where the turn starts). */
  turnStartBytes: number[];
  wallMs: number;
}

export interface GrowthOptions {
  turns: number;
  checkpoints: number[];
  fitBudget: number;
  outgrowBudget: number;
  log: (line: string) => void;
}

export const BYTES_PER_TOKEN = 4;

/**
 * What one conversation item costs the model beyond its text, in bytes: a chat model pays about 4 tokens of role
 * framing per message, x {@link BYTES_PER_TOKEN} bytes/token = 16 B. It stands in for the item's JSON transport
 * envelope (type, id, role, content wrappers: ~114 B per item here), which is wire format, not model tokens.
 */
export const ITEM_OVERHEAD_BYTES = 16;

/** How a request's input splits into Codex's fixed framing, conversation text and JSON item envelopes. */
export interface RequestComposition {
  items: number;
  /** Items that are Codex framing (base instructions, the skills block, the environment context). */
  framingItems: number;
  /** Every other item: conversation messages and injected context. */
  conversationItems: number;
  /** JSON bytes of the framing items: base instructions, the skills block, the environment context. */
  framingBytes: number;
  /** Text bytes of every other item (conversation messages and injected context). */
  conversationTextBytes: number;
  /** The rest: JSON envelopes of the non-framing items (type, id, role, content wrappers, escaping). */
  envelopeBytes: number;
  /**
   * Request content: conversation text + {@link ITEM_OVERHEAD_BYTES} per conversation item. The part of the request
   * a context engine's token budget governs, in model-token terms (x 4 B/token); excludes Codex framing and envelopes.
   */
  contentBytes: number;
}

/**
 * The text of one request item: its content parts' text, or a tool output's text (Codex injects `untrusted`
 * additionalContext entries as `function_call_output` items, so injected context is text too).
 */
function itemText(item: unknown): string {
  const output = (item as { output?: unknown }).output;
  if (typeof output === "string") return output;
  const content = (item as { content?: unknown }).content;
  if (!Array.isArray(content)) return "";
  return content.map((c: { text?: unknown }) => (typeof c.text === "string" ? c.text : "")).join("");
}

function isFraming(item: unknown, text: string): boolean {
  const role = (item as { role?: unknown }).role;
  if (role === "developer" && (text === OFFLINE_BASE_INSTRUCTIONS || text.startsWith("<skills_instructions>") || text.startsWith("<permissions"))) return true;
  return role === "user" && text.startsWith("<environment_context>");
}

/** Split a request's input into framing, conversation text and envelope bytes. */
export function composition(body: Record<string, unknown> | null): RequestComposition {
  const input = Array.isArray(body?.input) ? (body!.input as unknown[]) : [];
  const out: RequestComposition = {
    items: input.length,
    framingItems: 0,
    conversationItems: 0,
    framingBytes: 0,
    conversationTextBytes: 0,
    envelopeBytes: 0,
    contentBytes: 0,
  };
  for (const item of input) {
    const json = Buffer.byteLength(JSON.stringify(item));
    const text = itemText(item);
    if (isFraming(item, text)) {
      out.framingItems++;
      out.framingBytes += json;
    } else {
      const t = Buffer.byteLength(text);
      out.conversationItems++;
      out.conversationTextBytes += t;
      out.envelopeBytes += json - t;
    }
  }
  out.contentBytes = out.conversationTextBytes + ITEM_OVERHEAD_BYTES * out.conversationItems;
  return out;
}

/** Request content of a request body: conversation text + {@link ITEM_OVERHEAD_BYTES} per non-framing item. */
export const requestContentBytes = (body: Record<string, unknown> | null): number => composition(body).contentBytes;

/** The largest increase from one element to the next (0 for fewer than two elements or a never-growing series). */
export function largestIncrease(xs: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < xs.length; i++) best = Math.max(best, xs[i]! - xs[i - 1]!);
  return best;
}

/** Limit of the outgrows check: the budget in bytes (tokens x {@link BYTES_PER_TOKEN}) plus one turn. */
export const outgrowLimit = (budgetTokens: number, oneTurnBytes: number): number => budgetTokens * BYTES_PER_TOKEN + oneTurnBytes;

export interface GrowthCheck {
  name: string;
  pass: boolean;
  detail: string;
  /** Reported for context only: never a target, never counted as a failure (the name also starts with "(info)"). */
  info?: boolean;
}

const fmt = (n: number) => n.toLocaleString("en-US");

/**
 * The outgrows target: no single turn request's content exceeds the budget plus one turn. `contents` are the
 * mode's request contents, `floorContents` the no-engine floor's (one turn = their largest turn-to-turn increase),
 * `largest` the composition of the mode's request with the largest content.
 */
export function outgrowsCheck(mode: string, contents: readonly number[], largest: RequestComposition, floorContents: readonly number[], budgetTokens: number): GrowthCheck {
  const oneTurn = largestIncrease(floorContents);
  const limit = outgrowLimit(budgetTokens, oneTurn);
  const worst = Math.max(0, ...contents);
  return {
    name: `${mode} largest request content <= budget + one turn (outgrows)`,
    pass: worst <= limit,
    detail:
      `${fmt(worst)} B content (${fmt(largest.conversationTextBytes)} B text + ${largest.conversationItems} items x ${ITEM_OVERHEAD_BYTES} B) ` +
      `vs limit ${fmt(limit)} B (${fmt(budgetTokens)} tok x ${BYTES_PER_TOKEN} + one floor turn ${fmt(oneTurn)} B)`,
  };
}

/**
 * Context for the outgrows check: the raw largest request (JSON bytes of `input`) split into Codex framing, text
 * and envelopes, against the old raw-byte limit. Reported, never a target: the framing is identical in every mode.
 */
export function rawLargestInfo(mode: string, rawLargest: number, c: RequestComposition, budgetTokens: number, oneTurnRawBytes: number): GrowthCheck {
  const limit = outgrowLimit(budgetTokens, oneTurnRawBytes);
  const over = rawLargest - limit;
  return {
    name: `(info) ${mode} largest raw request (JSON input bytes incl. Codex framing and envelopes) (outgrows)`,
    pass: rawLargest <= limit,
    info: true,
    detail:
      `${fmt(rawLargest)} B = ${fmt(c.framingBytes)} B Codex framing (${c.framingItems} items, same in every mode incl. the floor) + ` +
      `${fmt(c.conversationTextBytes)} B text + ${fmt(c.envelopeBytes)} B JSON envelopes (${c.conversationItems} items); ` +
      `${over > 0 ? `${fmt(over)} B over` : `${fmt(-over)} B under`} the raw limit ${fmt(limit)} B (${fmt(budgetTokens)} tok x ${BYTES_PER_TOKEN} + one floor turn ${fmt(oneTurnRawBytes)} B raw)`,
  };
}

function threadOf(r: RecordedRequest): string {
  const t = r.turnMetadata?.thread_id;
  return typeof t === "string" ? t : (r.headers["thread-id"] ?? "");
}

async function runOne(mode: GrowthMode, budget: number | null, opts: GrowthOptions, cwd: string, shape?: EngineShape): Promise<GrowthRun> {
  const fake = await startFakeResponsesServer();
  let replies = 0;
  fake.setDefault(() => ({ text: modelReply(replies++) }));
  const env = await startOfflineCodex({ fake });
  const sessions = tempDir("ctm-bench-growth-");
  const t0 = performance.now();
  try {
    const sessionFile = path.join(sessions.dir, "session.jsonl");
    let engine: ContextEngine | undefined;
    let projection: ProjectionConfig | undefined;
    if (shape && mode !== "floor") {
      engine = createShape(shape, budget!);
      projection = { mode: mode === "anchor" ? "prompt" : mode };
    } else if (mode === "anchor") {
      engine = createWindowEngine({ tokenBudget: budget! });
      projection = { mode: "prompt" };
    } else if (mode === "delta") {
      engine = createWindowEngine({ tokenBudget: budget! });
      projection = { mode: "delta" };
    } else if (mode === "threadBootstrap") {
      engine = createWindowEngine({ tokenBudget: budget!, threadBootstrap: true });
      projection = { mode: "threadBootstrap" };
    }
    const modes: Record<string, number> = {};
    const reasons: Record<string, number> = {};
    const staleTokens: number[] = [];
    let noteBytes = 0;
    const noteBytesPerTurn: number[] = [];
    for (let i = 0; i < opts.turns; i++) {
      if (shape === "recall" || shape === "recallItem") {
        noteBytesPerTurn.push(Buffer.byteLength(recalledNote(userPrompt(i))));
        noteBytes += noteBytesPerTurn[i]!;
      }
      const result = await bounded(
        `${mode} turn ${i + 1}`,
        120_000,
        runCodexTurn({
          appServer: env.codex,
          sessionId: "bench-growth",
          sessionFile,
          prompt: userPrompt(i),
          cwd,
          ...(engine ? { contextEngine: engine, contextTokenBudget: budget! } : {}),
          ...(projection ? { projection } : {}),
        }),
      );
      if (result.status !== "completed") {
        throw new Error(`growth ${mode} turn ${i + 1} ended ${result.status}: ${result.error?.code ?? ""} ${result.error?.message ?? ""}`);
      }
      const pm = result.projection?.mode ?? "none";
      modes[pm] = (modes[pm] ?? 0) + 1;
      const reason = result.projection?.reason ?? "none";
      reasons[reason] = (reasons[reason] ?? 0) + 1;
      staleTokens.push((await readThreadBinding(sessionFile))?.staleTokens ?? 0);
    }
    const turnReqs = fake.requests.filter((r) => r.requestKind === "turn");
    const compactions = fake.requests.filter((r) => r.requestKind === "compaction");
    const bytes = turnReqs.map((r) => r.inputBytes);
    const cumulative: Record<string, number> = {};
    for (const c of opts.checkpoints) cumulative[String(c)] = bytes.slice(0, c).reduce((a, b) => a + b, 0);
    const reuse: number[] = [];
    const retained: number[] = [];
    let prev: Buffer | undefined;
    for (const r of turnReqs) {
      const cur = inputBytesOf(r.body);
      if (prev) {
        const share = prefixReuse(prev, cur);
        reuse.push(share);
        retained.push((share * cur.length) / prev.length);
      }
      prev = cur;
    }
    const largest = turnReqs.reduce<RecordedRequest | undefined>((a, b) => (a === undefined || b.inputBytes > a.inputBytes ? b : a), undefined);
    const comps = turnReqs.map((r) => composition(r.body));
    const contents = comps.map((c) => c.contentBytes);
    const largestContentAt = contents.indexOf(Math.max(...contents));
    const inputs = turnReqs.map((r) => inputBytesOf(r.body));
    const threadIds = turnReqs.map(threadOf);
    const lastInput = (turnReqs[turnReqs.length - 1]?.body?.input ?? []) as unknown[];
    const notesInLast = lastInput.filter((item) => itemText(item).includes("Recalled from memory:")).length;
    return {
      mode,
      ...(shape ? { shape } : {}),
      rotations: threadIds.filter((t, i) => i > 0 && t !== threadIds[i - 1]).length,
      effectiveCost: Math.round(effectiveInputCost(inputs, DEFAULT_CACHED_PRICE_RATIO)),
      requestsCarryingTwice: requestsCarryingTwice(
        turnReqs.map((r) => ((r.body?.input ?? []) as unknown[]).map(itemText)),
        (k) => [...Array.from({ length: k }, (_, i) => userPrompt(i)), ...Array.from({ length: k }, (_, n) => modelReply(n))],
      ),
      staleTokens,
      staleMax: Math.max(0, ...staleTokens),
      lastRequestStaleNotes: Math.max(0, notesInLast - 1),
      developerTranscriptRequests: turnReqs.filter((r, k) => {
        const earlier = [...Array.from({ length: k }, (_, i) => userPrompt(i)), ...Array.from({ length: k }, (_, n) => modelReply(n))];
        return ((r.body?.input ?? []) as unknown[]).some((item) => (item as { role?: unknown }).role === "developer" && earlier.some((t) => itemText(item).includes(t)));
      }).length,
      noteBytes,
      noteBytesPerTurn,
      cachedBytes: inputs.map((cur, k) => (k === 0 ? 0 : Math.round(prefixReuse(inputs[k - 1]!, cur) * cur.length))),
      turnStartBytes: turnReqs.map((r) => {
        const input = (r.body?.input ?? []) as unknown[];
        return Buffer.byteLength(JSON.stringify(input.slice(0, -1)), "utf8");
      }),
      budgetTokens: budget,
      turns: opts.turns,
      turnInputBytes: bytes,
      cumulative,
      cumulativeTotal: bytes.reduce((a, b) => a + b, 0),
      largestRequest: Math.max(0, ...bytes),
      compactionRequests: compactions.length,
      compactionInputBytes: compactions.reduce((a, r) => a + r.inputBytes, 0),
      threads: new Set(turnReqs.map(threadOf)).size,
      reuseMedian: round(median(reuse), 4),
      reuseMin: round(Math.min(...reuse), 4),
      retainedMedian: round(median(retained), 4),
      cacheBreaks: retained.filter((x) => x < 0.5).length,
      largestComposition: composition(largest?.body ?? null),
      turnContentBytes: contents,
      largestContent: Math.max(0, ...contents),
      largestContentComposition: comps[largestContentAt] ?? composition(null),
      projectionModes: modes,
      projectionReasons: reasons,
      wallMs: Math.round(performance.now() - t0),
    };
  } finally {
    await env.dispose();
    await fake.close();
    sessions.cleanup();
  }
}

export interface GrowthScenario {
  name: "fits" | "outgrows";
  budgetTokens: number;
  runs: GrowthRun[];
  /** Largest per-turn increase of the floor's raw request size (JSON input bytes): the old one-turn figure. */
  oneTurnBytes: number;
  /** Largest per-turn increase of the floor's request content: "one turn" of the outgrows check. */
  oneTurnContentBytes: number;
  /** Input bytes of the floor's first request: Codex's fixed framing (instructions, skills, environment) + prompt 1. */
  framingBytes: number;
  /** Limits of the outgrows check: on request content (the target) and on raw JSON bytes (reported only). */
  limits: { contentBytes: number; rawBytes: number };
  checks: GrowthCheck[];
}

/** The realistic engine shapes, on the budget the conversation fits in, against the same floor. */
export interface ShapeScenario {
  budgetTokens: number;
  floor: { cumulativeTotal: number; effectiveCost: number };
  runs: GrowthRun[];
  checks: GrowthCheck[];
}

export interface GrowthResults {
  turns: number;
  checkpoints: number[];
  setup: string;
  definitions: string[];
  scenarios: GrowthScenario[];
  shapes?: ShapeScenario;
}

/**
 * Projection modes each engine shape runs in: `delta` is what `auto` picked for them before issue 64 (the old auto),
 * `auto` what it picks now (the native sync whenever the engine assembled a view).
 */
export const SHAPE_MODES = ["delta", "threadBootstrap", "native", "auto"] as const;

/**
 * The least effective input cost a per-turn note can reach on ONE Codex thread by carrying notes and cutting the
 * thread back (`thread/revert`), turn-granular as Codex allows, granted every advantage (notes cost only their own
 * bytes, no envelope). Dynamic programming over the request k and the turn m the carried notes start at: request k
 * either carries notes m..k-1 (`ratio` x their bytes) or cuts before turn m, re-sending uncached what the floor had
 * cached from turn m on ((1 - `ratio`) x (cachedBytes[k] - turnStartBytes[m])). Either way it sends its own note
 * uncached. A cut never needs a new thread (a revert before turn 1 keeps Codex's preamble and tools cached), so
 * rotations are never cheaper and are not modelled. Returns the cost and the ideal (floor + every note once).
 *
 * @example
 * ```ts
 * recallRevertBound({ floorEffectiveCost: 1000, cachedBytes: [0, 900], turnStartBytes: [800, 850], noteBytes: [10, 10], ratio: 0.1 });
 * // { cost: 1021, ideal: 1020, cuts: 0 } (carrying the first note costs 1; cutting would cost 0.9 x 100)
 * ```
 */
export function recallRevertBound(p: { floorEffectiveCost: number; cachedBytes: readonly number[]; turnStartBytes: readonly number[]; noteBytes: readonly number[]; ratio: number }): {
  cost: number;
  ideal: number;
  cuts: number;
} {
  const n = p.noteBytes.length;
  // f[m] = least extra cost so far with notes m..k-1 carried into request k; cuts[m] = cuts on that path.
  let f = new Map<number, { cost: number; cuts: number }>([[0, { cost: p.noteBytes[0] ?? 0, cuts: 0 }]]);
  for (let k = 1; k < n; k++) {
    const next = new Map<number, { cost: number; cuts: number }>();
    const offer = (m: number, cost: number, cuts: number) => {
      const known = next.get(m);
      if (known === undefined || cost < known.cost) next.set(m, { cost, cuts });
    };
    for (const [m, at] of f) {
      let carried = 0;
      for (let j = m; j < k; j++) carried += p.noteBytes[j]!;
      offer(m, at.cost + p.noteBytes[k]! + p.ratio * carried, at.cuts);
      const resent = Math.max(0, (p.cachedBytes[k] ?? 0) - (p.turnStartBytes[m] ?? 0));
      offer(k, at.cost + p.noteBytes[k]! + (1 - p.ratio) * resent, at.cuts + 1);
    }
    f = next;
  }
  let best = { cost: Infinity, cuts: 0 };
  for (const v of f.values()) if (v.cost < best.cost) best = v;
  const notes = p.noteBytes.reduce((a, b) => a + b, 0);
  return { cost: Math.round(p.floorEffectiveCost + (n > 0 ? best.cost : 0)), ideal: p.floorEffectiveCost + notes, cuts: best.cuts };
}

/**
 * The least effective input cost ANY rotation schedule can reach for a per-turn note on Codex threads, which keep
 * every item they were given: the offline optimum over all rotation points (dynamic programming over segments),
 * granted every advantage: notes cost only their own bytes (no envelope), and a rotation costs only re-sending
 * uncached what the floor had cached at that request. On a thread started at request s, request k carries the notes
 * of s..k; the new one is uncached, the older ones are cached prefix (`ratio` x bytes). Returns the cost, the ideal
 * (floor + every note once, uncached) and the rotation points of the optimum.
 *
 * @example
 * ```ts
 * recallLowerBound({ floorEffectiveCost: 1000, cachedBytes: [0, 900], noteBytes: [10, 10], ratio: 0.1 });
 * // { cost: 1021, ideal: 1020, rotations: [] } (the second request carries the first note, cached: + 1)
 * ```
 */
export function recallLowerBound(p: { floorEffectiveCost: number; cachedBytes: readonly number[]; noteBytes: readonly number[]; ratio: number }): {
  cost: number;
  ideal: number;
  rotations: number[];
} {
  const n = p.noteBytes.length;
  const segment = (s: number, e: number): number => {
    let cost = s === 0 ? 0 : (1 - p.ratio) * (p.cachedBytes[s] ?? 0);
    let carried = 0;
    for (let k = s; k <= e; k++) {
      cost += p.noteBytes[k]! + p.ratio * carried;
      carried += p.noteBytes[k]!;
    }
    return cost;
  };
  const best: number[] = [0];
  const from: number[] = [0];
  for (let e = 0; e < n; e++) {
    best[e + 1] = Infinity;
    for (let s = 0; s <= e; s++) {
      const c = best[s]! + segment(s, e);
      if (c < best[e + 1]!) {
        best[e + 1] = c;
        from[e + 1] = s;
      }
    }
  }
  const rotations: number[] = [];
  for (let e = n; e > 0; e = from[e]!) if (from[e]! > 0) rotations.unshift(from[e]!);
  const notes = p.noteBytes.reduce((a, b) => a + b, 0);
  return { cost: Math.round(p.floorEffectiveCost + best[n]!), ideal: p.floorEffectiveCost + notes, rotations };
}

/**
 * The issue 15 targets on the engine shapes, in the given runs (floor from the same run).
 *
 * @example
 * ```ts
 * const checks = shapeChecks(runs, floor);
 * ```
 */
export function shapeChecks(runs: readonly GrowthRun[], floor: GrowthRun): GrowthCheck[] {
  const checks: GrowthCheck[] = [];
  const find = (shape: EngineShape, mode: GrowthMode) => runs.find((r) => r.shape === shape && r.mode === mode);
  const rebuilding = find("rebuilding", "delta");
  if (rebuilding) {
    checks.push({
      name: "rebuilding engine (delta): no request carries a message the thread holds",
      pass: rebuilding.requestsCarryingTwice === 0,
      detail: `${rebuilding.requestsCarryingTwice} of ${rebuilding.turns} requests carry an earlier message twice`,
    });
    const r = ratio(rebuilding.cumulativeTotal, floor.cumulativeTotal);
    checks.push({ name: "rebuilding engine (delta): cumulative input <= 1.01x the floor", pass: r <= 1.01, detail: `${fmt(rebuilding.cumulativeTotal)} B = ${r}x floor` });
  }
  const summarizing = find("summarizing", "delta");
  if (summarizing) {
    const r = ratio(summarizing.effectiveCost, floor.effectiveCost);
    checks.push({
      name: "summarizing engine (delta): effective input cost <= 0.8x the floor's",
      pass: r <= 0.8,
      detail: `${fmt(summarizing.effectiveCost)} B = ${r}x floor (${fmt(floor.effectiveCost)} B); ${summarizing.rotations} rotations; max stale per request ${fmt(summarizing.staleMax)} tokens`,
    });
  }
  const recall = find("recall", "delta");
  if (recall) {
    const ideal = floor.effectiveCost + recall.noteBytes;
    const r = ratio(recall.effectiveCost, ideal);
    checks.push({
      name: "recall engine (delta): effective input cost <= 1.05x its ideal (floor + each turn's note uncached)",
      pass: r <= 1.05,
      detail: `${fmt(recall.effectiveCost)} B = ${r}x ideal (${fmt(ideal)} B = floor ${fmt(floor.effectiveCost)} + notes ${fmt(recall.noteBytes)}); ${recall.rotations} rotations; last request carries ${recall.lastRequestStaleNotes} stale note copies (${fmt(recall.staleTokens[recall.staleTokens.length - 1] ?? 0)} stale tokens)`,
    });
    const bound = recallLowerBound({ floorEffectiveCost: floor.effectiveCost, cachedBytes: floor.cachedBytes, noteBytes: recall.noteBytesPerTurn, ratio: DEFAULT_CACHED_PRICE_RATIO });
    const boundRatio = ratio(bound.cost, bound.ideal);
    checks.push({
      name: "(info) recall engine: the least ANY rotation schedule can reach on append-only Codex threads (offline optimum, notes without envelope)",
      pass: true,
      info: true,
      detail:
        `${fmt(bound.cost)} B = ${boundRatio}x ideal, rotating at ${bound.rotations.length === 0 ? "no request" : `requests ${bound.rotations.map((x) => x + 1).join(", ")}`}; ` +
        `${boundRatio > 1.05 ? "above 1.05x: no policy can meet that target, because a Codex thread keeps every note it was given" : "within 1.05x"}; ` +
        `this run's policy pays ${fmt(recall.effectiveCost - floor.effectiveCost)} B over the floor against the optimum's ${fmt(bound.cost - floor.effectiveCost)} B (${ratio(recall.effectiveCost - floor.effectiveCost, bound.cost - floor.effectiveCost)}x)`,
    });
  }
  checks.push(...nativeShapeChecks(runs, floor, "native"), ...nativeShapeChecks(runs, floor, "auto"));
  for (const run of runs.filter((x) => x.mode !== "delta")) {
    checks.push({
      name: `(info) ${run.shape} engine (${run.mode})`,
      pass: true,
      info: true,
      detail: `cumulative ${ratio(run.cumulativeTotal, floor.cumulativeTotal)}x floor, effective ${ratio(run.effectiveCost, floor.effectiveCost)}x floor, ${run.rotations} rotations, max stale ${fmt(run.staleMax)} tokens, ${run.requestsCarryingTwice} requests carrying a message twice`,
    });
  }
  return checks;
}

/**
 * The issue 64 targets on native mode (the view becomes the thread), in the given runs (floor from the same run).
 *
 * @example
 * ```ts
 * const checks = nativeShapeChecks(runs, floor);
 * ```
 */
export function nativeShapeChecks(runs: readonly GrowthRun[], floor: GrowthRun, mode: "native" | "auto" = "native"): GrowthCheck[] {
  const checks: GrowthCheck[] = [];
  const find = (shape: EngineShape) => runs.find((r) => r.shape === shape && r.mode === mode);
  const rebuilding = find("rebuilding");
  if (rebuilding) {
    const r = ratio(rebuilding.cumulativeTotal, floor.cumulativeTotal);
    checks.push({
      name: `rebuilding engine (${mode}): cumulative input <= 1.01x the floor, 0 requests carrying a held message twice`,
      pass: r <= 1.01 && rebuilding.requestsCarryingTwice === 0,
      detail: `${fmt(rebuilding.cumulativeTotal)} B = ${r}x floor; ${rebuilding.requestsCarryingTwice} requests carry a message twice; ${rebuilding.threads} threads`,
    });
  }
  const summarizing = find("summarizing");
  if (summarizing) {
    const r = ratio(summarizing.effectiveCost, floor.effectiveCost);
    checks.push({
      name: `summarizing engine (${mode}): effective input cost <= 0.8x the floor's`,
      pass: r <= 0.8,
      detail: `${fmt(summarizing.effectiveCost)} B = ${r}x floor; ${summarizing.threads} threads; reasons ${JSON.stringify(summarizing.projectionReasons)}`,
    });
  }
  for (const shape of ["recall", "recallItem"] as const) {
    const recall = find(shape);
    if (!recall) continue;
    const ideal = floor.effectiveCost + recall.noteBytes;
    const r = ratio(recall.effectiveCost, ideal);
    const bound = recallRevertBound({
      floorEffectiveCost: floor.effectiveCost,
      cachedBytes: floor.cachedBytes,
      turnStartBytes: floor.turnStartBytes,
      noteBytes: recall.noteBytesPerTurn,
      ratio: DEFAULT_CACHED_PRICE_RATIO,
    });
    checks.push({
      name: `${shape} engine (${mode}): effective input cost <= 1.05x its ideal`,
      pass: r <= 1.05,
      detail:
        `${fmt(recall.effectiveCost)} B = ${r}x ideal (${fmt(ideal)} B); ${recall.threads} threads; last request carries ${recall.lastRequestStaleNotes} stale note copies; ` +
        `the least one Codex thread can reach by carrying and reverting (offline optimum, notes without envelope): ${fmt(bound.cost)} B = ${ratio(bound.cost, bound.ideal)}x ideal ` +
        `(${bound.cuts} cuts); this run = ${ratio(recall.effectiveCost, bound.cost)}x that bound`,
    });
  }
  const natives = runs.filter((r) => r.mode === mode);
  const devTranscript = natives.reduce((sum, r) => sum + r.developerTranscriptRequests, 0);
  if (natives.length > 0) {
    checks.push({
      name: `${mode}: 0 requests with transcript text in a developer-role item`,
      pass: devTranscript === 0,
      detail: `${devTranscript} of ${natives.reduce((sum, r) => sum + r.turns, 0)} requests over ${natives.length} engines`,
    });
  }
  return checks;
}

/** "Far past": the anchor's cumulative input at the last turn is at least this many times the mode's. */
const FAR_PAST_FACTOR = 2;

/**
 * Run every configuration and evaluate the targets.
 *
 * @example
 * ```ts
 * const g = await runGrowth({ turns: 40, checkpoints: [10, 20, 40], fitBudget: 1_000_000, outgrowBudget: 2_000, log: console.log });
 * ```
 */
export async function runGrowth(opts: GrowthOptions): Promise<GrowthResults> {
  const cwd = tempDir("ctm-bench-cwd-");
  const last = String(opts.checkpoints[opts.checkpoints.length - 1]!);
  try {
    opts.log(`growth: floor (no engine), ${opts.turns} turns`);
    const floor = await runOne("floor", null, opts, cwd.dir);
    const floorBytes = floor.turnInputBytes;
    const oneTurnBytes = largestIncrease(floorBytes);
    const oneTurnContentBytes = largestIncrease(floor.turnContentBytes);
    const framingBytes = floorBytes[0] ?? 0;
    const scenarios: GrowthScenario[] = [];
    for (const [name, budget] of [
      ["fits", opts.fitBudget],
      ["outgrows", opts.outgrowBudget],
    ] as const) {
      const runs: GrowthRun[] = [{ ...floor, budgetTokens: null }];
      for (const mode of ["anchor", "delta", "threadBootstrap"] as const) {
        opts.log(`growth: ${mode}, budget ${budget} tokens, ${opts.turns} turns`);
        runs.push(await runOne(mode, budget, opts, cwd.dir));
      }
      const by = (m: GrowthMode) => runs.find((r) => r.mode === m)!;
      const checks: GrowthScenario["checks"] = [];
      if (name === "fits") {
        for (const m of ["delta", "threadBootstrap"] as const) {
          const r = ratio(by(m).cumulative[last]!, floor.cumulative[last]!);
          checks.push({
            name: `${m} cumulative at turn ${last} within 1.1x of the floor (fits)`,
            pass: r <= 1.1,
            detail: `${by(m).cumulative[last]!.toLocaleString("en-US")} B = ${r}x floor`,
          });
        }
      } else {
        for (const m of ["delta", "threadBootstrap"] as const) {
          const r = by(m);
          checks.push(outgrowsCheck(m, r.turnContentBytes, r.largestContentComposition, floor.turnContentBytes, budget));
          checks.push(rawLargestInfo(m, r.largestRequest, r.largestComposition, budget, oneTurnBytes));
        }
      }
      for (const m of ["delta", "threadBootstrap"] as const) {
        const r = ratio(by("anchor").cumulative[last]!, by(m).cumulative[last]!);
        checks.push({
          name: `anchor grows far past ${m} (${name}: >= ${FAR_PAST_FACTOR}x at turn ${last})`,
          pass: r >= FAR_PAST_FACTOR,
          detail: `anchor/${m} = ${r}x`,
        });
      }
      const limits = { contentBytes: outgrowLimit(budget, oneTurnContentBytes), rawBytes: outgrowLimit(budget, oneTurnBytes) };
      scenarios.push({ name, budgetTokens: budget, runs, oneTurnBytes, oneTurnContentBytes, framingBytes, limits, checks });
    }
    const shapeRuns: GrowthRun[] = [];
    for (const shape of ["window", "rebuilding", "lossless", "summarizing", "recall", "recallItem"] as const) {
      for (const mode of SHAPE_MODES) {
        const budget = shape === "window" ? opts.outgrowBudget : opts.fitBudget;
        opts.log(`growth: ${shape} engine, ${mode}, budget ${budget} tokens, ${opts.turns} turns`);
        shapeRuns.push(await runOne(mode, budget, opts, cwd.dir, shape));
      }
    }
    const shapes: ShapeScenario = {
      budgetTokens: opts.fitBudget,
      floor: { cumulativeTotal: floor.cumulativeTotal, effectiveCost: floor.effectiveCost },
      runs: shapeRuns,
      checks: shapeChecks(shapeRuns, floor),
    };
    // bench/run.ts reports the scenarios' checks as targets; the shapes run on the "fits" budget.
    scenarios.find((x) => x.name === "fits")?.checks.push(...shapes.checks);
    return {
      shapes,
      turns: opts.turns,
      checkpoints: opts.checkpoints,
      setup:
        "fresh fake Responses server + fresh codex app-server (own CODEX_HOME) + fresh session file per configuration; " +
        "the floor run is shared by both budgets (it has no engine)",
      definitions: [
        "input bytes = byte length of JSON.stringify(request.input); only requestKind 'turn' requests are summed (compaction requests reported separately)",
        `budget bytes = budget tokens x ${BYTES_PER_TOKEN} bytes/token`,
        "Codex framing = the framing items of a request (base instructions, skills block, environment context): fixed Codex input, " +
          "byte-identical in every mode including the no-engine floor; no context engine controls or budgets it",
        `request content = conversation text bytes + ITEM_OVERHEAD_BYTES (${ITEM_OVERHEAD_BYTES}) per non-framing item: what the engine's token budget governs. ` +
          `${ITEM_OVERHEAD_BYTES} B = ~4 tokens of per-message role framing a chat model pays x ${BYTES_PER_TOKEN} B/token; it replaces the item's JSON ` +
          "transport envelope (type/id/role/content wrappers, ~114 B per item), which is wire format, not model tokens",
        "one turn (content) = the largest increase of the floor's request content from one turn to the next (prompt + previous reply + 2 items' overhead)",
        "one turn (raw) = the same on the floor's raw input bytes (the previous measure; reported, no longer the target's)",
        `outgrows target = max over the mode's turn requests of request content <= budget tokens x ${BYTES_PER_TOKEN} + one turn (content); ` +
          "the (info) line shows the raw largest request (framing | text | envelopes) against budget bytes + one turn (raw)",
        "floor request 1 = the floor's first request in raw bytes (Codex framing + first prompt)",
        `far past = anchor cumulative at the last checkpoint >= ${FAR_PAST_FACTOR}x the mode's`,
        "reuse = median over turn requests 2..N of (byte-identical prefix shared with the previous turn request) / (request size); input serialized item by item with JSON.stringify",
        "retained = the same prefix / (previous request size): 1.0 means the whole previous request is a cacheable prefix of the next",
        "cache breaks = turn requests whose retained share is below 0.5 (a thread rotation: new thread, new item ids)",
        "composition of a request: Codex framing items (base instructions, skills block, environment context) | conversation text (text of every other item) | JSON envelopes of those items",
        `effective input cost = sum over turn requests of uncached bytes + ${DEFAULT_CACHED_PRICE_RATIO} x cached bytes, cached = the prefix shared byte for byte with the previous turn request (the projection's default cachedPriceRatio)`,
        "rotations = turn requests on another thread than the previous one; stale tokens = the binding's staleTokens after each accepted turn",
        "carrying a message twice = some earlier prompt or reply text occurs in two items of one request",
        "recall ideal = the floor's effective cost + each turn's note bytes, uncached",
        "cached prefix (engine shapes) = all turn requests' bytes shared as a prefix with the previous request / all their bytes",
        "dev transcript = turn requests with an earlier prompt or reply inside a developer-role item",
        "engine shapes: the window engine runs on the outgrow budget, the others on the fit budget; delta is what today's auto picks for all of them",
      ],
      scenarios,
    };
  } finally {
    cwd.cleanup();
  }
}

/** Plain-text tables of the growth results. */
export function formatGrowth(g: GrowthResults): string {
  const lines: string[] = [];
  const last = String(g.checkpoints[g.checkpoints.length - 1]!);
  for (const s of g.scenarios) {
    const floor = s.runs.find((r) => r.mode === "floor")!;
    const anchor = s.runs.find((r) => r.mode === "anchor")!;
    lines.push(
      `\n## 1. Model input growth — ${s.name === "fits" ? "conversation fits" : "conversation outgrows"} the budget (${s.budgetTokens.toLocaleString("en-US")} tokens), ${g.turns} turns`,
    );
    const header = ["mode", ...g.checkpoints.map((c) => `cum@${c} B`), "largest B", `x floor@${last}`, `x anchor@${last}`, "threads", "compactions", "reuse", "retained", "cache breaks", "effective B", "max stale tok"];
    const rows: Array<Array<string | number>> = [header];
    for (const r of s.runs) {
      rows.push([
        MODE_LABELS[r.mode],
        ...g.checkpoints.map((c) => r.cumulative[String(c)]!),
        r.largestRequest,
        ratio(r.cumulative[last]!, floor.cumulative[last]!),
        ratio(r.cumulative[last]!, anchor.cumulative[last]!),
        r.threads,
        r.compactionRequests === 0 ? "0" : `${r.compactionRequests} (${r.compactionInputBytes.toLocaleString("en-US")} B)`,
        r.reuseMedian,
        r.retainedMedian,
        r.cacheBreaks,
        r.effectiveCost,
        r.staleMax,
      ]);
    }
    lines.push(table(rows));
    lines.push(
      `one turn = ${fmt(s.oneTurnContentBytes)} B content (${fmt(s.oneTurnBytes)} B raw); floor request 1 (Codex framing + prompt 1) = ${fmt(s.framingBytes)} B raw`,
    );
    if (s.name === "outgrows") {
      lines.push(
        `limits: content ${fmt(s.limits.contentBytes)} B = ${fmt(s.budgetTokens)} tok x ${BYTES_PER_TOKEN} + ${fmt(s.oneTurnContentBytes)} B (the target); ` +
          `raw ${fmt(s.limits.rawBytes)} B = ${fmt(s.budgetTokens)} tok x ${BYTES_PER_TOKEN} + ${fmt(s.oneTurnBytes)} B (info only)`,
      );
      const cRows: Array<Array<string | number>> = [["mode", "largest content B", "largest raw B", "framing B", "text B", "envelopes B", "items"]];
      for (const r of s.runs) {
        const c = r.largestComposition;
        cRows.push([MODE_LABELS[r.mode], r.largestContent, r.largestRequest, c.framingBytes, c.conversationTextBytes, c.envelopeBytes, c.items]);
      }
      lines.push("Largest request (framing / text / envelopes are of the raw-largest request):");
      lines.push(table(cRows));
    }
    for (const r of s.runs) {
      if (r.mode === "floor") continue;
      lines.push(`  ${r.mode}: projection reasons ${JSON.stringify(r.projectionReasons)}`);
    }
    for (const c of s.checks) lines.push(`${c.info ? "INFO" : c.pass ? "PASS" : "FAIL"}  ${c.name}: ${c.detail}`);
  }
  if (g.shapes) {
    const sh = g.shapes;
    lines.push(`\n## 1b. Realistic engine shapes, ${g.turns} turns, budget ${sh.budgetTokens.toLocaleString("en-US")} tokens (floor: ${fmt(sh.floor.cumulativeTotal)} B cumulative, ${fmt(sh.floor.effectiveCost)} B effective)`);
    const rows: Array<Array<string | number>> = [
      ["engine", "mode", "cumulative B", "x floor", "largest B", "effective B", "eff x floor", "threads", "rotations", "cached prefix", "max stale tok", "last stale tok", "carry twice", "dev transcript"],
    ];
    for (const r of sh.runs) {
      rows.push([
        r.shape === "rebuilding" ? "rebuilding" : r.shape === "lossless" ? "lossless-claw-like" : (r.shape ?? "window"),
        r.mode === "delta" ? "delta (old auto)" : r.mode === "auto" ? "auto (new)" : r.mode,
        r.cumulativeTotal,
        ratio(r.cumulativeTotal, sh.floor.cumulativeTotal),
        r.largestRequest,
        r.effectiveCost,
        ratio(r.effectiveCost, sh.floor.effectiveCost),
        r.threads,
        r.rotations,
        round(r.cachedBytes.reduce((a, b) => a + b, 0) / Math.max(1, r.cumulativeTotal), 4),
        r.staleMax,
        r.staleTokens[r.staleTokens.length - 1] ?? 0,
        r.requestsCarryingTwice,
        r.developerTranscriptRequests,
      ]);
    }
    lines.push(table(rows));
    for (const r of sh.runs) lines.push(`  ${r.shape} ${r.mode}: projection reasons ${JSON.stringify(r.projectionReasons)}`);
    for (const c of sh.checks) lines.push(`${c.info ? "INFO" : c.pass ? "PASS" : "FAIL"}  ${c.name}: ${c.detail}`);
  }
  lines.push("\nDefinitions:");
  for (const d of g.definitions) lines.push(`  - ${d}`);
  return lines.join("\n");
}
