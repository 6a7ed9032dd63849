/**
 * Crash soak: many sessions, real offline Codex turns (loopback fake Responses API only), workers SIGKILLed at random
 * points of random turns, restarted until every session has all its turns. Then every prompt is checked against the
 * transcript and the engine's fsynced ledger. Not part of `npm test`.
 *
 *   npx tsx bench/soak.ts [--sessions 20] [--turns 10] [--batch 5] [--kill-rate 0.5] [--concurrency 2] [--seed 1]
 *                         [--long-rounds 3] [--long-delay-ms 2000] [--max-seconds 900] [--out FILE] [--help]
 *                         [--pg [--lease-ms 5000] [--db-stops 3,15]] [--durable]
 *
 * Prints the summary and writes it to bench/soak-results.json (or --out).
 *
 * Then the long-turn kill (`longTurnKill` in the summary), `--long-rounds` times on a fresh session each: process A
 * runs a turn whose model reply is slowed by `--long-delay-ms` per SSE event (about 10 events: > 10 s, longer than the
 * session lock's 10 s stale time), process B starts a turn on the same session once A's is accepted and waits for
 * the lock; A is SIGKILLed 11-14 s into its turn. B must get the lock (dead holder), recover A's turn from Codex's
 * thread (the binding's in-flight marker), run its own, and a third process C re-runs A's prompt only if the transcript
 * still lacks it, the way a host does after a crash. Counted: lost turns (completed but not in the transcript), A's
 * turns recovered from Codex (mirrored once, not run again), duplicated mirror entries, duplicate finalizes (by the
 * turn's own prompt), finalizes that mixed two turns' prompts, B turns accepted by Codex before A died (the lock did
 * not hold), lock directories (or `.discarded` asides) left, lingering app-servers.
 *
 * With `--pg`, the sessions live in PostgreSQL (a temporary cluster started here, or CODEX_TURN_TEST_PG_URL; the
 * workers' lease is `--lease-ms`): the store's own crash points stand in for the file store's fault hooks (see
 * test/reliability/fixtures/turn-worker.ts), each session is exported to pi JSONL for the same analysis, and
 * `--db-stops 3,15` stops the database for those many seconds while the workers run (temporary cluster only). The
 * summary adds the pending rows and leases left in the database. The long-turn kill rounds are file-store only.
 *
 * With `--durable`, the workers' engine declares OpenClaw's durable turns (transcriptSemantics + `commitTurn`,
 * idempotent per advancement key against its fsynced ledger; test/reliability/fixtures/turn-worker.ts): the crash
 * points `afterMirror` and `finalizeWindow` land inside `commitTurn`, before and after its durable ledger line. The
 * summary adds `durableTurns`: commitTurn calls, committed vs duplicate, refused keys (a retry whose payload changed),
 * prompts committed exactly once / never, keys committed twice and double advancements (a prompt whose turn was
 * committed more than once, under any key: must be 0), and the afterTurn/ingest calls (must be 0 for that engine).
 * The long-turn kill rounds use the legacy engine.
 *
 * The last prompt of a session is never a crash target, so its worker's turn also finalizes whatever the previous
 * worker left pending (finalizePendingTurns runs before every turn) and the session ends settled.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { prng } from "./lib.js";
import path from "node:path";
import { parseArgs } from "node:util";
import {
  CRASH_POINTS,
  analyzeSession,
  processAlive,
  readLedger,
  runTurnWorker,
  unmirroredPrompts,
  type CrashPoint,
} from "../test/reliability/fixtures/turn-worker.js";
import { codexHomeTempBase } from "../src/codex/app-server.js";
import { readLockTurnLedger, startLockTurnWorker, waitForTurnLedger } from "../test/reliability/fixtures/lock-turn-worker.js";
import { mkdirSync, readdirSync } from "node:fs";
import pg from "pg";
import { createPostgresSessionStores } from "../src/postgres/index.js";
import { startTempCluster } from "../test/helpers/postgres-cluster.js";

const { values } = parseArgs({
  options: {
    sessions: { type: "string", default: "20" },
    turns: { type: "string", default: "10" },
    batch: { type: "string", default: "5" },
    "kill-rate": { type: "string", default: "0.5" },
    concurrency: { type: "string", default: "2" },
    seed: { type: "string", default: "1" },
    "max-seconds": { type: "string", default: "900" },
    "long-rounds": { type: "string", default: "3" },
    "long-delay-ms": { type: "string", default: "2000" },
    out: { type: "string" },
    pg: { type: "boolean", default: false },
    "lease-ms": { type: "string", default: "5000" },
    "db-stops": { type: "string", default: "" },
    durable: { type: "boolean", default: false },
    help: { type: "boolean", default: false },
  },
});
if (values.help) {
  const doc = readFileSync(fileURLToPath(import.meta.url), "utf8").split("*/")[0]!;
  console.log(doc.replace(/^\/\*\*\n?/, "").replace(/^ \* ?/gm, ""));
  process.exit(0);
}
const num = (name: keyof typeof values, min: number, max: number): number => {
  const v = Number(values[name]);
  if (!Number.isFinite(v) || v < min || v > max) throw new Error(`--${name} must be a number in [${min}, ${max}], got ${String(values[name])}`);
  return v;
};
const SESSIONS = Math.floor(num("sessions", 0, 500));
const TURNS = Math.floor(num("turns", 2, 200));
const BATCH = Math.floor(num("batch", 1, 200));
const KILL_RATE = num("kill-rate", 0, 1);
const CONCURRENCY = Math.floor(num("concurrency", 1, 16));
const SEED = Math.floor(num("seed", 0, 2 ** 31));
const DEADLINE = Date.now() + num("max-seconds", 10, 3600) * 1000;
const PG = values.pg === true;
const LONG_ROUNDS = PG ? 0 : Math.floor(num("long-rounds", 0, 100));
const LEASE_MS = Math.floor(num("lease-ms", 500, 120_000));
const DB_STOPS = (values["db-stops"] ?? "").split(",").filter((x) => x !== "").map(Number);
const DURABLE = values.durable === true;
const LONG_DELAY_MS = Math.floor(num("long-delay-ms", 1100, 10_000));


