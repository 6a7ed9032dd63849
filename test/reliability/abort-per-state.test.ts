/**
 * An abort (or a yield) arriving in each lifecycle state: the outcome status and which side effects (mirror,
 * finalize, maintain) ran. The pure machine covers every state with provide() fakes; the real binary covers the
 * states an engine or hook can hold open (bootstrap, assemble, hooks, turnRunning, finalize, maintain).
 */
import { getEventListeners } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn, startCodexTurn } from "../../src/turn.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { CANONICAL, MachineDriver, machineInput } from "../helpers/machine-driver.js";
import { captureLogger, deferred, mirrorKeyCounts, mirrorKeys, tempSessions, turnParams, until, disposeChecked } from "../helpers/turn-env.js";
import { createFaultEngine, type EngineMethod, type FaultEngine } from "../helpers/fault-engine.js";
import { recordCases } from "./case-count.js";

const PRE_TURN = new Set(["loadHistory", "bootstrap", "assemble", "project", "hooks", "threadStart"]);

const MACHINE_CASES = CANONICAL.flatMap((state) => [
  [state, "ABORT"],
  [state, "YIELD"],
] as Array<[string, "ABORT" | "YIELD"]>);
recordCases("abort-machine", MACHINE_CASES.length);

describe("abort/yield in every lifecycle state (machine with fakes)", () => {
  it.each(MACHINE_CASES)("%s + %s", async (state, kind) => {
    const d = new MachineDriver(machineInput());
    await d.advanceTo(state);
    await d.send({ type: kind });
    const out = await d.runToEnd();
    const status = kind === "ABORT" ? "aborted" : "yieldAborted";
    expect(out.status).toBe(status);
    expect(out.trace[out.trace.length - 1]).toBe(status);
    const idx = CANONICAL.indexOf(state as (typeof CANONICAL)[number]);
    // Everything up to the abort state was entered, in order.
    expect(out.trace.slice(0, idx + 1)).toEqual(CANONICAL.slice(0, idx + 1));
    if (PRE_TURN.has(state)) {
      expect(out.trace).toEqual([...CANONICAL.slice(0, idx + 1), status]);
      expect(d.started).not.toContain("mirrorTranscript");
      expect(d.started).not.toContain("finalizeEngine");
      expect(out.engine.finalize).toBe("skipped:turnNotStarted");
      expect(out.engine.maintenance).toBe(kind === "ABORT" ? "skipped:aborted" : "skipped:yieldAborted");
    } else {
      // The turn was accepted: persistence is never cut in half.
      expect(d.started).toContain("mirrorTranscript");
      expect(d.started).toContain("finalizeEngine");
      expect(out.engine.finalize).toBe("afterTurn");
      if (state === "turnRunning") expect(d.forwarded).toContainEqual({ type: "TURN.INTERRUPT", reason: kind === "ABORT" ? "abort" : "yield" });
      if (state === "maintain") {
        expect(out.engine.maintenance).toBe("aborted");
      } else {
        expect(out.trace).not.toContain("maintain");
        expect(out.engine.maintenance).toBe(kind === "ABORT" ? "skipped:aborted" : "skipped:yieldAborted");
      }
    }
    expect(d.started.filter((s) => s === "mirrorTranscript").length).toBeLessThanOrEqual(1);
  });

  it("an accepted turn that never ends after an abort is mirrored once from a timed-out record", async () => {
    const d = new MachineDriver(machineInput());
    await d.advanceTo("turnRunning");
    await d.send({ type: "ABORT" });
    expect(d.substate).toBe("interrupting");
    await d.tick(1_001);
    expect(d.state).toBe("mirror");
    const out = await d.runToEnd();
    expect(out.status).toBe("aborted");
    expect(out.record?.codexStatus).toBe("timedOut");
    expect(d.started.filter((s) => s === "mirrorTranscript")).toHaveLength(1);
  });
});

// ------------------------------------------------------------------------------------------------------------------
// The real binary

let env: OfflineCodex;
const sessions = tempSessions("abort-real-");
const engines: FaultEngine[] = [];

beforeAll(async () => {
  env = await startOfflineCodex();
});
afterAll(async () => {
  for (const e of engines) e.release();
  await disposeChecked(env);
  sessions.cleanup();
});

const REAL_STATES = ["bootstrap", "assemble", "hooks", "turnRunning", "finalize", "maintain"] as const;
recordCases("abort-real", REAL_STATES.length + 1);

const GATED: Partial<Record<(typeof REAL_STATES)[number], EngineMethod>> = {
  bootstrap: "bootstrap",
  assemble: "assemble",
  finalize: "afterTurn",
  maintain: "maintain",
};

