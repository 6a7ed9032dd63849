/**
 * Property test: random sequences of external events (STEER, ABORT, YIELD), runTurn events (ACCEPTED, ENDED,
 * START_FAILED, STEER_REJECTED, COMPACTION), actor successes and failures, and interrupt-grace timeouts, driven
 * through the pure turn machine with provide() fakes, for random engine facts. Checked against an independent
 * model of the lifecycle: trace order, mirror iff accepted, maintenance only after a clean completed turn, the final
 * status, and where steer texts went.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { EngineFacts, TurnMachineOutput, TurnRecord } from "../../machines/turn.contract.js";
import { CANONICAL, FINALS, MachineDriver, fakeRecord, machineInput, okOutput, type PromiseActor } from "../helpers/machine-driver.js";
import { recordCases } from "./case-count.js";

type Cmd =
  | { t: "ok" }
  | { t: "okEmpty" }
  | { t: "fail" }
  | { t: "ABORT" }
  | { t: "YIELD" }
  | { t: "STEER" }
  | { t: "ACCEPT" }
  | { t: "END"; status: TurnRecord["codexStatus"] }
  | { t: "START_FAILED" }
  | { t: "STEER_REJECTED" }
  | { t: "COMPACTION" }
  | { t: "TICK" };

const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Cmd>({ t: "ok" }) },
  { weight: 1, arbitrary: fc.constant<Cmd>({ t: "okEmpty" }) },
  { weight: 2, arbitrary: fc.constant<Cmd>({ t: "fail" }) },
  { weight: 1, arbitrary: fc.constant<Cmd>({ t: "ABORT" }) },
  { weight: 1, arbitrary: fc.constant<Cmd>({ t: "YIELD" }) },
  { weight: 1, arbitrary: fc.constant<Cmd>({ t: "STEER" }) },
  { weight: 3, arbitrary: fc.constant<Cmd>({ t: "ACCEPT" }) },
  { weight: 3, arbitrary: fc.constantFrom<TurnRecord["codexStatus"]>("completed", "completed", "failed", "interrupted").map((status): Cmd => ({ t: "END", status })) },
  { weight: 1, arbitrary: fc.constant<Cmd>({ t: "START_FAILED" }) },
  { weight: 1, arbitrary: fc.constant<Cmd>({ t: "STEER_REJECTED" }) },
  { weight: 1, arbitrary: fc.constant<Cmd>({ t: "COMPACTION" }) },
  { weight: 1, arbitrary: fc.constant<Cmd>({ t: "TICK" }) },
);

const engineArb: fc.Arbitrary<EngineFacts> = fc.record({
  active: fc.boolean(),
  id: fc.constant("prop"),
  hasBootstrap: fc.boolean(),
  hasMaintain: fc.boolean(),
  hasAfterTurn: fc.boolean(),
  hasIngestBatch: fc.boolean(),
  ownsCompaction: fc.boolean(),
  turnMaintenanceMode: fc.constantFrom<"foreground" | "background">("foreground", "background"),
});

/** What the model tracks, independently of the machine's context. */
interface ModelFacts {
  accepted: boolean;
  firstInterrupt?: "ABORT" | "YIELD";
  sawAbort: boolean;
  sawYield: boolean;
  failedBeforeTurn: boolean;
  endStatus?: TurnRecord["codexStatus"];
  finalizeRejected: boolean;
  /** The transcript write failed: the turn is failed whatever else happened, and never finalized. */
  mirrorRejected: boolean;
  steersForwarded: number;
  followUps: number;
  mirrorsStarted: number;
}

