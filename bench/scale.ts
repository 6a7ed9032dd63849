/**
 * Scale: N concurrent sessions on ONE app-server process, each running a few sequential `runCodexTurn` turns with the
 * window engine (auto projection). A fresh app-server per N, so the memory figures of one N do not carry the loaded
 * threads of the previous one. Memory: VmRSS of the app-server (`/proc/<pid>/status`) and of this node process,
 * sampled every 50 ms (peak) and idle right after spawn (base). Plus the transcript mirror's append cost at 10, 1,000
 * and 10,000 existing entries.
 */
import path from "node:path";
import { runCodexTurn } from "../src/turn.js";
import { createWindowEngine } from "../src/context-engine/engines/window.js";
import { measureAppendCostDetailed, type AppendCostFigures } from "./append-cost.js";
import { formatSessionSize, measureSessionSizeCosts, type SessionSizeFigures } from "./session-size.js";
import { startOfflineCodex } from "../src/testing/index.js";
import { bounded, median, modelReply, percentile, round, rssKiB, table, tempDir, userPrompt } from "./lib.js";

export interface ScaleRow {
  sessions: number;
  turnsPerSession: number;
  turns: number;
  wallMs: number;
  turnsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  appServerRssBaseMiB: number | null;
  appServerRssPeakMiB: number | null;
  nodeRssBaseMiB: number;
  nodeRssPeakMiB: number;
  failed: number;
}

export interface ScaleResults {
  rows: ScaleRow[];
  append: AppendCostFigures[];
  /** Per-turn history read and projection at growing session sizes (absent in results written before it existed). */
  sessionSize?: SessionSizeFigures[];
  note: string;
}

const mib = (kib: number | undefined): number | null => (kib === undefined ? null : round(kib / 1024, 1));

async function scaleOnce(n: number, turnsPerSession: number): Promise<ScaleRow> {
  const env = await startOfflineCodex();
  let replies = 0;
  env.fake.setDefault(() => ({ text: modelReply(replies++) }));
  const dirs = tempDir("ctm-bench-scale-");
  const cwd = tempDir("ctm-bench-cwd-");
  const pid = env.codex.pid;
  try {
    await new Promise((r) => setTimeout(r, 200));
    const appBase = rssKiB(pid);
    const nodeBase = process.memoryUsage().rss;
    let appPeak = appBase ?? 0;
    let nodePeak = nodeBase;
    const sampler = setInterval(() => {
      const a = rssKiB(pid);
      if (a !== undefined) appPeak = Math.max(appPeak, a);
      nodePeak = Math.max(nodePeak, process.memoryUsage().rss);
    }, 50);
    const engine = createWindowEngine({ tokenBudget: 1_000_000 });
    const latencies: number[] = [];
    let failed = 0;
    const t0 = performance.now();
    try {
      await bounded(
        `scale N=${n}`,
        300_000,
        Promise.all(
          Array.from({ length: n }, async (_, s) => {
            const sessionFile = path.join(dirs.dir, `s${s}.jsonl`);
            for (let i = 0; i < turnsPerSession; i++) {
              const ts = performance.now();
              const r = await runCodexTurn({
                appServer: env.codex,
                sessionId: `scale-${s}`,
                sessionFile,
                prompt: userPrompt(i),
                cwd: cwd.dir,
                contextEngine: engine,
                contextTokenBudget: 1_000_000,
              });
              latencies.push(performance.now() - ts);
              if (r.status !== "completed") failed++;
            }
          }),
        ),
      );
    } finally {
      clearInterval(sampler);
    }
    const wallMs = performance.now() - t0;
    const a = rssKiB(pid);
    if (a !== undefined) appPeak = Math.max(appPeak, a);
    nodePeak = Math.max(nodePeak, process.memoryUsage().rss);
    const turns = n * turnsPerSession;
    return {
      sessions: n,
      turnsPerSession,
      turns,
      wallMs: Math.round(wallMs),
      turnsPerSecond: round(turns / (wallMs / 1000), 1),
      p50Ms: round(median(latencies), 1),
      p99Ms: round(percentile(latencies, 0.99), 1),
      appServerRssBaseMiB: mib(appBase),
      appServerRssPeakMiB: appBase === undefined ? null : mib(appPeak),
      nodeRssBaseMiB: round(nodeBase / 1048576, 1),
      nodeRssPeakMiB: round(nodePeak / 1048576, 1),
      failed,
    };
  } finally {
    await env.dispose();
    dirs.cleanup();
    cwd.cleanup();
  }
}

/**
 * @example
 * ```ts
 * const s = await runScale({ sessions: [1, 10, 50], turnsPerSession: 3, appendAt: [10, 1000, 10000], appendSamples: 50, log: console.log });
 * ```
 */
export async function runScale(opts: {
  sessions: number[];
  turnsPerSession: number;
  appendAt: number[];
  appendSamples: number;
  log: (l: string) => void;
}): Promise<ScaleResults> {
  const rows: ScaleRow[] = [];
  for (const n of opts.sessions) {
    opts.log(`scale: ${n} concurrent sessions x ${opts.turnsPerSession} turns`);
    rows.push(await scaleOnce(n, opts.turnsPerSession));
  }
  const append: AppendCostFigures[] = [];
  for (const n of opts.appendAt) {
    opts.log(`append cost: ${n} existing entries`);
    append.push(await measureAppendCostDetailed(n, opts.appendSamples));
  }
  opts.log("session size: history read and projection at 100 / 1,000 / 10,000 messages");
  const sessionSize = await measureSessionSizeCosts([100, 1_000, 10_000], 10);
  return {
    rows,
    append,
    sessionSize,
    note:
      "one app-server per N (fresh CODEX_HOME); sessions run concurrently, turns within a session sequentially; " +
      "latency = runCodexTurn call to result; RSS peak sampled every 50 ms. Append = mirror one 3-message turn " +
      "(lock + index check + O_APPEND write + fsync) into a transcript already holding N entries; cold = first append " +
      "of a process (reads the file once).",
  };
}

export function formatScale(s: ScaleResults): string {
  const lines = ["\n## 5. Scale: concurrent sessions on one app-server (window engine, auto projection)"];
  const rows: Array<Array<string | number>> = [
    ["sessions", "turns", "wall ms", "turns/s", "p50 ms", "p99 ms", "app-server RSS MiB (idle -> peak)", "node RSS MiB (start -> peak)", "failed"],
  ];
  for (const r of s.rows) {
    rows.push([
      String(r.sessions),
      r.turns,
      r.wallMs,
      r.turnsPerSecond,
      r.p50Ms,
      r.p99Ms,
      r.appServerRssBaseMiB === null ? "n/a" : `${r.appServerRssBaseMiB} -> ${r.appServerRssPeakMiB}`,
      `${r.nodeRssBaseMiB} -> ${r.nodeRssPeakMiB}`,
      r.failed,
    ]);
  }
  lines.push(table(rows));
  lines.push("\nMirror append cost (one turn = 3 messages):");
  const arows: Array<Array<string | number>> = [["existing entries", "median us", "p90 us", "cold us", "file bytes", "samples"]];
  for (const a of s.append) arows.push([String(a.existingEntries), a.medianUs, a.p90Us, a.coldUs, a.fileBytes, a.samples]);
  lines.push(table(arows));
  if (s.sessionSize) lines.push(formatSessionSize(s.sessionSize));
  lines.push(s.note);
  return lines.join("\n");
}
