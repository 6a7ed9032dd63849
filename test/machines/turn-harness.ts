/**
 * A controllable harness for the real turn machine: every invoked actor is a promise (or callback) the test settles
 * by name, and a SimulatedClock drives the interrupt grace timer. Used by the model-based and path suites.
 */
import { SimulatedClock, createActor, fromCallback, fromPromise, type AnyActorRef, type InspectionEvent } from "xstate";
import { turnMachine, type TurnContext, type TurnMachine } from "../../machines/turn.machine.js";
import { ACTOR_STATE, AUTO_ACTORS, autoOutput, fullEngineFacts, type PromiseActor } from "../helpers/machine-driver.js";
import type {
  EngineFacts,
  RunTurnEmitted,
  RunTurnReceived,
  TurnMachineInput,
  TurnMachineOutput,
  TurnRecord,
} from "../../machines/turn.contract.js";

export type PromiseActorName = PromiseActor;

interface Deferred {
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

export const ENGINE_FULL: EngineFacts = fullEngineFacts({ id: "test-engine" });
export const NO_ENGINE: EngineFacts = { ...ENGINE_FULL, active: false, id: "legacy", hasBootstrap: false, hasMaintain: false };

export function record(codexStatus: TurnRecord["codexStatus"]): TurnRecord {
  return {
    threadId: "thread-1",
    turnId: "turn-1",
    codexStatus,
    assistantText: codexStatus === "completed" ? "done" : "",
    messagesSnapshot: [{ role: "user", content: "prompt", timestamp: 1 }],
    compactions: [],
  };
}

export const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

/** A stable identity for a transition definition (provide() clones state nodes, so object identity differs). */
export function transitionKey(t: {
  source: { id: string };
  eventType: string;
  target?: Array<{ id: string }> | undefined;
  guard?: unknown;
}): string {
  const guard = t.guard as { type?: string } | string | undefined;
  const guardName = typeof guard === "string" ? guard : (guard?.type ?? (typeof guard === "function" ? "inline" : ""));
  return `${t.source.id}|${t.eventType}|${(t.target ?? []).map((n) => n.id).join(",")}|${guardName}`;
}

/** A live turn machine whose effects the test controls. */
export class TurnHarness {
  readonly calls: string[] = [];
  readonly pending = new Map<string, Deferred>();
  readonly forwarded: RunTurnReceived[] = [];
  readonly clock = new SimulatedClock();
  readonly takenTransitions = new Set<string>();
  readonly visitedStateIds = new Set<string>();
  backgroundScheduled = 0;
  /** The turns the machine told the host to record as having overflowed the context window (`persistContextOverflow`). */
  readonly contextOverflows: Array<{ threadId: string; turnId: string }> = [];
  output: TurnMachineOutput | undefined;
  sendBack: ((event: RunTurnEmitted) => void) | undefined;
  readonly actor: AnyActorRef;

  constructor(
    input: TurnMachineInput,
    machine: TurnMachine = turnMachine,
    guards?: Record<string, () => boolean>,
    controlled: readonly PromiseActorName[] = [],
  ) {
    const promiseActor = (name: PromiseActorName) =>
      fromPromise(
        ({ input }) =>
          new Promise((resolve, reject) => {
            this.calls.push(name);
            if (AUTO_ACTORS.has(name) && !controlled.includes(name)) resolve(autoOutput(name, input));
            else this.pending.set(name, { resolve, reject });
          }),
      );
    const provided = machine.provide({
      actors: {
        ...Object.fromEntries(Object.keys(ACTOR_STATE).map((name) => [name, promiseActor(name as PromiseActorName)])),
        runTurn: fromCallback<RunTurnReceived, unknown, RunTurnEmitted>(({ sendBack, receive }) => {
          this.calls.push("runTurn");
          this.sendBack = sendBack;
          receive((event) => this.forwarded.push(event));
          return () => {
            this.sendBack = undefined;
          };
        }),
      } as never,
      actions: {
        scheduleBackgroundMaintenance: () => {
          this.backgroundScheduled++;
        },
        persistContextOverflow: (_: unknown, params: { threadId: string; turnId: string }) => {
          this.contextOverflows.push(params);
        },
      },
      ...(guards ? { guards: guards as never } : {}),
    } as never) as TurnMachine;
    this.actor = createActor(provided, {
      input,
      clock: this.clock,
      inspect: (event: InspectionEvent) => {
        if (event.type === "@xstate.microstep" && event.actorRef === this.actor) {
          for (const t of event._transitions) this.takenTransitions.add(transitionKey(t as never));
          // Microsteps also show transient routing states (decideMaintenance, settling) that no settled snapshot has.
          for (const node of (event.snapshot as unknown as { _nodes: Array<{ id: string }> })._nodes) this.visitedStateIds.add(node.id);
        }
      },
    });
    this.actor.subscribe({
      next: (snapshot) => {
        for (const node of (snapshot as unknown as { _nodes: Array<{ id: string }> })._nodes) this.visitedStateIds.add(node.id);
        if (snapshot.status === "done") this.output = snapshot.output as TurnMachineOutput;
      },
      error: () => undefined,
    });
    this.actor.start();
  }