async function apply(d: MachineDriver, cmd: Cmd, m: ModelFacts): Promise<void> {
  if (d.done) return;
  const state = d.state;
  const pending: PromiseActor | undefined = d.pendingActor;
  switch (cmd.t) {
    case "ok":
    case "okEmpty":
      if (!pending) return;
      await d.resolve(pending, cmd.t === "okEmpty" && pending === "assembleContext" ? { messages: [], estimatedTokens: 0 } : okOutput(pending));
      return;
    case "fail":
      if (!pending) return;
      if (pending === "readHistory" || pending === "startThread") m.failedBeforeTurn = true;
      if (pending === "finalizeEngine") m.finalizeRejected = true;
      if (pending === "mirrorTranscript") m.mirrorRejected = true;
      await d.reject(pending);
      return;
    case "ABORT":
    case "YIELD":
      m.firstInterrupt ??= cmd.t;
      if (cmd.t === "ABORT") m.sawAbort = true;
      else m.sawYield = true;
      await d.send({ type: cmd.t });
      return;
    case "STEER":
      if (state === "turnRunning") m.steersForwarded++;
      else m.followUps++;
      await d.send({ type: "STEER", text: "steer" });
      return;
    case "ACCEPT":
      if (state !== "turnRunning" || m.accepted || !d.sendBack) return;
      m.accepted = true;
      await d.emit({ type: "TURN.ACCEPTED", turnId: "turn-1" });
      return;
    case "END":
      if (state !== "turnRunning" || !m.accepted || !d.sendBack) return;
      m.endStatus = cmd.status;
      await d.emit({ type: "TURN.ENDED", record: fakeRecord(cmd.status) });
      return;
    case "START_FAILED":
      if (state !== "turnRunning" || m.accepted || !d.sendBack) return;
      if (!m.sawAbort && !m.sawYield) m.failedBeforeTurn = true;
      await d.emit({ type: "TURN.START_FAILED", error: { phase: "turnRunning", message: "rejected", code: "turnStartRejected" } });
      return;
    case "STEER_REJECTED":
      if (state !== "turnRunning" || !d.sendBack) return;
      m.followUps += 2;
      await d.emit({ type: "TURN.STEER_REJECTED", texts: ["r1", "r2"] });
      return;
    case "COMPACTION":
      if (state !== "turnRunning" || !d.sendBack) return;
      await d.emit({ type: "TURN.COMPACTION", compaction: { backend: "codex-app-server", threadId: "thread-1", turnId: "turn-1", itemId: "c1", completed: true } });
      return;
    case "TICK":
      if (state === "turnRunning" && d.substate === "interrupting" && m.accepted) m.endStatus = "timedOut";
      await d.tick(1_001);
      return;
  }
}

/** Finish the attempt the way a well-behaved Codex would. */
async function finish(
  d: MachineDriver,
  m: ModelFacts,
  hangsAfterInterrupt: boolean,
  lateInterrupt: "ABORT" | "YIELD" | undefined,
  mirrorFails = false,
): Promise<TurnMachineOutput> {
  let interruptSent = false;
  for (let i = 0; i < 40 && !d.done; i++) {
    const pending = d.pendingActor;
    if (pending === "mirrorTranscript" && mirrorFails) await apply(d, { t: "fail" }, m);
    else if (pending) await d.resolve(pending);
    else if (lateInterrupt && !interruptSent && d.state === "turnRunning" && d.substate === "streaming") {
      // An abort/yield arriving while the accepted turn streams.
      interruptSent = true;
      await apply(d, { t: lateInterrupt }, m);
    }
    else if (d.state === "turnRunning" && d.substate === "interrupting" && hangsAfterInterrupt) {
      // Codex never ends the interrupted turn: the grace timer decides.
      await apply(d, { t: "TICK" }, m);
    } else if (d.state === "turnRunning" && d.sendBack) {
      if (!m.accepted) await apply(d, { t: "ACCEPT" }, m);
      else await apply(d, { t: "END", status: d.forwarded.some((f) => f.type === "TURN.INTERRUPT") ? "interrupted" : "completed" }, m);
    } else await d.tick(0);
  }
  if (!d.done) throw new Error(`machine stuck in ${d.state}/${d.substate ?? ""}`);
  return d.output!;
}

