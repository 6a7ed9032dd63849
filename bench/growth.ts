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
import { bounded, inputBytesOf, median, modelReply, prefixReuse, ratio, round, table, tempDir, userPrompt } from "./lib.js";

export type GrowthMode = "floor" | "anchor" | "delta" | "threadBootstrap";

export const MODE_LABELS: Record<GrowthMode, string> = {
  floor: "floor: plain Codex turns, no engine",
  anchor: "anchor: prompt projection, one thread",
  delta: "delta + window engine",
  threadBootstrap: "threadBootstrap + window engine",
};

export interface GrowthRun {
  mode: GrowthMode;
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
  /** Composition of the largest turn request (see {@link composition}). */
  largestComposition: RequestComposition;
  projectionModes: Record<string, number>;
  projectionReasons: Record<string, number>;
  wallMs: number;
}

export interface GrowthOptions {
  turns: number;
  checkpoints: number[];
  fitBudget: number;
  outgrowBudget: number;
  log: (line: string) => void;
}

/** How a request's input splits into Codex's fixed framing, conversation text and JSON item envelopes. */
export interface RequestComposition {
  items: number;
  /** JSON bytes of the framing items: base instructions, the skills block, the environment context. */
  framingBytes: number;
  /** Text bytes of every other item (conversation messages and injected context). */
  conversationTextBytes: number;
  /** The rest: JSON envelopes of the non-framing items (type, id, role, content wrappers, escaping). */
  envelopeBytes: number;
}

function itemText(item: unknown): string {
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
  const out: RequestComposition = { items: input.length, framingBytes: 0, conversationTextBytes: 0, envelopeBytes: 0 };
  for (const item of input) {
    const json = Buffer.byteLength(JSON.stringify(item));
    const text = itemText(item);
    if (isFraming(item, text)) out.framingBytes += json;
    else {
      const t = Buffer.byteLength(text);
      out.conversationTextBytes += t;
      out.envelopeBytes += json - t;
    }
  }
  return out;
}

function threadOf(r: RecordedRequest): string {
  const t = r.turnMetadata?.thread_id;
  return typeof t === "string" ? t : (r.headers["thread-id"] ?? "");
}

async function runOne(mode: GrowthMode, budget: number | null, opts: GrowthOptions, cwd: string): Promise<GrowthRun> {
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
    if (mode === "anchor") {
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
    for (let i = 0; i < opts.turns; i++) {
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
    return {
      mode,
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
  /** Largest per-turn increase of the floor's request size: what one more turn adds to a native thread. */
  oneTurnBytes: number;
  /** Input bytes of the floor's first request: Codex's fixed framing (instructions, skills, environment) + prompt 1. */
  framingBytes: number;
  checks: Array<{ name: string; pass: boolean; detail: string }>;
}

export interface GrowthResults {
  turns: number;
  checkpoints: number[];
  setup: string;
  definitions: string[];
  scenarios: GrowthScenario[];
}

const BYTES_PER_TOKEN = 4;
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
    let oneTurnBytes = 0;
    for (let i = 1; i < floorBytes.length; i++) oneTurnBytes = Math.max(oneTurnBytes, floorBytes[i]! - floorBytes[i - 1]!);
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
        const limit = budget * BYTES_PER_TOKEN + oneTurnBytes;
        for (const m of ["delta", "threadBootstrap"] as const) {
          const largest = by(m).largestRequest;
          checks.push({
            name: `${m} largest request <= budget + one turn (outgrows)`,
            pass: largest <= limit,
            detail: `${largest.toLocaleString("en-US")} B vs limit ${limit.toLocaleString("en-US")} B (${budget} tok x ${BYTES_PER_TOKEN} + ${oneTurnBytes} B)`,
          });
          const c = by(m).largestComposition;
          checks.push({
            name: `(info) ${m} largest request's conversation text <= budget + one turn (outgrows)`,
            pass: c.conversationTextBytes <= limit,
            detail: `${c.conversationTextBytes.toLocaleString("en-US")} B text + ${c.envelopeBytes.toLocaleString("en-US")} B JSON envelopes (${c.items} items) + ${c.framingBytes.toLocaleString("en-US")} B Codex framing`,
          });
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
      scenarios.push({ name, budgetTokens: budget, runs, oneTurnBytes, framingBytes, checks });
    }
    return {
      turns: opts.turns,
      checkpoints: opts.checkpoints,
      setup:
        "fresh fake Responses server + fresh codex app-server (own CODEX_HOME) + fresh session file per configuration; " +
        "the floor run is shared by both budgets (it has no engine)",
      definitions: [
        "input bytes = byte length of JSON.stringify(request.input); only requestKind 'turn' requests are summed (compaction requests reported separately)",
        `budget bytes = budget tokens x ${BYTES_PER_TOKEN} bytes/token`,
        "one turn = the largest increase of the floor's request size from one turn to the next (prompt + previous reply + item framing)",
        "Codex framing = the floor's first request (base instructions, skills block, environment context, first prompt)",
        `far past = anchor cumulative at the last checkpoint >= ${FAR_PAST_FACTOR}x the mode's`,
        "reuse = median over turn requests 2..N of (byte-identical prefix shared with the previous turn request) / (request size); input serialized item by item with JSON.stringify",
        "retained = the same prefix / (previous request size): 1.0 means the whole previous request is a cacheable prefix of the next",
        "cache breaks = turn requests whose retained share is below 0.5 (a thread rotation: new thread, new item ids)",
        "composition of a request: Codex framing items (base instructions, skills block, environment context) | conversation text (text of every other item) | JSON envelopes of those items",
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
    const header = ["mode", ...g.checkpoints.map((c) => `cum@${c} B`), "largest B", `x floor@${last}`, `x anchor@${last}`, "threads", "compactions", "reuse", "retained", "cache breaks"];
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
      ]);
    }
    lines.push(table(rows));
    lines.push(`one turn = ${s.oneTurnBytes.toLocaleString("en-US")} B; Codex framing (floor request 1) = ${s.framingBytes.toLocaleString("en-US")} B`);
    for (const r of s.runs) {
      if (r.mode === "floor") continue;
      lines.push(`  ${r.mode}: projection reasons ${JSON.stringify(r.projectionReasons)}`);
    }
    for (const c of s.checks) lines.push(`${c.pass ? "PASS" : "FAIL"}  ${c.name}: ${c.detail}`);
  }
  lines.push("\nDefinitions:");
  for (const d of g.definitions) lines.push(`  - ${d}`);
  return lines.join("\n");
}
