/**
 * Paths from the real compaction machine (getSimplePaths over invoke outcomes, the native timer and ABORT),
 * replayed on a live actor whose actors are controllable promises: after every step the live snapshot's state and
 * context must equal the traversal's.
 */
import { describe, expect, it } from "vitest";
import { getSimplePaths, getStateNodes } from "xstate/graph";
import { compactionMachine } from "../../machines/compaction.machine.js";
import type { CompactionMachineInput } from "../../machines/compaction.rules.js";
import { FAKE_SESSION_FILE, allTransitionKeys, createSut, type InvokeId } from "../compaction/harness.js";

const TIMEOUT_MS = 2_000;
const INPUTS: Array<{ name: string; input: CompactionMachineInput }> = [
  { name: "owning+maintain", input: input(true, true, true, "manual") },
  { name: "owning", input: input(true, true, false, "budget") },
  { name: "non-owning+maintain", input: input(false, true, true, "budget") },
  { name: "no engine", input: input(false, false, false, "manual") },
];

function input(owns: boolean, active: boolean, hasMaintain: boolean, trigger: "manual" | "budget"): CompactionMachineInput {
  return {
    sessionId: "s1",
    sessionFile: FAKE_SESSION_FILE,
    trigger,
    engine: { active, id: active ? "eng" : "none", ownsCompaction: owns, hasMaintain },
    nativeTimeoutMs: TIMEOUT_MS,
  };
}

const done = (id: InvokeId, output: unknown) => ({ type: `xstate.done.actor.${id}`, output, actorId: id });
const fail = (id: InvokeId, message: string) => ({ type: `xstate.error.actor.${id}`, error: new Error(message), actorId: id });

/** Each state's own events, with payload variants for invoke outcomes (a function: an array would hide the timer). */
const EVENTS_BY_STATE: Record<string, unknown[]> = {
  loadBinding: [
    done("loadBinding", { threadId: "thr-1", lastUsage: { inputTokens: 900, totalTokens: 950 } }),
    done("loadBinding", null),
    fail("loadBinding", "unreadable"),
  ],
  engineCompact: [
    done("engineCompact", { ok: true, compacted: true, result: { tokensBefore: 900, tokensAfter: 200 } }),
    done("engineCompact", { ok: false, compacted: false, reason: "busy" }),
    fail("engineCompact", "engine boom"),
  ],
  maintain: [done("maintain", { changed: false }), fail("maintain", "maintain boom")],
  nativeCompact: [
    done("nativeCompact", { ok: true, threadId: "thr-1", turnId: "t-c", itemId: "i-c" }),
    done("nativeCompact", { ok: false, reason: "codexCompactionFailed", threadId: "thr-1" }),
    fail("nativeCompact", "closed"),
    { type: "xstate.after.nativeTimeout.compaction.nativeCompact" },
  ],
  markBinding: [done("markBinding", undefined), fail("markBinding", "disk full")],
};

const eventsFor = (snapshot: { value: unknown; status: string }) =>
  snapshot.status === "done" ? [] : [...(EVENTS_BY_STATE[String(snapshot.value)] ?? []), { type: "ABORT" }];

function pathsFor(machine: typeof compactionMachine, machineInput: CompactionMachineInput) {
  return getSimplePaths(machine, {
    input: machineInput,
    // A finished actor ignores events; the pure transition function would not (eventsFor returns none for it).
    events: eventsFor as never,
  });
}

async function replay(
  machineInput: CompactionMachineInput,
  paths: ReturnType<typeof pathsFor>,
  guards?: Parameters<typeof createSut>[1],
) {
  const failures: string[] = [];
  const taken = new Set<string>();
  const visited = new Set<string>();
  for (const path of paths) {
    const sut = await createSut(machineInput, guards);
    try {
      for (const step of path.steps) {
        const ev = step.event as { type: string; output?: unknown; error?: unknown };
        if (ev.type === "xstate.init") {
          expect(sut.snapshot().value).toEqual(step.state.value);
          continue;
        }
        const m = /^xstate\.(done|error)\.actor\.(.+)$/.exec(ev.type);
        if (m) {
          if (m[1] === "done") await sut.resolve(m[2] as InvokeId, ev.output);
          else await sut.reject(m[2] as InvokeId, ev.error);
        } else if (ev.type.startsWith("xstate.after.")) {
          await sut.fireNativeTimeout();
        } else {
          await sut.abort();
        }
        // Each step holds the state its event led to.
        const expected = step.state;
        const real = sut.snapshot();
        expect(real.value).toEqual(expected.value);
        expect(real.context).toEqual(expected.context);
        expect(real.status).toBe(expected.status);
      }
    } catch (error) {
      failures.push((error as Error).message.split("\n")[0]!);
    } finally {
      for (const k of sut.taken) taken.add(k);
      for (const n of sut.visitedNodes) visited.add(n);
      sut.stop();
    }
  }
  return { failures, taken, visited };
}

describe("compaction machine: getSimplePaths replayed on a live actor", () => {
  it("every path of the real machine replays identically, covering all states and transitions", async () => {
    const taken = new Set<string>();
    const visited = new Set<string>();
    let total = 0;
    for (const { name, input: machineInput } of INPUTS) {
      const paths = pathsFor(compactionMachine, machineInput);
      const states = new Set(paths.map((p) => JSON.stringify(p.state.value)));
      const steps = paths.reduce((n, p) => n + p.steps.length, 0);
      console.log(`[compaction paths] ${name}: ${paths.length} paths, ${states.size} distinct end states, ${steps} steps`);
      total += paths.length;
      const r = await replay(machineInput, paths);
      expect(r.failures).toEqual([]);
      for (const k of r.taken) taken.add(k);
      for (const n of r.visited) visited.add(n);
    }
    const nodes = getStateNodes(compactionMachine.root).map((n) => n.id);
    const edges = allTransitionKeys(compactionMachine);
    const missingNodes = nodes.filter((n) => !visited.has(n));
    const missingEdges = [...edges].filter((e) => !taken.has(e));
    console.log(
      `[compaction paths] total ${total} paths; ${nodes.length - missingNodes.length}/${nodes.length} state nodes, ` +
        `${edges.size - missingEdges.length}/${edges.size} transitions covered`,
    );
    expect(total).toBeGreaterThan(50);
    expect(missingNodes).toEqual([]);
    expect(missingEdges).toEqual([]);
  });

  it("the native timeout is a real transition of the traversal", () => {
    const paths = pathsFor(compactionMachine, INPUTS[0]!.input);
    const timedOut = paths.filter((p) => p.steps.some((s) => s.event.type.startsWith("xstate.after.nativeTimeout")));
    expect(timedOut.length).toBeGreaterThan(0);
    expect(timedOut.every((p) => p.state.value !== "markBinding")).toBe(true);
  });

  it("a guard mutant (nativeOk := false) makes replayed paths fail", async () => {
    const { input: machineInput } = INPUTS[2]!;
    const r = await replay(machineInput, pathsFor(compactionMachine, machineInput), { nativeOk: () => false });
    console.log(`[compaction paths] mutant nativeOk=false: ${r.failures.length} failing paths`);
    expect(r.failures.length).toBeGreaterThan(0);
  });
});
