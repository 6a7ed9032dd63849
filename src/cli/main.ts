/**
 * `codex-turn` CLI: an operator surface over {@link runCodexTurn} (demo, run, compact, inspect-session, viz).
 * Exit codes: 0 ok, 1 turn failed, 2 usage error, 3 environment/config error, 130 aborted.
 */
import { mkdir, mkdtemp, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { CodexAppServer } from "../codex/app-server.js";
import { compactCodexSession, createBindingStore } from "../compaction/index.js";
import { assertContextEngine } from "../context-engine/contract.js";
import { createRecordingEngine, createWindowEngine } from "../context-engine/engines/index.js";
import type { ContextEngine } from "../context-engine/types.js";
import { withSessionLock } from "../transcript/lock.js";
import { readThreadBinding, writeThreadBinding } from "../transcript/binding.js";
import { listPendingFinalize } from "../transcript/pending.js";
import { readSessionHistory } from "../transcript/session-file.js";
import { startOfflineCodex } from "../testing/offline-codex.js";
import { runCodexTurn, startCodexTurn } from "../turn.js";
import type { CodexTurnParams } from "../params.js";
import { createTrajectoryWriter } from "../trajectory/index.js";
import { createInterface } from "node:readline";

export const EXIT = { ok: 0, turnFailed: 1, usage: 2, env: 3, aborted: 130 } as const;

/** A CLI failure with the exit code it maps to. */
export class CliError extends Error {
  constructor(
    readonly code: "USAGE" | "ENV" | "TURN_FAILED",
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
    this.name = "CliError";
  }
}

const usage = (msg: string) => new CliError("USAGE", msg, EXIT.usage);
const envError = (msg: string) => new CliError("ENV", msg, EXIT.env);

const LIVE_PROVIDER_HELP = `--offline uses the fake model (answers "offline reply"). Without it, codex app-server runs
with CODEX_HOME set to $CODEX_HOME when that is set and non-empty, else ~/.codex (Codex's own default; created if
missing), so your \`codex login\` credentials and config.toml there are used; of the environment only PATH, HOME and
OPENAI_API_KEY (when set) are passed to it.`;
const INSPECT_HELP = `--inspect needs the package @statelyai/inspect (a devDependency of codex-turn-machine).`;

const HELP: Record<string, string> = {
  main: `codex-turn <command> [options]

Commands:
  demo             scripted offline multi-turn session (tool call, steer, compaction)
  run "<prompt>"   run one turn against a session file
  chat             interactive multi-turn session (steer while a turn runs)
  compact          compact a session (engine-owned or Codex native)
  inspect-session  summarize a session file (no message content unless --show-content)
  viz              write a self-contained statechart HTML page

Run "codex-turn <command> --help" for a command's options.
Exit codes: 0 ok, 1 turn failed, 2 usage error, 3 environment/config error, 130 aborted.`,
  demo: `codex-turn demo [--out DIR] [--json] [--inspect]

Starts a real codex app-server against the offline fake model and runs ~5 scripted turns with the window engine,
then prints a summary (turns, engine calls, model input bytes, where the transcript and trace were written).
${INSPECT_HELP}`,
  run: `codex-turn run "<prompt>" --session FILE [--engine MODULE] [--model M] [--offline] [--json] [--inspect]
                [--trajectory FILE [--trajectory-full]]

Runs one turn.
${LIVE_PROVIDER_HELP}
${INSPECT_HELP}`,
  chat: `codex-turn chat --session FILE [--engine MODULE] [--offline] [--inspect] [--trajectory FILE [--trajectory-full]]

Interactive multi-turn chat. A line typed while a turn runs is sent as a steer; Ctrl-C aborts the running turn;
Ctrl-C at the idle prompt or end of input exits.
${LIVE_PROVIDER_HELP}
${INSPECT_HELP}`,
  compact: `codex-turn compact --session FILE [--engine MODULE] [--offline] [--json]

Compacts the session: the engine's compact() when it owns compaction, plus Codex native compaction of the bound thread.
${LIVE_PROVIDER_HELP}`,
  "inspect-session": `codex-turn inspect-session FILE [--show-content] [--json]

Message count by role, the thread binding summary and pending finalize records. Content only with --show-content.`,
  viz: `codex-turn viz [--trace FILE] [--out FILE.html]

Writes the turn and compaction statecharts as one self-contained HTML page (with a replay when --trace is given).
Needs the package "mermaid" (a devDependency of codex-turn-machine).`,
};

type Out = { json: boolean; log: (line: string) => void };

function mkOut(json: boolean): Out {
  return { json, log: (line) => process.stdout.write(`${line}\n`) };
}

type OptSpec = Record<string, { type: "string" | "boolean"; short?: string }>;
type Values = Record<string, string | boolean | undefined>;

function parse(argv: string[], options: OptSpec, allowPositionals = true): { values: Values; positionals: string[] } {
  try {
    const r = parseArgs({ args: argv, options: { ...options, help: { type: "boolean", short: "h" } }, allowPositionals, strict: true });
    return { values: r.values as Values, positionals: r.positionals };
  } catch (err) {
    throw usage((err as Error).message);
  }
}

/** Load an engine module: default export, or its `createContextEngine()`; validated with assertContextEngine. */
export async function loadEngineModule(spec: string): Promise<ContextEngine> {
  const abs = path.resolve(spec);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(abs).href)) as Record<string, unknown>;
  } catch (err) {
    throw envError(`--engine ${spec}: cannot load module: ${(err as Error).message}`);
  }
  let engine: unknown = mod.default;
  if (typeof mod.createContextEngine === "function") engine = await (mod.createContextEngine as () => unknown)();
  else if (typeof engine === "function") engine = await (engine as () => unknown)();
  try {
    assertContextEngine(engine);
  } catch (err) {
    throw envError(`--engine ${spec}: not a context engine: ${(err as Error).message}`);
  }
  return engine as ContextEngine;
}

