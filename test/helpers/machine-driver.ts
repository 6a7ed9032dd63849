/**
 * Drives the pure turn machine with `provide()` fakes: every promise actor waits until the test resolves or rejects
 * it by name, the runTurn callback hands the test its `sendBack`, and a SimulatedClock drives the interrupt grace.
 */
import { SimulatedClock, createActor, fromCallback, fromPromise, type AnyActorRef } from "xstate";
import { turnMachine, type TurnContext } from "../../machines/turn.machine.js";
import type {
  EngineFacts,
  RunTurnEmitted,
  RunTurnReceived,
  TurnMachineInput,
  TurnMachineOutput,
  TurnRecord,
} from "../../machines/turn.contract.js";

export type PromiseActor =
  | "acquireSessionLock"
  | "recoverSession"
  | "recoverCutTurn"
  | "readHistory"
  | "bootstrapEngine"
  | "compactEngine"
  | "rereadHistory"
  | "rereadHistoryForFinalize"
  | "assembleContext"
  | "projectContext"
  | "runPromptHooks"
  | "admitTurn"
  | "recordBlockedTurn"
  | "resumeThread"
  | "startThread"
  | "revertThread"
  | "injectItems"
  | "prepareTranscriptMessages"
  | "recordPendingFinalize"
  | "mirrorTranscript"
  | "finalizeEngine"
  | "commitEngineTurn"
  | "clearPendingRecord"
  | "maintainEngine";

/** The top-level state each promise actor belongs to. */
export const ACTOR_STATE: Record<PromiseActor, string[]> = {
  acquireSessionLock: ["session"],
  recoverSession: ["session"],
  recoverCutTurn: ["session"],
  readHistory: ["loadHistory"],
  bootstrapEngine: ["bootstrap"],
  compactEngine: ["compactBeforeTurn"],
  rereadHistory: ["reloadHistory"],
  rereadHistoryForFinalize: ["finalize"],
  assembleContext: ["assemble"],
  // Also in hooks: the projection is redone there when the hook changed the developer instructions.
  projectContext: ["project", "hooks"],
  runPromptHooks: ["hooks"],
  admitTurn: ["hooks"],
  recordBlockedTurn: ["recordingBlock"],
  resumeThread: ["threadStart"],
  startThread: ["threadStart"],
  revertThread: ["threadStart"],
  injectItems: ["threadStart"],
  prepareTranscriptMessages: ["mirror"],
  recordPendingFinalize: ["mirror"],
  mirrorTranscript: ["mirror"],
  finalizeEngine: ["finalize"],
  commitEngineTurn: ["finalize"],
  clearPendingRecord: ["finalize"],
  maintainEngine: ["maintain"],
};

/** Actors a driver settles by itself unless a test asks to control them (the session steps and bookkeeping). */
export const AUTO_ACTORS: ReadonlySet<PromiseActor> = new Set(["acquireSessionLock", "recoverSession", "recoverCutTurn", "prepareTranscriptMessages", "recordPendingFinalize", "rereadHistoryForFinalize", "clearPendingRecord"]);

/** The output an auto actor settles with: `okOutput`, except that preparing the messages keeps the turn's own. */
export function autoOutput(actor: PromiseActor, input: unknown): unknown {
  if (actor === "prepareTranscriptMessages") return { messages: (input as { record: TurnRecord }).record.messagesSnapshot, rewritten: 0, dropped: 0 };
  return okOutput(actor);
}

export const CANONICAL = [
  "loadHistory",
  "bootstrap",
  "assemble",
  "project",
  "hooks",
  "threadStart",
  "turnRunning",
  "mirror",
  "finalize",
  "maintain",
] as const;
export const FINALS = ["completed", "failed", "aborted", "yieldAborted", "blocked"] as const;

/** Facts of an engine with every optional lifecycle method and foreground maintenance; override what a test varies. */
export function fullEngineFacts(overrides: Partial<EngineFacts> = {}): EngineFacts {
  return {
    active: true,
    id: "fake",
    hasBootstrap: true,
    hasMaintain: true,
    hasAfterTurn: true,
    hasIngestBatch: false,
    ownsCompaction: false,
    turnMaintenanceMode: "foreground",
    ...overrides,
  };
}

export const FULL_ENGINE: EngineFacts = fullEngineFacts();

export function machineInput(engine: EngineFacts = FULL_ENGINE, overrides: Partial<TurnMachineInput> = {}): TurnMachineInput {
  return { sessionId: "s", sessionFile: "/nonexistent/s.jsonl", prompt: "p", engine, hadSessionFile: true, hasPromptHooks: true, ...overrides };
}

