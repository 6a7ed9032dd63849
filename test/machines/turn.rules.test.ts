import { describe, expect, it } from "vitest";
import {
  blockedTurnText,
  bootstrapSkipReason,
  canMaintain,
  hasPromptError,
  isAdmissionDue,
  isAssembleEmpty,
  isOverflowCompactionDue,
  isTurnRefused,
  isBackgroundMaintenance,
  maintenanceSkipReason,
  needsRecovery,
  turnLeftInFlight,
  settleStatus,
  shouldAssemble,
  shouldBootstrap,
  shouldReprojectAfterHooks,
  shouldWarnAssembleEmpty,
  turnOverflowedContext,
  engineCommitsTurns,
  turnCommittable,
  requestAlreadyRecorded,
  requestStatusAtMirror,
} from "../../machines/rules.js";
import type { EngineFacts } from "../../machines/turn.contract.js";
import { fullEngineFacts } from "../helpers/machine-driver.js";

const engine = (over: Partial<EngineFacts> = {}): EngineFacts => fullEngineFacts({ id: "test", ...over });

const ok = {
  aborted: false,
  yieldAborted: false,
  turnAccepted: true,
  record: { codexStatus: "completed" as const },
  finalizeOk: true,
  engine: engine(),
};

describe("turn lifecycle rules", () => {
  it("projects again after the hook only when it changed the developer instructions of a projection that succeeded", () => {
    expect(shouldReprojectAfterHooks({ before: "base", after: "policy\n\nbase", projectionFailed: false })).toBe(true);
    expect(shouldReprojectAfterHooks({ before: undefined, after: "policy", projectionFailed: false })).toBe(true);
    expect(shouldReprojectAfterHooks({ before: "base", after: "base", projectionFailed: false })).toBe(false);
    expect(shouldReprojectAfterHooks({ before: undefined, after: undefined, projectionFailed: false })).toBe(false);
    // A failed projection starts a fresh thread anyway (with the hook's instructions): nothing to decide again.
    expect(shouldReprojectAfterHooks({ before: "base", after: "policy", projectionFailed: true })).toBe(false);
  });

  it("recovers only when the locked session holds a pending record", () => {
    expect(needsRecovery({ pendingRecord: true })).toBe(true);
    expect(needsRecovery({ pendingRecord: false })).toBe(false);
  });

  it("recovers a turn left in flight only when the binding's marker names one", () => {
    expect(turnLeftInFlight({ turnInFlight: true })).toBe(true);
    expect(turnLeftInFlight({ turnInFlight: false })).toBe(false);
  });

  it("bootstraps only an active engine with bootstrap on an existing session", () => {
    expect(shouldBootstrap(engine(), true)).toBe(true);
    expect(shouldBootstrap(engine(), false)).toBe(false);
    expect(shouldBootstrap(engine({ hasBootstrap: false }), true)).toBe(false);
    expect(shouldBootstrap(engine({ active: false }), true)).toBe(false);
    expect(bootstrapSkipReason(engine({ active: false }), true)).toBe("skipped:noEngine");
    expect(bootstrapSkipReason(engine({ hasBootstrap: false }), true)).toBe("skipped:noBootstrap");
    expect(bootstrapSkipReason(engine(), false)).toBe("skipped:newSession");
  });

  it("assembles only with an active engine and treats an empty result as no assembly", () => {
    expect(shouldAssemble(engine())).toBe(true);
    expect(shouldAssemble(engine({ active: false }))).toBe(false);
    expect(isAssembleEmpty(undefined)).toBe(true);
    expect(isAssembleEmpty({ messages: [], estimatedTokens: 0 })).toBe(true);
    expect(isAssembleEmpty({ messages: [{ role: "user", content: "x", timestamp: 1 }], estimatedTokens: 1 })).toBe(false);
    // Only an empty assembly over a non-empty history is worth a warning.
    expect(shouldWarnAssembleEmpty({ messages: [], estimatedTokens: 0 }, 0)).toBe(false);
    expect(shouldWarnAssembleEmpty({ messages: [], estimatedTokens: 0 }, 3)).toBe(true);
    expect(shouldWarnAssembleEmpty(undefined, 1)).toBe(true);
    expect(shouldWarnAssembleEmpty({ messages: [{ role: "user", content: "x", timestamp: 1 }], estimatedTokens: 1 }, 3)).toBe(false);
  });

  it("detects prompt errors from the Codex record or a failure before the turn", () => {
    expect(hasPromptError(ok)).toBe(false);
    expect(hasPromptError({ ...ok, record: { codexStatus: "failed" } })).toBe(true);
    expect(hasPromptError({ ...ok, record: { codexStatus: "interrupted" } })).toBe(true);
    expect(hasPromptError({ ...ok, record: { codexStatus: "timedOut" } })).toBe(true);
    expect(hasPromptError({ ...ok, record: undefined, turnAccepted: true })).toBe(true);
    expect(hasPromptError({ ...ok, failedBeforeTurn: true })).toBe(true);
  });

  it("maintains only after a successful, non-aborted, finalized turn of an engine with maintain", () => {
    expect(canMaintain(ok)).toBe(true);
    expect(maintenanceSkipReason(ok)).toBeUndefined();
    expect(maintenanceSkipReason({ ...ok, engine: engine({ active: false }) })).toBe("skipped:noEngine");
    expect(maintenanceSkipReason({ ...ok, yieldAborted: true, aborted: true })).toBe("skipped:yieldAborted");
    expect(maintenanceSkipReason({ ...ok, aborted: true })).toBe("skipped:aborted");
    expect(maintenanceSkipReason({ ...ok, record: { codexStatus: "failed" } })).toBe("skipped:promptError");
    expect(maintenanceSkipReason({ ...ok, finalizeOk: false })).toBe("skipped:finalizeFailed");
    expect(maintenanceSkipReason({ ...ok, engine: engine({ hasMaintain: false }) })).toBe("skipped:noMaintain");
    for (const bad of [{ aborted: true }, { yieldAborted: true }, { record: { codexStatus: "timedOut" as const } }]) {
      expect(canMaintain({ ...ok, ...bad })).toBe(false);
    }
    expect(isBackgroundMaintenance(engine({ turnMaintenanceMode: "background" }))).toBe(true);
    expect(isBackgroundMaintenance(engine())).toBe(false);
  });

  it("settles yieldAborted > aborted > failed > completed", () => {
    const all = { ...ok, yieldAborted: true, aborted: true, record: { codexStatus: "failed" as const } };
    expect(settleStatus(all)).toBe("yieldAborted");
    expect(settleStatus({ ...all, yieldAborted: false })).toBe("aborted");
    expect(settleStatus({ ...all, yieldAborted: false, aborted: false })).toBe("failed");
    expect(settleStatus({ ...ok, failedBeforeTurn: true, turnAccepted: false, record: undefined })).toBe("failed");
    expect(settleStatus(ok)).toBe("completed");
  });

  it("a refused turn settles blocked, whatever came after the decision", () => {
    const refused = { ...ok, blocked: true, turnAccepted: false, record: undefined };
    expect(settleStatus(refused)).toBe("blocked");
    expect(settleStatus({ ...refused, aborted: true, yieldAborted: true })).toBe("blocked");
    expect(settleStatus({ ...refused, blocked: false })).toBe("completed");
  });

  it("the gate runs once per attempt, and only when registered; its refusal is read from its output", () => {
    expect(isAdmissionDue(true, false)).toBe(true);
    expect(isAdmissionDue(true, true)).toBe(false);
    expect(isAdmissionDue(false, false)).toBe(false);
    expect(isTurnRefused({ admitted: false })).toBe(true);
    expect(isTurnRefused({ admitted: true })).toBe(false);
  });

  it("renders a block as OpenClaw does: the gate's user-facing text when given, always attributed", () => {
    expect(blockedTurnText("Too long", "length-guard")).toBe("Your message could not be sent: Too long (blocked by length-guard)");
    expect(blockedTurnText("  ", "length-guard")).toBe("Your message could not be sent: blocked by length-guard");
    expect(blockedTurnText(undefined, "beforeAgentRun")).toBe("Your message could not be sent: blocked by beforeAgentRun");
    expect(blockedTurnText(undefined, "")).toBe("Your message could not be sent: blocked");
  });
});