function checkInvariants(out: TurnMachineOutput, d: MachineDriver, m: ModelFacts, engine: EngineFacts): void {
  // Trace: canonical lifecycle states in order, no repeats, then exactly one final state equal to the status.
  const finalState = out.trace[out.trace.length - 1]!;
  expect(FINALS as readonly string[]).toContain(finalState);
  expect(finalState).toBe(out.status);
  const body = out.trace.slice(0, -1);
  const idx = body.map((s) => (CANONICAL as readonly string[]).indexOf(s));
  expect(idx.every((i) => i >= 0)).toBe(true);
  for (let i = 1; i < idx.length; i++) expect(idx[i]!).toBeGreaterThan(idx[i - 1]!);
  // Empty when the attempt ended in the session step (lock, recovery), before the lifecycle started.
  if (body.length > 0) expect(body[0]).toBe("loadHistory");

  // Mirror iff Codex accepted the turn; finalize follows the mirror; each at most once.
  const mirrored = out.trace.includes("mirror");
  expect(mirrored).toBe(m.accepted);
  expect(out.trace.includes("finalize")).toBe(mirrored && !m.mirrorRejected);
  expect(d.started.filter((s) => s === "mirrorTranscript").length).toBe(mirrored ? 1 : 0);
  expect(d.started.filter((s) => s === "finalizeEngine").length).toBe(mirrored && !m.mirrorRejected ? 1 : 0);

  // The final status.
  if (m.mirrorRejected) {
    expect(out.status).toBe("failed");
    expect(out.error?.phase).toBe("mirror");
  } else if (!m.sawAbort && !m.sawYield) {
    const promptError = m.failedBeforeTurn || (m.accepted && m.endStatus !== "completed");
    expect(out.status).toBe(promptError ? "failed" : "completed");
  } else if (m.firstInterrupt === "YIELD" || !m.sawAbort) {
    expect(out.status).toBe("yieldAborted");
  } else if (!m.sawYield) {
    expect(out.status).toBe("aborted");
  } else {
    expect(["aborted", "yieldAborted"]).toContain(out.status);
  }

  // Maintenance only after a clean, completed, finalized turn of an engine that has it.
  const maintained = out.trace.includes("maintain");
  if (maintained) {
    expect(engine.active && engine.hasMaintain && engine.turnMaintenanceMode === "foreground").toBe(true);
    expect(m.finalizeRejected).toBe(false);
    if (out.status === "completed") expect(["ran", "failed"]).toContain(out.engine.maintenance);
    else expect(out.engine.maintenance).toBe("aborted");
  }
  if (out.status !== "completed") {
    expect(["ran", "failed", "background"]).not.toContain(out.engine.maintenance);
    expect(d.backgroundScheduled).toBe(0);
  }
  if (out.backgroundMaintenance) {
    expect(out.status).toBe("completed");
    expect(engine.turnMaintenanceMode).toBe("background");
    expect(d.backgroundScheduled).toBe(1);
  }
  if (out.status === "completed" && engine.active && engine.hasMaintain && !m.finalizeRejected) {
    expect(["ran", "failed", "background"]).toContain(out.engine.maintenance);
  }
  if (m.finalizeRejected) expect(out.engine.maintenance).not.toBe("ran");

  // Steers: forwarded while the turn ran, otherwise queued as follow-ups (with rejected texts).
  expect(d.forwarded.filter((f) => f.type === "TURN.STEER")).toHaveLength(m.steersForwarded);
  expect(out.followUps).toHaveLength(m.followUps);
}

const RUNS = 400;
recordCases("machine-property", RUNS);

describe("turn machine under random event sequences", () => {
  it("keeps the lifecycle invariants", async () => {
    const seen = new Map<string, number>();
    const count = (k: string) => seen.set(k, (seen.get(k) ?? 0) + 1);
    await fc.assert(
      fc.asyncProperty(
        engineArb,
        fc.boolean(),
        fc.boolean(),
        fc.array(cmdArb, { minLength: 0, maxLength: 30 }),
        fc.boolean(),
        fc.constantFrom<"ABORT" | "YIELD" | undefined>(undefined, undefined, "ABORT", "YIELD"),
        fc.integer({ min: 0, max: 9 }),
        async (engine, hadSessionFile, hasPromptHooks, cmds, hangsAfterInterrupt, lateInterrupt, dice) => {
          const d = new MachineDriver(machineInput(engine, { hadSessionFile, hasPromptHooks }));
          const m: ModelFacts = {
            accepted: false,
            sawAbort: false,
            sawYield: false,
            failedBeforeTurn: false,
            finalizeRejected: false,
            mirrorRejected: false,
            steersForwarded: 0,
            followUps: 0,
            mirrorsStarted: 0,
          };
          for (const cmd of cmds) await apply(d, cmd, m);
          const out = await finish(d, m, hangsAfterInterrupt, lateInterrupt, dice === 0);
          checkInvariants(out, d, m, engine);
          count(out.status);
          if (out.trace.includes("maintain")) count("maintain");
          if (out.record?.codexStatus === "timedOut") count("timedOut");
          if (out.backgroundMaintenance) count("background");
          if (m.sawAbort && out.trace.includes("mirror")) count("abortAfterAccept");
          if (m.mirrorRejected) count("mirrorFailed");
          d.actor.stop();
        },
      ),
      { numRuns: RUNS, seed: 20261122 },
    );
    // The generator reached every outcome and the interesting paths (else the property proves little).
    for (const k of ["completed", "failed", "aborted", "yieldAborted", "maintain", "timedOut", "background", "abortAfterAccept", "mirrorFailed"]) {
      expect(seen.get(k) ?? 0, `runs reaching ${k}`).toBeGreaterThan(0);
    }
  }, 60_000);
});