/**
 * The CODEX_HOME a non-offline command runs codex with: `$CODEX_HOME` when set and non-empty (Codex ignores an empty
 * one too), else Codex's own default `~/.codex`, so the user's `codex login` and config.toml are used. Never a
 * temporary directory.
 *
 * @example
 * ```ts
 * resolveCodexHome({}, os.homedir); // { home: path.join(os.homedir(), ".codex"), source: "default" }
 * ```
 */
export function resolveCodexHome(
  env: NodeJS.ProcessEnv = process.env,
  homedir: () => string = os.homedir,
): { home: string; source: "CODEX_HOME" | "default" } {
  const fromEnv = env.CODEX_HOME;
  if (fromEnv !== undefined && fromEnv !== "") return { home: fromEnv, source: "CODEX_HOME" };
  return { home: path.join(homedir(), ".codex"), source: "default" };
}

/** `CodexAppServer.spawn` options of a non-offline command (the user's own Codex setup). */
export function liveCodexSpawnOptions(env: NodeJS.ProcessEnv = process.env, homedir: () => string = os.homedir) {
  return { codexHome: resolveCodexHome(env, homedir).home, passEnv: ["OPENAI_API_KEY"] };
}

async function startServer(offline: boolean) {
  if (offline) {
    let env;
    try {
      env = await startOfflineCodex({ offline: { lean: true } });
    } catch (err) {
      throw envError(`cannot start the offline codex app-server: ${(err as Error).message}`);
    }
    env.fake.setDefault({ text: "offline reply" });
    return { codex: env.codex, fake: env.fake, dispose: () => env.dispose() };
  }
  const { home, source } = resolveCodexHome();
  try {
    // Codex refuses a CODEX_HOME that does not exist; its default ~/.codex it would create itself, so create that one.
    if (source === "default") await mkdir(home, { recursive: true });
    else if (!(await stat(home)).isDirectory()) throw new Error("not a directory");
  } catch (err) {
    const origin = source === "default" ? "default ~/.codex" : "from $CODEX_HOME";
    throw envError(`CODEX_HOME ${home} (${origin}) is not usable: ${(err as Error).message}`);
  }
  try {
    const codex = await CodexAppServer.spawn(liveCodexSpawnOptions());
    return { codex, fake: undefined, dispose: () => codex.close() };
  } catch (err) {
    throw envError(`cannot start codex app-server (CODEX_HOME ${home}): ${(err as Error).message}`);
  }
}

let trajectory: ReturnType<typeof createTrajectoryWriter> | undefined;

