/**
 * The statechart alone: `turnMachine` driven to its final state with instant in-process actors (no app-server, no
 * files, no lock), its lifecycle logging bound to a real pino logger (the project's `createLogger`, level info,
 * redaction on) writing to /dev/null. What is left is what the machine itself costs a turn: createActor, interpreting
 * every transition, assigns, invoking and settling each actor, the lifecycle log lines and the host's trace observer.
 * The actors are bound (`provide`) once, as `runCodexTurn` binds them once per process (src/turn/bind.ts).
 */
import { createActor, fromCallback, fromPromise, toPromise } from "xstate";
import { pino, type Logger } from "pino";
import { turnMachine } from "../machines/turn.machine.js";
import type {
  AssembleOutput,
  BootstrapOutput,
  EngineFacts,
  FinalizeOutput,
  HistoryOutput,
  HooksOutput,
  MaintainOutput,
  MirrorOutput,
  ProjectionOutput,
  RunTurnEmitted,
  RunTurnInput,
  RunTurnReceived,
  ThreadStartOutput,
  TurnMachineInput,
  TurnMachineOutput,
  TurnRecord,
} from "../machines/turn.contract.js";
import { createLogger } from "../src/log/logger.js";
import { median, percentile, round } from "./lib.js";

export type MachineInputKind = "noEngine" | "fullEngine";

const FULL_ENGINE: EngineFacts = {
  active: true,
  id: "bench-engine",
  hasBootstrap: true,
  hasMaintain: true,
  hasAfterTurn: true,
  hasIngestBatch: false,
  ownsCompaction: false,
  turnMaintenanceMode: "foreground",
};
const NO_ENGINE: EngineFacts = { ...FULL_ENGINE, active: false, id: "legacy", hasBootstrap: false, hasMaintain: false, hasAfterTurn: false };

/** The lifecycle each input must visit (the machine's `trace`): checked on every measured turn. */
export const EXPECTED_TRACE: Record<MachineInputKind, string[]> = {
  noEngine: ["loadHistory", "project", "threadStart", "turnRunning", "mirror", "finalize", "completed"],
  fullEngine: ["loadHistory", "bootstrap", "assemble", "project", "hooks", "threadStart", "turnRunning", "mirror", "finalize", "maintain", "completed"],
};

export function machineInput(kind: MachineInputKind): TurnMachineInput {
  return {
    sessionId: "bench-machine",
    sessionFile: "/nonexistent/bench-machine.jsonl",
    prompt: "Turn 1: make the change and run the tests.",
    engine: kind === "fullEngine" ? FULL_ENGINE : NO_ENGINE,
    hadSessionFile: true,
    hasPromptHooks: kind === "fullEngine",
  };
}

const HISTORY: HistoryOutput = {
  messages: [
    { role: "user", content: "Turn 0: earlier prompt.", timestamp: 1 },
    { role: "assistant", content: [{ type: "text", text: "Earlier reply." }], timestamp: 2 },
  ] as HistoryOutput["messages"],
  origins: [
    { threadId: "thread-1", turnId: "turn-0" },
    { threadId: "thread-1", turnId: "turn-0" },
  ],
};
const BOOTSTRAP: BootstrapOutput = { ...HISTORY, bootstrapped: true };
const ASSEMBLED: AssembleOutput = { messages: HISTORY.messages, estimatedTokens: 12 };
const PROJECTION: ProjectionOutput = {
  mode: "delta",
  reason: "bench",
  promptText: "Turn 1: make the change and run the tests.",
  thread: { action: "resume", threadId: "thread-1", reason: "bench" },
  entriesSent: 0,
  bytes: 42,
};
const HOOKS: HooksOutput = { promptText: PROJECTION.promptText };
const THREAD: ThreadStartOutput = { threadId: "thread-1", resumed: true };
const RECORD: TurnRecord = {
  threadId: "thread-1",
  turnId: "turn-1",
  codexStatus: "completed",
  assistantText: "Done.",
  messagesSnapshot: [
    { role: "user", content: "Turn 1: make the change and run the tests.", timestamp: 3 },
    { role: "assistant", content: [{ type: "text", text: "Done." }], timestamp: 4 },
  ] as TurnRecord["messagesSnapshot"],
  compactions: [],
};
// The mirror appended the whole turn at the file's tail: finalize uses history + turn without a re-read.
const MIRROR: MirrorOutput = { appended: 2, entryCount: 5 };
const FINALIZE: FinalizeOutput = { mode: "afterTurn", usedFallback: false };
const MAINTAIN: MaintainOutput = { changed: false };

/** A logger like a host's: the project's factory (redaction on), level info, every line written to /dev/null. */
export function nullLogger(): { logger: Logger; close(): void } {
  const destination = pino.destination({ dest: "/dev/null", sync: true });
  return { logger: createLogger({ level: "info" }, destination), close: () => destination.end() };
}

/**
 * `turnMachine` with instant actors and the lifecycle log bound as `runCodexTurn` binds it. `runTurn` sends
 * TURN.ACCEPTED then TURN.ENDED on the next microtask (a real turn's events always arrive asynchronously).
 */
