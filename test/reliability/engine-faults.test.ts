/**
 * Every engine method throwing, hanging (bounded by timeouts.engineCallMs) and returning malformed data: the turn
 * still completes per the lifecycle rules, and the outcome label, warning and log event say what happened.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { captureLogger, mirrorKeyCounts, tempSessions, turnParams, disposeChecked } from "../helpers/turn-env.js";
import { createFaultEngine, type EngineMethod, type FaultEngine, type FaultKind } from "../helpers/fault-engine.js";
import { recordCases } from "./case-count.js";

let env: OfflineCodex;
const sessions = tempSessions("engine-faults-");
const engines: FaultEngine[] = [];

beforeAll(async () => {
  env = await startOfflineCodex();
});
afterAll(async () => {
  for (const e of engines) e.release();
  await disposeChecked(env);
  sessions.cleanup();
});

interface Expectation {
  label: keyof Awaited<ReturnType<typeof runCodexTurn>>["engine"];
  value: string;
  /** The warning, with the engine's own error text between the parentheses. */
  warning?: RegExp;
  logEvent: string;
  maintenance: string;
}

const EXPECT: Record<EngineMethod, Expectation> = {
  bootstrap: { label: "bootstrap", value: "failed", warning: /^bootstrap failed \((.+)\); continuing without it$/, logEvent: "bootstrap failed", maintenance: "ran" },
  assemble: { label: "assemble", value: "failed", warning: /^assemble failed \((.+)\); using the unassembled prompt$/, logEvent: "assemble failed", maintenance: "ran" },
  afterTurn: { label: "finalize", value: "failed", warning: /^context-engine finalize failed \((.+)\)$/, logEvent: "finalize failed", maintenance: "skipped:finalizeFailed" },
  ingestBatch: { label: "finalize", value: "failed", warning: /^context-engine finalize failed \((.+)\)$/, logEvent: "finalize failed", maintenance: "skipped:finalizeFailed" },
  ingest: { label: "finalize", value: "failed", warning: /^context-engine finalize failed \((.+)\)$/, logEvent: "finalize failed", maintenance: "skipped:finalizeFailed" },
  maintain: { label: "maintenance", value: "failed", warning: /^maintenance failed \((.+)\)$/, logEvent: "maintenance failed", maintenance: "failed" },
};

const OMIT: Record<EngineMethod, Array<"afterTurn" | "ingestBatch">> = {
  bootstrap: [],
  assemble: [],
  afterTurn: [],
  ingestBatch: ["afterTurn"],
  ingest: ["afterTurn", "ingestBatch"],
  maintain: [],
};

const CASES: Array<[EngineMethod, FaultKind]> = [];
for (const method of ["bootstrap", "assemble", "afterTurn", "ingestBatch", "ingest", "maintain"] as const) {
  for (const kind of ["throw", "hang", "malformed"] as const) {
    if (method === "afterTurn" && kind === "malformed") continue; // afterTurn returns nothing to validate
    CASES.push([method, kind]);
  }
}
recordCases("engine-faults", CASES.length);

describe("engine method faults", () => {
  it.each(CASES)("%s %s: the turn completes and says so", async (method, kind) => {
    const file = sessions.file();
    const engine = createFaultEngine({ omit: OMIT[method] });
    engines.push(engine);
    const log = captureLogger();
    const params = (prompt: string) =>
      turnParams(env, file, prompt, { contextEngine: engine, logger: log.logger, timeouts: { engineCallMs: 200 }, contextTokenBudget: 8_000 });
    // bootstrap only runs when the session file already exists: one clean turn first.
    const warm = await runCodexTurn(params("clean turn"));
    expect(warm.status).toBe("completed");
    engine.fault = { method, kind };
    log.events.length = 0;

    const r = await runCodexTurn(params(`faulty ${method} ${kind}`));
    // ingest()'s result is never used (unlike ingestBatch's count), so a malformed one is harmless and not validated.
    const want: Expectation =
      method === "ingest" && kind === "malformed"
        ? { label: "finalize", value: "ingest", logEvent: "finalize completed", maintenance: "ran" }
        : EXPECT[method];
    expect(r.status).toBe("completed");
    expect(r.engine[want.label]).toBe(want.value);
    expect(r.engine.maintenance).toBe(want.maintenance);
    if (want.warning) {
      const reason = r.warnings.map((w) => want.warning!.exec(w)?.[1]).find((x) => x !== undefined);
      expect(reason, r.warnings.join(" | ")).toBeDefined();
      // The engine's own text reaches the warning (a throw's message; a timeout or a malformed result says so).
      if (kind === "throw") expect(reason).toContain(`injected ${method} failure`);
      if (kind === "hang") expect(reason).toMatch(/timed out|200/);
    }
    expect(engine.calls.map((c) => c.method)).toContain(`${method}:${kind === "throw" ? "threw" : kind === "hang" ? "hung" : "malformed"}`);
    expect(log.events.some((e) => e.event === want.logEvent)).toBe(true);
    expect(log.events.find((e) => e.event === "turn settled")).toMatchObject({ status: "completed" });
    // The turn itself was unaffected: mirrored exactly once, the model answered.
    expect(r.assistantText).toBe(`reply to: faulty ${method} ${kind}`);
    const { byTurn, duplicates } = await mirrorKeyCounts(file);
    expect(duplicates).toEqual([]);
    expect([...byTurn.keys()]).toEqual([warm.turnId, r.turnId]);
    // Maintenance never runs after a failed finalize.
    if (want.maintenance === "skipped:finalizeFailed") {
      const afterFault = engine.calls.slice(engine.calls.findIndex((c) => c.method.includes(":")));
      expect(afterFault.some((c) => c.method === "maintain")).toBe(false);
    }
    // No log line leaks prompt text.
    expect(JSON.stringify(log.events)).not.toContain(`faulty ${method} ${kind}`);
  });
});

recordCases("finalize-replay", 1);

describe("a failed finalize", () => {
  it("is replayed once by the next attempt, before that attempt's own lifecycle", async () => {
    const file = sessions.file();
    const engine = createFaultEngine();
    engines.push(engine);
    const params = (prompt: string) => turnParams(env, file, prompt, { contextEngine: engine, contextTokenBudget: 8_000 });
    expect((await runCodexTurn(params("replay one"))).status).toBe("completed");
    engine.fault = { method: "afterTurn", kind: "throw" };
    const failed = await runCodexTurn(params("replay two"));
    expect(failed.engine.finalize).toBe("failed");
    engine.fault = undefined;
    engine.calls.length = 0;
    const log = captureLogger();
    const next = await runCodexTurn({ ...params("replay three"), logger: log.logger });
    expect(next.status).toBe("completed");
    // The pending record of the failed turn is finalized first (4 messages: turns one and two), then this turn.
    expect(engine.calls.map((c) => c.method)).toEqual(["afterTurn", "bootstrap", "maintain", "assemble", "afterTurn", "maintain"]);
    expect(engine.calls[0]).toMatchObject({ prePromptMessageCount: 2, messageCount: 4 });
    expect(log.events.some((e) => e.event === "pending finalize completed" && e.turnId === failed.turnId)).toBe(true);
    // Only once: a further attempt replays nothing.
    engine.calls.length = 0;
    await runCodexTurn(params("replay four"));
    expect(engine.calls.filter((c) => c.method === "afterTurn")).toHaveLength(1);
  });
});
