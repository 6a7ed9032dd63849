/**
 * Paths from the REAL machine: `getShortestPaths` traverses turnMachine itself (invoke outcomes arrive as
 * `xstate.done.actor.<id>` / `xstate.error.actor.<id>` events, the grace timer as its `xstate.after` event), and
 * every path is replayed on a live actor with controllable fakes, comparing the state after each step and checking
 * per-state invariants.
 */
import { describe, expect, it } from "vitest";
import { getShortestPaths, getSimplePaths } from "xstate/graph";
import type { AnyEventObject } from "xstate";
import { MAX_CONTEXT_KEYS, turnMachine, type TurnContext } from "../../machines/turn.machine.js";
import type { TurnMachineInput } from "../../machines/turn.contract.js";
import { ENGINE_FULL, NO_ENGINE, TurnHarness, record, settle, type PromiseActorName } from "./turn-harness.js";
import { AUTO_ACTORS } from "../helpers/machine-driver.js";

const history = { messages: [], origins: [] };
const USAGE_OVER_THRESHOLD = { totalTokens: 95, modelContextWindow: 100 };
const projectionWith = (thread: { action: "start" | "resume"; threadId?: string; reason: string }) => ({
  mode: "delta",
  reason: "t",
  promptText: "prompt",
  thread,
  entriesSent: 0,
  bytes: 6,
});
const RESUME_PLAN = { action: "resume" as const, threadId: "thread-0", reason: "compatibleBinding" };
const START_PLAN = { action: "start" as const, reason: "t" };

interface Invoke {
  id: string;
  src: PromiseActorName;
  outputs: (context: TurnContext) => unknown[];
  errors?: unknown[];
}
/** The invoke of each leaf state, with the outcomes the traversal tries (every `onDone` branch and `onError`). */
const invokes: Record<string, Invoke> = {
  "session.acquiringLock": {
    id: "acquireLock",
    src: "acquireSessionLock",
    outputs: () => [
      { waitedMs: 0, pendingRecord: true, turnInFlight: false },
      { waitedMs: 0, pendingRecord: false, turnInFlight: false },
      { waitedMs: 0, pendingRecord: false, turnInFlight: true },
      { waitedMs: 0, pendingRecord: true, turnInFlight: true },
    ],
  },
  "session.recovering": { id: "recover", src: "recoverSession", outputs: () => [{ pending: 0, mirroredMessages: 0, finalized: 0, dropped: 0 }] },
  "session.recoveringCutTurn": {
    id: "recoverCutTurn",
    src: "recoverCutTurn",
    outputs: () => [{ turnId: "turn-0", outcome: "recovered", messages: 2 }, { turnId: "turn-0", outcome: "notInThread" }],
  },
  loadHistory: {
    id: "loadHistory",
    src: "readHistory",
    outputs: (c) => [{ history, sessionFileExisted: c.input.hadSessionFile, ...(c.input.accordion ? { lastUsage: USAGE_OVER_THRESHOLD } : {}) }],
  },
  bootstrap: { id: "bootstrap", src: "bootstrapEngine", outputs: () => [{ ...history, bootstrapped: true }] },
  compactBeforeTurn: { id: "compactBeforeTurn", src: "compactEngine", outputs: () => [{ compacted: true, failed: false }, { compacted: false, failed: true, reason: "compactFailed" }] },
  reloadHistory: { id: "reloadHistory", src: "rereadHistory", outputs: () => [history] },
  assemble: {
    id: "assemble",
    src: "assembleContext",
    outputs: () => [{ messages: [{ role: "user", content: "c", timestamp: 1 }], estimatedTokens: 1 }, { messages: [], estimatedTokens: 0 }],
  },
  project: {
    id: "project",
    src: "projectContext",
    // A configuration with a bound thread plans a resume until the resume failed once.
    outputs: (c) => [projectionWith(c.input.sessionKey === "resume" && !c.thread.resumeFellBack ? RESUME_PLAN : START_PLAN)],
  },
  // The hook leaves the developer instructions alone, or changes them (the machine then projects again).
  "hooks.running": { id: "hooks", src: "runPromptHooks", outputs: () => [{ promptText: "prompt" }, { promptText: "hooked prompt", developerInstructions: "hooked" }] },
  "hooks.reprojecting": {
    id: "reproject",
    src: "projectContext",
    outputs: (c) => [{ ...projectionWith(c.input.sessionKey === "resume" && !c.thread.resumeFellBack ? RESUME_PLAN : START_PLAN), developerInstructions: c.request.developerInstructions }],
  },
  // The gate admits, or refuses (its failure, the error branch, refuses too).
  "hooks.admitting": {
    id: "admitTurn",
    src: "admitTurn",
    outputs: () => [{ admitted: true }, { admitted: false, blockedBy: "guard", message: "Your message could not be sent: blocked by guard" }],
  },
  recordingBlock: {
    id: "recordBlock",
    src: "recordBlockedTurn",
    outputs: () => [{ entryId: "e1", userMessage: { role: "user", content: [{ type: "text", text: "Your message could not be sent: blocked by guard" }], timestamp: 1 } }],
  },
  "threadStart.resuming": {
    id: "resumeThread",
    src: "resumeThread",
    outputs: () => [{ threadId: "thread-0", resumed: true }],
    errors: [Object.assign(new Error("no rollout found"), { code: "THREAD_RESUME_FAILED" }), new Error("app-server gone")],
  },
  "threadStart.starting": { id: "startThread", src: "startThread", outputs: () => [{ threadId: "thread-1", resumed: false }] },
  "mirror.preparing": {
    id: "prepareMessages",
    src: "prepareTranscriptMessages",
    outputs: (c) => [{ messages: c.turn.record?.messagesSnapshot ?? [], rewritten: 0, dropped: 0 }],
  },
  "mirror.recordingPending": { id: "recordPending", src: "recordPendingFinalize", outputs: () => [undefined] },
  "mirror.writing": { id: "mirror", src: "mirrorTranscript", outputs: () => [{ appended: 1, entryCount: 1 }, { appended: 2 }] },
  "finalize.rereading": {
    id: "rereadForFinalize",
    src: "rereadHistoryForFinalize",
    outputs: () => [{ messages: [], origins: [{ threadId: "thread-1", turnId: "turn-1" }] }, history],
  },
  "finalize.finalizing": { id: "finalize", src: "finalizeEngine", outputs: () => [{ mode: "afterTurn", usedFallback: false }] },
  maintain: { id: "maintain", src: "maintainEngine", outputs: () => [{ changed: false }] },
};
const GRACE_EVENT = "xstate.after.interruptGrace.turn.turnRunning.interrupting";

