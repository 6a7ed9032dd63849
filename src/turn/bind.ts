/**
 * Binds the turn actors (src/turn/actors) to the pure statechart with `turnMachine.provide()`. Each actor is a
 * function of its input and the attempt's dependencies; nothing else is shared.
 */
import { fromCallback, fromPromise } from "xstate";
import { turnMachine } from "../../machines/turn.machine.js";
import type { RunTurnEmitted, RunTurnInput, RunTurnReceived } from "../../machines/turn.contract.js";
import type { TurnDeps } from "./deps.js";
import { acquireSessionLock, recoverSession } from "./actors/session.js";
import { readHistory, rereadHistory } from "./actors/history.js";
import { assembleContext, bootstrapEngine, compactEngine, finalizeEngine, maintainEngine } from "./actors/engine.js";
import { projectContext } from "./actors/project.js";
import { runPromptHooks } from "./actors/prompt-hooks.js";
import { resumeThread, startThread } from "./actors/thread.js";
import { runTurn } from "./actors/run-turn.js";
import { mirrorTranscript, recordPendingFinalize } from "./actors/persist.js";
import { scheduleBackgroundMaintenance } from "./background.js";

/** The turn machine with this attempt's effects bound. */
export function bindTurnMachine(deps: TurnDeps) {
  return turnMachine.provide({
    delays: { interruptGrace: deps.params.timeouts?.interruptGraceMs ?? 10_000 },
    actions: {
      logLifecycle: ({ context }, params) => {
        const { event, ...counts } = params as { event: string; [k: string]: unknown };
        deps.logger.info({ ...deps.ids, threadId: context.threadId, turnId: context.turnId, event, ...counts }, `codex context engine ${event}`);
      },
      scheduleBackgroundMaintenance: ({ context }) => scheduleBackgroundMaintenance(deps, context.record),
      persistAcceptedBinding: (_, params) => deps.binding.accept(params),
      persistUsage: (_, params) => deps.binding.usage(params.record),
      persistNativeCompaction: (_, params) => deps.binding.nativeCompaction(params.compaction, params.preTurn),
    },
    actors: {
      acquireSessionLock: fromPromise(({ signal }) => acquireSessionLock(deps, signal)),
      recoverSession: fromPromise(() => recoverSession(deps)),
      readHistory: fromPromise(() => readHistory(deps)),
      rereadHistory: fromPromise(() => rereadHistory(deps)),
      rereadHistoryForFinalize: fromPromise(() => rereadHistory(deps)),
      bootstrapEngine: fromPromise(({ signal }) => bootstrapEngine(deps, signal)),
      compactEngine: fromPromise(({ input, signal }) => compactEngine(deps, input, signal)),
      assembleContext: fromPromise(({ input, signal }) => assembleContext(deps, input, signal)),
      projectContext: fromPromise(({ input }) => projectContext(deps, input)),
      runPromptHooks: fromPromise(({ input, signal }) => runPromptHooks(deps, input, signal)),
      resumeThread: fromPromise(({ input }) => resumeThread(deps, input)),
      startThread: fromPromise(({ input }) => startThread(deps, input)),
      runTurn: fromCallback<RunTurnReceived, RunTurnInput, RunTurnEmitted>(({ input, sendBack, receive }) =>
        runTurn(deps, input, sendBack, receive),
      ),
      recordPendingFinalize: fromPromise(({ input }) => recordPendingFinalize(deps, input)),
      mirrorTranscript: fromPromise(({ input }) => mirrorTranscript(deps, input)),
      finalizeEngine: fromPromise(({ input }) => finalizeEngine(deps, input)),
      maintainEngine: fromPromise(({ input, signal }) => maintainEngine(deps, input, signal)),
    },
  });
}