/** Record app-server notifications; our own turn requests are added via {@link recordTurnRequest}. */
function attachTrajectory(codex: CodexAppServer, values: Values): (() => void) | undefined {
  if (typeof values.trajectory !== "string") return undefined;
  trajectory = createTrajectoryWriter({ file: path.resolve(values.trajectory), full: values["trajectory-full"] === true });
  return trajectory.attach(codex);
}

function recordTurnRequest(sessionFile: string, prompt: string, engineId: string): void {
  trajectory?.record("request", "codexTurn/run", { sessionFile, prompt, engineId });
}

/** Whether `err` says that the package `pkg` (or a file inside it) could not be found. */
export function isMissingPackageError(err: unknown, pkg: string): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  const message = (err as { message?: unknown } | null)?.message;
  if (typeof message !== "string" || !message.includes(pkg)) return false;
  return code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND" || /cannot find (package|module)/i.test(message);
}

/** The CLI error for a command that needs an optional package (a devDependency) that is not installed. */
export function missingPackageError(pkg: string, feature: string): CliError {
  return envError(
    `${feature} needs the package "${pkg}", which is not installed (it is a devDependency of codex-turn-machine): ` +
      `run \`npm install ${pkg}\``,
  );
}

/**
 * Import a module that needs the optional package `pkg`: a missing package becomes {@link missingPackageError}, any
 * other load failure an environment error naming `feature`; never a stack trace.
 */
export async function importOptional<T>(pkg: string, feature: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    if (isMissingPackageError(err, pkg)) throw missingPackageError(pkg, feature);
    throw envError(`${feature}: cannot load ${pkg}: ${(err as Error)?.message ?? String(err)}`);
  }
}

/**
 * What `run` and `chat` share: the engine (from --engine or the default window engine), the inspector (first, so a
 * missing optional package fails before an app-server process exists), the app-server and the trajectory writer.
 */
async function setUpTurnCommand(values: Values, out: Out) {
  const engine = typeof values.engine === "string" ? await loadEngineModule(values.engine) : createWindowEngine({});
  const inspector = await maybeInspector(values.inspect === true, out);
  const server = await startServer(values.offline === true).catch(async (err: unknown) => {
    await inspector?.close();
    throw err;
  });
  const detach = attachTrajectory(server.codex, values);
  return { engine, inspector, server, detach };
}

async function maybeInspector(enabled: boolean, out: Out) {
  if (!enabled) return undefined;
  const { createLiveInspector } = await importOptional("@statelyai/inspect", "--inspect", () => import("../inspect/live.js"));
  try {
    const inspector = await createLiveInspector();
    // Keep stdout pure JSON for scripts.
    if (out.json) process.stderr.write(`inspector: ${inspector.url}\n`);
    else out.log(`inspector: ${inspector.url}`);
    return inspector;
  } catch (err) {
    // `ws` is resolved through @statelyai/inspect (its dependency) when the relay starts.
    if (isMissingPackageError(err, "@statelyai/inspect") || isMissingPackageError(err, "ws")) {
      throw missingPackageError("@statelyai/inspect", "--inspect");
    }
    throw envError(`--inspect: live inspector unavailable: ${(err as Error).message}`);
  }
}

function statusExit(status: string): number {
  if (status === "completed") return EXIT.ok;
  if (status === "aborted" || status === "yieldAborted") return EXIT.aborted;
  return EXIT.turnFailed;
}

async function cmdRun(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    session: { type: "string" },
    engine: { type: "string" },
    model: { type: "string" },
    offline: { type: "boolean" },
    json: { type: "boolean" },
    inspect: { type: "boolean" },
    trajectory: { type: "string" },
    "trajectory-full": { type: "boolean" },
  });
  if (values.help) return help("run");
  const prompt = positionals[0];
  if (!prompt) throw usage('run: missing "<prompt>"');
  if (typeof values.session !== "string") throw usage("run: --session FILE is required");
  const out = mkOut(values.json === true);
  const { engine, inspector, server, detach } = await setUpTurnCommand(values, out);
  const ac = new AbortController();
  const onSigint = () => ac.abort();
  process.once("SIGINT", onSigint);
  try {
    const sessionFile = path.resolve(values.session);
    recordTurnRequest(sessionFile, prompt, engine.info.id);
    const r = await runCodexTurn({
      appServer: server.codex,
      sessionId: path.basename(sessionFile, path.extname(sessionFile)),
      sessionFile,
      prompt,
      contextEngine: engine,
      signal: ac.signal,
      ...(typeof values.model === "string" ? { model: values.model } : {}),
      ...(inspector ? { inspect: (e: Parameters<NonNullable<CodexTurnParams["inspect"]>>[0]) => inspector.inspect.next?.(e) } : {}),
    });
    await r.backgroundMaintenance.catch(() => undefined);
    if (out.json) out.log(JSON.stringify({ status: r.status, threadId: r.threadId, turnId: r.turnId, assistantText: r.assistantText, trace: r.trace, error: r.error }));
    else {
      out.log(r.assistantText);
      out.log(`status: ${r.status}${r.error ? ` (${JSON.stringify(r.error)})` : ""}`);
    }
    return statusExit(r.status);
  } finally {
    process.off("SIGINT", onSigint);
    detach?.();
    await inspector?.close();
    await server.dispose();
  }
}