  resolve(name: PromiseActorName, value: unknown): void {
    const d = this.pending.get(name);
    if (!d) throw new Error(`actor ${name} is not pending (calls: ${this.calls.join(",")})`);
    this.pending.delete(name);
    d.resolve(value);
  }

  reject(name: PromiseActorName, message = `${name} failed`, code?: string): void {
    const d = this.pending.get(name);
    if (!d) throw new Error(`actor ${name} is not pending (calls: ${this.calls.join(",")})`);
    this.pending.delete(name);
    d.reject(code ? Object.assign(new Error(message), { code }) : new Error(message));
  }

  /** Reject with this exact error (a path's error event carries it). */
  rejectWith(name: PromiseActorName, error: unknown): void {
    const d = this.pending.get(name);
    if (!d) throw new Error(`actor ${name} is not pending (calls: ${this.calls.join(",")})`);
    this.pending.delete(name);
    d.reject(error);
  }

  /** The input the machine handed finalize (the snapshot it chose). */
  finalizeInput(): { source: string; messages: unknown[] } {
    const ctx = (this.actor.getSnapshot() as { context: TurnContext }).context;
    const source = ctx.persistence.finalizeSource ?? "fallback";
    const messages = source === "reread" && ctx.persistence.finalizeHistory ? ctx.persistence.finalizeHistory.messages : [...ctx.history.messages, ...(ctx.turn.record?.messagesSnapshot ?? [])];
    return { source, messages };
  }

  emit(event: RunTurnEmitted): void {
    if (!this.sendBack) throw new Error(`runTurn is not running (calls: ${this.calls.join(",")})`);
    this.sendBack(event);
  }

  send(event: { type: "ABORT" } | { type: "YIELD" } | { type: "STEER"; text: string }): void {
    this.actor.send(event);
  }

  /** The lifecycle state name as the model names it. */
  lifecycleState(): string {
    const value = this.actor.getSnapshot().value as string | Record<string, string>;
    if (typeof value === "string") return value;
    const sub = value["turnRunning"];
    if (sub === "starting") return "turnStarting";
    if (sub === "streaming") return "turnStreaming";
    if (sub === "interrupting") return "interrupting";
    if (value["session"] === "acquiringLock") return "lock";
    if (value["session"] === "recovering") return "recover";
    if (value["session"] === "recoveringCutTurn") return "recoverCutTurn";
    if (value["threadStart"] === "resuming") return "threadResume";
    if (value["threadStart"] === "reverting") return "nativeReverting";
    if (value["threadStart"] === "injecting") return "nativeInjecting";
    if (value["hooks"] === "reprojecting") return "reproject";
    if (value["hooks"] === "running") return "hooks";
    if (value["hooks"] === "admitting") return "admitting";
    if (value["finalize"] === "committing") return "committing";
    // Steps inside these states are bookkeeping the model does not name (pending record, snapshot choice).
    for (const state of ["threadStart", "mirror", "finalize"]) if (value[state] !== undefined) return state;
    return JSON.stringify(value);
  }
}
