/**
 * `codex-turn demo`: a scripted offline session against the real app-server (plain turn, dynamic tool call, a steered
 * slow turn, a fourth turn, explicit compaction, a turn after it), then a summary. Every turn is shown the same way:
 * one live state line on a TTY (a state per line otherwise), then its reply.
 */
import { mkdir, mkdtemp } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Command } from "commander";
import type { InspectionEvent } from "xstate";
import { runCodexCompaction, runCodexCompactionParamsSchema, createBindingStore } from "../../compaction/index.js";
import { createRecordingEngine, createWindowEngine } from "../../context-engine/engines/index.js";
import type { FakeReply } from "../../testing/fake-responses-server.js";
import { startOfflineCodex, type OfflineCodex } from "../../testing/offline-codex.js";
import { readThreadBinding, writeThreadBinding } from "../../transcript/binding.js";
import { withSessionLock } from "../../transcript/lock.js";
import { startCodexTurn, type CodexTurnResult } from "../../turn.js";
import { CliError, EXIT, envError } from "../errors.js";
import { holdInspector, startInspector } from "../inspector.js";
import { addInspectOptions, addJsonOption } from "../options.js";
import { createOut, type Out } from "../output.js";
import { runnableCommand } from "../self.js";
import { fitStatusLine, terminalColumns } from "../status-line.js";

type DemoOptions = { out?: string | undefined; json?: boolean | undefined; inspect?: boolean | undefined; inspectWait?: number | undefined; inspectUiUrl?: string | undefined };

interface DemoStep {
  prompt: string;
  replies: FakeReply[];
  steer?: string | undefined;
}

const SCRIPT: DemoStep[] = [
  { prompt: "Hello, who are you?", replies: [{ text: "I am the offline demo model." }] },
  {
    prompt: "What time is it in the demo?",
    replies: [{ functionCall: { name: "demo_clock", arguments: { zone: "UTC" } } }, { text: "The demo clock says noon." }],
  },
  {
    prompt: "Count slowly to twenty.",
    replies: [{ text: Array.from({ length: 30 }, (_, i) => `${i + 1}`).join(" "), delayMs: 25 }, { text: "Steered: stopping early." }],
    steer: "Actually, stop and say you were steered.",
  },
  { prompt: "Summarize our chat.", replies: [{ text: "We greeted, checked the clock and got steered." }] },
];
const AFTER_COMPACTION: DemoStep = { prompt: "Are you still there?", replies: [{ text: "Still here after compaction." }] };

const TOOL = {
  name: "demo_clock",
  description: "Returns the demo clock time.",
  inputSchema: { type: "object", properties: { zone: { type: "string" } } },
  handler: () => "12:00",
};

interface DemoContext {
  env: OfflineCodex;
  out: Out;
  tty: boolean;
  sessionFile: string;
  engine: ReturnType<typeof createRecordingEngine>;
  inspect: (e: InspectionEvent) => void;
}

