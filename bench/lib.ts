/**
 * Shared helpers of the benchmarks: statistics, deterministic conversation text, prefix reuse, process memory and
 * plain-text tables. Nothing here talks to the network; everything that spawns a process is closed by its caller.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import os from "node:os";
import path from "node:path";
import { CodexAppServer } from "../src/codex/app-server.js";
import { offlineCodexConfig } from "../src/codex/config.js";

export const median = (xs: readonly number[]): number => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Nearest-rank percentile (p in 0..1). */
export const percentile = (xs: readonly number[], p: number): number => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!;
};

export const round = (x: number, digits = 0): number => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};

/** A tiny deterministic PRNG (mulberry32), so every run sends byte-identical conversations. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  "the session window engine thread context budget request model reply turn history summary plan file test build " +
  "config value error log change review patch module function type schema state event queue cache prefix token " +
  "input output bytes ratio compaction epoch delta bootstrap projection mirror transcript binding ledger rotate " +
  "latency memory process server client offline fake loopback measure result figure median check target"
).split(" ");

function sentence(rand: () => number, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(WORDS[Math.floor(rand() * WORDS.length)]!);
  const s = out.join(" ");
  return `${s[0]!.toUpperCase()}${s.slice(1)}.`;
}

/** Deterministic text of about `chars` characters (whole sentences), seeded. */
export function textOfLength(seed: number, chars: number): string {
  const rand = prng(seed);
  let text = "";
  while (text.length < chars) text += (text ? " " : "") + sentence(rand, 6 + Math.floor(rand() * 10));
  return text.slice(0, chars).trimEnd();
}

/** The user prompt of turn `i` (0-based): 120-240 characters, deterministic. */
export function userPrompt(i: number): string {
  const len = 120 + ((i * 53) % 121);
  return `Turn ${i + 1}: ${textOfLength(1_000 + i, len)}`;
}

/** The fake model's reply to the `n`-th turn request (0-based): 300-600 characters, deterministic. */
export function modelReply(n: number): string {
  const len = 300 + ((n * 137) % 301);
  return textOfLength(50_000 + n, len);
}

/**
 * Share of `cur` (bytes) that is a byte-identical prefix of `prev`: the part a prompt cache keyed on the request
 * prefix could reuse. Both are the request `input` arrays serialized item by item with JSON.stringify.
 */
export function prefixReuse(prev: Buffer, cur: Buffer): number {
  if (cur.length === 0) return 0;
  const n = Math.min(prev.length, cur.length);
  let i = 0;
  while (i < n && prev[i] === cur[i]) i++;
  return i / cur.length;
}

/** The request `input` as one byte string (each item JSON.stringify'd, concatenated). */
export function inputBytesOf(body: Record<string, unknown> | null): Buffer {
  const input = Array.isArray(body?.input) ? (body!.input as unknown[]) : [];
  return Buffer.from(input.map((item) => JSON.stringify(item)).join(""), "utf8");
}

