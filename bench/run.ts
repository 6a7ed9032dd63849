/**
 * Benchmarks of codex-turn-machine against the real `codex app-server` and a fake Responses API on 127.0.0.1.
 * Never part of `npm test`. Every step is bounded; every process it starts is closed before it exits.
 *
 *   npm run bench                       # full run (~ a few minutes on 2 vCPUs)
 *   npm run bench -- --quick            # smaller run (20 turns, fewer samples, N = 1 and 10)
 *   npm run bench -- --only growth      # one section: growth | overhead | sdk | scale | store
 *   npm run bench -- --only overhead --repeat 5   # the overhead comparison 5 times in fresh processes; the
 *                                                 # end-to-end target is then judged on the median run
 *
 * Prints tables and writes bench/results.json (bench/results.quick.json with --quick); sections that did not run are
 * kept from the previous file.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { formatGrowth, runGrowth } from "./growth.js";
import {
  endToEndTarget,
  endToEndTargetOverRuns,
  formatOverhead,
  formatOverheadRuns,
  overheadTarget,
  runOverhead,
  summarizeOverheadRuns,
  type OverheadResults,
} from "./overhead.js";
import { formatPacedOverhead, runPacedOverhead } from "./overhead-paced.js";
import { formatSdk, runSdkComparison } from "./sdk.js";
import { formatScale, runScale } from "./scale.js";
import { formatStoreCost, runStoreCost, storeCostTarget } from "./store-cost.js";

const SECTIONS = ["growth", "overhead", "sdk", "scale", "store"] as const;
type Section = (typeof SECTIONS)[number];

/** The most repeats `--repeat` takes (each overhead run takes about 2-3.5 minutes on 2 vCPUs). */
const MAX_REPEAT = 20;

function parseArgs(argv: string[]): { quick: boolean; only: Section[]; repeat: number } {
  let quick = false;
  let repeat = 1;
  const only: Section[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--quick") quick = true;
    else if (a === "--only" || a.startsWith("--only=")) {
      const value = a.includes("=") ? a.slice(a.indexOf("=") + 1) : argv[++i];
      for (const name of (value ?? "").split(",")) {
        if (!(SECTIONS as readonly string[]).includes(name)) {
          throw new Error(`--only: unknown section "${name}" (expected one of ${SECTIONS.join(", ")})`);
        }
        only.push(name as Section);
      }
    } else if (a === "--repeat" || a.startsWith("--repeat=")) {
      const value = a.includes("=") ? a.slice(a.indexOf("=") + 1) : argv[++i];
      repeat = Number(value);
      if (!Number.isInteger(repeat) || repeat < 1 || repeat > MAX_REPEAT) {
        throw new Error(`--repeat: expected a whole number of runs from 1 to ${MAX_REPEAT}, got "${value ?? ""}"`);
      }
    } else if (a === "--help" || a === "-h") {
      console.log("usage: tsx bench/run.ts [--quick] [--only growth|overhead|sdk|scale|store[,...]] [--repeat N (overhead runs)]");
      process.exit(0);
    } else throw new Error(`unknown argument "${a}"`);
  }
  return { quick, only: only.length > 0 ? only : [...SECTIONS], repeat };
}

function codexVersion(): string {
  try {
    const p = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "node_modules", "@openai", "codex", "package.json");
    return (JSON.parse(readFileSync(p, "utf8")) as { version: string }).version;
  } catch {
    return "unknown";
  }
}

