/**
 * The end-to-end comparison of section 3 again, with a model that streams: the fake sends each SSE event of the same
 * reply `delayMsPerEvent` after the previous one, so a turn lasts about as long as a short real reply takes to stream
 * (16 events: ~0.7 s at 40 ms). Same warm app-server for all variants, interleaved round by round (each variant
 * follows every other equally often).
 *
 * Context for issue 14's end-to-end target, not the target itself: the target is judged on the instant fake (section
 * 3), where the bare turn is Codex's own bookkeeping and nothing else. Here the harness adds the same milliseconds to
 * a turn whose length is mostly the model's, which is what a host meets with a real model.
 */
import path from "node:path";
import { runCodexTurn } from "../src/turn.js";
import { createWindowEngine } from "../src/context-engine/engines/window.js";
import { OVERHEAD_REPLY } from "./overhead.js";
import { bounded, carryoverBalancedRounds, median, pairedRatio, round, spawnBenchAppServer, startFakeModelProcess, tempDir, userPrompt } from "./lib.js";

/** Results of {@link runPacedOverhead}; ms are medians over the rounds. */
export interface PacedOverheadResults {
  rounds: number;
  warmup: number;
  delayMsPerEvent: number;
  medianMs: { direct: number; machineNoEngine: number; machineWindow: number };
  /** Medians of the per-round ratio (runCodexTurn / direct), with a 95% bootstrap interval. */
  pairedRatio: { noEngine: { median: number; ci95: [number, number] }; window: { median: number; ci95: [number, number] } };
  diffMs: { noEngine: number; window: number };
}

type PacedVariant = keyof PacedOverheadResults["medianMs"];

/**
 * @example
 * ```ts
 * const p = await runPacedOverhead({ rounds: 20, warmup: 2, delayMsPerEvent: 40, log: console.error });
 * console.log(p.pairedRatio.window.median); // about 1.01
 * ```
 */
export async function runPacedOverhead(opts: { rounds: number; warmup: number; delayMsPerEvent: number; log: (l: string) => void }): Promise<PacedOverheadResults> {
  const model = await startFakeModelProcess(OVERHEAD_REPLY, { delayMsPerEvent: opts.delayMsPerEvent });
  const codex = await spawnBenchAppServer(model);
  const dirs = tempDir("ctm-bench-paced-");
  const cwd = tempDir("ctm-bench-paced-cwd-");
  try {
    const { threadId } = await codex.startThread({ cwd: cwd.dir });
    const engine = createWindowEngine({ tokenBudget: 1_000_000 });
    const samples: Record<PacedVariant, number[]> = { direct: [], machineNoEngine: [], machineWindow: [] };
    const turn = async (v: PacedVariant, i: number): Promise<number> => {
      const t0 = performance.now();
      if (v === "direct") {
        const record = await (await codex.startTurn({ threadId, text: userPrompt(i) })).completion;
        if (record.codexStatus !== "completed") throw new Error(`paced direct turn ${i} ended ${record.codexStatus}`);
      } else {
        const kind = v === "machineNoEngine" ? "noEngine" : "window";
        const result = await runCodexTurn({
          appServer: codex,
          sessionId: `paced-${kind}`,
          sessionFile: path.join(dirs.dir, `${kind}.jsonl`),
          prompt: userPrompt(i),
          cwd: cwd.dir,
          ...(kind === "window" ? { contextEngine: engine, contextTokenBudget: 1_000_000 } : {}),
        });
        if (result.status !== "completed") throw new Error(`paced ${kind} turn ${i} ended ${result.status}`);
      }
      return performance.now() - t0;
    };
    const order: PacedVariant[] = ["direct", "machineNoEngine", "machineWindow"];
    // Each variant runs right after every other one equally often (a rotated order would keep who follows whom).
    const rounds = carryoverBalancedRounds(order.length);
    for (let i = 0; i < opts.warmup + opts.rounds; i++) {
      for (const v of rounds[i % rounds.length]!.map((k) => order[k]!)) {
        const ms = await bounded(`paced ${v} turn ${i}`, 60_000, turn(v, i));
        if (i >= opts.warmup) samples[v].push(ms);
      }
    }
    const paired = (a: number[]) => {
      const r = pairedRatio(a, samples.direct);
      return { median: round(r.median, 3), ci95: [round(r.ci95[0], 3), round(r.ci95[1], 3)] as [number, number] };
    };
    const med = (v: PacedVariant) => round(median(samples[v]), 1);
    return {
      rounds: opts.rounds,
      warmup: opts.warmup,
      delayMsPerEvent: opts.delayMsPerEvent,
      medianMs: { direct: med("direct"), machineNoEngine: med("machineNoEngine"), machineWindow: med("machineWindow") },
      pairedRatio: { noEngine: paired(samples.machineNoEngine), window: paired(samples.machineWindow) },
      diffMs: {
        noEngine: round(median(samples.machineNoEngine) - median(samples.direct), 1),
        window: round(median(samples.machineWindow) - median(samples.direct), 1),
      },
    };
  } finally {
    await codex.close();
    await model.close();
    dirs.cleanup();
    cwd.cleanup();
  }
}

export function formatPacedOverhead(p: PacedOverheadResults): string {
  const r = (x: { median: number; ci95: [number, number] }) => `${x.median}x (95% CI ${x.ci95[0]}-${x.ci95[1]})`;
  return [
    `\n### 3b. The same comparison with a model that streams (${p.delayMsPerEvent} ms between SSE events, ${p.rounds} rounds after ${p.warmup} warm-up)`,
    `Bare client ${p.medianMs.direct} ms; runCodexTurn no engine ${p.medianMs.machineNoEngine} ms (+${p.diffMs.noEngine}), ` +
      `window engine ${p.medianMs.machineWindow} ms (+${p.diffMs.window}). Round by round: ${r(p.pairedRatio.noEngine)} no engine, ` +
      `${r(p.pairedRatio.window)} window. Context only: issue 14's target is judged on the instant fake above.`,
  ].join("\n");
}
