/**
 * One Codex app-server turn as a pure XState v5 statechart. No I/O happens here: every effect is a named actor
 * (see the table in `turn.contract.ts`) that a host binds with `turnMachine.provide({ actors })`.
 *
 * Lifecycle: loadHistory -> bootstrap -> assemble -> project -> hooks -> threadStart -> turnRunning -> mirror ->
 * finalize -> maintain, ending in completed | failed | aborted | yieldAborted. The rules live in `rules.ts`.
 */
import { assign, fromCallback, fromPromise, sendTo, setup, type DoneActorEvent } from "xstate";
import {
  bootstrapSkipReason,
  canMaintain,
  isAssembleEmpty,
  isBackgroundMaintenance,
  maintenanceSkipReason,
  settleStatus,
  shouldAssemble,
  shouldBootstrap,
  type SettleFacts,
} from "./rules.js";
import type {
  AssembleOutput,
  BootstrapOutput,
  EngineOutcomes,
  FinalizeOutput,
  HistoryOutput,
  HooksOutput,
  MaintainOutput,
  MirrorOutput,
  NativeCompactionRecord,
  ProjectionOutput,
  RunTurnEmitted,
  RunTurnInput,
  RunTurnReceived,
  ThreadPlan,
  ThreadStartOutput,
  TurnError,
  TurnEvent,
  TurnMachineInput,
  TurnMachineOutput,
  TurnPhase,
  TurnRecord,
} from "./turn.contract.js";

/** The machine's context: JSON-friendly, so a persisted snapshot and the inspector can carry it. */
export interface TurnContext {
  input: TurnMachineInput;
  history: HistoryOutput;
  /** Mirrored history length after bootstrap: `messages.slice(prePromptMessageCount)` is this turn. */
  prePromptMessageCount: number;
  assembled?: AssembleOutput;
  projection?: ProjectionOutput;
  promptText: string;
  developerInstructions?: string;
  threadId?: string;
  turnId?: string;
  record?: TurnRecord;
  turnAccepted: boolean;
  aborted: boolean;
  yieldAborted: boolean;
  mirrorOk: boolean;
  finalizeOk: boolean;
  failedBeforeTurn: boolean;
  engine: EngineOutcomes;
  trace: string[];
  warnings: string[];
  followUps: string[];
  compactions: NativeCompactionRecord[];
  backgroundMaintenance: boolean;
  error?: TurnError;
}

const notProvided = (name: string) => () => {
  throw new Error(`turn machine actor not provided: ${name}`);
};

function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === "string" ? error : "unknown error";
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

function toTurnError(phase: TurnPhase, error: unknown): TurnError {
  const code = errorCode(error);
  return code ? { phase, message: errorMessage(error), code } : { phase, message: errorMessage(error) };
}

function settleFacts(context: TurnContext): SettleFacts {
  return {
    aborted: context.aborted,
    yieldAborted: context.yieldAborted,
    turnAccepted: context.turnAccepted,
    record: context.record,
    failedBeforeTurn: context.failedBeforeTurn,
  };
}

function buildOutput(context: TurnContext): TurnMachineOutput {
  const output: TurnMachineOutput = {
    status: settleStatus(settleFacts(context)),
    engine: context.engine,
    trace: context.trace,
    warnings: context.warnings,
    followUps: context.followUps,
    backgroundMaintenance: context.backgroundMaintenance,
  };
  if (context.threadId) output.threadId = context.threadId;
  if (context.turnId) output.turnId = context.turnId;
  if (context.record) output.record = context.record;
  if (context.error) output.error = context.error;
  if (context.projection) {
    const { mode, reason, entriesSent, bytes } = context.projection;
    output.projection = { mode, reason, entriesSent, bytes };
  }
  return output;
}

/** A record for a turn Codex accepted but did not finish within the interrupt grace period. */
function timedOutRecord(context: TurnContext): TurnRecord {
  return {
    threadId: context.threadId ?? "",
    turnId: context.turnId ?? "",
    codexStatus: "timedOut",
    assistantText: "",
    messagesSnapshot: [{ role: "user", content: context.input.prompt, timestamp: 0 }],
    compactions: context.compactions,
    error: { message: "turn did not end within the interrupt grace period" },
  };
}