/** "loadHistory", or "threadStart.resuming" for a compound state (one level deep everywhere). */
function leafKey(value: unknown): string {
  if (typeof value === "string") return value;
  const [k, v] = Object.entries(value as Record<string, string>)[0]!;
  return `${k}.${v}`;
}
const topState = (value: unknown) => leafKey(value).split(".")[0]!;

function eventsFor(snapshot: { value: unknown; context: TurnContext; status: string }, firstOutcomeOnly = false): AnyEventObject[] {
  if (snapshot.status !== "active") return [];
  const key = leafKey(snapshot.value);
  const events: AnyEventObject[] = [];
  const inv = invokes[key];
  if (inv) {
    const outputs = inv.outputs(snapshot.context);
    for (const output of firstOutcomeOnly ? outputs.slice(0, 1) : outputs) events.push({ type: `xstate.done.actor.${inv.id}`, output, actorId: inv.id });
    const errors = inv.errors ?? [new Error(`${inv.id} failed`)];
    for (const error of firstOutcomeOnly ? errors.slice(0, 1) : errors) events.push({ type: `xstate.error.actor.${inv.id}`, error, actorId: inv.id });
    const top = topState(snapshot.value);
    // Simple paths leave abort/yield to the running turn (shortest paths try them in every state).
    if (firstOutcomeOnly) return events;
    if ((top !== "mirror" && top !== "finalize" && top !== "recordingBlock") || !snapshot.context.outcome.aborted) events.push({ type: "ABORT" }, { type: "YIELD" });
    return events;
  }
  const sub = (snapshot.value as Record<string, string>)["turnRunning"];
  if (sub === "starting") events.push({ type: "TURN.ACCEPTED", turnId: "turn-1" }, { type: "TURN.START_FAILED", error: { phase: "turnRunning", message: "rejected" } });
  if (sub === "streaming") events.push({ type: "TURN.ENDED", record: record("completed") }, { type: "TURN.ENDED", record: record("failed") });
  if (sub === "interrupting") {
    events.push({ type: GRACE_EVENT });
    if (!snapshot.context.turn.accepted) events.push({ type: "TURN.ACCEPTED", turnId: "turn-1" }, { type: "TURN.START_FAILED", error: { phase: "turnRunning", message: "rejected" } });
    else events.push({ type: "TURN.ENDED", record: record("interrupted") });
  } else events.push({ type: "ABORT" }, { type: "YIELD" });
  return events;
}