/** A `readHistory` output: the session as loaded (no binding unless given). */
export function sessionLoad(messages: unknown[] = [], extra: Record<string, unknown> = {}): unknown {
  return { history: { messages, origins: messages.map(() => null) }, ...extra };
}

export function fakeRecord(codexStatus: TurnRecord["codexStatus"], turnId = "turn-1"): TurnRecord {
  return {
    threadId: "thread-1",
    turnId,
    codexStatus,
    assistantText: codexStatus === "completed" ? "done" : "",
    messagesSnapshot: [{ role: "user", content: "p", timestamp: 1 }],
    compactions: [],
    ...(codexStatus === "failed" ? { error: { message: "boom", codexErrorInfo: "internalServerError" } } : {}),
  };
}

/** A plausible successful output for each promise actor. */
export function okOutput(actor: PromiseActor): unknown {
  switch (actor) {
    case "acquireSessionLock":
      return { waitedMs: 0, pendingRecord: false, turnInFlight: false };
    case "recoverSession":
      return { pending: 0, mirroredMessages: 0, finalized: 0, dropped: 0 };
    case "recoverCutTurn":
      return { turnId: "turn-0", outcome: "recovered", messages: 2 };
    case "readHistory":
      return sessionLoad();
    case "rereadHistory":
    case "rereadHistoryForFinalize":
      return { messages: [], origins: [] };
    case "compactEngine":
      return { compacted: true, failed: false };
    case "resumeThread":
      return { threadId: "thread-1", resumed: true };
    case "recordPendingFinalize":
      return undefined;
    case "prepareTranscriptMessages":
      return { messages: [{ role: "user", content: "p", timestamp: 1 }], rewritten: 0, dropped: 0 };
    case "bootstrapEngine":
      return { messages: [], origins: [], bootstrapped: true };
    case "assembleContext":
      return { messages: [{ role: "user", content: "ctx", timestamp: 1 }], estimatedTokens: 3 };
    case "projectContext":
      return { mode: "delta", reason: "test", promptText: "p", thread: { action: "start", reason: "test" }, entriesSent: 0, bytes: 1 };
    case "runPromptHooks":
      return { promptText: "p" };
    case "admitTurn":
      return { admitted: true };
    case "recordBlockedTurn":
      return { entryId: "e1", userMessage: { role: "user", content: [{ type: "text", text: "Your message could not be sent: blocked by gate" }], timestamp: 1 } };
    case "startThread":
      return { threadId: "thread-1", resumed: false };
    case "revertThread":
      return { reverted: true, injectedItems: 0, injectedBytes: 0 };
    case "injectItems":
      return { reverted: false, injectedItems: 1, injectedBytes: 80 };
    case "mirrorTranscript":
      return { appended: 2 };
    case "finalizeEngine":
      return { mode: "afterTurn", usedFallback: false };
    case "commitEngineTurn":
      return { status: "committed", advancementKey: "codex-turn:v1:0", messages: 2, admissionEntryId: "e1", terminalEntryId: "e2", admissionSeq: 1, terminalSeq: 2 };
    case "clearPendingRecord":
      return undefined;
    case "maintainEngine":
      return { changed: false };
  }
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 6; i++) await new Promise((r) => setImmediate(r));
};

/** A live turn machine whose effects the test settles. */
export class MachineDriver {
  readonly pending = new Map<PromiseActor, { resolve(v: unknown): void; reject(e: unknown): void }>();
  readonly started: string[] = [];
  readonly forwarded: RunTurnReceived[] = [];
  readonly logEvents: string[] = [];
  readonly clock = new SimulatedClock();
  readonly actor: AnyActorRef;
  backgroundScheduled = 0;
  sendBack: ((e: RunTurnEmitted) => void) | undefined;
  turnRunning = false;

  constructor(input: TurnMachineInput = machineInput(), controlled: readonly PromiseActor[] = []) {
    const promiseActor = (name: PromiseActor) =>
      fromPromise(
        ({ input }) =>
          new Promise((resolve, reject) => {
            this.started.push(name);
            if (AUTO_ACTORS.has(name) && !controlled.includes(name)) resolve(autoOutput(name, input));
            else this.pending.set(name, { resolve, reject });
          }),
      );
    const machine = turnMachine.provide({
      delays: { interruptGrace: 1_000 },
      actions: {
        logLifecycle: (_: unknown, params: { event: string }) => {
          this.logEvents.push(params.event);
        },
        scheduleBackgroundMaintenance: () => {
          this.backgroundScheduled++;
        },
      },
      actors: {
        ...(Object.fromEntries(Object.keys(ACTOR_STATE).map((name) => [name, promiseActor(name as PromiseActor)])) as Record<PromiseActor, ReturnType<typeof promiseActor>>),
        runTurn: fromCallback<RunTurnReceived, unknown, RunTurnEmitted>(({ sendBack, receive }) => {
          this.started.push("runTurn");
          this.turnRunning = true;
          this.sendBack = sendBack;
          receive((e) => this.forwarded.push(e));
          return () => {
            this.turnRunning = false;
            this.sendBack = undefined;
          };
        }),
      },
    } as never) as typeof turnMachine;
    this.actor = createActor(machine, { input, clock: this.clock });
    this.actor.start();
  }

