/**
 * Paths from the REAL machine: `getShortestPaths` traverses turnMachine itself (invoke outcomes arrive as
 * `xstate.done.actor.<id>` / `xstate.error.actor.<id>` events, the grace timer as its `xstate.after` event), and
 * every path is replayed on a live actor with controllable fakes, comparing the state after each step and checking
 * per-state invariants.
 */
import { describe, expect, it } from "vitest";
import { getShortestPaths, getSimplePaths } from "xstate/graph";
import type { AnyEventObject } from "xstate";
import { turnMachine, type TurnContext } from "../../machines/turn.machine.js";
import type { TurnMachineInput } from "../../machines/turn.contract.js";
import { ENGINE_FULL, NO_ENGINE, TurnHarness, record, settle, type PromiseActorName } from "./turn-harness.js";

const history = { messages: [], origins: [] };
const projection = { mode: "delta", reason: "t", promptText: "prompt", thread: { action: "start", reason: "t" }, entriesSent: 0, bytes: 6 };
const outputs: Record<string, { src: PromiseActorName; output: unknown }> = {
  loadHistory: { src: "readHistory", output: history },
  bootstrap: { src: "bootstrapEngine", output: { ...history, bootstrapped: true } },
  assemble: { src: "assembleContext", output: { messages: [{ role: "user", content: "c", timestamp: 1 }], estimatedTokens: 1 } },
  project: { src: "projectContext", output: projection },
  hooks: { src: "runPromptHooks", output: { promptText: "prompt" } },
  threadStart: { src: "startThread", output: { threadId: "thread-1", resumed: false } },
  mirror: { src: "mirrorTranscript", output: { appended: 2 } },
  finalize: { src: "finalizeEngine", output: { mode: "afterTurn", usedFallback: false } },
  maintain: { src: "maintainEngine", output: { changed: false } },
};
const GRACE_EVENT = "xstate.after.interruptGrace.turn.turnRunning.interrupting";

function eventsFor(snapshot: { value: unknown; context: TurnContext; status: string }): AnyEventObject[] {
  if (snapshot.status !== "active") return [];
  const value = snapshot.value;
  const events: AnyEventObject[] = [];
  if (typeof value === "string") {
    const o = outputs[value];
    if (o) {
      events.push({ type: `xstate.done.actor.${value}`, output: o.output, actorId: value });
      events.push({ type: `xstate.error.actor.${value}`, error: new Error(`${value} failed`), actorId: value });
    }
    if (value === "assemble") events.push({ type: "xstate.done.actor.assemble", output: { messages: [], estimatedTokens: 0 }, actorId: "assemble" });
    if (value !== "mirror" && value !== "finalize" || !snapshot.context.aborted) events.push({ type: "ABORT" }, { type: "YIELD" });
    return events;
  }
  const sub = (value as Record<string, string>)["turnRunning"];
  if (sub === "starting") events.push({ type: "TURN.ACCEPTED", turnId: "turn-1" }, { type: "TURN.START_FAILED", error: { phase: "turnRunning", message: "rejected" } });
  if (sub === "streaming") events.push({ type: "TURN.ENDED", record: record("completed") }, { type: "TURN.ENDED", record: record("failed") });
  if (sub === "interrupting") {
    events.push({ type: GRACE_EVENT });
    if (!snapshot.context.turnAccepted) events.push({ type: "TURN.ACCEPTED", turnId: "turn-1" }, { type: "TURN.START_FAILED", error: { phase: "turnRunning", message: "rejected" } });
    else events.push({ type: "TURN.ENDED", record: record("interrupted") });
  } else events.push({ type: "ABORT" }, { type: "YIELD" });
  return events;
}

function apply(h: TurnHarness, event: AnyEventObject): void {
  const done = /^xstate\.done\.actor\.(.+)$/.exec(event.type);
  const error = /^xstate\.error\.actor\.(.+)$/.exec(event.type);
  if (done) return h.resolve(outputs[done[1]!]!.src, event["output"]);
  if (error) return h.reject(outputs[error[1]!]!.src);
  if (event.type === GRACE_EVENT) return void h.clock.increment(10_000);
  if (event.type.startsWith("TURN.")) return h.emit(event as never);
  h.send(event as never);
}

const input = (engine = ENGINE_FULL, hooks = true): TurnMachineInput => ({
  sessionId: "s",
  sessionFile: "/s.jsonl",
  prompt: "prompt",
  engine,
  hadSessionFile: true,
  hasPromptHooks: hooks,
});

type GraphPath = { steps: Array<{ event: AnyEventObject; state: { value: unknown; context: TurnContext } }> };

function traverse(kind: "shortest" | "simple", cfg: TurnMachineInput): GraphPath[] {
  const options = {
    input: cfg,
    events: eventsFor as never,
    serializeState: (s: { value: unknown; context: unknown }) => JSON.stringify({ v: s.value, c: { ...(s.context as TurnContext), trace: undefined } }),
  } as never;
  return (kind === "shortest" ? getShortestPaths(turnMachine, options) : getSimplePaths(turnMachine, options)) as unknown as GraphPath[];
}

/** Replay every path on a live actor with controllable fakes; returns the number of steps replayed. */
async function replay(paths: GraphPath[], cfg: TurnMachineInput): Promise<number> {
  let steps = 0;
  for (const path of paths) {
    const h = new TurnHarness(cfg);
    await settle();
    for (const step of path.steps.slice(1)) {
      apply(h, step.event);
      await settle();
      steps++;
      const live = h.actor.getSnapshot() as { value: unknown; context: TurnContext };
      expect(live.value, path.steps.map((s) => s.event.type).join(" > ")).toEqual(step.state.value);
      // Per-state invariants.
      if (live.value === "mirror" || live.value === "finalize") expect(live.context.turnAccepted).toBe(true);
      if (live.value === "maintain") {
        expect(live.context.aborted || live.context.yieldAborted).toBe(false);
        expect(live.context.finalizeOk).toBe(true);
      }
    }
    if (h.output) {
      if (h.output.status !== "completed") expect(h.output.engine.maintenance).not.toBe("ran");
      if (!h.calls.includes("runTurn")) expect(h.calls).not.toContain("mirrorTranscript");
      expect(h.output.trace.at(-1)).toBe(h.output.status);
    }
    h.actor.stop();
  }
  return steps;
}

describe("paths of the real turn machine", () => {
  for (const [name, cfg] of [
    ["full engine with hooks", input()],
    ["no engine", input(NO_ENGINE, false)],
    ["background maintenance", input({ ...ENGINE_FULL, turnMaintenanceMode: "background" }, false)],
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