export function instantTurnMachine(logger: Logger) {
  const instant = <T>(value: T) => fromPromise<T>(async () => value);
  const ids = { sessionId: "bench-machine", engineId: "bench-engine" };
  return turnMachine.provide({
    actions: {
      logLifecycle: ({ context }, params) => {
        const { event, ...counts } = params as { event: string; [k: string]: unknown };
        logger.info({ ...ids, threadId: context.thread.id, turnId: context.turn.id, event, ...counts }, `codex context engine ${event}`);
      },
      scheduleBackgroundMaintenance: () => {},
    },
    actors: {
      acquireSessionLock: instant({ waitedMs: 0, pendingRecord: false }),
      recoverSession: instant({ pending: 0, mirroredMessages: 0, finalized: 0, dropped: 0 }),
      readHistory: instant({ history: { ...HISTORY, entryCount: 3 }, sessionFileExisted: true }),
      rereadHistory: instant(HISTORY),
      rereadHistoryForFinalize: instant(HISTORY),
      compactEngine: instant({ compacted: false, failed: false }),
      resumeThread: instant(THREAD),
      recordPendingFinalize: instant(undefined),
      bootstrapEngine: instant(BOOTSTRAP),
      assembleContext: instant(ASSEMBLED),
      projectContext: instant(PROJECTION),
      runPromptHooks: instant(HOOKS),
      startThread: instant(THREAD),
      runTurn: fromCallback<RunTurnReceived, RunTurnInput, RunTurnEmitted>(({ sendBack }) => {
        let live = true;
        queueMicrotask(() => {
          if (!live) return;
          sendBack({ type: "TURN.ACCEPTED", turnId: RECORD.turnId });
          sendBack({ type: "TURN.ENDED", record: RECORD });
        });
        return () => {
          live = false;
        };
      }),
      mirrorTranscript: instant(MIRROR),
      finalizeEngine: instant(FINALIZE),
      maintainEngine: instant(MAINTAIN),
    } as never,
  });
}

/**
 * Run one turn to its final state; returns its output and wall milliseconds. `bind` returns the machine for the turn
 * and is timed with it (a `provide()` there would count; `measureMachineOnly` passes the machine bound once, as
 * `runCodexTurn` does).
 */
export async function runMachineTurn(
  bind: () => ReturnType<typeof instantTurnMachine>,
  input: TurnMachineInput,
  logger: Logger,
): Promise<{ output: TurnMachineOutput; ms: number }> {
  const t0 = performance.now();
  const actor = createActor(bind(), { input });
  // The host's trace observer (runCodexTurn emits one `state` event per new trace entry).
  let seen = 0;
  actor.subscribe((snapshot) => {
    for (; seen < snapshot.context.trace.length; seen++) void snapshot.context.trace[seen];
  });
  const done = toPromise(actor);
  actor.start();
  const output = (await done) as TurnMachineOutput;
  logger.info({ sessionId: input.sessionId, event: "turn settled", status: output.status, threadId: output.threadId, turnId: output.turnId }, "codex turn settled");
  return { output, ms: performance.now() - t0 };
}

export interface MachineOnlyResults {
  turns: number;
  warmup: number;
  /** Median wall ms per full turn (createActor -> start -> final state). */
  noEngineMs: number;
  fullEngineMs: number;
  p90Ms: { noEngine: number; fullEngine: number };
  /** Lifecycle log lines written per turn (logLifecycle + "turn settled"). */
  logLinesPerTurn: { noEngine: number; fullEngine: number };
  trace: Record<MachineInputKind, string[]>;
}

/**
 * Measure the statechart alone, the two inputs interleaved turn by turn.
 *
 * @example
 * ```ts
 * const m = await measureMachineOnly({ turns: 2000, warmup: 200 });
 * console.log(m.fullEngineMs);
 * ```
 */
export async function measureMachineOnly(opts: { turns: number; warmup: number }): Promise<MachineOnlyResults> {
  const lines = { count: 0 };
  const { logger: base, close } = nullLogger();
  // Count lines without changing what is written: wrap the logger's info.
  const logger = new Proxy(base, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (prop === "info" && typeof v === "function") {
        return (...a: unknown[]) => {
          lines.count++;
          return (v as (...x: unknown[]) => unknown).apply(target, a);
        };
      }
      return v;
    },
  });
  try {
    const bound = instantTurnMachine(logger);
    return await measure(() => bound, logger, lines, opts);
  } finally {
    close();
  }
}

async function measure(
  bind: () => ReturnType<typeof instantTurnMachine>,
  logger: Logger,
  lines: { count: number },
  opts: { turns: number; warmup: number },
): Promise<MachineOnlyResults> {
  const samples: Record<MachineInputKind, number[]> = { noEngine: [], fullEngine: [] };
  const logLines: Record<MachineInputKind, number[]> = { noEngine: [], fullEngine: [] };
  const kinds: MachineInputKind[] = ["noEngine", "fullEngine"];
  for (let i = 0; i < opts.warmup + opts.turns; i++) {
    for (const kind of i % 2 ? [...kinds].reverse() : kinds) {
      lines.count = 0;
      const { output, ms } = await runMachineTurn(bind, machineInput(kind), logger);
      if (output.status !== "completed" || output.trace.join(",") !== EXPECTED_TRACE[kind].join(",")) {
        throw new Error(`machine-only ${kind}: ended ${output.status} via ${output.trace.join(" > ")}`);
      }
      if (i >= opts.warmup) {
        samples[kind].push(ms);
        logLines[kind].push(lines.count);
      }
    }
  }
  return {
    turns: opts.turns,
    warmup: opts.warmup,
    noEngineMs: round(median(samples.noEngine), 4),
    fullEngineMs: round(median(samples.fullEngine), 4),
    p90Ms: { noEngine: round(percentile(samples.noEngine, 0.9), 4), fullEngine: round(percentile(samples.fullEngine, 0.9), 4) },
    logLinesPerTurn: { noEngine: median(logLines.noEngine), fullEngine: median(logLines.fullEngine) },
    trace: EXPECTED_TRACE,
  };
}