describe("context window overflow", () => {
  it("a turn overflowed the window only when Codex says contextWindowExceeded", () => {
    expect(turnOverflowedContext({ error: { codexErrorInfo: "contextWindowExceeded" } })).toBe(true);
    expect(turnOverflowedContext({ error: { codexErrorInfo: "internalServerError" } })).toBe(false);
    expect(turnOverflowedContext({ error: { codexErrorInfo: undefined } })).toBe(false);
    expect(turnOverflowedContext({})).toBe(false);
  });

  it("the next turn's accordion compacts after an overflow only when the accordion is on", () => {
    const on = { enabled: true, contextThreshold: 0.9 };
    expect(isOverflowCompactionDue(on, true)).toBe(true);
    expect(isOverflowCompactionDue(on, false)).toBe(false);
    expect(isOverflowCompactionDue(on, undefined)).toBe(false);
    expect(isOverflowCompactionDue({ ...on, enabled: false }, true)).toBe(false);
    expect(isOverflowCompactionDue(undefined, true)).toBe(false);
  });
});

describe("durable turns (OpenClaw commitTurn)", () => {
  it("engineCommitsTurns: an active engine that declares durable turns; legacy and undeclared engines do not", () => {
    expect(engineCommitsTurns(engine({ durableTurns: true }))).toBe(true);
    expect(engineCommitsTurns(engine())).toBe(false);
    expect(engineCommitsTurns(engine({ durableTurns: false }))).toBe(false);
    expect(engineCommitsTurns(engine({ durableTurns: true, active: false }))).toBe(false);
  });

  it("turnCommittable: only a turn Codex completed, neither aborted nor yield-aborted, and in the transcript", () => {
    const done = { aborted: false, yieldAborted: false, turnAccepted: true, record: { codexStatus: "completed" as const } };
    expect(turnCommittable(done)).toBe(true);
    expect(turnCommittable({ ...done, aborted: true })).toBe(false);
    expect(turnCommittable({ ...done, yieldAborted: true })).toBe(false);
    expect(turnCommittable({ ...done, mirrorFailed: true })).toBe(false);
    for (const codexStatus of ["failed", "interrupted", "timedOut"] as const) expect(turnCommittable({ ...done, record: { codexStatus } })).toBe(false);
  });
});