const root = mkdtempSync(path.join(codexHomeTempBase(), "codex-soak-"));

// --pg: one database for the run, on a temporary cluster unless CODEX_TURN_TEST_PG_URL names a server.
const cluster = PG && !process.env.CODEX_TURN_TEST_PG_URL ? await startTempCluster() : undefined;
let pgUrl: string | undefined;
let pgAdmin: pg.Pool | undefined;
if (PG) {
  if (DB_STOPS.length > 0 && !cluster) throw new Error("--db-stops needs the temporary cluster (unset CODEX_TURN_TEST_PG_URL)");
  const server = process.env.CODEX_TURN_TEST_PG_URL ?? cluster!.url;
  const c = new pg.Client({ connectionString: server });
  await c.connect();
  await c.query(`drop database if exists ctm_soak`);
  await c.query(`create database ctm_soak`);
  await c.end();
  const u = new URL(server);
  u.pathname = "/ctm_soak";
  pgUrl = u.toString();
  pgAdmin = new pg.Pool({ connectionString: pgUrl, max: 2 });
  pgAdmin.on("error", () => undefined);
  const s = createPostgresSessionStores({ pool: pgAdmin });
  await s.migrate();
}
/** The PostgreSQL session exported to `file` (the analysis reads pi JSONL); the file store's own file otherwise. */
async function sessionFileFor(file: string, sessionId: string): Promise<string> {
  if (!pgUrl) return file;
  for (let attempt = 0; ; attempt++) {
    try {
      const s = createPostgresSessionStores({ pool: pgAdmin! });
      writeFileSync(file, await s.session(sessionId).exportJsonl());
      return file;
    } catch (err) {
      if (attempt > 60) throw err;
      await new Promise((r) => setTimeout(r, 500)); // the database may be stopped on purpose (--db-stops)
    }
  }
}
const dbStops: Array<{ seconds: number; atMs: number }> = [];
const kills = new Map<CrashPoint, number>(CRASH_POINTS.map((p) => [p, 0]));
let workers = 0;
let workerFailures = 0;
let lingered = 0;
let timedOut = false;
/** Lock directories, takeover guards and `.discarded` asides (src/transcript/discard.ts) left next to a settled session's transcript. */
let sidecarsLeft = 0;
/** Transcript entries whose parentId is not the previous entry's id. */
let chainBreaks = 0;
/** The lock directory or its takeover guard (`.lock`, `.lock.takeover`), or what a discard renamed aside (`.discarded`). */
const isLeftSidecar = (name: string): boolean => name.includes(".lock") || name.endsWith(".discarded");

