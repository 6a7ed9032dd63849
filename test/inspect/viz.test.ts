import { describe, expect, it } from "vitest";
import { createActor, fromCallback, fromPromise, toPromise, type AnyStateMachine } from "xstate";
import { compactionMachine } from "../../machines/compaction.machine.js";
import type {
  AssembleOutput,
  BootstrapOutput,
  FinalizeOutput,
  HistoryOutput,
  HooksOutput,
  LockOutput,
  MaintainOutput,
  MirrorOutput,
  ProjectionOutput,
  RecoveryOutput,
  RunTurnEmitted,
  RunTurnInput,
  RunTurnReceived,
  SessionLoadOutput,
  ThreadStartOutput,
  TurnRecord,
} from "../../machines/turn.contract.js";
import { turnMachine } from "../../machines/turn.machine.js";
import { fullEngineFacts } from "../helpers/machine-driver.js";
import { machineToMermaid } from "../../src/inspect/mermaid.js";
import { MERMAID_BEGIN_MARKER, MERMAID_END_MARKER } from "../../src/inspect/page.js";
import { createTraceRecorder, type TraceStep } from "../../src/inspect/trace.js";
import {
  computeHighlightFrames,
  machinesToDiagrams,
  mermaidStateIds,
  renderStatechartPage,
  resolveStateIds,
  unmatchedTraceStates,
  VizError,
} from "../../src/inspect/viz.js";

const SECRET = "SECRET-PROMPT-viz-55e1";

// Fakes ignore their input, so the input type is left open for `provide` to check against each actor's slot.
const resolves = <T>(make: () => T) => fromPromise<T, any>(async () => make());

/** Runs the real turn machine once, every effect faked, and returns its trace. */
async function recordTurn(): Promise<TraceStep[]> {
  const history: HistoryOutput = { messages: [], origins: [] };
  const record: TurnRecord = {
    threadId: "t1",
    turnId: "u1",
    codexStatus: "completed",
    assistantText: `answer ${SECRET}`,
    messagesSnapshot: [],
    compactions: [],
  };
  const machine = turnMachine.provide({
    actors: {
      // The session steps (lock, recovery, pending record) as the shared machine driver settles them.
      acquireSessionLock: resolves<LockOutput>(() => ({ waitedMs: 0, pendingRecord: true, turnInFlight: false })),
      recoverSession: resolves<RecoveryOutput>(() => ({ pending: 0, mirroredMessages: 0, finalized: 0, dropped: 0 })),
      recordPendingFinalize: resolves<void>(() => undefined),
      rereadHistoryForFinalize: resolves<HistoryOutput>(() => history),
      readHistory: resolves<SessionLoadOutput>(() => ({ history })),
      bootstrapEngine: resolves<BootstrapOutput>(() => ({ ...history, bootstrapped: true })),
      assembleContext: resolves<AssembleOutput>(() => ({ messages: [], estimatedTokens: 5, systemPromptAddition: SECRET })),
      projectContext: resolves<ProjectionOutput>(() => ({
        mode: "prompt" as const,
        reason: "test",
        promptText: SECRET,
        thread: { action: "start" as const, reason: "new" },
        entriesSent: 1,
        bytes: 10,
      })),
      runPromptHooks: resolves<HooksOutput>(() => ({ promptText: SECRET })),
      startThread: resolves<ThreadStartOutput>(() => ({ threadId: "t1", resumed: false })),
      runTurn: fromCallback<RunTurnReceived, RunTurnInput, RunTurnEmitted>(({ sendBack }) => {
        queueMicrotask(() => {
          sendBack({ type: "TURN.ACCEPTED", turnId: "u1" });
          queueMicrotask(() => sendBack({ type: "TURN.ENDED", record }));
        });
      }),
      mirrorTranscript: resolves<MirrorOutput>(() => ({ appended: 2 })),
      finalizeEngine: resolves<FinalizeOutput>(() => ({ mode: "afterTurn" as const, usedFallback: false })),
      maintainEngine: resolves<MaintainOutput>(() => ({ changed: false })),
    },
  });
  const recorder = createTraceRecorder();
  const actor = createActor(machine, {
    inspect: recorder.inspect,
    input: {
      sessionId: "s1",
      sessionFile: "/nonexistent/s1.jsonl",
      prompt: SECRET,
      hadSessionFile: true,
      hasPromptHooks: true,
      engine: fullEngineFacts({ id: "test-engine" }),
    },
  });
  actor.start();
  const output = await toPromise(actor);
  expect(output.status).toBe("completed");
  return recorder.events();
}

