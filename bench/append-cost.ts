/**
 * Bench helper: what does mirroring one turn cost when the transcript already holds N entries? The writer keeps
 * a per-file index (ids, keys, leaf) validated by one stat, so the cost must stay flat as N grows; only the first
 * open of a file in a process reads it whole.
 */
import { promises as fsp } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { AgentMessage } from "../src/context-engine/types.js";
import { mirrorTurnToTranscript } from "../src/transcript/mirror.js";
import { invalidateSessionIndex, openSessionFile } from "../src/transcript/session-file.js";

/** Detailed figures of one measurement (microseconds). */
export interface AppendCostFigures {
  existingEntries: number;
  samples: number;
  medianUs: number;
  p90Us: number;
  /** One mirror right after the index was dropped (first append of a process: reads the file once). */
  coldUs: number;
  fileBytes: number;
}

function turnMessages(i: number): AgentMessage[] {
  const t = 1_700_000_000_000 + i * 1000;
  return [
    { role: "user", content: `question ${i}`, timestamp: t },
    { role: "assistant", content: [{ type: "thinking", thinking: `thinking about ${i}` }], timestamp: t + 1 },
    {
      role: "assistant",
      content: [{ type: "text", text: `answer ${i} `.repeat(20) }],
      model: "bench",
      stopReason: "stop",
      usage: { input: 100, output: 50, cacheRead: 0, cacheWrite: 0, totalTokens: 150 },
      timestamp: t + 2,
    },
  ];
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[idx]!;
}

/**
 * Measure the mirror cost in detail (see {@link measureAppendCost}).
 *
 * @example
 * ```ts
 * const f = await measureAppendCostDetailed(1000, 30);
 * console.log(f.medianUs, f.coldUs);
 * ```
 */
export async function measureAppendCostDetailed(existingEntries: number, samples: number): Promise<AppendCostFigures> {
  if (!Number.isInteger(existingEntries) || existingEntries < 0) throw new RangeError(`existingEntries must be a non-negative integer, got ${existingEntries}`);
  if (!Number.isInteger(samples) || samples < 1) throw new RangeError(`samples must be a positive integer, got ${samples}`);
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), "ctm-bench-append-"));
  const file = path.join(dir, "session.jsonl");
  try {
    // Seed N entries in one batch (3 per turn) through the real writer.
    const writer = await openSessionFile(file, { sessionId: "bench", cwd: dir });
    const seed: Array<{ type: string; idempotencyKey: string; message: AgentMessage }> = [];
    for (let i = 0; seed.length < existingEntries; i++) {
      const msgs = turnMessages(i);
      for (let j = 0; j < msgs.length && seed.length < existingEntries; j++) {
        seed.push({ type: "message", idempotencyKey: `codex-app-server:seed:${i}:m${j}`, message: msgs[j]! });
      }
    }
    await writer.append(seed);

    const mirrorOne = async (i: number) =>
      mirrorTurnToTranscript({ sessionFile: file, sessionId: "bench", threadId: "bench-thread", turnId: `t${i}`, messages: turnMessages(i) });

    invalidateSessionIndex();
    let t0 = process.hrtime.bigint();
    await mirrorOne(-1);
    const coldUs = Number(process.hrtime.bigint() - t0) / 1000;

    const times: number[] = [];
    for (let s = 0; s < samples; s++) {
      t0 = process.hrtime.bigint();
      await mirrorOne(s);
      times.push(Number(process.hrtime.bigint() - t0) / 1000);
    }
    times.sort((a, b) => a - b);
    const fileBytes = (await fsp.stat(file)).size;
    return {
      existingEntries,
      samples,
      medianUs: Math.round(percentile(times, 0.5)),
      p90Us: Math.round(percentile(times, 0.9)),
      coldUs: Math.round(coldUs),
      fileBytes,
    };
  } finally {
    invalidateSessionIndex();
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/**
 * Median microseconds to mirror one turn (3 messages, lock + index check + one O_APPEND write + fsync) into a
 * transcript that already holds `existingEntries` entries.
 *
 * @example
 * ```ts
 * for (const n of [10, 1000, 10000]) console.log(n, await measureAppendCost(n, 50));
 * ```
 */
export async function measureAppendCost(existingEntries: number, samples: number): Promise<number> {
  return (await measureAppendCostDetailed(existingEntries, samples)).medianUs;
}