/** Crash points applied to each prompt (so a double finalize can be attributed to the unavoidable window). */
const killedAt = new Map<string, CrashPoint[]>();

async function soakSession(index: number): Promise<Awaited<ReturnType<typeof analyzeSession>>> {
  // Distinct, well-mixed seeds per session (adjacent raw seeds give correlated first draws).
  const rand = prng(Math.imul(SEED + 1, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca6b));
  const dir = path.join(root, `s${index}`);
  const job = {
    file: path.join(dir, "s.jsonl"),
    sessionId: `soak-${index}`,
    codexHome: path.join(dir, "codex-home"),
    ledger: path.join(dir, "ledger.jsonl"),
    ...(pgUrl ? { pgUrl, leaseMs: LEASE_MS } : {}),
    ...(DURABLE ? { durable: true } : {}),
  };
  mkdirSync(dir, { recursive: true });
  const prompts = Array.from({ length: TURNS }, (_, t) => `s${index}-t${t}`);
  const last = prompts[prompts.length - 1]!;
  let seenPids = 0;
  for (let attempt = 0; attempt < TURNS * 4; attempt++) {
    if (Date.now() > DEADLINE) {
      timedOut = true;
      break;
    }
    const remaining = await unmirroredPrompts(await sessionFileFor(job.file, job.sessionId), prompts);
    if (remaining.length === 0) break;
    const batch = remaining.slice(0, BATCH);
    const targets = batch.filter((p) => p !== last);
    const crash =
      targets.length > 0 && rand() < KILL_RATE
        ? { point: CRASH_POINTS[Math.floor(rand() * CRASH_POINTS.length)]!, prompt: targets[Math.floor(rand() * targets.length)]! }
        : undefined;
    workers++;
    // The worker recovers the session first (finishing a cut-short mirror from the pending record), then runs the
    // batch's prompts the transcript still lacks: a prompt whose turn was already accepted is never run twice.
    const exit = await runTurnWorker({ ...job, retryIfUnmirrored: batch, prompts: [], ...(crash ? { crash } : {}) }, 60_000);
    if (exit.signal === "SIGKILL" && crash) {
      kills.set(crash.point, kills.get(crash.point)! + 1);
      killedAt.set(crash.prompt, [...(killedAt.get(crash.prompt) ?? []), crash.point]);
    }
    else if (exit.code !== 0) {
      workerFailures++;
      process.stderr.write(`session ${index}: worker exited code=${exit.code} signal=${exit.signal}: ${exit.stderr.slice(0, 300)}\n`);
    }
    // The worker's app-server must go away with it (stdin closed): wait a bit, then count and kill stragglers.
    const spawned = (await readLedger(job.ledger)).filter((l) => l.kind === "spawned");
    for (const l of spawned.slice(seenPids)) {
      if (l.kind !== "spawned" || l.codexPid === undefined) continue;
      const end = Date.now() + 5_000;
      while (processAlive(l.codexPid) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      if (processAlive(l.codexPid)) {
        lingered++;
        process.kill(l.codexPid, "SIGKILL");
      }
    }
    seenPids = spawned.length;
  }
  // Every worker has exited: what a kill left between a discard's rename and its removal is gone by now.
  sidecarsLeft += readdirSync(dir).filter(isLeftSidecar).length;
  const file = await sessionFileFor(job.file, job.sessionId);
  chainBreaks += countChainBreaks(file);
  countCommits(await readLedger(job.ledger), prompts);
  return analyzeSession(file, job.ledger, prompts);
}

/** `--durable`: what the engine's ledger says about its commitTurn calls (see the header). */
const durable = {
  commitTurnCalls: 0,
  committed: 0,
  duplicate: 0,
  duplicateAfterWindowKill: 0,
  refusedKeys: 0,
  committedExactlyOnce: 0,
  committedNever: 0,
  keysCommittedTwice: 0,
  doubleAdvancements: 0,
  afterTurnCalls: 0,
  ingestCalls: 0,
};
function countCommits(ledger: Awaited<ReturnType<typeof readLedger>>, prompts: string[]): void {
  const byKey = new Map<string, number>();
  const byPrompt = new Map<string, number>(prompts.map((p) => [p, 0]));
  for (const l of ledger) {
    if (l.kind === "finalize") l.method === "afterTurn" ? durable.afterTurnCalls++ : durable.ingestCalls++;
    if (l.kind === "commitRejected") (durable.commitTurnCalls++, durable.refusedKeys++);
    if (l.kind !== "commit") continue;
    durable.commitTurnCalls++;
    if (l.status === "duplicate") {
      durable.duplicate++;
      if (killedAt.get(l.prompt)?.includes("finalizeWindow")) durable.duplicateAfterWindowKill++;
      continue;
    }
    durable.committed++;
    byKey.set(l.advancementKey, (byKey.get(l.advancementKey) ?? 0) + 1);
    byPrompt.set(l.prompt, (byPrompt.get(l.prompt) ?? 0) + 1);
  }
  durable.keysCommittedTwice += [...byKey.values()].filter((n) => n > 1).length;
  durable.doubleAdvancements += [...byPrompt.values()].filter((n) => n > 1).length;
  durable.committedExactlyOnce += [...byPrompt.values()].filter((n) => n === 1).length;
  durable.committedNever += [...byPrompt.values()].filter((n) => n === 0).length;
}

/** Entries whose parent is not the entry before them (the mirror only appends: the chain must be one line). */
function countChainBreaks(file: string): number {
  let breaks = 0;
  let prev: string | null = null;
  let first = true;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.trim() === "") continue;
    const e = JSON.parse(line) as { type?: string; id?: string; parentId?: string | null };
    if (e.type === "session") continue;
    if ((first ? null : prev) !== (e.parentId ?? null)) breaks++;
    prev = e.id ?? null;
    first = false;
  }
  return breaks;
}