async function cmdCompact(argv: string[]): Promise<number> {
  const { values } = parse(argv, { session: { type: "string" }, engine: { type: "string" }, offline: { type: "boolean" }, json: { type: "boolean" } }, false);
  if (values.help) return help("compact");
  if (typeof values.session !== "string") throw usage("compact: --session FILE is required");
  const engine = typeof values.engine === "string" ? await loadEngineModule(values.engine) : createWindowEngine({ ownsCompaction: true });
  const server = await startServer(values.offline === true);
  try {
    const sessionFile = path.resolve(values.session);
    const r = await compactCodexSession({
      appServer: server.codex,
      bindingStore: createBindingStore({ read: readThreadBinding, write: writeThreadBinding }),
      sessionId: path.basename(sessionFile, path.extname(sessionFile)),
      sessionFile,
      contextEngine: engine,
      trigger: "manual",
      nativeTimeoutMs: 30_000,
      withLock: (fn) => withSessionLock(sessionFile, fn),
    });
    const summary = { ok: r.ok, compacted: r.compacted, primary: r.primary, reason: r.reason };
    process.stdout.write(values.json ? `${JSON.stringify(summary)}\n` : `compaction: ok=${r.ok} compacted=${r.compacted} primary=${r.primary ?? "-"} reason=${r.reason ?? "-"}\n`);
    return r.ok ? EXIT.ok : EXIT.turnFailed;
  } finally {
    await server.dispose();
  }
}

/** Structural summary of a session file; content only when asked. */
export async function summarizeSession(file: string, showContent = false) {
  const { messages } = await readSessionHistory(file);
  const byRole: Record<string, number> = {};
  for (const m of messages) byRole[m.role] = (byRole[m.role] ?? 0) + 1;
  const b = await readThreadBinding(file);
  const pending = await listPendingFinalize(file);
  return {
    file,
    messages: messages.length,
    byRole,
    binding: b
      ? { threadId: b.threadId, mode: b.projectionMode, epoch: b.projectionEpoch ?? null, engineId: b.engineId, ledgerSize: b.ledger.length, heldTurns: b.heldTurnIds.length }
      : null,
    pendingFinalize: pending.map((p) => ({ turnId: p.turnId })),
    ...(showContent ? { content: messages } : {}),
  };
}

async function cmdInspectSession(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { "show-content": { type: "boolean" }, json: { type: "boolean" } });
  if (values.help) return help("inspect-session");
  const file = positionals[0];
  if (!file) throw usage("inspect-session: missing FILE");
  let s;
  try {
    s = await summarizeSession(path.resolve(file), values["show-content"] === true);
  } catch (err) {
    throw envError(`inspect-session: cannot read ${file}: ${(err as Error).message}`);
  }
  if (values.json) process.stdout.write(`${JSON.stringify(s)}\n`);
  else {
    const lines = [
      `session: ${s.file}`,
      `messages: ${s.messages} (${Object.entries(s.byRole).map(([r, n]) => `${r}=${n}`).join(", ") || "none"})`,
      s.binding
        ? `binding: thread=${s.binding.threadId} mode=${s.binding.mode} epoch=${s.binding.epoch ?? "-"} ledger=${s.binding.ledgerSize} held=${s.binding.heldTurns}`
        : "binding: none",
      `pending finalize: ${s.pendingFinalize.length}`,
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
    if (s.content) process.stdout.write(`${JSON.stringify(s.content, null, 2)}\n`);
  }
  return EXIT.ok;
}