let args: ReturnType<typeof parseArgs>;
try {
  args = parseArgs(process.argv.slice(2));
} catch (err) {
  console.error(`bench: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(2);
}
const log = (line: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);
// A quick run never overwrites the full run's figures (docs/benchmarks.md quotes them).
const resultsPath = path.join(path.dirname(fileURLToPath(import.meta.url)), args.quick ? "results.quick.json" : "results.json");
const previous: Record<string, unknown> = existsSync(resultsPath) ? (JSON.parse(readFileSync(resultsPath, "utf8")) as Record<string, unknown>) : {};
const results: Record<string, unknown> = { ...previous };
const meta = {
  date: new Date().toISOString(),
  command: `tsx bench/run.ts ${process.argv.slice(2).join(" ")}`.trim(),
  quick: args.quick,
  sections: args.only,
  ...(args.repeat > 1 ? { overheadRepeat: args.repeat } : {}),
  node: process.version,
  codexCli: codexVersion(),
  platform: `${os.type()} ${os.release()} ${os.arch()}`,
  cpus: `${os.cpus().length} x ${os.cpus()[0]?.model ?? "?"}`,
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
};
console.log(`codex-turn-machine benchmarks — ${meta.date}, node ${meta.node}, codex-cli ${meta.codexCli}, ${meta.cpus}`);
console.log(`mode: ${args.quick ? "quick" : "full"}; sections: ${args.only.join(", ")}`);
console.log("Absolute times drift 10-25% between runs on a small shared box; compare ratios measured in one run.");

const failures: string[] = [];
/** Every target evaluated in this run, printed together at the end ((info) lines are context, not targets). */
const targets: Array<{ section: Section; name: string; pass: boolean; detail: string }> = [];
const started = performance.now();
for (const section of args.only) {
  try {
    if (section === "growth") {
      const turns = args.quick ? 20 : 40;
      const g = await runGrowth({
        turns,
        checkpoints: args.quick ? [10, 20] : [10, 20, 40],
        fitBudget: 1_000_000,
        outgrowBudget: 2_000,
        log,
      });
      results.growth = g;
      console.log(formatGrowth(g));
      for (const s of g.scenarios) {
        for (const c of s.checks) {
          if (c.info || c.name.startsWith("(info)")) continue;
          targets.push({ section, name: c.name, pass: c.pass, detail: c.detail });
          if (!c.pass) failures.push(`${c.name}: ${c.detail}`);
        }
      }
    } else if (section === "overhead") {
      const runs: OverheadResults[] = [];
      for (let r = 1; r <= args.repeat; r++) {
        log(`overhead: interleaved direct / runCodexTurn / runCodexTurn+window${args.repeat > 1 ? ` (run ${r} of ${args.repeat})` : ""}`);
        const o = await runOverhead({ turns: args.quick ? 10 : 200, warmup: 3, log });
        runs.push(o);
        console.log(formatOverhead(o));
      }
      // The last run's figures in full; with --repeat, every run's ratios beside them (a stale summary never stays).
      const last = runs.at(-1)!;
      results.overhead = last;
      const summary = args.repeat > 1 ? summarizeOverheadRuns(runs) : undefined;
      if (summary) {
        results.overheadRuns = summary;
        console.log(formatOverheadRuns(summary));
      } else delete results.overheadRuns;
      for (const t of [overheadTarget(last), summary ? endToEndTargetOverRuns(summary) : endToEndTarget(last)]) {
        targets.push({ section, ...t });
        if (!t.pass) failures.push(`${t.name}: ${t.detail}`);
      }
      log("overhead: the same with a model that streams (40 ms between SSE events)");
      const paced = await runPacedOverhead({ rounds: args.quick ? 6 : 20, warmup: 2, delayMsPerEvent: 40, log });
      results.overheadPaced = paced;
      console.log(formatPacedOverhead(paced));
    } else if (section === "sdk") {
      log("sdk: codex-sdk vs runCodexTurn vs bare client");
      const s = await runSdkComparison({ turns: args.quick ? 4 : 10, log });
      results.sdk = s;
      console.log(formatSdk(s));
    } else if (section === "scale") {
      const s = await runScale({
        sessions: args.quick ? [1, 10] : [1, 10, 50],
        turnsPerSession: 3,
        appendAt: [10, 1_000, 10_000],
        appendSamples: args.quick ? 15 : 50,
        log,
      });
      results.scale = s;
      console.log(formatScale(s));
    } else if (section === "store") {
      const s = await runStoreCost({ turns: args.quick ? 50 : 200, leaseCycles: args.quick ? 200 : 1_000, wakeSamples: args.quick ? 20 : 50, endToEndTurns: args.quick ? 10 : 30, log });
      results.store = s;
      console.log(formatStoreCost(s));
      const t = storeCostTarget(s);
      targets.push({ section, ...t });
      if (!t.pass) failures.push(`${t.name}: ${t.detail}`);
    }
  } catch (err) {
    console.log(`\n## ${section}: ERROR — ${err instanceof Error ? err.message : String(err)}`);
    failures.push(`${section} errored`);
    results[section] = { error: err instanceof Error ? err.message : String(err), at: meta.date };
  }
}
results.meta = { ...meta, wallSeconds: Math.round((performance.now() - started) / 1000) };
writeFileSync(resultsPath, `${JSON.stringify(results, null, 2)}\n`);
console.log(`\nwrote ${path.relative(process.cwd(), resultsPath)} (${Math.round((performance.now() - started) / 1000)} s)`);
if (targets.length > 0) {
  console.log("\nTargets (sections run now):");
  for (const t of targets) console.log(`  ${t.pass ? "PASS" : "FAIL"}  [${t.section}] ${t.name}: ${t.detail}`);
}
if (failures.length > 0) {
  console.log(`\n${failures.length} target(s) failed or errored:`);
  for (const f of failures) console.log(`  FAIL ${f}`);
}
// Targets are reported, not enforced: a FAIL is a finding, not a crash. Exit non-zero only on errors.
process.exitCode = failures.some((f) => f.endsWith("errored")) ? 1 : 0;