/** What one long-turn kill round left behind (see the header). */
interface LongRoundReport {
  /** Turns that completed (B's and C's; A is killed). */
  completed: number;
  lost: number;
  duplicatedMirrorEntries: number;
  duplicateFinalizes: number;
  crossTurnFinalizes: number;
  /** A's turn reached the transcript once without being run again (recovered from Codex's thread by B). */
  cutTurnRecovered: boolean;
  secondTurnAcceptedWhileFirstAlive: boolean;
  killedAfterMs: number;
  /** A lock directory, or an aside a discard left (`.discarded`), is still next to the transcript. */
  lockLeft: boolean;
  lingering: number;
  workerFailures: number;
}

async function waitGoneOrKill(pid: number): Promise<boolean> {
  const end = Date.now() + 5_000;
  while (processAlive(pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  if (!processAlive(pid)) return false;
  process.kill(pid, "SIGKILL");
  return true;
}

async function longTurnKillRound(index: number, rand: () => number): Promise<LongRoundReport> {
  const dir = path.join(root, `long${index}`);
  const file = path.join(dir, "s.jsonl");
  const ledger = path.join(dir, "ledger.jsonl");
  const common = { file, ledger, sessionId: `long-${index}`, codexHome: path.join(dir, "codex-home") };
  const [pa, pb] = [`long${index}-A`, `long${index}-B`];
  const a = startLockTurnWorker({ ...common, prompt: pa, delayMs: LONG_DELAY_MS }, 120_000);
  await waitForTurnLedger(ledger, (l) => l.kind === "accepted" && l.pid === a.pid, 60_000);
  const acceptedAt = Date.now();
  const b = startLockTurnWorker({ ...common, prompt: pb }, 180_000);
  const killAfterMs = 11_000 + Math.floor(rand() * 3_000);
  await new Promise((r) => setTimeout(r, Math.max(0, acceptedAt + killAfterMs - Date.now())));
  a.kill();
  await a.exited;
  const killedAfterMs = Date.now() - acceptedAt;
  const bBeforeKill = (await readLockTurnLedger(ledger)).some((l) => l.kind === "accepted" && l.pid === b.pid);
  const eb = await b.exited;
  // The host re-runs the prompt the crash cut short (it never reached the transcript).
  const retry = await unmirroredPrompts(file, [pa]);
  const c = retry.length > 0 ? await startLockTurnWorker({ ...common, prompt: pa }, 120_000).exited : { code: 0, stderr: "" };
  const lines = await readLockTurnLedger(ledger);
  let lingering = 0;
  for (const l of lines) if (l.kind === "spawned" && l.codexPid !== undefined && (await waitGoneOrKill(l.codexPid))) lingering++;
  const report = await analyzeSession(file, ledger, [pa, pb]);
  const completed = new Set(lines.flatMap((l) => (l.kind === "result" && l.status === "completed" ? [l.prompt] : [])));
  const fates = [...report.prompts];
  return {
    completed: completed.size,
    lost: fates.filter(([p, f]) => completed.has(p) && f.mirrored === 0).length,
    duplicatedMirrorEntries: report.duplicateKeys + fates.reduce((n, [, f]) => n + Math.max(0, f.mirrored - 1), 0),
    duplicateFinalizes: fates.reduce((n, [, f]) => n + Math.max(0, f.finalized - 1), 0),
    // B's attempt finalizes A's recovered turn as well as its own: a finalize is attributed to its turn's prompt, and
    // one that handed the engine two turns' prompts at once is the defect counted here.
    crossTurnFinalizes: lines.filter((l) => l.kind === "finalize" && new Set(l.userTexts).size > 1).length,
    cutTurnRecovered: retry.length === 0 && report.prompts.get(pa)?.mirrored === 1 && report.prompts.get(pa)?.accepted === 1,
    secondTurnAcceptedWhileFirstAlive: bBeforeKill,
    killedAfterMs,
    lockLeft: readdirSync(dir).some(isLeftSidecar),
    lingering,
    workerFailures: [eb, c].filter((e) => e.code !== 0).length,
  };
}

const started = Date.now();
const reports: Array<Awaited<ReturnType<typeof analyzeSession>>> = [];
let next = 0;
let soakDone = false;
// --db-stops: stop the database for each duration in turn while the sessions run (15 s apart).
const stopper = (async () => {
  for (const seconds of DB_STOPS) {
    await new Promise((r) => setTimeout(r, 15_000));
    if (soakDone) return;
    dbStops.push({ seconds, atMs: Date.now() - started });
    process.stderr.write(`soak: stopping PostgreSQL for ${seconds} s\n`);
    cluster!.stopServer();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    cluster!.startServer();
  }
})();
await Promise.all(
  Array.from({ length: Math.min(CONCURRENCY, SESSIONS) }, async () => {
    while (next < SESSIONS) reports.push(await soakSession(next++));
  }),
);
soakDone = true;
await stopper;
const wallMs = Date.now() - started;
let dbLeft: { pendingRows: number; leases: number } | undefined;
if (pgAdmin) {
  const { rows } = await pgAdmin.query("select (select count(*) from codex_turn.pending)::int as p, (select count(*) from codex_turn.leases where expires_at > clock_timestamp())::int as l, (select count(*) from codex_turn.leases)::int as all_leases");
  dbLeft = { pendingRows: rows[0].p, leases: rows[0].all_leases };
  await pgAdmin.end();
}
cluster?.stop();

const longStarted = Date.now();
const longRand = prng(Math.imul(SEED + 7, 0x9e3779b1));
const longRounds: LongRoundReport[] = [];
for (let i = 0; i < LONG_ROUNDS && Date.now() < DEADLINE; i++) longRounds.push(await longTurnKillRound(i, longRand));
const sumOf = (k: keyof LongRoundReport) => longRounds.reduce((n, r) => n + Number(r[k]), 0);
const longTurnKill = {
  rounds: longRounds.length,
  delayMsPerEvent: LONG_DELAY_MS,
  killedAfterMs: longRounds.map((r) => r.killedAfterMs),
  turnsCompleted: sumOf("completed"),
  lostTurns: sumOf("lost"),
  cutTurnsRecovered: sumOf("cutTurnRecovered"),
  duplicatedMirrorEntries: sumOf("duplicatedMirrorEntries"),
  duplicateFinalizes: sumOf("duplicateFinalizes"),
  crossTurnFinalizes: sumOf("crossTurnFinalizes"),
  secondTurnAcceptedWhileFirstAlive: sumOf("secondTurnAcceptedWhileFirstAlive"),
  lockDirectoriesLeft: sumOf("lockLeft"),
  lingeringCodexProcesses: sumOf("lingering"),
  workerFailures: sumOf("workerFailures"),
  wallMs: Date.now() - longStarted,
};

const fates = reports.flatMap((r) => [...r.prompts].map(([prompt, f]) => ({ ...f, killedAt: killedAt.get(prompt) ?? [] })));
const count = (pred: (f: (typeof fates)[number]) => boolean) => fates.filter(pred).length;
const summary = {
  sessions: SESSIONS,
  turnsPerSession: TURNS,
  seed: SEED,
  killRate: KILL_RATE,
  workers,
  workerFailures,
  timedOut,
  turns: fates.length,
  codexTurnsAccepted: fates.reduce((n, f) => n + f.accepted, 0),
  promptsAccepted: count((f) => f.accepted > 0),
  mirroredExactlyOnce: count((f) => f.mirrored === 1),
  mirroredNever: count((f) => f.mirrored === 0),
  mirroredMoreThanOnce: count((f) => f.mirrored > 1),
  mirroredWithoutReply: count((f) => f.mirrored > 0 && !f.replied),
  mirroredWithoutReplyAfterMidWriteKill: count((f) => f.mirrored > 0 && !f.replied && f.killedAt.includes("midMirrorWrite")),
  finalizedExactlyOnce: count((f) => f.finalized === 1),
  finalizedMoreThanOnce: count((f) => f.finalized > 1),
  finalizedMoreThanOnceAfterWindowKill: count((f) => f.finalized > 1 && f.killedAt.includes("finalizeWindow")),
  finalizedMoreThanOnceOtherwise: count((f) => f.finalized > 1 && !f.killedAt.includes("finalizeWindow")),
  finalizedNever: count((f) => f.finalized === 0),
  killsByPoint: Object.fromEntries(kills),
  killsTotal: [...kills.values()].reduce((a, b) => a + b, 0),
  lingeringCodexProcesses: lingered,
  pendingLeft: reports.reduce((n, r) => n + r.pending.length, 0),
  sidecarsLeft,
  chainBreaks,
  duplicateMirrorKeys: reports.reduce((n, r) => n + r.duplicateKeys, 0),
  transcriptDamage: reports.reduce((n, r) => n + r.damage.corruptLines + (r.damage.tornTailBytes > 0 ? 1 : 0), 0),
  wallMs,
  ...(PG ? { store: "postgres", leaseMs: LEASE_MS, dbStops, databaseLeft: dbLeft } : { store: "jsonl" }),
  engine: DURABLE ? "durable-turns" : "legacy",
  ...(DURABLE ? { durableTurns: durable } : {}),
  longTurnKill,
};
console.log(JSON.stringify(summary, null, 2));
// Kept next to bench/results.json (the mirror append cost lives there, under scale.append).
const out = values.out ?? path.join(path.dirname(fileURLToPath(import.meta.url)), "soak-results.json");
writeFileSync(out, `${JSON.stringify({ generatedAt: new Date().toISOString(), node: process.version, ...summary }, null, 2)}\n`);
console.log(`wrote ${out}`);
rmSync(root, { recursive: true, force: true });
