/**
 * A controllable run of the real compaction machine: every actor is a promise the test resolves or rejects, timers
 * run on a SimulatedClock, and the inspector records every transition taken (for edge coverage).
 */
import os from "node:os";
import path from "node:path";
import { createActor, fromPromise, SimulatedClock, type AnyActorRef, type SnapshotFrom } from "xstate";
import { compactionMachine } from "../../machines/compaction.machine.js";
import type { CompactionMachineInput } from "../../machines/compaction.rules.js";

/** Invoke ids of the compaction machine, keyed by actor source name. */
/** A session path for machines and fakes that never touch the file (inside the temp dir, never created). */
export const FAKE_SESSION_FILE = path.join(os.tmpdir(), "ctm-fake-session-s1.jsonl");

export const INVOKE_IDS = {
  readBinding: "loadBinding",
  compactEngine: "engineCompact",
  maintainEngine: "maintain",
  compactNative: "nativeCompact",
  markBindingCompacted: "markBinding",
} as const;
export type InvokeId = (typeof INVOKE_IDS)[keyof typeof INVOKE_IDS];

interface Pending {
  input: unknown;
  signal: AbortSignal;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

type Machine = typeof compactionMachine;
type GuardOverrides = Parameters<Machine["provide"]>[0]["guards"];

/** A transition key that is stable across `machine.provide()` copies. */
export function transitionKey(t: {
  source: { id: string; transitions: Map<string, unknown[]>; always?: unknown[] };
  eventType: string;
  target?: ReadonlyArray<{ id: string }> | undefined;
  guard?: unknown;
}): string {
  const list = t.eventType === "" ? (t.source.always ?? []) : (t.source.transitions.get(t.eventType) ?? []);
  const idx = list.indexOf(t);
  const targets = (t.target ?? []).map((n) => n.id).join(",");
  return `${t.source.id} --${t.eventType || "always"}[${idx}]--> ${targets || "(self)"}`;
}

/** Every transition of a machine, keyed like {@link transitionKey}. */
export function allTransitionKeys(machine: Machine): Set<string> {
  const keys = new Set<string>();
  const visit = (node: any) => {
    for (const list of node.transitions.values()) for (const t of list) keys.add(transitionKey(t));
    for (const t of node.always ?? []) keys.add(transitionKey(t));
    for (const child of Object.values(node.states ?? {})) visit(child);
  };
  visit(machine.root);
  return keys;
}

export interface Sut {
  actor: AnyActorRef;
  clock: SimulatedClock;
  calls: Array<{ id: InvokeId; input: unknown; signal: AbortSignal }>;
  taken: Set<string>;
  visitedNodes: Set<string>;
  machine: Machine;
  snapshot(): SnapshotFrom<Machine>;
  pending(id: InvokeId): Pending | undefined;
  /** Invocations whose promise the test has not settled yet. */
  unsettled(): Pending[];
  resolve(id: InvokeId, output: unknown): Promise<void>;
  reject(id: InvokeId, error: unknown): Promise<void>;
  abort(): Promise<void>;
  fireNativeTimeout(): Promise<void>;
  settle(): Promise<void>;
  stop(): void;
}

/** Let promise callbacks and the actor's microsteps run. */
export async function flush(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise<void>((r) => setImmediate(r));
}

export async function createSut(input: CompactionMachineInput, guards?: GuardOverrides): Promise<Sut> {
  const pendingById = new Map<InvokeId, Pending>();
  const calls: Sut["calls"] = [];
  const taken = new Set<string>();
  const visitedNodes = new Set<string>();
  const controlled = (id: InvokeId) =>
    fromPromise<any, any>(
      ({ input: actorInput, signal }) =>
        new Promise((resolve, reject) => {
          calls.push({ id, input: actorInput, signal });
          pendingById.set(id, { input: actorInput, signal, resolve, reject });
        }),
    );
  const machine = compactionMachine.provide({
    actors: {
      readBinding: controlled("loadBinding"),
      compactEngine: controlled("engineCompact"),
      maintainEngine: controlled("maintain"),
      compactNative: controlled("nativeCompact"),
      markBindingCompacted: controlled("markBinding"),
    },
    ...(guards ? { guards } : {}),
  }) as Machine;
  const clock = new SimulatedClock();
  const actor = createActor(machine, {
    input,
    clock,
    inspect: (ev: any) => {
      if (ev.type !== "@xstate.microstep") return;
      for (const t of ev._transitions) {
        taken.add(transitionKey(t));
        for (const n of t.target ?? []) visitedNodes.add(n.id);
      }
    },
  });
  actor.subscribe({ error: () => {} });
  visitedNodes.add(machine.root.id);
  visitedNodes.add(`${machine.root.id}.${machine.root.initial?.target[0]?.key ?? "loadBinding"}`);
  actor.start();
  await flush();
  const take = (id: InvokeId): Pending => {
    const p = pendingById.get(id);
    if (!p) throw new Error(`no pending invocation of ${id} (state ${JSON.stringify(actor.getSnapshot().value)})`);
    pendingById.delete(id);
    return p;
  };
  return {
    actor,
    clock,
    calls,
    taken,
    visitedNodes,
    machine,
    snapshot: () => actor.getSnapshot(),
    pending: (id) => pendingById.get(id),
    unsettled: () => [...pendingById.values()],
    resolve: async (id, output) => {
      take(id).resolve(output);
      await flush();
    },
    reject: async (id, error) => {
      take(id).reject(error);
      await flush();
    },
    abort: async () => {
      actor.send({ type: "ABORT" });
      await flush();
    },
    fireNativeTimeout: async () => {
      clock.increment(input.nativeTimeoutMs);
      await flush();
    },
    settle: flush,
    stop: () => actor.stop(),
  };
}