type Phase = { phase: TurnPhase };

export const turnMachine = setup({
  types: {
    context: {} as TurnContext,
    events: {} as TurnEvent,
    input: {} as TurnMachineInput,
    output: {} as TurnMachineOutput,
  },
  actors: {
    readHistory: fromPromise<HistoryOutput, { sessionFile: string }>(notProvided("readHistory")),
    bootstrapEngine: fromPromise<BootstrapOutput, { sessionFile: string }>(notProvided("bootstrapEngine")),
    assembleContext: fromPromise<AssembleOutput, { history: HistoryOutput; prompt: string }>(notProvided("assembleContext")),
    projectContext: fromPromise<
      ProjectionOutput,
      { prompt: string; history: HistoryOutput; assembled?: AssembleOutput }
    >(notProvided("projectContext")),
    runPromptHooks: fromPromise<HooksOutput, { promptText: string; developerInstructions?: string; history: HistoryOutput }>(
      notProvided("runPromptHooks"),
    ),
    startThread: fromPromise<ThreadStartOutput, { plan: ThreadPlan; developerInstructions?: string }>(
      notProvided("startThread"),
    ),
    runTurn: fromCallback<RunTurnReceived, RunTurnInput, RunTurnEmitted>(notProvided("runTurn")),
    mirrorTranscript: fromPromise<MirrorOutput, { record: TurnRecord }>(notProvided("mirrorTranscript")),
    finalizeEngine: fromPromise<
      FinalizeOutput,
      { record: TurnRecord; mirrorOk: boolean; history: HistoryOutput; prePromptMessageCount: number }
    >(notProvided("finalizeEngine")),
    maintainEngine: fromPromise<MaintainOutput, { record?: TurnRecord }>(notProvided("maintainEngine")),
  },
  delays: {
    interruptGrace: 10_000,
  },
  guards: {
    shouldBootstrap: ({ context }) => shouldBootstrap(context.input.engine, context.input.hadSessionFile),
    shouldAssemble: ({ context }) => shouldAssemble(context.input.engine),
    hasPromptHooks: ({ context }) => context.input.hasPromptHooks,
    assembledEmpty: (_, params: { output: AssembleOutput }) => isAssembleEmpty(params.output),
    turnAccepted: ({ context }) => context.turnAccepted,
    isAborting: ({ context }) => context.aborted || context.yieldAborted,
    canMaintainForeground: ({ context }) =>
      canMaintain({ ...settleFacts(context), finalizeOk: context.finalizeOk, engine: context.input.engine }) &&
      !isBackgroundMaintenance(context.input.engine),
    canMaintainBackground: ({ context }) =>
      canMaintain({ ...settleFacts(context), finalizeOk: context.finalizeOk, engine: context.input.engine }) &&
      isBackgroundMaintenance(context.input.engine),
    settlesYieldAborted: ({ context }) => settleStatus(settleFacts(context)) === "yieldAborted",
    settlesAborted: ({ context }) => settleStatus(settleFacts(context)) === "aborted",
    settlesFailed: ({ context }) => settleStatus(settleFacts(context)) === "failed",
  },
  actions: {
    /** Host hook: one structured log event per lifecycle step (ids and counts only). */
    logLifecycle: (_, _params: { event: string; [key: string]: unknown }) => {},
    /** Host hook: start `maintain` after the result is returned, tracked by the host. */
    scheduleBackgroundMaintenance: () => {},
    enterState: assign({ trace: ({ context }, params: { state: string }) => [...context.trace, params.state] }),
    storeHistory: assign((_, params: { output: HistoryOutput }) => ({
      history: params.output,
      prePromptMessageCount: params.output.messages.length,
    })),
    markBootstrapSkipped: assign({
      engine: ({ context }) => ({
        ...context.engine,
        bootstrap: bootstrapSkipReason(context.input.engine, context.input.hadSessionFile),
      }),
    }),
    markAssembleSkipped: assign({ engine: ({ context }) => ({ ...context.engine, assemble: "skipped:noEngine" }) }),
    storeBootstrap: assign(({ context }, params: { output: BootstrapOutput }) => ({
      history: { messages: params.output.messages, origins: params.output.origins },
      prePromptMessageCount: params.output.messages.length,
      engine: { ...context.engine, bootstrap: "ran" },
    })),
    warnBootstrapFailed: assign(({ context }) => ({
      engine: { ...context.engine, bootstrap: "failed" },
      warnings: [...context.warnings, "bootstrap failed; continuing without it"],
    })),
    storeAssembled: assign(({ context }, params: { output: AssembleOutput }) => ({
      assembled: params.output,
      engine: { ...context.engine, assemble: "ran" },
    })),
    // An empty result still carries its systemPromptAddition (projection falls back to the raw prompt).
    warnAssembleEmpty: assign(({ context }, params: { output: AssembleOutput }) => ({
      assembled: params.output.systemPromptAddition?.trim()
        ? { messages: [], estimatedTokens: 0, systemPromptAddition: params.output.systemPromptAddition }
        : undefined,
      engine: { ...context.engine, assemble: "fallback" },
      warnings: [...context.warnings, "assemble returned no messages; using the unassembled prompt"],
    })),
    warnAssembleFailed: assign(({ context }) => ({
      assembled: undefined,
      engine: { ...context.engine, assemble: "failed" },
      warnings: [...context.warnings, "assemble failed; using the unassembled prompt"],
    })),
    storeProjection: assign((_, params: { output: ProjectionOutput }) => ({
      projection: params.output,
      promptText: params.output.promptText,
      developerInstructions: params.output.developerInstructions,
    })),
    warnProjectionFailed: assign(({ context }) => {
      // Without a projection we cannot know whether the bound thread is compatible: a fresh thread is the safe choice.
      const projection: ProjectionOutput = {
        mode: "none",
        reason: "projectionFailed",
        promptText: context.input.prompt,
        thread: { action: "start", reason: "projectionFailed" },
        entriesSent: 0,
        bytes: Buffer.byteLength(context.input.prompt, "utf8"),
      };
      return {
        projection,
        promptText: context.input.prompt,
        developerInstructions: undefined,
        warnings: [...context.warnings, "projection failed; sending the original prompt on a fresh thread"],
      };
    }),
    storeHooks: assign((_, params: { output: HooksOutput }) => ({
      promptText: params.output.promptText,
      developerInstructions: params.output.developerInstructions,
    })),
    warnHooksFailed: assign(({ context }) => ({
      warnings: [...context.warnings, "beforePromptBuild hook failed; keeping the unmodified prompt"],
    })),
    storeThread: assign((_, params: { output: ThreadStartOutput }) => ({ threadId: params.output.threadId })),
    recordError: assign((_, params: { error: TurnError }) => ({ error: params.error })),
    recordFailureBeforeTurn: assign(({ context }, params: { error: TurnError }) => ({
      error: params.error,
      failedBeforeTurn: true,
      engine: {
        ...context.engine,
        finalize: "skipped:turnNotStarted",
        maintenance: "skipped:turnNotStarted",
      },
    })),
    recordAbortBeforeTurn: assign(({ context }, params: { yield: boolean }) => ({
      aborted: context.aborted || !params.yield,
      yieldAborted: context.yieldAborted || params.yield,
      engine: {
        ...context.engine,
        finalize: "skipped:turnNotStarted",
        maintenance: params.yield ? "skipped:yieldAborted" : "skipped:aborted",
      },
    })),
    markTurnNotStarted: assign(({ context }) => ({
      engine: {
        ...context.engine,
        finalize: "skipped:turnNotStarted",
        maintenance: context.yieldAborted ? "skipped:yieldAborted" : "skipped:aborted",
      },
    })),
    markAbortFlag: assign(({ context }, params: { yield: boolean }) => ({
      aborted: context.aborted || !params.yield,
      yieldAborted: context.yieldAborted || params.yield,
    })),
    forwardInterrupt: sendTo("turn", ({ context }): RunTurnReceived => ({
      type: "TURN.INTERRUPT",
      reason: context.yieldAborted ? "yield" : "abort",
    })),
    forwardSteer: sendTo("turn", (_, params: { text: string }): RunTurnReceived => ({ type: "TURN.STEER", text: params.text })),
    queueFollowUps: assign({ followUps: ({ context }, params: { texts: string[] }) => [...context.followUps, ...params.texts] }),
    storeAccepted: assign((_, params: { turnId: string }) => ({ turnAccepted: true, turnId: params.turnId })),
    storeCompaction: assign({
      compactions: ({ context }, params: { compaction: NativeCompactionRecord }) => [
        ...context.compactions.filter((c) => c.itemId !== params.compaction.itemId),
        params.compaction,
      ],
    }),
    // A turn that ended has a turn id: Codex accepted it, even if TURN.ACCEPTED was not seen first.
    storeRecord: assign((_, params: { record: TurnRecord }) => ({
      record: params.record,
      turnId: params.record.turnId,
      turnAccepted: true,
    })),
    storeTimedOutRecord: assign(({ context }) => ({ record: timedOutRecord(context) })),
    storeMirrored: assign({ mirrorOk: true }),
    warnMirrorFailed: assign(({ context }) => ({
      mirrorOk: false,
      warnings: [...context.warnings, "transcript mirror failed; finalizing from history + this turn's snapshot"],
    })),
    storeFinalized: assign(({ context }, params: { output: FinalizeOutput }) => ({
      finalizeOk: true,
      engine: { ...context.engine, finalize: params.output.mode },
    })),
    warnFinalizeFailed: assign(({ context }) => ({
      finalizeOk: false,
      engine: { ...context.engine, finalize: "failed" },
      warnings: [...context.warnings, "context-engine finalize failed"],
    })),
    markMaintenanceSkipped: assign(({ context }) => ({
      engine: {
        ...context.engine,
        maintenance:
          maintenanceSkipReason({ ...settleFacts(context), finalizeOk: context.finalizeOk, engine: context.input.engine }) ??
          "skipped",
      },
    })),
    markMaintenanceBackground: assign(({ context }) => ({
      backgroundMaintenance: true,
      engine: { ...context.engine, maintenance: "background" },
    })),
    storeMaintained: assign(({ context }) => ({ engine: { ...context.engine, maintenance: "ran" } })),
    warnMaintenanceFailed: assign(({ context }) => ({
      engine: { ...context.engine, maintenance: "failed" },
      warnings: [...context.warnings, "maintenance failed"],
    })),
    markMaintenanceAborted: assign(({ context }) => ({ engine: { ...context.engine, maintenance: "aborted" } })),
  },
}).createMachine({
  id: "turn",
  initial: "loadHistory",
  context: ({ input }) => ({
    input,
    history: { messages: [], origins: [] },
    prePromptMessageCount: 0,
    promptText: input.prompt,
    turnAccepted: false,
    aborted: false,
    yieldAborted: false,
    mirrorOk: false,
    finalizeOk: false,
    failedBeforeTurn: false,
    engine: { bootstrap: "pending", assemble: "pending", finalize: "pending", maintenance: "pending" },
    trace: [],
    warnings: [],
    followUps: [],
    compactions: [],
    backgroundMaintenance: false,
  }),
  // Before Codex accepted the turn, an abort or a yield stops at once; leaving a state stops its actor, whose
  // AbortSignal reaches the in-flight engine call. States after acceptance override these handlers.
  on: {
    ABORT: { target: ".aborted", actions: { type: "recordAbortBeforeTurn", params: { yield: false } } },
    YIELD: { target: ".yieldAborted", actions: { type: "recordAbortBeforeTurn", params: { yield: true } } },
    STEER: { actions: { type: "queueFollowUps", params: ({ event }) => ({ texts: [event.text] }) } },
  },
  states: {
    loadHistory: {
      entry: [{ type: "enterState", params: { state: "loadHistory" } }],
      invoke: {
        id: "loadHistory",
        src: "readHistory",
        input: ({ context }) => ({ sessionFile: context.input.sessionFile }),
        onDone: [
          {
            guard: "shouldBootstrap",
            target: "bootstrap",
            actions: [{ type: "storeHistory", params: ({ event }) => ({ output: event.output }) }],
          },
          {
            guard: "shouldAssemble",
            target: "assemble",
            actions: [{ type: "storeHistory", params: ({ event }) => ({ output: event.output }) }, "markBootstrapSkipped"],
          },
          {
            target: "project",
            actions: [
              { type: "storeHistory", params: ({ event }) => ({ output: event.output }) },
              "markBootstrapSkipped",
              "markAssembleSkipped",
            ],
          },
        ],
        onError: {
          target: "failed",
          actions: {
            type: "recordFailureBeforeTurn",
            params: ({ event }) => ({ error: toTurnError("loadHistory", event.error) }),
          },
        },
      },
    },
    bootstrap: {
      entry: [
        { type: "enterState", params: { state: "bootstrap" } },
        { type: "logLifecycle", params: { event: "bootstrap started" } },
      ],
      invoke: {
        id: "bootstrap",
        src: "bootstrapEngine",
        input: ({ context }) => ({ sessionFile: context.input.sessionFile }),
        onDone: {
          target: "assemble",
          actions: [
            { type: "storeBootstrap", params: ({ event }) => ({ output: event.output }) },
            { type: "logLifecycle", params: { event: "bootstrap completed" } },
          ],
        },
        onError: {
          target: "assemble",
          actions: ["warnBootstrapFailed", { type: "logLifecycle", params: { event: "bootstrap failed" } }],
        },
      },
    },
    assemble: {
      entry: [{ type: "enterState", params: { state: "assemble" } }],
      invoke: {
        id: "assemble",
        src: "assembleContext",
        input: ({ context }) => ({ history: context.history, prompt: context.input.prompt }),
        onDone: [
          {
            guard: { type: "assembledEmpty", params: ({ event }) => ({ output: event.output }) },
            target: "project",
            actions: [
              { type: "warnAssembleEmpty", params: ({ event }) => ({ output: event.output }) },
              { type: "logLifecycle", params: { event: "assemble empty" } },
            ],
          },
          {
            target: "project",
            actions: [
              { type: "storeAssembled", params: ({ event }) => ({ output: event.output }) },
              {
                type: "logLifecycle",
                params: ({ event }) => ({
                  event: "assemble applied",
                  assembledMessageCount: event.output.messages.length,
                  estimatedTokens: event.output.estimatedTokens,
                  hasSystemPromptAddition: Boolean(event.output.systemPromptAddition?.trim()),
                }),
              },
            ],
          },
        ],
        onError: {
          target: "project",
          actions: ["warnAssembleFailed", { type: "logLifecycle", params: { event: "assemble failed" } }],
        },
      },
    },
    project: {
      entry: [{ type: "enterState", params: { state: "project" } }],
      invoke: {
        id: "project",
        src: "projectContext",
        input: ({ context }) => ({ prompt: context.input.prompt, history: context.history, assembled: context.assembled }),
        onDone: [
          {
            guard: "hasPromptHooks",
            target: "hooks",
            actions: { type: "storeProjection", params: ({ event }) => ({ output: event.output }) },
          },
          {
            target: "threadStart",
            actions: { type: "storeProjection", params: ({ event }) => ({ output: event.output }) },
          },
        ],
        onError: [
          {
            guard: "hasPromptHooks",
            target: "hooks",
            actions: ["warnProjectionFailed", { type: "logLifecycle", params: { event: "projection failed" } }],
          },
          {
            target: "threadStart",
            actions: ["warnProjectionFailed", { type: "logLifecycle", params: { event: "projection failed" } }],
          },
        ],
      },
    },
    hooks: {
      entry: [{ type: "enterState", params: { state: "hooks" } }],
      invoke: {
        id: "hooks",
        src: "runPromptHooks",
        input: ({ context }) => ({
          promptText: context.promptText,
          developerInstructions: context.developerInstructions,
          history: context.history,
        }),
        onDone: {
          target: "threadStart",
          actions: { type: "storeHooks", params: ({ event }) => ({ output: event.output }) },
        },
        onError: {
          target: "threadStart",
          actions: ["warnHooksFailed", { type: "logLifecycle", params: { event: "beforePromptBuild failed" } }],
        },
      },
    },
    threadStart: {
      entry: [{ type: "enterState", params: { state: "threadStart" } }],
      invoke: {
        id: "threadStart",
        src: "startThread",
        input: ({ context }) => ({
          plan: context.projection?.thread ?? { action: "start", reason: "noProjection" },
          developerInstructions: context.developerInstructions,
        }),
        onDone: {
          target: "turnRunning",
          actions: { type: "storeThread", params: ({ event }) => ({ output: event.output }) },
        },
        onError: {
          target: "failed",
          actions: {
            type: "recordFailureBeforeTurn",
            params: ({ event }) => ({ error: toTurnError("threadStart", event.error) }),
          },
        },
      },
    },
    turnRunning: {
      entry: [{ type: "enterState", params: { state: "turnRunning" } }],
      initial: "starting",
      invoke: {
        id: "turn",
        src: "runTurn",
        input: ({ context }) => ({
          threadId: context.threadId ?? "",
          promptText: context.promptText,
          originalPrompt: context.input.prompt,
          additionalContext: context.projection?.additionalContext,
        }),
      },
      on: {
        ABORT: {
          target: ".interrupting",
          actions: [{ type: "markAbortFlag", params: { yield: false } }, "forwardInterrupt"],
        },
        YIELD: {
          target: ".interrupting",
          actions: [{ type: "markAbortFlag", params: { yield: true } }, "forwardInterrupt"],
        },
        STEER: { actions: { type: "forwardSteer", params: ({ event }) => ({ text: event.text }) } },
        "TURN.ACCEPTED": {
          actions: [
            { type: "storeAccepted", params: ({ event }) => ({ turnId: event.turnId }) },
            { type: "logLifecycle", params: { event: "turn accepted" } },
          ],
        },
        "TURN.STEER_REJECTED": {
          actions: { type: "queueFollowUps", params: ({ event }) => ({ texts: event.texts }) },
        },
        "TURN.COMPACTION": {
          actions: [
            { type: "storeCompaction", params: ({ event }) => ({ compaction: event.compaction }) },
            { type: "logLifecycle", params: { event: "codex native compaction" } },
          ],
        },
        "TURN.START_FAILED": [
          { guard: "isAborting", target: "#turn.settling", actions: "markTurnNotStarted" },
          {
            target: "failed",
            actions: {
              type: "recordFailureBeforeTurn",
              params: ({ event }) => ({ error: event.error }),
            },
          },
        ],
        "TURN.ENDED": {
          target: "mirror",
          actions: { type: "storeRecord", params: ({ event }) => ({ record: event.record }) },
        },
      },
      states: {
        starting: {
          on: {
            "TURN.ACCEPTED": {
              target: "streaming",
              actions: [
                { type: "storeAccepted", params: ({ event }) => ({ turnId: event.turnId }) },
                { type: "logLifecycle", params: { event: "turn accepted" } },
              ],
            },
          },
        },
        streaming: {},
        interrupting: {
          // Abort/yield already recorded; more of them change nothing.
          on: { ABORT: {}, YIELD: {} },
          after: {
            interruptGrace: [
              { guard: "turnAccepted", target: "#turn.mirror", actions: "storeTimedOutRecord" },
              { target: "#turn.settling", actions: "markTurnNotStarted" },
            ],
          },
        },
      },
    },
    mirror: {
      entry: [{ type: "enterState", params: { state: "mirror" } }],
      // Persistence is never cut in half: an abort or a yield here only marks the outcome.
      on: {
        ABORT: { actions: { type: "markAbortFlag", params: { yield: false } } },
        YIELD: { actions: { type: "markAbortFlag", params: { yield: true } } },
      },
      invoke: {
        id: "mirror",
        src: "mirrorTranscript",
        input: ({ context }) => ({ record: context.record! }),
        onDone: {
          target: "finalize",
          actions: ["storeMirrored", { type: "logLifecycle", params: { event: "mirror completed" } }],
        },
        onError: {
          target: "finalize",
          actions: ["warnMirrorFailed", { type: "logLifecycle", params: { event: "mirror failed" } }],
        },
      },
    },
    finalize: {
      entry: [{ type: "enterState", params: { state: "finalize" } }],
      on: {
        ABORT: { actions: { type: "markAbortFlag", params: { yield: false } } },
        YIELD: { actions: { type: "markAbortFlag", params: { yield: true } } },
      },
      invoke: {
        id: "finalize",
        src: "finalizeEngine",
        input: ({ context }) => ({
          record: context.record!,
          mirrorOk: context.mirrorOk,
          history: context.history,
          prePromptMessageCount: context.prePromptMessageCount,
        }),
        onDone: {
          target: "decideMaintenance",
          actions: [
            { type: "storeFinalized", params: ({ event }) => ({ output: event.output }) },
            { type: "logLifecycle", params: ({ event }) => ({ event: "finalize completed", mode: event.output.mode }) },
          ],
        },
        onError: {
          target: "decideMaintenance",
          actions: ["warnFinalizeFailed", { type: "logLifecycle", params: { event: "finalize failed" } }],
        },
      },
    },
    // Transient routing after finalize (not a lifecycle state; not recorded in the trace).
    decideMaintenance: {
      always: [
        { guard: "canMaintainForeground", target: "maintain" },
        {
          guard: "canMaintainBackground",
          target: "settling",
          actions: [
            "markMaintenanceBackground",
            "scheduleBackgroundMaintenance",
            { type: "logLifecycle", params: { event: "maintenance scheduled in background" } },
          ],
        },
        {
          target: "settling",
          actions: ["markMaintenanceSkipped", { type: "logLifecycle", params: { event: "maintenance skipped" } }],
        },
      ],
    },
    maintain: {
      entry: [{ type: "enterState", params: { state: "maintain" } }],
      on: {
        ABORT: {
          target: "settling",
          actions: [{ type: "markAbortFlag", params: { yield: false } }, "markMaintenanceAborted"],
        },
        YIELD: {
          target: "settling",
          actions: [{ type: "markAbortFlag", params: { yield: true } }, "markMaintenanceAborted"],
        },
      },
      invoke: {
        id: "maintain",
        src: "maintainEngine",
        input: ({ context }) => ({ record: context.record }),
        onDone: {
          target: "settling",
          actions: ["storeMaintained", { type: "logLifecycle", params: { event: "maintenance completed" } }],
        },
        onError: {
          target: "settling",
          actions: ["warnMaintenanceFailed", { type: "logLifecycle", params: { event: "maintenance failed" } }],
        },
      },
    },
    // Transient routing to the final state (not a lifecycle state; not recorded in the trace).
    settling: {
      always: [
        { guard: "settlesYieldAborted", target: "yieldAborted" },
        { guard: "settlesAborted", target: "aborted" },
        { guard: "settlesFailed", target: "failed" },
        { target: "completed" },
      ],
    },
    completed: {
      type: "final",
      entry: { type: "enterState", params: { state: "completed" } },
    },
    failed: {
      type: "final",
      entry: { type: "enterState", params: { state: "failed" } },
    },
    aborted: {
      type: "final",
      entry: { type: "enterState", params: { state: "aborted" } },
    },
    yieldAborted: {
      type: "final",
      entry: { type: "enterState", params: { state: "yieldAborted" } },
    },
  },
  output: ({ context }) => buildOutput(context),
});

export type TurnMachine = typeof turnMachine;
export type { DoneActorEvent, Phase };
