/**
 * One real session grown turn by turn: what the host costs per turn as the session gets long. Real `codex app-server`
 * (the pinned binary), the loopback fake model, the window engine with a 100,000-token budget by default (a long
 * session's view is a tail of its history; the thread rotates when the stale context outgrows the rotation policy), one
 * `runCodexTurn` per turn on one session file. Every `--every` turns it prints the medians of that stretch:
 * - outside: wall time outside the Codex turn (everything but `turnRunning`);
 * - before turn: from the call to entering `turnRunning` (lock, history read, assemble, projection, thread);
 * - mirror, after mirror: the mirror state, and from `finalize` to the result;
 * - cpu: this process's CPU per turn (all threads; Codex and the fake model are other processes);
 * - the transcript's size and the binding's (as one whole record: the binding file is a log of whole records and
 *   patches, docs/storage.md) at the end of the stretch.
 * Not part of `npm run bench` (3,000 turns take about 5 minutes); no network, no credentials.
 *
 * `--budget` sets the window engine's token budget (default 100,000); a budget larger than the session grows to (say
 * 1000000) keeps the whole history in view, so the thread never rotates on budget and its binding (held turns, and the
 * ledger of a thread bootstrapped with the view) grows with the session.
 *
 *   npx tsx bench/long-session.ts [--turns 3000] [--every 250] [--engine window|none] [--budget 100000]
 */
import path from "node:path";
import { statSync } from "node:fs";
import { parseArgs } from "node:util";
import { runCodexTurn, type TurnStreamEvent } from "../src/turn.js";
import { createWindowEngine } from "../src/context-engine/engines/window.js";
import { median, spawnBenchAppServer, startFakeModelProcess, table, tempDir, userPrompt } from "./lib.js";
import { OVERHEAD_REPLY } from "./overhead.js";
import { readThreadBinding } from "../src/transcript/binding.js";

const { values } = parseArgs({
  options: {
    turns: { type: "string", default: "3000" },
    every: { type: "string", default: "250" },
    engine: { type: "string", default: "window" },
    budget: { type: "string", default: "100000" },
  },
});
const turns = Number(values.turns);
const every = Number(values.every);
const BUDGET = Number(values.budget);
if (!(turns > 0 && every > 0 && Number.isSafeInteger(BUDGET) && BUDGET > 0) || (values.engine !== "window" && values.engine !== "none")) {
  console.error("usage: npx tsx bench/long-session.ts [--turns 3000] [--every 250] [--engine window|none] [--budget 100000]");
  process.exit(2);
}

const model = await startFakeModelProcess(OVERHEAD_REPLY);
const codex = await spawnBenchAppServer(model);
const dirs = tempDir("ctm-bench-long-");
const cwd = tempDir("ctm-bench-long-cwd-");
const engine = values.engine === "window" ? createWindowEngine({ tokenBudget: BUDGET }) : undefined;
const sessionFile = path.join(dirs.dir, "long.jsonl");
const sizeOf = (file: string) => {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
};

console.log(`long session: ${turns} turns, ${values.engine === "window" ? `window engine (${BUDGET} tokens)` : "no engine"}, ${new Date().toISOString()}, node ${process.version}`);
const rows: Array<Array<string | number>> = [["turns", "outside ms", "before turn ms", "mirror ms", "after mirror ms", "cpu ms", "transcript bytes", "binding bytes"]];
let stretch: Record<string, number[]> = {};
const add = (name: string, v: number) => (stretch[name] ??= []).push(v);
try {
  for (let i = 0; i < turns; i++) {
    const marks: Record<string, number> = {};
    const onEvent = (e: TurnStreamEvent) => {
      if (e.type === "state") marks[e.state] = performance.now();
    };
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const result = await runCodexTurn({
      appServer: codex,
      sessionId: "long",
      sessionFile,
      prompt: userPrompt(i),
      cwd: cwd.dir,
      onEvent,
      ...(engine ? { contextEngine: engine, contextTokenBudget: BUDGET } : {}),
    });
    const t1 = performance.now();
    const cpu = process.cpuUsage(c0);
    if (result.status !== "completed") throw new Error(`turn ${i + 1}: ${result.status}`);
    add("outside", t1 - t0 - (marks.mirror! - marks.turnRunning!));
    add("before", marks.turnRunning! - t0);
    add("mirror", marks.finalize! - marks.mirror!);
    add("after", t1 - marks.finalize!);
    add("cpu", (cpu.user + cpu.system) / 1000);
    if ((i + 1) % every === 0 || i + 1 === turns) {
      const m = (k: string) => Math.round(median(stretch[k]!) * 100) / 100;
      const binding = await readThreadBinding(sessionFile);
      const bindingBytes = binding ? Buffer.byteLength(JSON.stringify(binding)) + 1 : 0;
      rows.push([`${i + 2 - stretch.outside!.length}-${i + 1}`, m("outside"), m("before"), m("mirror"), m("after"), m("cpu"), sizeOf(sessionFile), bindingBytes]);
      console.log(`[long ${new Date().toISOString().slice(11, 19)}] ${rows.at(-1)!.join("  ")}`);
      stretch = {};
    }
  }
  console.log();
  console.log(table(rows));
} finally {
  await codex.close();
  await model.close();
  dirs.cleanup();
  cwd.cleanup();
}