describe("abort in each pausable state (real app-server)", () => {
  it.each(REAL_STATES)("abort during %s", async (state) => {
    const file = sessions.file();
    const engine = createFaultEngine();
    engines.push(engine);
    const log = captureLogger();
    const warm = await runCodexTurn(turnParams(env, file, "warm turn", { contextEngine: engine }));
    expect(warm.status).toBe("completed");

    const hookGate = deferred<void>();
    const hookEntered = deferred<void>();
    const method = GATED[state];
    // Bootstrap maintenance (empty runtime context) runs inside bootstrap; gate only the turn's maintenance.
    if (method === "maintain") {
      engine.fault = { method, kind: "gate", when: (p) => (p as { runtimeContext?: object }).runtimeContext !== undefined && "currentTokenCount" in (p as { runtimeContext: object }).runtimeContext };
    } else if (method) engine.fault = { method, kind: "gate" };
    if (state === "turnRunning") env.fake.enqueue({ text: Array.from({ length: 80 }, (_, i) => `w${i} `), delayMs: 30 });
    let deltas = 0;
    const controller = new AbortController();
    const requestsBefore = env.fake.requests.length;
    const handle = startCodexTurn(
      turnParams(env, file, `abort in ${state}`, {
        contextEngine: engine,
        logger: log.logger,
        signal: controller.signal,
        timeouts: { engineCallMs: 10_000, interruptGraceMs: 5_000 },
        onEvent: (e) => {
          if (e.type === "agentMessageDelta") deltas++;
        },
        ...(state === "hooks"
          ? {
              hooks: {
                beforePromptBuild: async () => {
                  hookEntered.resolve();
                  await hookGate.promise;
                },
              },
            }
          : {}),
      }),
    );
    if (method) await engine.entered();
    else if (state === "hooks") await hookEntered.promise;
    else await until(() => deltas > 0, 10_000, "the first delta");
    controller.abort();
    // Persistence states finish their work after the abort; release the held engine call.
    if (state === "finalize") setTimeout(() => engine.release(), 50);
    const r = await handle.result;
    hookGate.resolve();
    engine.release();

    expect(r.status).toBe("aborted");
    expect(log.events.find((e) => e.event === "turn settled")).toMatchObject({ status: "aborted" });
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    const { byTurn, duplicates } = await mirrorKeyCounts(file);
    expect(duplicates).toEqual([]);
    if (PRE_TURN.has(state)) {
      expect([...byTurn.keys()]).toEqual([warm.turnId]);
      expect(env.fake.requests.length).toBe(requestsBefore);
      expect(r.engine.finalize).toBe("skipped:turnNotStarted");
      expect(r.engine.maintenance).toBe("skipped:aborted");
    } else {
      expect([...byTurn.keys()]).toEqual([warm.turnId, r.turnId]);
      expect(r.trace).toContain("mirror");
      expect(r.engine.finalize).toBe("afterTurn");
      expect(r.engine.maintenance).toBe(state === "maintain" ? "aborted" : "skipped:aborted");
    }
    // The next turn on the session still works.
    engine.fault = undefined;
    const next = await runCodexTurn(turnParams(env, file, "after abort", { contextEngine: engine }));
    expect(next.status).toBe("completed");
  });

  it("abort during threadStart (the app-server frozen with SIGSTOP while thread/start is pending)", async () => {
    const file = sessions.file();
    const log = captureLogger();
    const pid = env.codex.pid!;
    const requestsBefore = env.fake.requests.length;
    let frozen = false;
    const inThreadStart = deferred<void>();
    const handle = startCodexTurn(
      turnParams(env, file, "abort in threadStart", {
        logger: log.logger,
        hooks: {
          // Freeze Codex just before threadStart so its thread/start request cannot be answered.
          beforePromptBuild: () => {
            process.kill(pid, "SIGSTOP");
            frozen = true;
          },
          onState: (state) => {
            if (state === "threadStart") inThreadStart.resolve();
          },
        },
      }),
    );
    try {
      await inThreadStart.promise;
      handle.abort();
      const r = await handle.result;
      expect(r.status).toBe("aborted");
      expect(r.trace).toEqual(["loadHistory", "project", "hooks", "threadStart", "aborted"]);
      expect(r.engine.finalize).toBe("skipped:turnNotStarted");
      expect(log.events.find((e) => e.event === "turn settled")).toMatchObject({ status: "aborted" });
    } finally {
      if (frozen) process.kill(pid, "SIGCONT");
    }
    expect(await mirrorKeys(file)).toEqual([]);
    expect(env.fake.requests.length).toBe(requestsBefore);
    const next = await runCodexTurn(turnParams(env, file, "after frozen threadStart"));
    expect(next.status).toBe("completed");
    expect(env.codex.pid).toBe(pid);
  });
});
