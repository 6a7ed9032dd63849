/**
 * Binds the turn actors (src/turn/actors) to the pure statechart with `turnMachine.provide()`. Each actor is a
 * function of its input and the attempt's dependencies; nothing else is shared.
 *
 * The machine is provided ONCE per process (`provide()` rebuilds the whole state-node tree: about 1 ms of CPU per
 * turn when it ran per attempt). An attempt's dependencies travel with its actor system instead: `createTurnActor`
 * registers them for the system it creates, and every implementation below looks them up from the `system` XState
 * hands it. A system belongs to exactly one attempt, so the lookup can never cross attempts, and the entry goes with
 * the system (a WeakMap).
 */
import { createActor, fromCallback, fromPromise, type ActorOptions, type ActorSystem } from "xstate";
import type { TurnMachineInput } from "../../machines/turn.contract.js";
import { turnMachine } from "../../machines/turn.machine.js";
import type { RunTurnEmitted, RunTurnInput, RunTurnReceived } from "../../machines/turn.contract.js";
import type { TurnDeps } from "./deps.js";
import { acquireSessionLock, recoverSession, recoverTurnLeftInFlight } from "./actors/session.js";
import { readHistory, rereadHistory } from "./actors/history.js";
import { assembleContext, bootstrapEngine, clearPendingRecord, commitEngineTurn, compactEngine, finalizeEngine, maintainEngine } from "./actors/engine.js";
import { projectContext } from "./actors/project.js";
import { runPromptHooks } from "./actors/prompt-hooks.js";
import { admitTurn, recordBlockedTurn } from "./actors/admission.js";
import { resumeThread, startThread } from "./actors/thread.js";
import { injectItems, revertThread } from "./actors/native-sync.js";
import { runTurn } from "./actors/run-turn.js";
import { mirrorTranscript, prepareTranscriptMessages, recordPendingFinalize } from "./actors/persist.js";
import { scheduleBackgroundMaintenance } from "./background.js";

/** Any system: the map is keyed by identity only. */
type AnyActorSystem = ActorSystem<any>;

const depsBySystem = new WeakMap<AnyActorSystem, TurnDeps>();

/** The dependencies of the attempt that owns `system` (registered by {@link createTurnActor}). */
function depsOf(system: AnyActorSystem): TurnDeps {
  const deps = depsBySystem.get(system);
  if (!deps) throw new Error("turn actor system has no dependencies: create it with createTurnActor()");
  return deps;
}

/** The turn machine with the turn actors bound; each implementation finds its attempt's dependencies by system. */
export const boundTurnMachine = turnMachine.provide({
  delays: { interruptGrace: ({ system }) => depsOf(system).params.timeouts?.interruptGraceMs ?? 10_000 },
  actions: {
    logLifecycle: ({ context, system }, params) => {
      const deps = depsOf(system);
      const { event, ...counts } = params as { event: string; [k: string]: unknown };
      deps.logger.info({ ...deps.ids, threadId: context.thread.id, turnId: context.turn.id, event, ...counts }, `codex context engine ${event}`);
    },
    scheduleBackgroundMaintenance: ({ context, system }) => scheduleBackgroundMaintenance(depsOf(system), context.turn.record),
    persistAcceptedBinding: ({ system }, params) => depsOf(system).binding.accept(params),
    persistUsage: ({ system }, params) => depsOf(system).binding.usage(params.threadId, params.usage),
    persistContextOverflow: ({ system }, params) => depsOf(system).binding.contextOverflow(params.threadId, params.turnId),
    clearTurnInFlight: ({ system }, params) => depsOf(system).binding.turnRecorded(params.turnId),
    persistNativeCompaction: ({ system }, params) => depsOf(system).binding.nativeCompaction(params.compaction, params.preTurn),
  },
  actors: {
    acquireSessionLock: fromPromise(({ system, signal }) => acquireSessionLock(depsOf(system), signal)),
    recoverSession: fromPromise(({ system }) => recoverSession(depsOf(system))),
    recoverCutTurn: fromPromise(({ system }) => recoverTurnLeftInFlight(depsOf(system))),
    readHistory: fromPromise(({ system }) => readHistory(depsOf(system))),
    rereadHistory: fromPromise(({ system }) => rereadHistory(depsOf(system))),
    rereadHistoryForFinalize: fromPromise(({ system }) => rereadHistory(depsOf(system))),
    bootstrapEngine: fromPromise(({ system, signal }) => bootstrapEngine(depsOf(system), signal)),
    compactEngine: fromPromise(({ input, system, signal }) => compactEngine(depsOf(system), input, signal)),
    assembleContext: fromPromise(({ input, system, signal }) => assembleContext(depsOf(system), input, signal)),
    projectContext: fromPromise(({ input, system }) => projectContext(depsOf(system), input)),
    runPromptHooks: fromPromise(({ input, system, signal }) => runPromptHooks(depsOf(system), input, signal)),
    admitTurn: fromPromise(({ input, system, signal }) => admitTurn(depsOf(system), input, signal)),
    recordBlockedTurn: fromPromise(({ input, system }) => recordBlockedTurn(depsOf(system), input)),
    resumeThread: fromPromise(({ input, system }) => resumeThread(depsOf(system), input)),
    startThread: fromPromise(({ input, system }) => startThread(depsOf(system), input)),
    revertThread: fromPromise(({ input, system }) => revertThread(depsOf(system), input)),
    injectItems: fromPromise(({ input, system }) => injectItems(depsOf(system), input)),
    runTurn: fromCallback<RunTurnReceived, RunTurnInput, RunTurnEmitted>(({ input, system, sendBack, receive }) =>
      runTurn(depsOf(system), input, sendBack, receive),
    ),
    prepareTranscriptMessages: fromPromise(({ input, system }) => prepareTranscriptMessages(depsOf(system), input)),
    recordPendingFinalize: fromPromise(({ input, system }) => recordPendingFinalize(depsOf(system), input)),
    mirrorTranscript: fromPromise(({ input, system }) => mirrorTranscript(depsOf(system), input)),
    finalizeEngine: fromPromise(({ input, system }) => finalizeEngine(depsOf(system), input)),
    commitEngineTurn: fromPromise(({ input, system }) => commitEngineTurn(depsOf(system), input)),
    clearPendingRecord: fromPromise(({ input, system }) => clearPendingRecord(depsOf(system), input)),
    maintainEngine: fromPromise(({ input, system, signal }) => maintainEngine(depsOf(system), input, signal)),
  },
});

/**
 * Create (not start) the actor of one attempt: the shared bound machine, with `deps` registered for its system.
 *
 * @example
 * ```ts
 * const actor = createTurnActor(deps, { input: machineInput(deps) });
 * actor.start();
 * ```
 */
export function createTurnActor(deps: TurnDeps, options: Omit<ActorOptions<typeof boundTurnMachine>, "input"> & { input: TurnMachineInput }) {
  const actor = createActor(boundTurnMachine, options);
  depsBySystem.set(actor.system, deps);
  return actor;
}