async function cmdViz(argv: string[]): Promise<number> {
  const { values } = parse(argv, { trace: { type: "string" }, out: { type: "string" } }, false);
  if (values.help) return help("viz");
  let viz: typeof import("../inspect/viz.js");
  let trace: typeof import("../inspect/trace.js");
  try {
    viz = await import("../inspect/viz.js");
    trace = await import("../inspect/trace.js");
  } catch (err) {
    throw envError(`viz: src/inspect is unavailable: ${(err as Error).message}`);
  }
  const { turnMachine } = await import("../../machines/turn.machine.js");
  const { compactionMachine } = await import("../../machines/compaction.machine.js");
  let steps;
  if (typeof values.trace === "string") {
    try {
      steps = await trace.readTraceFile(path.resolve(values.trace));
    } catch (err) {
      throw envError(`viz: cannot read trace ${values.trace}: ${(err as Error).message}`);
    }
  }
  let html: string;
  try {
    html = viz.renderStatechartPage({
      title: "codex-turn-machine",
      machines: [
        { id: "turn", title: "Turn", machine: turnMachine },
        { id: "compaction", title: "Compaction", machine: compactionMachine },
      ],
      ...(steps ? { trace: steps } : {}),
    });
  } catch (err) {
    // The page inlines mermaid's browser bundle (resolved from node_modules when the page is rendered).
    if ((err as { code?: unknown } | null)?.code === "VIZ_MERMAID_MISSING" || isMissingPackageError(err, "mermaid")) {
      throw missingPackageError("mermaid", "viz");
    }
    throw envError(`viz: cannot render the page: ${(err as Error)?.message ?? String(err)}`);
  }
  const outFile = path.resolve(typeof values.out === "string" ? values.out : "statecharts.html");
  await writeFile(outFile, html);
  process.stdout.write(`wrote ${outFile}\n`);
  return EXIT.ok;
}