/** Resident set size of a process in KiB (Linux /proc), or undefined when unreadable. */
export function rssKiB(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** A temp directory removed by `cleanup()`. */
export function tempDir(prefix: string): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Render rows as an aligned plain-text table (first row is the header). */
export function table(rows: ReadonlyArray<ReadonlyArray<string | number>>): string {
  const cells = rows.map((r) => r.map((c) => (typeof c === "number" ? formatNumber(c) : c)));
  const widths: number[] = [];
  for (const r of cells) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  const out = [line(cells[0]!), widths.map((w) => "-".repeat(w)).join("  "), ...cells.slice(1).map(line)];
  return out.join("\n");
}

export function formatNumber(x: number): string {
  if (!Number.isFinite(x)) return "n/a";
  if (Number.isInteger(x)) return x.toLocaleString("en-US");
  return x.toLocaleString("en-US", { maximumFractionDigits: Math.abs(x) < 10 ? 3 : 1 });
}

/**
 * Median of per-pair ratios `a[i] / b[i]` (samples taken side by side, e.g. one round of an interleaved benchmark), with
 * a 95% percentile-bootstrap interval (2,000 resamples, seeded: the same samples give the same interval). Pairing
 * cancels the slow drift of a shared machine that hits both samples of a round alike.
 *
 * @example
 * ```ts
 * pairedRatio([66, 70], [60, 62]); // { median: 1.114..., ci95: [1.1, 1.129...], pairs: 2 }
 * ```
 */
export function pairedRatio(a: readonly number[], b: readonly number[], resamples = 2_000): { median: number; ci95: [number, number]; pairs: number } {
  const n = Math.min(a.length, b.length);
  const ratios = Array.from({ length: n }, (_, i) => a[i]! / b[i]!);
  const rnd = prng(14);
  const medians: number[] = [];
  for (let r = 0; r < resamples; r++) {
    const sample = Array.from({ length: n }, () => ratios[Math.floor(rnd() * n)]!);
    medians.push(median(sample));
  }
  return { median: median(ratios), ci95: [percentile(medians, 0.025), percentile(medians, 0.975)], pairs: n };
}

/**
 * The order of `n` interleaved variants for each round, so that what one variant leaves behind (background removals,
 * garbage, a busy page cache) falls on every other variant alike. Rotating one order does not do that: a rotation
 * keeps who follows whom, so with `[a, b, c]` rotated, `b` runs right after `a` in every round. These `n - 1` rounds,
 * run in a cycle, put every variant right after every other variant exactly once per cycle, counting the step from
 * one round's last variant to the next round's first; each round still runs every variant once (paired ratios stay
 * paired). Found by a depth-first search (round 0 in the given order): about 1 ms for `n` = 6, less below.
 *
 * @example
 * ```ts
 * const rounds = carryoverBalancedRounds(3); // [[0, 1, 2], [0, 2, 1]]: 0>1 1>2, 2>0, 0>2 2>1, then 1>0
 * for (let i = 0; i < 200; i++) for (const k of rounds[i % rounds.length]!) runVariant(variants[k]!);
 * ```
 */
export function carryoverBalancedRounds(n: number): number[][] {
  if (!Number.isInteger(n) || n < 2 || n > 6) {
    throw new RangeError(`carryoverBalancedRounds: n must be an integer from 2 to 6, got ${n}`);
  }
  const perms: number[][] = [];
  const permute = (prefix: number[], rest: number[]): void => {
    if (rest.length === 0) perms.push(prefix);
    rest.forEach((x, i) => permute([...prefix, x], [...rest.slice(0, i), ...rest.slice(i + 1)]));
  };
  permute([], Array.from({ length: n }, (_, i) => i));
  const key = (a: number, b: number) => a * n + b;
  const search = (rounds: number[][], used: Set<number>): number[][] | undefined => {
    const last = rounds[rounds.length - 1]!;
    if (rounds.length === n - 1) {
      const closing = key(last[n - 1]!, rounds[0]![0]!);
      return last[n - 1] !== rounds[0]![0] && !used.has(closing) ? rounds : undefined;
    }
    for (const p of perms) {
      const steps = [key(last[n - 1]!, p[0]!), ...p.slice(1).map((x, i) => key(p[i]!, x))];
      if (last[n - 1] === p[0] || steps.some((s) => used.has(s))) continue;
      const found = search([...rounds, p], new Set([...used, ...steps]));
      if (found) return found;
    }
    return undefined;
  };
  const first = perms[0]!;
  const found = search([first], new Set(first.slice(1).map((x, i) => key(first[i]!, x))));
  if (!found) throw new Error(`carryoverBalancedRounds: no balanced cycle for n = ${n}`);
  return found;
}

export const ratio = (a: number, b: number): number => (b > 0 ? round(a / b, 3) : Number.NaN);

/** Elapsed milliseconds since `t0` (performance.now based). */
export const since = (t0: number): number => performance.now() - t0;

/** Reject after `ms` so no benchmark step can hang the run. */
export async function bounded<T>(what: string, ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`bench: ${what} did not finish within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Start the fake Responses API in a child process (`fake-model-process.ts`) that answers every turn with `reply`, each
 * SSE event `delayMsPerEvent` after the previous one (default 0: the whole reply at once). Closing stdin stops it.
 *
 * @example
 * ```ts
 * const model = await startFakeModelProcess("Done.");
 * const paced = await startFakeModelProcess("Done.", { delayMsPerEvent: 40 }); // a model that streams
 * const settings = offlineCodexConfig({ baseUrl: model.baseUrl });
 * await model.close();
 * ```
 */
export async function startFakeModelProcess(
  reply: string,
  opts: { delayMsPerEvent?: number | undefined } = {},
): Promise<{ baseUrl: string; pid: number; close(): Promise<void> }> {
  const script = fileURLToPath(new URL("./fake-model-process.ts", import.meta.url));
  const child = spawn(process.execPath, ["--import", "tsx", script, reply, String(opts.delayMsPerEvent ?? 0)], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const baseUrl = await bounded(
    "fake model process start",
    30_000,
    new Promise<string>((resolve, reject) => {
      let out = "";
      child.stdout.setEncoding("utf8");
      child.stdout.on("data", (chunk: string) => {
        out += chunk;
        const nl = out.indexOf("\n");
        if (nl >= 0) resolve((JSON.parse(out.slice(0, nl)) as { baseUrl: string }).baseUrl);
      });
      child.once("exit", (code) => reject(new Error(`fake model process exited with ${code} before listening`)));
    }),
  ).catch((err: unknown) => {
    child.kill("SIGKILL");
    throw err;
  });
  return {
    baseUrl,
    pid: child.pid!,
    async close() {
      child.stdin.end();
      await bounded("fake model process exit", 10_000, exited).catch(() => child.kill("SIGKILL"));
    },
  };
}

/**
 * Effective input cost of a sequence of requests, in bytes: each request's prefix shared byte for byte with the
 * previous request counts as cached (`ratio` of the price), the rest as uncached. A prompt cache keyed on the
 * request prefix bills roughly like this.
 *
 * @example
 * ```ts
 * effectiveInputCost([Buffer.from("abc"), Buffer.from("abcd")], 0.1); // 3 + (1 + 0.1 x 3) = 4.3
 * ```
 */
export function effectiveInputCost(inputs: readonly Buffer[], ratio: number): number {
  let total = 0;
  let prev: Buffer | undefined;
  for (const cur of inputs) {
    const cached = prev ? Math.round(prefixReuse(prev, cur) * cur.length) : 0;
    total += cur.length - cached + ratio * cached;
    prev = cur;
  }
  return total;
}

/**
 * How many requests carry some earlier conversation text in two items. `itemTexts[k]` are the texts of request k's
 * input items; `known(k)` the texts of the conversation before request k (earlier prompts and replies).
 *
 * @example
 * ```ts
 * requestsCarryingTwice([["hi"], ["hi", "ctx: hi"]], (k) => (k === 0 ? [] : ["hi"])); // 1
 * ```
 */
export function requestsCarryingTwice(itemTexts: ReadonlyArray<readonly string[]>, known: (k: number) => readonly string[]): number {
  let count = 0;
  itemTexts.forEach((texts, k) => {
    const twice = known(k).some((text) => texts.filter((t) => t.includes(text)).length > 1);
    if (twice) count++;
  });
  return count;
}

/**
 * A warm offline app-server against `model` (the fake in its own process); closes the model when the spawn fails.
 *
 * @example
 * ```ts
 * const model = await startFakeModelProcess("Done.");
 * const codex = await spawnBenchAppServer(model);
 * ```
 */
export async function spawnBenchAppServer(model: { baseUrl: string; close(): Promise<void> }): Promise<CodexAppServer> {
  const settings = offlineCodexConfig({ baseUrl: model.baseUrl });
  return CodexAppServer.spawn({
    config: settings.config,
    env: settings.env,
    ...(settings.modelCatalog ? { modelCatalog: settings.modelCatalog } : {}),
  }).catch(async (err: unknown) => {
    await model.close();
    throw err;
  });
}
