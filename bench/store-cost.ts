/**
 * Bench section `store`: what one turn's storage costs with the file store and with the PostgreSQL store, interleaved
 * in one run (the store calls a turn makes: acquireLock, readHistory, readBinding, hasPending, recordPending,
 * appendTurn, writeBinding, completePending, release), plus the lease: two processes x N acquire cycles (never
 * together) and how soon a waiter wakes after a release (NOTIFY). PostgreSQL is CODEX_TURN_TEST_PG_URL or a temporary
 * cluster started here (test/helpers/postgres-cluster.ts).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import type { AgentMessage } from "../src/context-engine/types.js";
import { createPostgresSessionStores } from "../src/postgres/index.js";
import { createJsonlSessionStore, type SessionStore } from "../src/store/session-store.js";
import type { ThreadBinding } from "../src/transcript/binding.js";
import { startTempCluster } from "../test/helpers/postgres-cluster.js";
import { runCodexTurn } from "../src/turn.js";
import { bounded, carryoverBalancedRounds, median, pairedRatio, spawnBenchAppServer, startFakeModelProcess, userPrompt } from "./lib.js";
import { OVERHEAD_REPLY } from "./overhead.js";

export interface StoreCostResults {
  turns: number;
  fileMs: { p50: number; p90: number };
  postgresMs: { p50: number; p90: number };
  lease: { cycles: number; processes: number; violations: number; ms: number[] };
  wakeMs: { samples: number; p50: number; p90: number; max: number };
  /**
   * End to end: `runCodexTurn` with each store against the bare client's turn (`startTurn` -> `completion` on a
   * pre-started thread), one warm app-server and the fake model in its own process, the three interleaved turn by turn
   * (each follows every other equally often). Ratios are of medians; `paired` is the median of the per-round ratios
   * with a 95% bootstrap interval.
   */
  endToEnd?: {
    turns: number;
    medianMs: { bare: number; file: number; postgres: number };
    ratio: { file: number; postgres: number };
    paired: { file: { median: number; ci95: [number, number] }; postgres: { median: number; ci95: [number, number] } };
  };
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? 0;
}
const round = (n: number) => Math.round(n * 100) / 100;
const r3 = (n: number) => Math.round(n * 1000) / 1000;

function turnMessages(i: number): AgentMessage[] {
  const t = 1_700_000_000_000 + i * 1000;
  return [
    { role: "user", content: `question ${i}`, timestamp: t },
    { role: "assistant", content: [{ type: "text", text: `answer ${i} `.repeat(20) }], model: "bench", stopReason: "stop", timestamp: t + 1 } as AgentMessage,
  ];
}

const binding = (i: number): ThreadBinding => ({
  version: 1,
  threadId: "thr_bench",
  dynamicToolsFingerprint: "d",
  engineId: "e",
  policyFingerprint: "p",
  projectionMode: "auto",
  heldTurnIds: [],
  ledger: [],
  lastTurnId: `turn_${i}`,
} as ThreadBinding);

/** One turn's store calls; its wall time in ms. */
async function turnStorage(store: SessionStore, i: number): Promise<number> {
  const t0 = performance.now();
  const lock = await store.acquireLock();
  const history = await store.readHistory();
  await store.readBinding();
  await store.hasPending();
  const messages = turnMessages(i);
  await store.recordPending({ threadId: "thr_bench", turnId: `turn_${i}`, prePromptMessageCount: history.messages.length, messageCount: messages.length, status: "completed", messages });
  await store.appendTurn({ threadId: "thr_bench", turnId: `turn_${i}`, messages });
  await store.writeBinding(binding(i), { durable: false });
  await store.completePending(`turn_${i}`);
  await lock.release();
  return performance.now() - t0;
}

async function leaseRace(url: string, cycles: number): Promise<{ violations: number; ms: number[] }> {
  const admin = new pg.Pool({ connectionString: url, max: 1 });
  await admin.query("create table if not exists lease_occupancy (id int primary key, holders int not null)");
  await admin.query("insert into lease_occupancy values (1, 0) on conflict (id) do update set holders = 0");
  await admin.end();
  const worker = path.join(root, "test/postgres/fixtures/lease-worker.ts");
  const job = JSON.stringify({ mode: "cycles", url, sessionKey: "bench-race", cycles, leaseMs: 5_000, heartbeatMs: 1_000 });
  const runs = await Promise.all(
    [0, 1].map(
      () =>
        new Promise<{ violations: number; ms: number }>((resolve, reject) => {
          const c = spawn(process.execPath, ["--import", "tsx", worker, job], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
          let out = "";
          let err = "";
          c.stdout.on("data", (b) => (out += b));
          c.stderr.on("data", (b) => (err += b));
          c.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out.trim())) : reject(new Error(`lease worker exited ${code}: ${err.slice(-500)}`))));
        }),
    ),
  );
  return { violations: runs.reduce((a, r) => a + r.violations, 0), ms: runs.map((r) => r.ms) };
}