  get done(): boolean {
    return this.actor.getSnapshot().status === "done";
  }

  get output(): TurnMachineOutput | undefined {
    const snap = this.actor.getSnapshot();
    return snap.status === "done" ? (snap.output as TurnMachineOutput) : undefined;
  }

  /** Top-level state name ("turnRunning" for its substates). */
  get state(): string {
    const v = this.actor.getSnapshot().value as string | Record<string, unknown>;
    return typeof v === "string" ? v : Object.keys(v)[0]!;
  }

  get substate(): string | undefined {
    const v = this.actor.getSnapshot().value as string | Record<string, string>;
    return typeof v === "string" ? undefined : Object.values(v)[0];
  }

  /** The promise actor of the current state awaiting settlement, if any (actors of states left are ignored). */
  get pendingActor(): PromiseActor | undefined {
    return [...this.pending.keys()].find((a) => ACTOR_STATE[a].includes(this.state));
  }

  async resolve(actor: PromiseActor, value: unknown = okOutput(actor)): Promise<void> {
    const d = this.pending.get(actor);
    if (!d) throw new Error(`${actor} is not pending (state ${this.state})`);
    this.pending.delete(actor);
    d.resolve(value);
    await flush();
  }

  async reject(actor: PromiseActor, error: unknown = Object.assign(new Error(`${actor} failed`), { code: "INJECTED" })): Promise<void> {
    const d = this.pending.get(actor);
    if (!d) throw new Error(`${actor} is not pending (state ${this.state})`);
    this.pending.delete(actor);
    d.reject(error);
    await flush();
  }

  async emit(event: RunTurnEmitted): Promise<void> {
    if (!this.sendBack) throw new Error(`runTurn is not running (state ${this.state})`);
    this.sendBack(event);
    await flush();
  }

  async send(event: { type: "ABORT" } | { type: "YIELD" } | { type: "STEER"; text: string }): Promise<void> {
    this.actor.send(event);
    await flush();
  }

  async tick(ms: number): Promise<void> {
    this.clock.increment(ms);
    await flush();
  }

  /** Settle whatever is pending: promise actors succeed, a running turn is accepted and ends (interrupted if asked). */
  async runToEnd(maxSteps = 50): Promise<TurnMachineOutput> {
    await flush();
    for (let i = 0; i < maxSteps && !this.done; i++) {
      const p = this.pendingActor;
      if (p) {
        // Settle only the actor that belongs to the current state (a stopped actor's promise no longer matters).
        await this.resolve(p);
        continue;
      }
      if (this.state === "turnRunning" && this.sendBack) {
        const snap = this.actor.getSnapshot().context as TurnContext;
        if (this.substate === "starting") await this.emit({ type: "TURN.ACCEPTED", turnId: "turn-1" });
        else if (this.substate === "interrupting" && !snap.turn.accepted) await this.tick(1_001);
        else await this.emit({ type: "TURN.ENDED", record: fakeRecord(this.forwarded.some((f) => f.type === "TURN.INTERRUPT") ? "interrupted" : "completed") });
        continue;
      }
      await flush();
    }
    if (!this.done) throw new Error(`machine did not finish (state ${this.state})`);
    return this.output!;
  }

  /** Succeed actors until the machine is in `state` (and, for turnRunning, streaming). */
  async advanceTo(state: string): Promise<void> {
    await flush();
    for (let i = 0; i < 30; i++) {
      if (this.state === state && (state !== "turnRunning" || this.substate === "streaming")) return;
      const p = this.pendingActor;
      if (p) await this.resolve(p);
      else if (this.state === "turnRunning" && this.substate === "starting") await this.emit({ type: "TURN.ACCEPTED", turnId: "turn-1" });
      else if (this.state === "turnRunning") await this.emit({ type: "TURN.ENDED", record: fakeRecord("completed") });
      else await flush();
    }
    throw new Error(`never reached ${state} (at ${this.state})`);
  }
}
