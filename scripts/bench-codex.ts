/**
 * Measure the real `codex app-server` against the fake Responses API on loopback:
 *   cold start  = spawn -> `initialize` response (fresh process and CODEX_HOME per run)
 *   thread      = thread/start round trip
 *   turn 1 / 2  = turn/start sent -> turn/completed received (turn 2 is a warm turn on the same thread)
 *
 *   npx tsx scripts/bench-codex.ts [runs=10]
 *
 * One warm-up run is discarded. Prints medians (min-max) and a JSON line.
 */
import { CodexAppServer } from "../src/codex/app-server.js";
import { offlineCodexConfig } from "../src/codex/config.js";
import { startFakeResponsesServer } from "../src/testing/fake-responses-server.js";

const runs = Number(process.argv[2] ?? 10);
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const fmt = (xs: number[]): string => `${median(xs).toFixed(0)} ms (${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)})`;

const fake = await startFakeResponsesServer();
const settings = offlineCodexConfig({ baseUrl: fake.baseUrl });
const samples = { coldStart: [] as number[], threadStart: [] as number[], turn1: [] as number[], turn2: [] as number[], close: [] as number[] };

for (let i = 0; i <= runs; i++) {
  const server = await CodexAppServer.spawn({ config: settings.config, env: settings.env, modelCatalog: settings.modelCatalog! });
  const t0 = performance.now();
  const { threadId } = await server.startThread();
  const t1 = performance.now();
  const turnTime = async (text: string): Promise<number> => {
    const s = performance.now();
    const turn = await server.startTurn({ threadId, text });
    const r = await turn.completion;
    if (r.codexStatus !== "completed") throw new Error(`turn ended ${r.codexStatus}`);
    return performance.now() - s;
  };
  const turn1 = await turnTime("bench turn one");
  const turn2 = await turnTime("bench turn two");
  const c0 = performance.now();
  await server.close();
  const closeMs = performance.now() - c0;
  if (i === 0) continue; // warm-up
  samples.coldStart.push(server.startupMs);
  samples.threadStart.push(t1 - t0);
  samples.turn1.push(turn1);
  samples.turn2.push(turn2);
  samples.close.push(closeMs);
}
await fake.close();

console.log(`codex app-server offline bench, ${runs} runs (+1 warm-up), node ${process.version}`);
console.log(`cold start (spawn -> initialize): ${fmt(samples.coldStart)}`);
console.log(`thread/start:                     ${fmt(samples.threadStart)}`);
console.log(`turn 1 (turn/start -> completed): ${fmt(samples.turn1)}`);
console.log(`turn 2 (warm, same thread):       ${fmt(samples.turn2)}`);
console.log(`close (stdin EOF -> exit):        ${fmt(samples.close)}`);
console.log(JSON.stringify(Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, { median: Math.round(median(v)), min: Math.round(Math.min(...v)), max: Math.round(Math.max(...v)) }]))));