/**
 * Run the section.
 *
 * @example
 * ```ts
 * const r = await runStoreCost({ turns: 200, leaseCycles: 1000, wakeSamples: 50, log: console.error });
 * ```
 */
export async function runStoreCost(opts: {
  turns: number;
  leaseCycles: number;
  wakeSamples: number;
  /** End-to-end rounds (bare client, file store, PostgreSQL store); 0 skips them. */
  endToEndTurns?: number;
  log: (line: string) => void;
}): Promise<StoreCostResults> {
  const cluster = process.env.CODEX_TURN_TEST_PG_URL ? undefined : await startTempCluster();
  const server = process.env.CODEX_TURN_TEST_PG_URL ?? cluster!.url;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  const dbName = `ctm_bench_${process.pid}`;
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.query(`create database ${dbName}`);
  const u = new URL(server);
  u.pathname = `/${dbName}`;
  const url = u.toString();
  const dir = mkdtempSync(path.join(os.tmpdir(), "ctm-bench-store-"));
  const stores = createPostgresSessionStores({ connectionString: url });
  try {
    await stores.migrate();
    const file = createJsonlSessionStore({ sessionFile: path.join(dir, "bench.jsonl"), sessionId: "bench" });
    const pgStore = stores.session("bench");
    opts.log(`store: ${opts.turns} turns' storage, file and PostgreSQL interleaved`);
    const fileMs: number[] = [];
    const pgMs: number[] = [];
    for (let i = 0; i < 5; i++) {
      await turnStorage(file, 10_000 + i);
      await turnStorage(pgStore, 10_000 + i);
    }
    for (let i = 0; i < opts.turns; i++) {
      fileMs.push(await turnStorage(file, i));
      pgMs.push(await turnStorage(pgStore, i));
    }
    fileMs.sort((a, b) => a - b);
    pgMs.sort((a, b) => a - b);

    opts.log(`store: lease race, 2 processes x ${opts.leaseCycles} cycles`);
    const race = await leaseRace(url, opts.leaseCycles);

    opts.log(`store: waiter wake-up after release, ${opts.wakeSamples} samples`);
    const a = createPostgresSessionStores({ connectionString: url, pollMs: 10_000 });
    const b = createPostgresSessionStores({ connectionString: url, pollMs: 10_000 });
    const wake: number[] = [];
    try {
      for (let i = 0; i < opts.wakeSamples; i++) {
        const held = await a.session("wake").acquireLock();
        const waiting = b.session("wake").acquireLock({ timeoutMs: 15_000 });
        await new Promise((r) => setTimeout(r, 20));
        const t0 = performance.now();
        await held.release();
        const next = await waiting;
        wake.push(performance.now() - t0);
        await next.release();
      }
    } finally {
      await a.close();
      await b.close();
    }
    wake.sort((x, y) => x - y);
    const e2eTurns = opts.endToEndTurns ?? 0;
    let endToEnd: StoreCostResults["endToEnd"];
    if (e2eTurns > 0) {
      opts.log(`store: end to end, ${e2eTurns} turns each of the bare client, runCodexTurn with the file store and with the PostgreSQL store`);
      endToEnd = await endToEndByStore({ turns: e2eTurns, warmup: 3, dir, pgStore: stores.session("e2e") });
    }
    return {
      turns: opts.turns,
      fileMs: { p50: round(pct(fileMs, 0.5)), p90: round(pct(fileMs, 0.9)) },
      postgresMs: { p50: round(pct(pgMs, 0.5)), p90: round(pct(pgMs, 0.9)) },
      lease: { cycles: opts.leaseCycles, processes: 2, ...race },
      wakeMs: { samples: wake.length, p50: round(pct(wake, 0.5)), p90: round(pct(wake, 0.9)), max: round(wake.at(-1) ?? 0) },
      ...(endToEnd ? { endToEnd } : {}),
    };
  } finally {
    await stores.close();
    await admin.query(`drop database if exists ${dbName} with (force)`).catch(() => undefined);
    await admin.end();
    cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function endToEndByStore(opts: { turns: number; warmup: number; dir: string; pgStore: SessionStore }): Promise<NonNullable<StoreCostResults["endToEnd"]>> {
  const model = await startFakeModelProcess(OVERHEAD_REPLY);
  const codex = await spawnBenchAppServer(model);
  const cwd = mkdtempSync(path.join(os.tmpdir(), "ctm-bench-store-cwd-"));
  try {
    const { threadId } = await codex.startThread({ cwd });
    const variants = ["bare", "file", "postgres"] as const;
    const samples: Record<(typeof variants)[number], number[]> = { bare: [], file: [], postgres: [] };
    const turn = async (v: (typeof variants)[number], i: number): Promise<number> => {
      const t0 = performance.now();
      if (v === "bare") {
        const record = await (await codex.startTurn({ threadId, text: userPrompt(i) })).completion;
        if (record.codexStatus !== "completed") throw new Error(`store e2e bare turn ${i} ended ${record.codexStatus}`);
      } else {
        const result = await runCodexTurn({
          appServer: codex,
          sessionId: `e2e-${v}`,
          ...(v === "file" ? { sessionFile: path.join(opts.dir, "e2e.jsonl") } : { store: opts.pgStore }),
          prompt: userPrompt(i),
          cwd,
        });
        if (result.status !== "completed") throw new Error(`store e2e ${v} turn ${i} ended ${result.status}`);
      }
      return performance.now() - t0;
    };
    const rounds = carryoverBalancedRounds(variants.length);
    for (let i = 0; i < opts.warmup + opts.turns; i++) {
      for (const k of rounds[i % rounds.length]!) {
        const v = variants[k]!;
        const ms = await bounded(`store e2e ${v} turn ${i}`, 60_000, turn(v, i));
        if (i >= opts.warmup) samples[v].push(ms);
      }
    }
    const med = { bare: round(median(samples.bare)), file: round(median(samples.file)), postgres: round(median(samples.postgres)) };
    const paired = (xs: number[]) => {
      const r = pairedRatio(xs, samples.bare);
      return { median: r3(r.median), ci95: [r3(r.ci95[0]), r3(r.ci95[1])] as [number, number] };
    };
    return {
      turns: opts.turns,
      medianMs: med,
      ratio: { file: r3(median(samples.file) / median(samples.bare)), postgres: r3(median(samples.postgres) / median(samples.bare)) },
      paired: { file: paired(samples.file), postgres: paired(samples.postgres) },
    };
  } finally {
    await codex.close();
    await model.close();
    rmSync(cwd, { recursive: true, force: true });
  }
}

/** The target: the PostgreSQL store's per-turn storage p50 within +3 ms of the file store's. */
export function storeCostTarget(r: StoreCostResults): { name: string; pass: boolean; detail: string } {
  const delta = r.postgresMs.p50 - r.fileMs.p50;
  return { name: "PostgreSQL store per-turn storage p50 within +3 ms of the file store", pass: delta <= 3, detail: `${r.postgresMs.p50} ms vs ${r.fileMs.p50} ms (+${round(delta)} ms)` };
}

/** The section as a table. */
export function formatStoreCost(r: StoreCostResults): string {
  return [
    "",
    `## store: one turn's storage (${r.turns} turns, interleaved)`,
    "| store | p50 ms | p90 ms |",
    "| --- | --- | --- |",
    `| file (JSONL) | ${r.fileMs.p50} | ${r.fileMs.p90} |`,
    `| PostgreSQL | ${r.postgresMs.p50} | ${r.postgresMs.p90} |`,
    "",
    `lease: ${r.lease.processes} processes x ${r.lease.cycles} acquire cycles, ${r.lease.violations} times held together, ${r.lease.ms.join(" / ")} ms`,
    `waiter wake after release (NOTIFY): p50 ${r.wakeMs.p50} ms, p90 ${r.wakeMs.p90} ms, max ${r.wakeMs.max} ms (${r.wakeMs.samples} samples)`,
    ...(r.endToEnd
      ? [
          "",
          `### end to end: runCodexTurn with each store vs the bare client (${r.endToEnd.turns} turns each, interleaved)`,
          "| turn | median ms | ratio to bare | round by round (95% CI) |",
          "| --- | --- | --- | --- |",
          `| bare client | ${r.endToEnd.medianMs.bare} | 1 | |`,
          `| file (JSONL) | ${r.endToEnd.medianMs.file} | ${r.endToEnd.ratio.file}x | ${r.endToEnd.paired.file.median}x (${r.endToEnd.paired.file.ci95.join("–")}) |`,
          `| PostgreSQL | ${r.endToEnd.medianMs.postgres} | ${r.endToEnd.ratio.postgres}x | ${r.endToEnd.paired.postgres.median}x (${r.endToEnd.paired.postgres.ci95.join("–")}) |`,
        ]
      : []),
  ].join("\n");
}