/** One turn, displayed the same way for every turn: the live state line (TTY) or a line per state, then the reply. */
async function demoTurn(ctx: DemoContext, n: number, step: DemoStep): Promise<CodexTurnResult> {
  const { env, out, tty } = ctx;
  env.fake.enqueue(step.replies);
  const states: string[] = [];
  let sawDelta = false;
  const handle = startCodexTurn({
    appServer: env.codex,
    sessionId: "demo",
    sessionFile: ctx.sessionFile,
    prompt: step.prompt,
    contextEngine: ctx.engine,
    contextTokenBudget: 16_000,
    dynamicTools: [TOOL],
    steerQuietWindowMs: 20,
    inspect: ctx.inspect,
    onEvent: (e) => {
      if (e.type === "state") {
        states.push(e.state);
        // Cut to the terminal's width: a wrapped line would leave a stale copy on every redraw.
        if (tty) process.stdout.write(`\r\x1b[2K${fitStatusLine(`turn ${n}: `, states, terminalColumns(process.stdout))}`);
        else out.text(`turn ${n}: ${e.state}`);
      } else if (e.type === "agentMessageDelta") sawDelta = true;
    },
  });
  if (step.steer) {
    const deadline = Date.now() + 15_000;
    while (!sawDelta && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    handle.steer(step.steer);
    // On the live line the note stays in place as later states are appended.
    if (tty) states.push("(steer sent)");
    else out.text(`turn ${n}: steer sent`);
  }
  const r = await handle.result;
  await r.backgroundMaintenance.catch(() => undefined);
  if (tty) process.stdout.write("\n");
  out.text(`turn ${n}: ${r.status} — ${r.assistantText}`);
  if (r.status !== "completed") throw new CliError("TURN_FAILED", `demo turn ${n} ended ${r.status}: ${JSON.stringify(r.error ?? {})}`, EXIT.turnFailed);
  return r;
}

async function demoCompaction(ctx: DemoContext) {
  ctx.env.fake.enqueue({ compaction: true }, { kind: "compaction" });
  // Recorded into the trace when runCodexCompaction accepts an inspection observer (feature-detected).
  const inspect = "inspect" in runCodexCompactionParamsSchema.shape ? { inspect: ctx.inspect } : {};
  const r = await runCodexCompaction({
    appServer: ctx.env.codex,
    bindingStore: createBindingStore({ read: readThreadBinding, write: writeThreadBinding }),
    sessionId: "demo",
    sessionFile: ctx.sessionFile,
    contextEngine: ctx.engine,
    contextTokenBudget: 16_000,
    trigger: "manual",
    nativeTimeoutMs: 30_000,
    withLock: (fn) => withSessionLock(ctx.sessionFile, fn),
    ...inspect,
  });
  ctx.out.text(`compaction: ok=${r.ok} compacted=${r.compacted} primary=${r.primary ?? "-"}`);
  return r;
}

function printSummary(ctx: DemoContext, summary: Record<string, unknown> & { traceFile: string }, lines: string[]): void {
  if (ctx.out.json) {
    const { traceFile, ...rest } = summary;
    ctx.out.record({ ...rest, trace: traceFile });
    return;
  }
  ctx.out.text("");
  for (const line of lines) ctx.out.text(line);
  ctx.out.text(`transcript: ${ctx.sessionFile}`);
  ctx.out.text(`trace: ${summary.traceFile}`);
  ctx.out.text(`replay it: ${runnableCommand(["viz", "--trace", summary.traceFile])}`);
}

async function runDemo(ctx: DemoContext, traceFile: string, t0: number, recorder: { events(): import("../../inspect/trace.js").TraceStep[] }) {
  const { writeTraceFile } = await import("../../inspect/trace.js");
  const turns: CodexTurnResult[] = [];
  for (const [i, step] of SCRIPT.entries()) turns.push(await demoTurn(ctx, i + 1, step));
  const compaction = await demoCompaction(ctx);
  turns.push(await demoTurn(ctx, SCRIPT.length + 1, AFTER_COMPACTION));
  await writeTraceFile(traceFile, recorder.events());
  const calls: Record<string, number> = {};
  for (const c of ctx.engine.calls) calls[c.method] = (calls[c.method] ?? 0) + 1;
  const modelRequests = ctx.env.fake.requests.map((r, i) => ({ i, kind: r.requestKind, inputBytes: r.inputBytes }));
  const statuses = turns.map((t) => t.status);
  const wallMs = Date.now() - t0;
  printSummary(
    ctx,
    {
      turns: turns.length,
      statuses,
      engineCalls: calls,
      modelRequests,
      compaction: { ok: compaction.ok, compacted: compaction.compacted, primary: compaction.primary ?? null },
      transcript: ctx.sessionFile,
      traceFile,
      wallMs,
    },
    [
      `summary: ${turns.length} turns (${statuses.join(", ")}) in ${wallMs} ms`,
      `engine calls: ${Object.entries(calls).map(([k, v]) => `${k}=${v}`).join(" ")}`,
      ...modelRequests.map((r) => `model request ${r.i} (${r.kind}): ${r.inputBytes} input bytes`),
    ],
  );
  return EXIT.ok;
}

async function demoAction(opts: DemoOptions): Promise<number> {
  const out = createOut(opts.json === true);
  const t0 = Date.now();
  const dir = opts.out !== undefined ? path.resolve(opts.out) : await mkdtemp(path.join(os.tmpdir(), "codex-turn-demo-"));
  await mkdir(dir, { recursive: true });
  const { createTraceRecorder } = await import("../../inspect/trace.js");
  const recorder = createTraceRecorder();
  const inspector = await startInspector(opts.inspect === true, out, opts.inspectUiUrl);
  let env: OfflineCodex;
  try {
    env = await startOfflineCodex({ offline: { lean: true } });
  } catch (err) {
    await inspector?.close();
    throw envError(`demo: cannot start offline codex: ${(err as Error).message}`);
  }
  const ctx: DemoContext = {
    env,
    out,
    tty: process.stdout.isTTY === true && !out.json,
    sessionFile: path.join(dir, "demo-session.jsonl"),
    engine: createRecordingEngine(createWindowEngine({ tokenBudget: 16_000, ownsCompaction: true })),
    inspect: (e) => {
      recorder.inspect(e);
      inspector?.send(e);
    },
  };
  try {
    const code = await runDemo(ctx, path.join(dir, "demo-trace.jsonl"), t0, recorder);
    await holdInspector(inspector, opts.inspectWait, out);
    return code;
  } finally {
    await inspector?.close();
    await env.dispose();
  }
}

/**
 * The `demo` command.
 *
 * @example
 * ```ts
 * program.addCommand(demoCommand(setExitCode));
 * ```
 */
export function demoCommand(done: (code: number) => void): Command {
  const cmd = new Command("demo")
    .description("scripted offline multi-turn session (tool call, steer, compaction) against the real app-server")
    .option("--out <dir>", "where to write the transcript and the trace (default: a new directory under the OS temp dir)");
  addJsonOption(cmd, "print the summary as one JSON line");
  addInspectOptions(cmd);
  cmd.addHelpText("after", "\n--inspect needs the package @statelyai/inspect (a devDependency of codex-turn-machine).");
  return cmd.action(async (opts: DemoOptions) => done(await demoAction(opts)));
}