const srcOfInvoke = (id: string): PromiseActorName => Object.values(invokes).find((i) => i.id === id)!.src;

function apply(h: TurnHarness, event: AnyEventObject): void {
  const done = /^xstate\.done\.actor\.(.+)$/.exec(event.type);
  const error = /^xstate\.error\.actor\.(.+)$/.exec(event.type);
  if (done) return h.resolve(srcOfInvoke(done[1]!), event["output"]);
  if (error) return h.rejectWith(srcOfInvoke(error[1]!), event["error"]);
  if (event.type === GRACE_EVENT) return void h.clock.increment(10_000);
  if (event.type.startsWith("TURN.")) return h.emit(event as never);
  h.send(event as never);
}

const input = (engine = ENGINE_FULL, hooks = true, extra: Partial<TurnMachineInput> = {}): TurnMachineInput => ({
  sessionId: "s",
  sessionFile: "/s.jsonl",
  prompt: "prompt",
  engine,
  hadSessionFile: true,
  hasPromptHooks: hooks,
  hasAdmissionGate: hooks,
  hasMessageWriteHooks: hooks,
  ...extra,
});
/** An engine that owns compaction, an accordion that is due, and a bound thread to resume. */
const ACCORDION_AND_RESUME = input({ ...ENGINE_FULL, ownsCompaction: true }, false, {
  accordion: { enabled: true, contextThreshold: 0.9 },
  sessionKey: "resume",
  hasAdmissionGate: true,
});

type GraphPath = { steps: Array<{ event: AnyEventObject; state: { value: unknown; context: TurnContext } }> };

function traverse(kind: "shortest" | "simple", cfg: TurnMachineInput): GraphPath[] {
  const options = {
    input: cfg,
    // Simple paths enumerate every loop-free route: one outcome per invoke keeps them to a few hundred.
    events: (kind === "simple" ? (snap: never) => eventsFor(snap, true) : eventsFor) as never,
    // Only what decides later transitions: labels, warnings and payloads would multiply states without new routes.
    serializeState: (s: { value: unknown; context: TurnContext }) => {
      const c = s.context;
      return JSON.stringify({
        v: s.value,
        f: [c.outcome.aborted, c.outcome.yieldAborted, c.turn.accepted, c.turn.record?.codexStatus, c.outcome.mirrorOk, c.outcome.mirrorFailed, c.outcome.finalizeOk, c.thread.resumeFellBack, c.thread.rotate, c.outcome.failedBeforeTurn, c.persistence.mirror?.entryCount, c.request.projection?.thread.action, c.admission.admitted, c.admission.block?.blockedBy],
      });
    },
  } as never;
  return (kind === "shortest" ? getShortestPaths(turnMachine, options) : getSimplePaths(turnMachine, options)) as unknown as GraphPath[];
}