interface NodeLike {
  path: string[];
  states: Record<string, NodeLike>;
}
function allPaths(machine: AnyStateMachine): string[] {
  const out: string[] = [];
  const walk = (n: NodeLike) => {
    for (const c of Object.values(n.states)) {
      out.push(c.path.join("."));
      walk(c);
    }
  };
  walk(machine.root as unknown as NodeLike);
  return out;
}

const machines = [
  { id: "turn", title: "Turn machine", machine: turnMachine },
  { id: "compaction", title: "Compaction machine", machine: compactionMachine },
];

describe("mermaidStateIds", () => {
  it("collects ids from declarations, composite states, descriptions and transitions", () => {
    const ids = mermaidStateIds(
      [
        "stateDiagram-v2",
        "  [*] --> a",
        '  state "A" as a',
        "  state b {",
        "    [*] --> b_c",
        '    state "c" as b_c',
        "  }",
        "  b : invoke runB",
        "  a --> d : GO [guard]",
        "  d --> [*]",
        "  classDef hot fill:#f00",
      ].join("\n"),
    );
    expect([...ids].sort()).toEqual(["a", "b", "b_c", "d"]);
  });
});

describe("the real machines in the diagram", () => {
  it.each(machines)("every state of $id has a Mermaid node of the same name", ({ machine }) => {
    const ids = resolveStateIds(machine, machineToMermaid(machine));
    const paths = allPaths(machine);
    expect(paths.length).toBeGreaterThan(3);
    expect(Object.keys(ids).sort()).toEqual([...paths].sort());
    // The node's label is the state's own key (what a reader matches against the step list).
    const def = machineToMermaid(machine);
    for (const [path, id] of Object.entries(ids)) {
      const key = path.split(".").at(-1) ?? "";
      // Composite states carry their invoke in the title: `state "turnRunning · invoke runTurn" as turnRunning {`.
      const composite = new RegExp(`state "${key}( · [^"]*)?" as ${id} \\{`);
      expect(def.includes(`state "${key}" as ${id}`) || composite.test(def)).toBe(true);
    }
  });

  it("a recorded turn trace names only states the diagram has, and highlights the running state", async () => {
    const trace = await recordTurn();
    const diagrams = machinesToDiagrams(machines);
    expect(unmatchedTraceStates(diagrams, trace)).toEqual([]);

    const rootSteps = trace.filter((s) => s.machineId === turnMachine.id);
    // Top-level states in order (sub-states of session, threadStart, mirror and finalize are the machine's detail).
    const top = rootSteps.map((s) => s.state[0]?.split(".")[0]).filter((t, i, all) => i === 0 || t !== all[i - 1]);
    expect(top).toEqual([
      "session",
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
      "completed",
    ]);
    expect(rootSteps.map((s) => s.state[0]).filter((s) => s?.startsWith("turnRunning."))).toEqual([
      "turnRunning.starting",
      "turnRunning.streaming",
    ]);

    const frames = computeHighlightFrames(diagrams, trace);
    const accepted = trace.findIndex((s) => s.eventType === "TURN.ACCEPTED");
    expect(frames[accepted]?.turn).toEqual(["turnRunning", "turnRunning_streaming"]);
    expect(frames[accepted]?.compaction).toEqual([]);
    expect(frames.at(-1)?.turn).toEqual(["completed"]);
  });
});

describe("renderStatechartPage", () => {
  it("renders both machines, the trace and the library, with no run data and no network URLs", async () => {
    const trace = await recordTurn();
    const html = renderStatechartPage({ machines, trace });
    for (const { machine } of machines) {
      const escaped = machineToMermaid(machine, { mergeParallelEdges: true }).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
      expect(html).toContain(escaped);
    }
    expect(html).toContain(MERMAID_BEGIN_MARKER);
    expect(html).toContain("TURN.ACCEPTED \u2192 turnRunning.streaming");
    expect(html).not.toContain(SECRET);
    const own = html.slice(0, html.indexOf(MERMAID_BEGIN_MARKER)) + html.slice(html.indexOf(MERMAID_END_MARKER));
    expect(own).not.toMatch(/https?:/i);
    expect(own).not.toMatch(/<script[^>]*\ssrc=|<link\b/i);

    // Deterministic: a second, separate run of the same scenario gives the same bytes.
    expect(renderStatechartPage({ machines, trace: await recordTurn() })).toBe(html);
  });

  it("rejects something that is not a machine", () => {
    expect(() => renderStatechartPage({ machines: [{ id: "x", title: "X", machine: {} as AnyStateMachine }] })).toThrow(
      VizError,
    );
    expect(() => renderStatechartPage({ machines: [] })).toThrow(/machines/);
  });
});
