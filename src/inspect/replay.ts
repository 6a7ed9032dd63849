/**
 * Which recorded steps a replay shows: only those where a state machine actor's state (or status) changed. Steps of
 * promise/callback actors (invoked engine calls, app-server requests) and snapshots that repeat the previous state
 * of the same actor change nothing on a diagram, so a replay that shows them looks stuck.
 */
import type { TraceStep } from "./trace.js";

function stepKey(step: TraceStep): string {
  return `${step.status}|${step.state.join(",")}`;
}

/**
 * The steps of `trace` that change what a diagram shows: machine actors only, and only when the actor's active
 * states or status differ from its previous step. Step numbers are kept, so a filtered replay still names the
 * original step.
 *
 * @example
 * ```ts
 * const steps = stateChangingSteps(await readTraceFile(file));
 * renderStatechartPage({ machines, trace: steps });
 * ```
 */
export function stateChangingSteps(trace: readonly TraceStep[]): TraceStep[] {
  const last = new Map<string, string>();
  const out: TraceStep[] = [];
  for (const step of trace) {
    if (step.machineId === undefined) continue;
    const actor = `${step.parentId ?? ""}/${step.actorId}`;
    const key = stepKey(step);
    if (last.get(actor) === key) continue;
    last.set(actor, key);
    out.push(step);
  }
  return out;
}