describe("requestId", () => {
  const done = { aborted: false, yieldAborted: false, turnAccepted: true, record: { codexStatus: "completed" as const } };
  it("a request the transcript holds is replayed; its recorded status is the attempt's status, before anything else", () => {
    expect(requestAlreadyRecorded({})).toBe(false);
    const recordedRequest = { mark: { id: "r", status: "failed" as const }, record: { threadId: "t", turnId: "u", codexStatus: "failed" as const, assistantText: "", messagesSnapshot: [], compactions: [] } };
    expect(requestAlreadyRecorded({ recordedRequest })).toBe(true);
    expect(settleStatus({ ...done, replayed: "failed" })).toBe("failed");
    expect(settleStatus({ ...done, aborted: true, replayed: "completed" })).toBe("completed");
  });
  it("the status recorded with the prompt is the attempt's as it stands when the turn is written", () => {
    expect(requestStatusAtMirror(done)).toBe("completed");
    expect(requestStatusAtMirror({ ...done, aborted: true })).toBe("aborted");
    expect(requestStatusAtMirror({ ...done, yieldAborted: true })).toBe("yieldAborted");
    expect(requestStatusAtMirror({ ...done, record: { codexStatus: "interrupted" } })).toBe("failed");
    // The write it is recorded with is assumed to succeed (a failed one records nothing).
    expect(requestStatusAtMirror({ ...done, mirrorFailed: true })).toBe("completed");
  });
});
