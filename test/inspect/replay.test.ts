/**
 * `stateChangingSteps`: a replay shows only the steps where a machine actor's state or status changed.
 */
import { describe, expect, it } from "vitest";
import { stateChangingSteps } from "../../src/inspect/replay.js";
import type { TraceStep } from "../../src/inspect/trace.js";

const step = (n: number, actorId: string, state: string[], extra: Partial<TraceStep> = {}): TraceStep => ({
  step: n,
  actorId,
  machineId: "turn",
  eventType: `e${n}`,
  state,
  status: "active",
  ...extra,
});

describe("stateChangingSteps", () => {
  it("drops invoked non-machine actors and repeated states of the same actor, keeps step numbers", () => {
    const trace: TraceStep[] = [
      step(1, "root", ["loadHistory"]),
      { step: 2, actorId: "loadHistory", parentId: "root", eventType: "xstate.init", state: [], status: "active" },
      { step: 3, actorId: "loadHistory", parentId: "root", eventType: "x", state: [], status: "done" },
      step(4, "root", ["assemble"]),
      step(5, "root", ["assemble"]), // same state again (an event that changed only context)
      step(6, "compaction", ["loadBinding"], { machineId: "compaction", parentId: "root" }),
      step(7, "root", ["assemble"], { status: "done" }), // status change counts
    ];
    expect(stateChangingSteps(trace).map((s) => s.step)).toEqual([1, 4, 6, 7]);
  });

  it("tracks actors separately: the same state in two actors is two steps", () => {
    const trace = [step(1, "root", ["a"]), step(2, "root-2", ["a"]), step(3, "root", ["a"])];
    expect(stateChangingSteps(trace).map((s) => s.step)).toEqual([1, 2]);
  });
});