async function cmdDemo(argv: string[]): Promise<number> {
  const { values } = parse(argv, { out: { type: "string" }, json: { type: "boolean" }, inspect: { type: "boolean" } }, false);
  if (values.help) return help("demo");
  const json = values.json === true;
  const out = mkOut(json);
  const t0 = Date.now();
  const dir = typeof values.out === "string" ? path.resolve(values.out) : await mkdtemp(path.join(os.tmpdir(), "codex-turn-demo-"));
  await mkdir(dir, { recursive: true });
  const sessionFile = path.join(dir, "demo-session.jsonl");
  const traceFile = path.join(dir, "demo-trace.jsonl");
  const { createTraceRecorder, writeTraceFile } = await import("../inspect/trace.js").catch((err: Error) => {
    throw envError(`demo: src/inspect/trace.ts unavailable: ${err.message}`);
  });
  const recorder = createTraceRecorder();
  const inspector = await maybeInspector(values.inspect === true, out);
  let env;
  try {
    env = await startOfflineCodex({ offline: { lean: true } });
  } catch (err) {
    await inspector?.close();
    throw envError(`demo: cannot start offline codex: ${(err as Error).message}`);
  }
  const engine = createRecordingEngine(createWindowEngine({ tokenBudget: 16_000, ownsCompaction: true }));
  const tty = process.stdout.isTTY === true && !json;
  const turns: Array<{ n: number; prompt: string; status: string; states: string[]; reply: string }> = [];
  const script: Array<{ prompt: string; replies: Parameters<typeof env.fake.enqueue>[0]; steer?: string }> = [
    { prompt: "Hello, who are you?", replies: { text: "I am the offline demo model." } },
    {
      prompt: "What time is it in the demo?",
      replies: [{ functionCall: { name: "demo_clock", arguments: { zone: "UTC" } } }, { text: "The demo clock says noon." }],
    },
    {
      prompt: "Count slowly to twenty.",
      replies: [{ text: Array.from({ length: 30 }, (_, i) => `${i + 1}`).join(" "), delayMs: 25 }, { text: "Steered: stopping early." }],
      steer: "Actually, stop and say you were steered.",
    },
    { prompt: "Summarize our chat.", replies: { text: "We greeted, checked the clock and got steered." } },
  ];
  const tool = {
    name: "demo_clock",
    description: "Returns the demo clock time.",
    inputSchema: { type: "object", properties: { zone: { type: "string" } } },
    handler: () => "12:00",
  };
  let n = 0;
  try {
    for (const step of script) {
      n++;
      env.fake.enqueue(step.replies);
      const states: string[] = [];
      let sawDelta = false;
      const show = () => {
        if (tty) process.stdout.write(`\r\x1b[2Kturn ${n}: ${states.join(" > ")}`);
      };
      const handle = startCodexTurn({
        appServer: env.codex,
        sessionId: "demo",
        sessionFile,
        prompt: step.prompt,
        contextEngine: engine,
        contextTokenBudget: 16_000,
        dynamicTools: [tool],
        steerQuietWindowMs: 20,
        inspect: (e) => {
          recorder.inspect(e);
          inspector?.inspect.next?.(e);
        },
        onEvent: (e) => {
          if (e.type === "state") {
            states.push(e.state);
            if (tty) show();
            else if (!json) out.log(`turn ${n}: ${e.state}`);
          } else if (e.type === "agentMessageDelta") sawDelta = true;
        },
      });
      if (step.steer) {
        const deadline = Date.now() + 15_000;
        while (!sawDelta && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
        handle.steer(step.steer);
        if (!json) out.log(tty ? `\n(steer sent)` : `turn ${n}: steer sent`);
      }
      const r = await handle.result;
      await r.backgroundMaintenance.catch(() => undefined);
      if (tty) process.stdout.write("\n");
      if (!json) out.log(`turn ${n}: ${r.status} — ${r.assistantText}`);
      turns.push({ n, prompt: step.prompt, status: r.status, states, reply: r.assistantText });
      if (r.status !== "completed") throw new CliError("TURN_FAILED", `demo turn ${n} ended ${r.status}: ${JSON.stringify(r.error ?? {})}`, EXIT.turnFailed);
    }
    // Compaction: engine-owned (window engine) plus Codex native compaction of the bound thread.
    env.fake.enqueue({ compaction: true }, { kind: "compaction" });
    const compaction = await compactCodexSession({
      appServer: env.codex,
      bindingStore: createBindingStore({ read: readThreadBinding, write: writeThreadBinding }),
      sessionId: "demo",
      sessionFile,
      contextEngine: engine,
      contextTokenBudget: 16_000,
      trigger: "manual",
      nativeTimeoutMs: 30_000,
      withLock: (fn) => withSessionLock(sessionFile, fn),
    });
    if (!json) out.log(`compaction: ok=${compaction.ok} compacted=${compaction.compacted} primary=${compaction.primary ?? "-"}`);
    // One more turn after compaction, so the re-sent context is visible in the request sizes.
    n++;
    env.fake.enqueue({ text: "Still here after compaction." });
    const after = await runCodexTurn({
      appServer: env.codex,
      sessionId: "demo",
      sessionFile,
      prompt: "Are you still there?",
      contextEngine: engine,
      contextTokenBudget: 16_000,
      dynamicTools: [tool],
      inspect: (e) => recorder.inspect(e),
      onEvent: (e) => {
        if (e.type === "state" && !json) out.log(`turn ${n}: ${e.state}`);
      },
    });
    turns.push({ n, prompt: "Are you still there?", status: after.status, states: after.trace, reply: after.assistantText });
    await writeTraceFile(traceFile, recorder.events());
    const calls: Record<string, number> = {};
    for (const c of engine.calls) calls[c.method] = (calls[c.method] ?? 0) + 1;
    const summary = {
      turns: turns.length,
      statuses: turns.map((t) => t.status),
      engineCalls: calls,
      modelRequests: env.fake.requests.map((r, i) => ({ i, kind: r.requestKind, inputBytes: r.inputBytes })),
      compaction: { ok: compaction.ok, compacted: compaction.compacted, primary: compaction.primary ?? null },
      transcript: sessionFile,
      trace: traceFile,
      wallMs: Date.now() - t0,
    };
    if (json) out.log(JSON.stringify(summary));
    else {
      out.log("");
      out.log(`summary: ${summary.turns} turns (${summary.statuses.join(", ")}) in ${summary.wallMs} ms`);
      out.log(`engine calls: ${Object.entries(calls).map(([k, v]) => `${k}=${v}`).join(" ")}`);
      for (const r of summary.modelRequests) out.log(`model request ${r.i} (${r.kind}): ${r.inputBytes} input bytes`);
      out.log(`transcript: ${sessionFile}`);
      out.log(`trace: ${traceFile}  (codex-turn viz --trace ${traceFile})`);
    }
    return after.status === "completed" ? EXIT.ok : EXIT.turnFailed;
  } finally {
    await inspector?.close();
    await env.dispose();
  }
}

async function cmdChat(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    { session: { type: "string" }, engine: { type: "string" }, offline: { type: "boolean" }, inspect: { type: "boolean" }, trajectory: { type: "string" }, "trajectory-full": { type: "boolean" } },
    false,
  );
  if (values.help) return help("chat");
  if (typeof values.session !== "string") throw usage("chat: --session FILE is required");
  const sessionFile = path.resolve(values.session);
  const out = mkOut(false);
  const { engine, inspector, server, detach } = await setUpTurnCommand(values, out);
  const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: process.stdin.isTTY === true });
  let running: ReturnType<typeof startCodexTurn> | undefined;
  let exitCode: number = EXIT.ok;
  // Lines are queued so a piped script is processed in order: while a turn runs a line is a steer.
  const queue: string[] = [];
  let closed = false;
  let wake: (() => void) | undefined;
  rl.on("line", (line) => {
    const text = line.trim();
    if (!text) return;
    if (running) {
      running.steer(text);
      out.log("(steer sent)");
    } else {
      queue.push(text);
      wake?.();
    }
  });
  rl.on("close", () => {
    closed = true;
    wake?.();
  });
  rl.on("SIGINT", () => {
    if (running) {
      running.abort("user");
      out.log("(aborting turn)");
    } else rl.close();
  });
  try {
    rl.setPrompt("> ");
    rl.prompt();
    for (;;) {
      if (queue.length === 0 && !closed) await new Promise<void>((r) => (wake = r));
      wake = undefined;
      const prompt = queue.shift();
      if (prompt === undefined) {
        if (closed) break;
        continue;
      }
      recordTurnRequest(sessionFile, prompt, engine.info.id);
      running = startCodexTurn({
        appServer: server.codex,
        sessionId: path.basename(sessionFile, path.extname(sessionFile)),
        sessionFile,
        prompt,
        contextEngine: engine,
        ...(inspector ? { inspect: (e: Parameters<NonNullable<CodexTurnParams["inspect"]>>[0]) => inspector.inspect.next?.(e) } : {}),
      });
      const r = await running.result;
      running = undefined;
      await r.backgroundMaintenance.catch(() => undefined);
      out.log(r.assistantText);
      if (r.status !== "completed") out.log(`(turn ${r.status})`);
      for (const f of r.followUps) queue.push(f);
      exitCode = r.status === "failed" ? EXIT.turnFailed : EXIT.ok;
      if (!closed) rl.prompt();
    }
    return exitCode;
  } finally {
    rl.close();
    detach?.();
    await inspector?.close();
    await server.dispose();
  }
}

function help(cmd: string): number {
  process.stdout.write(`${HELP[cmd] ?? HELP.main}\n`);
  return EXIT.ok;
}

/** Run the CLI with argv (without node and script) and resolve with the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    switch (cmd) {
      case undefined:
      case "--help":
      case "-h":
      case "help":
        return help("main");
      case "demo":
        return await cmdDemo(rest);
      case "run":
        return await cmdRun(rest);
      case "compact":
        return await cmdCompact(rest);
      case "chat":
        return await cmdChat(rest);
      case "inspect-session":
        return await cmdInspectSession(rest);
      case "viz":
        return await cmdViz(rest);
      default:
        throw usage(`unknown command "${cmd}" (try --help)`);
    }
  } catch (err) {
    if (err instanceof CliError) {
      process.stderr.write(`codex-turn: ${err.message}\n`);
      return err.exitCode;
    }
    process.stderr.write(`codex-turn: ${(err as Error)?.stack ?? String(err)}\n`);
    return EXIT.env;
  }
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href;
if (invokedDirectly || process.env.CODEX_TURN_CLI_MAIN === "1") {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`codex-turn: ${String(err)}\n`);
      process.exit(EXIT.env);
    },
  );
}