/** Replay every path on a live actor with controllable fakes; returns the number of steps replayed. */
async function replay(paths: GraphPath[], cfg: TurnMachineInput): Promise<number> {
  let steps = 0;
  for (const path of paths) {
    const h = new TurnHarness(cfg, turnMachine, undefined, [...AUTO_ACTORS]);
    await settle();
    for (const step of path.steps.slice(1)) {
      apply(h, step.event);
      await settle();
      steps++;
      const live = h.actor.getSnapshot() as { value: unknown; context: TurnContext };
      expect(live.value, path.steps.map((s) => s.event.type).join(" > ")).toEqual(step.state.value);
      // XState's assign copies the context with Object.assign: past MAX_CONTEXT_KEYS keys V8 makes it a slow dictionary.
      expect(Object.keys(live.context).length).toBeLessThanOrEqual(MAX_CONTEXT_KEYS);
      // Per-state invariants.
      const top = topState(live.value);
      if (top === "mirror" || top === "finalize") expect(live.context.turn.accepted).toBe(true);
      // Nothing of a refused turn reaches Codex: the block is set before the record, and no thread was touched.
      if (top === "recordingBlock") {
        expect(live.context.admission.block).toBeDefined();
        expect(h.calls.filter((c) => c === "startThread" || c === "resumeThread" || c === "runTurn")).toEqual([]);
      }
      if (top === "finalize") expect(live.context.outcome.mirrorOk).toBe(true);
      if (top === "project" && live.context.thread.resumeFellBack) expect(live.context.session.binding).toBeUndefined();
      // Projected again only for instructions the hook changed, and the hook's prompt survives the new projection.
      if (leafKey(live.value) === "hooks.reprojecting") expect(live.context.request.developerInstructions).toBe("hooked");
      if (top === "threadStart" && live.context.request.developerInstructions === "hooked") expect(live.context.request.promptText).toBe("hooked prompt");
      if (top === "maintain") {
        expect(live.context.outcome.aborted || live.context.outcome.yieldAborted).toBe(false);
        expect(live.context.outcome.finalizeOk).toBe(true);
      }
    }
    if (h.output) {
      if (h.output.status !== "completed") expect(h.output.engine.maintenance).not.toBe("ran");
      if (h.output.status === "blocked") expect(h.calls).not.toContain("runTurn");
      // The gate judges the final turn, once: after the prompt hooks, never again after a refused resume.
      if (h.calls.includes("admitTurn")) expect(h.calls.indexOf("admitTurn")).toBeGreaterThan(h.calls.indexOf("runPromptHooks"));
      expect(h.calls.filter((c) => c === "admitTurn").length).toBeLessThanOrEqual(1);
      if (!h.calls.includes("runTurn")) expect(h.calls).not.toContain("mirrorTranscript");
      if (h.output.error?.phase === "mirror") expect(h.output.status).toBe("failed");
      expect(h.output.trace.at(-1)).toBe(h.output.status);
    }
    h.actor.stop();
  }
  return steps;
}

describe("paths of the real turn machine", () => {
  for (const [name, cfg] of [
    ["full engine with hooks and a gate", input()],
    ["a gate without prompt hooks", input(NO_ENGINE, false, { hasAdmissionGate: true })],
    ["no engine", input(NO_ENGINE, false)],
    ["background maintenance", input({ ...ENGINE_FULL, turnMaintenanceMode: "background" }, false)],
    ["accordion due and a bound thread to resume", ACCORDION_AND_RESUME],
  ] as const) {
    it(`replays every shortest path with per-state invariants: ${name}`, async () => {
      const paths = traverse("shortest", cfg);
      const steps = await replay(paths, cfg);
      console.log(`[turn real-machine paths] ${name}: shortest paths=${paths.length} steps=${steps}`);
      expect(paths.length).toBeGreaterThan(10);
    }, 60_000);
  }

  // Simple paths (every loop-free route, not one per state) only for the no-engine machine: for the engine
  // configurations getSimplePaths alone takes about a minute each (2,779 paths with background maintenance), so they
  // get shortest paths above and the independent model's paths in turn.model.test.ts.
  it.each([["no engine", input(NO_ENGINE, false)]] as const)("replays every simple path with per-state invariants: %s", async (name, cfg) => {
    const paths = traverse("simple", cfg);
    const steps = await replay(paths, cfg);
    console.log(`[turn real-machine paths] ${name}: simple paths=${paths.length} steps=${steps}`);
    expect(paths.length).toBeGreaterThan(traverse("shortest", cfg).length - 1);
  }, 120_000);
});
