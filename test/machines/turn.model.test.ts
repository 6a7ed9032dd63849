/**
 * Model-based test of the turn statechart. The lifecycle MODEL below is written from the spec (harness spec
 * "Desired behavior" / "Error handling" and the rules), independently of machines/turn.machine.ts and
 * machines/rules.ts: no invokes, one event per outcome. `createTestModel` enumerates its paths; each path is replayed
 * on the REAL machine with controllable fake actors, comparing the lifecycle state after every step and checking the
 * side effects at the end.
 */
import { afterAll, describe, expect, it } from "vitest";
import { assign, setup } from "xstate";
import { createTestModel } from "xstate/graph";
import { turnMachine, type TurnContext } from "../../machines/turn.machine.js";
import type { EngineFacts, TurnMachineInput } from "../../machines/turn.contract.js";
import { ENGINE_FULL, NO_ENGINE, TurnHarness, record, settle, transitionKey, type PromiseActorName } from "./turn-harness.js";

type ModelEvent =
  | { type: "LOCK_OK" | "LOCK_CLEAN" | "LOCK_IN_FLIGHT" | "LOCK_BOTH" | "LOCK_FAIL" | "RECOVER_OK" | "RECOVER_FAIL" | "CUT_OK" | "CUT_FAIL" }
  | { type: "HISTORY_OK" | "HISTORY_REPLAYED" | "HISTORY_FAIL" | "BOOTSTRAP_OK" | "BOOTSTRAP_FAIL" | "ASSEMBLE_OK" | "ASSEMBLE_EMPTY" | "ASSEMBLE_FAIL" }
  | { type: "COMPACT_OK" | "COMPACT_NONE" | "COMPACT_FAIL" | "RELOAD_OK" | "RELOAD_FAIL" }
  | { type: "PROJECT_OK" | "PROJECT_FAIL" | "HOOKS_OK" | "HOOKS_CHANGED" | "HOOKS_FAIL" | "REPROJECT_OK" | "REPROJECT_FAIL" | "THREAD_OK" | "THREAD_FAIL" }
  | { type: "ADMIT_PASS" | "ADMIT_BLOCK" | "ADMIT_FAIL" | "RECORD_BLOCK_OK" | "RECORD_BLOCK_FAIL" }
  | { type: "RESUME_OK" | "RESUME_REFUSED" | "RESUME_FAIL" }
  | { type: "REVERT_OK" | "REVERT_FAIL" | "INJECT_OK" | "INJECT_FAIL" }
  | { type: "TURN_ACCEPTED" | "TURN_START_FAIL" | "TURN_COMPLETED" | "TURN_FAILED" | "TURN_OVERFLOWED" | "INTERRUPT_TIMEOUT" }
  | { type: "MIRROR_OK" | "MIRROR_FAIL" | "FINALIZE_OK" | "FINALIZE_FAIL" | "COMMIT_OK" | "COMMIT_DUPLICATE" | "COMMIT_FAIL" | "MAINTAIN_OK" | "MAINTAIN_FAIL" }
  | { type: "ABORT" | "YIELD" | "STEER" };

interface ModelContext {
  cfg: TurnMachineInput;
  aborted: boolean;
  yielded: boolean;
  accepted: boolean;
  promptError: boolean;
  finalizeOk: boolean;
  /** The bound thread could not be resumed once: the model projects again for a fresh thread. */
  fellBack: boolean;
  /** The last projection failed: the machine then always starts a fresh thread. */
  projectFailed: boolean;
  /** The gate admitted the turn: a re-projection after a refused resume does not ask it again. */
  admitted: boolean;
  /** The binding records a turn an earlier attempt left in flight: it is recovered after any pending records. */
  inFlight: boolean;
  /** This turn failed because its input no longer fit the context window: the binding must say so for the next turn. */
  overflowed: boolean;
  /**
   * Decided on entering finalize, for an engine that takes durable turns (OpenClaw's commitTurn): the turn is one
   * OpenClaw accepts (Codex completed it, no abort, no yield), so it is committed; else it is not committed at all.
   */
  commits: boolean;
  skipsCommit: boolean;
}

// --- The independent lifecycle model -------------------------------------------------------------------------
const wantsBootstrap = (c: ModelContext) => c.cfg.engine.active && c.cfg.engine.hasBootstrap && c.cfg.hadSessionFile;
// The spec's accordion: an engine that compacts, the cadence enabled, and the last usage past the threshold (the
// configurations below that enable it report usage past it, except the one marked by session key "overflow").
const accordionDue = (c: ModelContext) => c.cfg.engine.active && c.cfg.accordion?.enabled === true && c.cfg.sessionKey !== "overflow";
// The last turn on the bound thread overflowed the context window (session key "overflow"; its usage is below the
// threshold): with the cadence on, the engine compacts first all the same.
const overflowDue = (c: ModelContext) => c.cfg.engine.active && c.cfg.accordion?.enabled === true && c.cfg.sessionKey === "overflow";
// A configuration whose session has a compatible bound thread (marked by its session key) plans a resume.
const resumePlanned = (c: ModelContext) => ["resume", "native", "nativeRevert"].includes(c.cfg.sessionKey ?? "") && !c.fellBack && !c.projectFailed;
// Native projection mode (docs/projection.md): the session key says what the sync before the turn does. "native":
// the bound thread is reverted, then the rest of the view injected; "nativeRevert": reverted only (the kept prefix is
// the whole view); "nativeFresh": a fresh thread gets the view injected before its first turn.
const nativeRevert = (c: ModelContext) => resumePlanned(c) && (c.cfg.sessionKey === "native" || c.cfg.sessionKey === "nativeRevert");
const nativeInject = (c: ModelContext) => (resumePlanned(c) && c.cfg.sessionKey === "native") || (c.cfg.sessionKey === "nativeFresh" && !c.projectFailed);
// Durable turns: the engine declared OpenClaw's transcript semantics and implements commitTurn.
const durable = (c: ModelContext) => c.cfg.engine.active && c.cfg.engine.durableTurns === true;
const acceptedByOpenClaw = (c: ModelContext) => !c.aborted && !c.yielded && !c.promptError;
const maintenanceAllowed = (c: ModelContext) =>
  c.cfg.engine.active && c.cfg.engine.hasMaintain && !c.aborted && !c.yielded && !c.promptError && c.finalizeOk;

export const lifecycleModel = setup({
  types: { context: {} as ModelContext, events: {} as ModelEvent, input: {} as TurnMachineInput },
  guards: {
    wantsBootstrap: ({ context }) => wantsBootstrap(context),
    accordionDue: ({ context }) => accordionDue(context),
    overflowDue: ({ context }) => overflowDue(context),
    resumePlanned: ({ context }) => resumePlanned(context),
    nativeRevert: ({ context }) => nativeRevert(context),
    nativeInject: ({ context }) => nativeInject(context),
    mayFallBack: ({ context }) => !context.fellBack,
    engineActive: ({ context }) => context.cfg.engine.active,
    hooks: ({ context }) => context.cfg.hasPromptHooks,
    // A gate judges the final turn (after the prompt hooks and every projection), before any thread work.
    gate: ({ context }) => context.cfg.hasAdmissionGate === true && !context.admitted,
    projected: ({ context }) => !context.projectFailed,
    yielded: ({ context }) => context.yielded,
    aborted: ({ context }) => context.aborted,
    accepted: ({ context }) => context.accepted,
    maintainForeground: ({ context }) => maintenanceAllowed(context) && context.cfg.engine.turnMaintenanceMode === "foreground",
    promptError: ({ context }) => context.promptError,
    notAbortedYet: ({ context }) => !context.aborted && !context.yielded,
    inFlight: ({ context }) => context.inFlight,
    hasRequestId: ({ context }) => context.cfg.requestId !== undefined,
    commitsNow: ({ context }) => durable(context) && acceptedByOpenClaw(context),
    skipsCommitNow: ({ context }) => durable(context) && !acceptedByOpenClaw(context),
  },
  actions: {
    abort: assign({ aborted: true }),
    yieldIt: assign({ yielded: true }),
    accept: assign({ accepted: true }),
    turnFailed: assign({ promptError: true }),
    finalizeOk: assign({ finalizeOk: true }),
    fallBack: assign({ fellBack: true }),
    projectOk: assign({ projectFailed: false }),
    projectFail: assign({ projectFailed: true }),
    admit: assign({ admitted: true }),
    leftInFlight: assign({ inFlight: true }),
    overflow: assign({ overflowed: true }),
    decideCommit: assign(({ context }) => ({ commits: durable(context) && acceptedByOpenClaw(context), skipsCommit: durable(context) && !acceptedByOpenClaw(context) })),
  },
}).createMachine({
  id: "model",
  context: ({ input }) => ({ cfg: input, aborted: false, yielded: false, accepted: false, promptError: false, finalizeOk: false, fellBack: false, projectFailed: false, admitted: false, inFlight: false, overflowed: false, commits: false, skipsCommit: false }),
  initial: "lock",
  states: {
    // One attempt at a time per session; a crashed attempt's turn is completed before this one starts.
    // Then a turn an earlier attempt left in flight (Codex accepted it, nothing recorded it) is rebuilt from Codex.
    lock: {
      on: {
        LOCK_OK: "recover",
        LOCK_BOTH: { target: "recover", actions: "leftInFlight" },
        LOCK_IN_FLIGHT: "recoverCutTurn",
        LOCK_CLEAN: "loadHistory",
        LOCK_FAIL: "failed",
        ABORT: "aborted",
        YIELD: "yieldAborted",
        STEER: {},
      },
    },
    recover: { on: { RECOVER_OK: [{ guard: "inFlight", target: "recoverCutTurn" }, { target: "loadHistory" }], RECOVER_FAIL: "failed", ABORT: "aborted", YIELD: "yieldAborted" } },
    recoverCutTurn: { on: { CUT_OK: "loadHistory", CUT_FAIL: "failed", ABORT: "aborted", YIELD: "yieldAborted" } },
    loadHistory: {
      on: {
        HISTORY_OK: [
          { guard: "wantsBootstrap", target: "bootstrap" },
          { guard: "accordionDue", target: "compactBeforeTurn" },
          { guard: "overflowDue", target: "compactBeforeTurn" },
          { guard: "engineActive", target: "assemble" },
          { target: "project" },
        ],
        HISTORY_FAIL: "failed",
        // requestId: the transcript already holds the request (recorded completed): returned as it is, nothing runs.
        HISTORY_REPLAYED: { guard: "hasRequestId", target: "completed" },
        ABORT: "aborted",
        YIELD: "yieldAborted",
        STEER: {},
      },
    },
    bootstrap: {
      on: {
        BOOTSTRAP_OK: [{ guard: "accordionDue", target: "compactBeforeTurn" }, { guard: "overflowDue", target: "compactBeforeTurn" }, { target: "assemble" }],
        BOOTSTRAP_FAIL: [{ guard: "accordionDue", target: "compactBeforeTurn" }, { guard: "overflowDue", target: "compactBeforeTurn" }, { target: "assemble" }],
        ABORT: "aborted",
        YIELD: "yieldAborted",
      },
    },
    // The engine compacts before the turn; a compacted view is re-read and goes to a fresh thread.
    compactBeforeTurn: {
      on: { COMPACT_OK: "reloadHistory", COMPACT_NONE: "assemble", COMPACT_FAIL: "assemble", ABORT: "aborted", YIELD: "yieldAborted" },
    },
    reloadHistory: { on: { RELOAD_OK: "assemble", RELOAD_FAIL: "assemble", ABORT: "aborted", YIELD: "yieldAborted" } },
    assemble: {
      on: { ASSEMBLE_OK: "project", ASSEMBLE_EMPTY: "project", ASSEMBLE_FAIL: "project", ABORT: "aborted", YIELD: "yieldAborted" },
    },
    project: {
      on: {
        PROJECT_OK: [
          { guard: "hooks", target: "hooks", actions: "projectOk" },
          { guard: "gate", target: "admitting", actions: "projectOk" },
          { guard: "resumePlanned", target: "threadResume", actions: "projectOk" },
          { target: "threadStart", actions: "projectOk" },
        ],
        // A failed projection always starts a fresh thread.
        PROJECT_FAIL: [
          { guard: "hooks", target: "hooks", actions: "projectFail" },
          { guard: "gate", target: "admitting", actions: "projectFail" },
          { target: "threadStart", actions: "projectFail" },
        ],
        ABORT: "aborted",
        YIELD: "yieldAborted",
      },
    },
    hooks: {
      on: {
        HOOKS_OK: [{ guard: "gate", target: "admitting" }, { guard: "resumePlanned", target: "threadResume" }, { target: "threadStart" }],
        // The hook changed the developer instructions: the thread decision is made again with them (the spec passes the
        // FINAL instructions to startOrResumeThread). A failed projection has no decision to redo.
        HOOKS_CHANGED: [
          { guard: "projected", target: "reproject" },
          { guard: "gate", target: "admitting" },
          { guard: "resumePlanned", target: "threadResume" },
          { target: "threadStart" },
        ],
        HOOKS_FAIL: [{ guard: "gate", target: "admitting" }, { guard: "resumePlanned", target: "threadResume" }, { target: "threadStart" }],
        ABORT: "aborted",
        YIELD: "yieldAborted",
      },
    },
    reproject: {
      on: {
        REPROJECT_OK: [
          { guard: "gate", target: "admitting", actions: "projectOk" },
          { guard: "resumePlanned", target: "threadResume", actions: "projectOk" },
          { target: "threadStart", actions: "projectOk" },
        ],
        // Like a failed projection: a fresh thread, with the hook's prompt and instructions.
        REPROJECT_FAIL: [{ guard: "gate", target: "admitting", actions: "projectFail" }, { target: "threadStart", actions: "projectFail" }],
        ABORT: "aborted",
        YIELD: "yieldAborted",
      },
    },
    // OpenClaw's before_agent_run: admitted turns go on; refused ones (and a gate that fails: fail-closed) start no
    // Codex work and are recorded as a redacted user message.
    admitting: {
      on: {
        ADMIT_PASS: [{ guard: "resumePlanned", target: "threadResume", actions: "admit" }, { target: "threadStart", actions: "admit" }],
        ADMIT_BLOCK: "recordingBlock",
        ADMIT_FAIL: "recordingBlock",
        ABORT: "aborted",
        YIELD: "yieldAborted",
      },
    },
    // The decision is made: an abort now has nothing to stop, and a failed record only warns.
    recordingBlock: { on: { RECORD_BLOCK_OK: "blocked", RECORD_BLOCK_FAIL: "blocked", ABORT: {}, YIELD: {} } },
    // The projection planned a resume of the bound thread, or a fresh thread.
    threadResume: {
      on: {
        RESUME_OK: [{ guard: "nativeRevert", target: "nativeReverting" }, { guard: "nativeInject", target: "nativeInjecting" }, { target: "turnStarting" }],
        // Codex refuses the bound thread: project again, for a fresh thread (once).
        RESUME_REFUSED: [{ guard: "mayFallBack", target: "project", actions: "fallBack" }, { target: "failed" }],
        RESUME_FAIL: "failed",
        ABORT: "aborted",
        YIELD: "yieldAborted",
      },
    },
    threadStart: {
      on: { THREAD_OK: [{ guard: "nativeInject", target: "nativeInjecting" }, { target: "turnStarting" }], THREAD_FAIL: "failed", ABORT: "aborted", YIELD: "yieldAborted" },
    },
    // Native mode: the thread is cut back (its intent recorded first) and the view's rest injected, while it is idle.
    nativeReverting: {
      on: { REVERT_OK: [{ guard: "nativeInject", target: "nativeInjecting" }, { target: "turnStarting" }], REVERT_FAIL: "failed", ABORT: "aborted", YIELD: "yieldAborted" },
    },
    nativeInjecting: { on: { INJECT_OK: "turnStarting", INJECT_FAIL: "failed", ABORT: "aborted", YIELD: "yieldAborted" } },
    turnStarting: {
      on: {
        TURN_ACCEPTED: { target: "turnStreaming", actions: "accept" },
        TURN_START_FAIL: "failed",
        ABORT: { target: "interrupting", actions: "abort" },
        YIELD: { target: "interrupting", actions: "yieldIt" },
      },
    },
    turnStreaming: {
      on: {
        TURN_COMPLETED: "mirror",
        TURN_FAILED: { target: "mirror", actions: "turnFailed" },
        // The input no longer fit the model's context window: a failed turn whose binding says so.
        TURN_OVERFLOWED: { target: "mirror", actions: ["turnFailed", "overflow"] },
        ABORT: { target: "interrupting", actions: "abort" },
        YIELD: { target: "interrupting", actions: "yieldIt" },
        STEER: {},
      },
    },
    interrupting: {
      on: {
        TURN_ACCEPTED: { guard: ({ context }) => !context.accepted, actions: "accept" },
        TURN_START_FAIL: [
          { guard: ({ context }) => !context.accepted && context.yielded, target: "yieldAborted" },
          { guard: ({ context }) => !context.accepted, target: "aborted" },
        ],
        // A turn that ended was accepted by Codex (it has a turn id), whatever order the events arrived in.
        TURN_FAILED: { target: "mirror", actions: ["accept", "turnFailed"] },
        INTERRUPT_TIMEOUT: [
          { guard: "accepted", target: "mirror", actions: "turnFailed" },
          { guard: "yielded", target: "yieldAborted" },
          { target: "aborted" },
        ],
      },
    },
    mirror: {
      on: {
        MIRROR_OK: [
          { guard: "commitsNow", target: "committing", actions: "decideCommit" },
          // A durable engine's turn OpenClaw would not accept: not committed, only its pending record is cleared.
          { guard: "skipsCommitNow", target: "settle", actions: "decideCommit" },
          { target: "finalize" },
        ],
        // The turn is in no transcript: it is failed (whatever was asked), kept in the pending record, not finalized.
        MIRROR_FAIL: "failed",
        ABORT: { guard: "notAbortedYet", actions: "abort" },
        YIELD: { guard: "notAbortedYet", actions: "yieldIt" },
      },
    },
    finalize: {
      on: {
        FINALIZE_OK: { target: "settle", actions: "finalizeOk" },
        FINALIZE_FAIL: "settle",
        ABORT: { guard: "notAbortedYet", actions: "abort" },
        YIELD: { guard: "notAbortedYet", actions: "yieldIt" },
      },
    },
    // A durable engine's accepted turn: commitTurn instead of afterTurn; `duplicate` (a retried key) is success too.
    committing: {
      on: {
        COMMIT_OK: { target: "settle", actions: "finalizeOk" },
        COMMIT_DUPLICATE: { target: "settle", actions: "finalizeOk" },
        COMMIT_FAIL: "settle",
        ABORT: { guard: "notAbortedYet", actions: "abort" },
        YIELD: { guard: "notAbortedYet", actions: "yieldIt" },
      },
    },
    settle: {
      always: [
        { guard: "maintainForeground", target: "maintain" },
        { guard: "yielded", target: "yieldAborted" },
        { guard: "aborted", target: "aborted" },
        { guard: "promptError", target: "failed" },
        { target: "completed" },
      ],
    },
    maintain: {
      on: { MAINTAIN_OK: "completed", MAINTAIN_FAIL: "completed", ABORT: "aborted", YIELD: "yieldAborted" },
    },
    completed: { type: "final" },
    failed: { type: "final" },
    aborted: { type: "final" },
    yieldAborted: { type: "final" },
    blocked: { type: "final" },
  },
});

// --- Mapping model events onto the real machine ---------------------------------------------------------------
const ok = (name: PromiseActorName, value: unknown) => (h: TurnHarness) => h.resolve(name, value);
const fail = (name: PromiseActorName) => (h: TurnHarness) => h.reject(name);
const history = { messages: [], origins: [] };
const projection = {
  mode: "delta",
  reason: "test",
  promptText: "prompt",
  thread: { action: "start", reason: "test" },
  entriesSent: 0,
  bytes: 6,
};

const USAGE_OVER_THRESHOLD = { totalTokens: 95, modelContextWindow: 100 };
const USAGE_UNDER_THRESHOLD = { totalTokens: 50, modelContextWindow: 100 };
/** The projection the real machine gets for a configuration (native sessions carry their sync). */
function projectionFor(c: TurnContext, extra: Record<string, unknown> = {}): unknown {
  const key = c.input.sessionKey ?? "";
  const resume = ["resume", "native", "nativeRevert"].includes(key) && !c.thread.resumeFellBack;
  const thread = resume ? { action: "resume", threadId: "thread-0", reason: "compatibleBinding" } : projection.thread;
  const item = { type: "message", role: "user", content: [{ type: "input_text", text: "earlier" }] };
  const counts = { viewUnits: 1, keptTurns: 0, revertedTurns: 1, injectedItems: 1, injectedBytes: 80, staleBytes: 0 };
  const sync = (revert: boolean, items: unknown[]) => ({ reason: revert ? "revert" : "noRecord", ...(revert ? { revertBeforeTurnId: "turn-0" } : {}), items, units: [], record: {}, counts });
  let nativeSync: unknown;
  if (resume && key === "native") nativeSync = sync(true, [item]);
  else if (resume && key === "nativeRevert") nativeSync = sync(true, []);
  else if (key === "nativeFresh") nativeSync = sync(false, [item]);
  return { ...projection, thread, ...extra, ...(nativeSync ? { mode: "native", nativeSync } : {}) };
}

const refused = (h: TurnHarness) => h.reject("resumeThread", "no rollout found", "THREAD_RESUME_FAILED");
const ctxOf = (h: TurnHarness) => (h.actor.getSnapshot() as { context: TurnContext }).context;

const exec: Record<ModelEvent["type"], (h: TurnHarness) => void> = {
  // A crashed attempt left a pending record (recovery runs), or the session is clean (recovery is skipped).
  LOCK_OK: ok("acquireSessionLock", { waitedMs: 0, pendingRecord: true, turnInFlight: false }),
  LOCK_CLEAN: ok("acquireSessionLock", { waitedMs: 0, pendingRecord: false, turnInFlight: false }),
  LOCK_IN_FLIGHT: ok("acquireSessionLock", { waitedMs: 0, pendingRecord: false, turnInFlight: true }),
  LOCK_BOTH: ok("acquireSessionLock", { waitedMs: 0, pendingRecord: true, turnInFlight: true }),
  CUT_OK: ok("recoverCutTurn", { turnId: "turn-0", outcome: "recovered", messages: 2 }),
  CUT_FAIL: fail("recoverCutTurn"),
  LOCK_FAIL: fail("acquireSessionLock"),
  RECOVER_OK: ok("recoverSession", { pending: 0, mirroredMessages: 0, finalized: 0, dropped: 0 }),
  RECOVER_FAIL: fail("recoverSession"),
  HISTORY_OK: (h) => {
    const input = ctxOf(h).input;
    const overflow = input.sessionKey === "overflow";
    const usage = input.accordion ? { lastUsage: overflow ? USAGE_UNDER_THRESHOLD : USAGE_OVER_THRESHOLD } : {};
    h.resolve("readHistory", { history, sessionFileExisted: input.hadSessionFile, ...usage, ...(overflow ? { contextOverflowed: true } : {}) });
  },
  COMPACT_OK: ok("compactEngine", { compacted: true, failed: false }),
  COMPACT_NONE: ok("compactEngine", { compacted: false, failed: false, reason: "notCompacted" }),
  COMPACT_FAIL: fail("compactEngine"),
  RELOAD_OK: ok("rereadHistory", history),
  RELOAD_FAIL: fail("rereadHistory"),
  RESUME_OK: ok("resumeThread", { threadId: "thread-0", resumed: true }),
  RESUME_REFUSED: refused,
  RESUME_FAIL: fail("resumeThread"),
  HISTORY_FAIL: fail("readHistory"),
  // Only a turn with a request id looks its request up (the model's guard): without one the event is not possible.
  HISTORY_REPLAYED: (h) => {
    if (ctxOf(h).input.requestId === undefined) return;
    h.resolve("readHistory", {
      history,
      sessionFileExisted: true,
      recordedRequest: { mark: { id: "req", status: "completed" }, record: { ...record("completed"), turnId: "turn-recorded" } },
    });
  },
  BOOTSTRAP_OK: ok("bootstrapEngine", { ...history, bootstrapped: true }),
  BOOTSTRAP_FAIL: fail("bootstrapEngine"),
  ASSEMBLE_OK: ok("assembleContext", { messages: [{ role: "user", content: "earlier", timestamp: 1 }], estimatedTokens: 2 }),
  ASSEMBLE_EMPTY: ok("assembleContext", { messages: [], estimatedTokens: 0 }),
  ASSEMBLE_FAIL: fail("assembleContext"),
  PROJECT_OK: (h) => h.resolve("projectContext", projectionFor(ctxOf(h))),
  PROJECT_FAIL: fail("projectContext"),
  HOOKS_OK: ok("runPromptHooks", { promptText: "prompt" }),
  HOOKS_CHANGED: ok("runPromptHooks", { promptText: "prompt", developerInstructions: "hooked" }),
  REPROJECT_OK: (h) => h.resolve("projectContext", projectionFor(ctxOf(h), { developerInstructions: "hooked" })),
  REPROJECT_FAIL: fail("projectContext"),
  HOOKS_FAIL: fail("runPromptHooks"),
  ADMIT_PASS: ok("admitTurn", { admitted: true }),
  ADMIT_BLOCK: ok("admitTurn", { admitted: false, blockedBy: "guard", message: "Your message could not be sent: no (blocked by guard)" }),
  ADMIT_FAIL: fail("admitTurn"),
  RECORD_BLOCK_OK: ok("recordBlockedTurn", { entryId: "e1", userMessage: { role: "user", content: [{ type: "text", text: "refused" }], timestamp: 1 } }),
  RECORD_BLOCK_FAIL: fail("recordBlockedTurn"),
  THREAD_OK: ok("startThread", { threadId: "thread-1", resumed: false }),
  REVERT_OK: ok("revertThread", { reverted: true, injectedItems: 0, injectedBytes: 0 }),
  REVERT_FAIL: fail("revertThread"),
  INJECT_OK: ok("injectItems", { reverted: true, injectedItems: 1, injectedBytes: 80 }),
  INJECT_FAIL: fail("injectItems"),
  THREAD_FAIL: fail("startThread"),
  TURN_ACCEPTED: (h) => h.emit({ type: "TURN.ACCEPTED", turnId: "turn-1" }),
  TURN_START_FAIL: (h) => h.emit({ type: "TURN.START_FAILED", error: { phase: "turnRunning", message: "rejected" } }),
  TURN_COMPLETED: (h) => h.emit({ type: "TURN.ENDED", record: record("completed") }),
  TURN_FAILED: (h) => h.emit({ type: "TURN.ENDED", record: record("interrupted") }),
  TURN_OVERFLOWED: (h) =>
    h.emit({ type: "TURN.ENDED", record: { ...record("failed"), error: { message: "Codex ran out of room in the model's context window.", codexErrorInfo: "contextWindowExceeded" } } }),
  INTERRUPT_TIMEOUT: (h) => h.clock.increment(10_000),
  MIRROR_OK: ok("mirrorTranscript", { appended: 2 }),
  MIRROR_FAIL: fail("mirrorTranscript"),
  FINALIZE_OK: ok("finalizeEngine", { mode: "afterTurn", usedFallback: false }),
  FINALIZE_FAIL: fail("finalizeEngine"),
  COMMIT_OK: ok("commitEngineTurn", { status: "committed", advancementKey: "codex-turn:v1:k", messages: 2, admissionEntryId: "e1", terminalEntryId: "e2", admissionSeq: 1, terminalSeq: 2 }),
  COMMIT_DUPLICATE: ok("commitEngineTurn", { status: "duplicate", advancementKey: "codex-turn:v1:k", messages: 2, admissionEntryId: "e1", terminalEntryId: "e2", admissionSeq: 1, terminalSeq: 2 }),
  COMMIT_FAIL: fail("commitEngineTurn"),
  MAINTAIN_OK: ok("maintainEngine", { changed: false }),
  MAINTAIN_FAIL: fail("maintainEngine"),
  ABORT: (h) => h.send({ type: "ABORT" }),
  YIELD: (h) => h.send({ type: "YIELD" }),
  STEER: (h) => h.send({ type: "STEER", text: "steer" }),
};

const configs: Array<{ name: string; input: TurnMachineInput }> = [
  { name: "no engine", input: cfg(NO_ENGINE, true, false) },
  { name: "full engine, existing session, prompt hooks, an admission gate, message write hooks", input: { ...cfg(ENGINE_FULL, true, true, true), hasMessageWriteHooks: true } },
  { name: "engine without bootstrap/maintain", input: cfg({ ...ENGINE_FULL, hasBootstrap: false, hasMaintain: false }, true, false) },
  { name: "background maintenance, new session, an admission gate", input: cfg({ ...ENGINE_FULL, turnMaintenanceMode: "background" }, false, false, true) },
  {
    name: "accordion due, a bound thread to resume, prompt hooks and an admission gate",
    input: { ...cfg({ ...ENGINE_FULL, ownsCompaction: true }, true, true, true), accordion: { enabled: true, contextThreshold: 0.9 }, sessionKey: "resume" },
  },
  { name: "no engine, prompt hooks without a gate", input: cfg(NO_ENGINE, true, true) },
  {
    name: "accordion on, usage under its threshold, the last turn overflowed the context window",
    input: { ...cfg({ ...ENGINE_FULL, ownsCompaction: true }, true, false), accordion: { enabled: true, contextThreshold: 0.9 }, sessionKey: "overflow" },
  },
  { name: "native projection: revert the bound thread, then inject the view's rest", input: { ...cfg({ ...ENGINE_FULL, hasBootstrap: false, hasMaintain: false }, true, false), sessionKey: "native" } },
  { name: "native projection: revert only", input: { ...cfg({ ...ENGINE_FULL, hasBootstrap: false, hasMaintain: false }, true, false), sessionKey: "nativeRevert" } },
  { name: "native projection: a fresh thread gets the view injected", input: { ...cfg({ ...ENGINE_FULL, hasBootstrap: false, hasMaintain: false }, true, false), sessionKey: "nativeFresh" } },
  {
    name: "durable turns (commitTurn instead of afterTurn), foreground maintenance, a request id",
    input: { ...cfg({ ...ENGINE_FULL, hasBootstrap: false, durableTurns: true }, true, false), requestId: "req" },
  },
];

function cfg(engine: EngineFacts, hadSessionFile: boolean, hasPromptHooks: boolean, hasAdmissionGate = false): TurnMachineInput {
  return { sessionId: "s", sessionFile: "/sessions/s.jsonl", prompt: "prompt", engine, hadSessionFile, hasPromptHooks, hasAdmissionGate };
}

const modelValue = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value));

interface ReplayFailure {
  path: string;
  reason: string;
}

/** Replay one model path on the real machine; returns a failure description or undefined. */
async function replay(
  input: TurnMachineInput,
  steps: Array<{ event: ModelEvent; state: { value: unknown; context: ModelContext } }>,
  harness: TurnHarness,
): Promise<string | undefined> {
  await settle();
  for (const step of steps) {
    if (step.event.type === ("xstate.init" as string)) continue;
    try {
      exec[step.event.type](harness);
    } catch (error) {
      return `${step.event.type}: ${(error as Error).message}`;
    }
    await settle();
    const expected = modelValue(step.state.value);
    const actual = harness.output ? harness.lifecycleState() : harness.lifecycleState();
    if (expected !== actual) return `after ${step.event.type}: model ${expected}, machine ${actual}`;
  }
  const last = steps[steps.length - 1]!.state;
  const final = modelValue(last.value);
  if (["completed", "failed", "aborted", "yieldAborted", "blocked"].includes(final)) {
    if (harness.output?.status !== final) return `final status: model ${final}, machine ${harness.output?.status}`;
    // A refused turn starts no Codex work, says who refused it, and is recorded (the gate ran exactly once).
    if (final === "blocked") {
      if (["resumeThread", "startThread", "runTurn"].some((c) => harness.calls.includes(c))) return `blocked turn did Codex work: ${harness.calls.join(",")}`;
      if (!harness.output.blocked?.message || !harness.calls.includes("recordBlockedTurn")) return "blocked turn without its block or its record";
    }
    if (harness.calls.filter((c) => c === "admitTurn").length > 1) return "the gate ran more than once";
    if (harness.calls.includes("admitTurn") !== (input.hasAdmissionGate === true && steps.some((st) => modelValue(st.state.value) === "admitting"))) {
      return "the gate ran although the model never reached it (or vice versa)";
    }
    const ctx = last.context;
    const passedMaintain = steps.some((st) => modelValue(st.state.value) === "maintain");
    if (harness.calls.includes("maintainEngine") !== passedMaintain) return "maintenance ran although the model never reached maintain (or vice versa)";
    // A turn that overflowed the context window is recorded in the binding for the next turn, and no other is.
    if (harness.contextOverflows.length !== (ctx.overflowed ? 1 : 0)) return `context overflow recorded ${harness.contextOverflows.length} times (model: ${ctx.overflowed})`;
    if (!ctx.accepted && (harness.calls.includes("mirrorTranscript") || harness.calls.includes("finalizeEngine") || harness.calls.includes("commitEngineTurn"))) {
      return "mirrored/finalized a turn Codex never accepted";
    }
    // A replayed request runs nothing: no engine call, no Codex work, no write.
    if (steps.some((st) => st.event.type === "HISTORY_REPLAYED")) {
      const ran = harness.calls.filter((c) => !["acquireSessionLock", "recoverSession", "recoverCutTurn", "readHistory"].includes(c));
      if (ran.length > 0) return `a replayed request ran ${ran.join(",")}`;
      if (harness.output.request?.replayed !== true || harness.output.turnId !== "turn-recorded") return "the replayed request's outcome is not the recorded one";
    }
    // A durable engine is committed (never afterTurn'd), exactly when the model committed the turn.
    if (durable(ctx) && harness.calls.includes("finalizeEngine")) return "a durable engine was finalized the legacy way";
    if (harness.calls.filter((c) => c === "commitEngineTurn").length !== (ctx.commits ? 1 : 0)) return `commitTurn ran ${harness.calls.filter((c) => c === "commitEngineTurn").length} times (model: ${ctx.commits})`;
    if (harness.calls.includes("clearPendingRecord") !== ctx.skipsCommit) return "the uncommitted durable turn's pending record was not cleared (or cleared without reason)";
    if (ctx.commits && harness.output.engine.finalize !== "commitTurn" && steps.at(-2)?.event.type !== "COMMIT_FAIL" && !steps.some((st) => st.event.type === "COMMIT_FAIL")) {
      return `engine.finalize is ${harness.output.engine.finalize} after a commit`;
    }
    const background = maintenanceAllowed(ctx) && input.engine.turnMaintenanceMode === "background";
    if (background !== harness.backgroundScheduled > 0) return `background maintenance: model ${background}, machine ${harness.backgroundScheduled}`;
    // Engine calls happen in lifecycle order.
    const order = ["acquireSessionLock", "recoverSession", "recoverCutTurn", "readHistory", "bootstrapEngine", "compactEngine", "rereadHistory", "assembleContext", "projectContext", "runPromptHooks", "admitTurn", "recordBlockedTurn", "resumeThread", "startThread", "revertThread", "injectItems", "runTurn", "prepareTranscriptMessages", "recordPendingFinalize", "mirrorTranscript", "rereadHistoryForFinalize", "finalizeEngine", "commitEngineTurn", "clearPendingRecord", "maintainEngine"];
    // A refused resume goes back to project once: order is checked from the last projection on.
    const calls = harness.calls.slice(Math.max(0, harness.calls.lastIndexOf("projectContext")));
    const head = harness.calls.slice(0, Math.max(0, harness.calls.lastIndexOf("projectContext")));
    const indexes = [...head.filter((c) => c !== "projectContext" && c !== "resumeThread" && c !== "runPromptHooks" && c !== "admitTurn"), ...calls].map((c) => order.indexOf(c));
    if (indexes.some((v, i) => i > 0 && v < indexes[i - 1]!)) return `call order ${harness.calls.join(",")}`;
    if (harness.output.trace[harness.output.trace.length - 1] !== final) return `trace ends with ${harness.output.trace.at(-1)}`;
  }
  return undefined;
}

async function runModel(input: TurnMachineInput, guards?: Record<string, () => boolean>) {
  const model = createTestModel(lifecycleModel.provide({}) as never);
  const paths = model.getShortestPaths({ input } as never) as unknown as Array<{
    steps: Array<{ event: ModelEvent; state: { value: unknown; context: ModelContext } }>;
  }>;
  const failures: ReplayFailure[] = [];
  const harnesses: TurnHarness[] = [];
  for (const path of paths) {
    const harness = new TurnHarness(input, turnMachine, guards, SESSION_ACTORS);
    harnesses.push(harness);
    const reason = await replay(input, path.steps, harness);
    if (reason) failures.push({ path: path.steps.map((s) => s.event.type).join(" > "), reason });
    harness.actor.stop();
  }
  return { paths, failures, harnesses };
}

/** The model drives the session steps itself; the pending record and finalize's re-read settle on their own. */
const SESSION_ACTORS: PromiseActorName[] = ["acquireSessionLock", "recoverSession", "recoverCutTurn"];

const coverage = { paths: 0, steps: 0, states: new Set<string>(), transitions: new Set<unknown>() };

describe("turn machine against the independent lifecycle model", () => {
  for (const { name, input } of configs) {
    it(`replays every shortest path of the model: ${name}`, async () => {
      const { paths, failures, harnesses } = await runModel(input);
      expect(paths.length).toBeGreaterThan(5);
      expect(failures.slice(0, 5)).toEqual([]);
      coverage.paths += paths.length;
      for (const p of paths) coverage.steps += p.steps.length;
      for (const h of harnesses) {
        for (const id of h.visitedStateIds) coverage.states.add(id);
        for (const t of h.takenTransitions) coverage.transitions.add(t);
      }
    }, 120_000);
  }

  // Events that never change the lifecycle state, so shortest paths skip them: scenario checks that also count
  // towards coverage.
  const track = (h: TurnHarness) => {
    for (const id of h.visitedStateIds) coverage.states.add(id);
    for (const t of h.takenTransitions) coverage.transitions.add(t);
  };
  const drive = async (h: TurnHarness, events: ModelEvent["type"][]) => {
    await settle();
    for (const e of events) {
      exec[e](h);
      await settle();
    }
  };

  it("keeps steers that arrive before the turn as follow-ups and forwards steers during it", async () => {
    const h = new TurnHarness(configs[0]!.input);
    await drive(h, ["STEER", "HISTORY_OK", "PROJECT_OK", "THREAD_OK", "TURN_ACCEPTED", "STEER"]);
    h.emit({ type: "TURN.STEER_REJECTED", texts: ["late steer"] });
    await drive(h, ["TURN_COMPLETED", "MIRROR_OK", "FINALIZE_OK"]);
    expect(h.forwarded).toEqual([{ type: "TURN.STEER", text: "steer" }]);
    expect(h.output?.followUps).toEqual(["steer", "late steer"]);
    expect(h.output?.status).toBe("completed");
    track(h);
  });

  it("records native compactions reported during the turn", async () => {
    const h = new TurnHarness(configs[0]!.input);
    await drive(h, ["HISTORY_OK", "PROJECT_OK", "THREAD_OK", "TURN_ACCEPTED"]);
    const compaction = { backend: "codex-app-server" as const, threadId: "thread-1", turnId: "turn-1", itemId: "c1", completed: true };
    h.emit({ type: "TURN.COMPACTION", compaction });
    await settle();
    expect(ctxOf(h).turn.compactions).toEqual([compaction]);
    await drive(h, ["ABORT", "INTERRUPT_TIMEOUT", "MIRROR_OK", "FINALIZE_OK"]);
    expect(h.output?.status).toBe("aborted");
    expect(h.output?.record?.codexStatus).toBe("timedOut");
    expect(h.output?.record?.compactions).toEqual([compaction]);
    track(h);
  });

  it("projects again with the hook's instructions; a failed re-projection keeps the hook's prompt on a fresh thread", async () => {
    for (const outcome of ["ok", "fail"] as const) {
      const h = new TurnHarness({ ...configs[1]!.input, hasAdmissionGate: false });
      await drive(h, ["HISTORY_OK", "BOOTSTRAP_OK", "ASSEMBLE_OK", "PROJECT_OK"]);
      h.resolve("runPromptHooks", { promptText: "hooked prompt", developerInstructions: "hooked" });
      await settle();
      expect(h.lifecycleState()).toBe("reproject");
      if (outcome === "ok") h.resolve("projectContext", { ...projection, thread: { action: "resume", threadId: "thread-0", reason: "compatibleBinding" }, developerInstructions: "hooked" });
      else h.reject("projectContext", "boom");
      await settle();
      const ctx = ctxOf(h);
      expect(ctx.request.promptText).toBe("hooked prompt");
      expect(ctx.request.developerInstructions).toBe("hooked");
      if (outcome === "ok") {
        expect(h.lifecycleState()).toBe("threadResume");
        expect(ctx.warnings).toEqual([]);
      } else {
        expect(h.lifecycleState()).toBe("threadStart");
        expect(ctx.request.projection).toMatchObject({ reason: "projectionFailed", thread: { action: "start" } });
        expect(ctx.warnings).toEqual(["projection for the hook's developer instructions failed (boom); sending the prompt on a fresh thread"]);
      }
      // The calls: projection, hook, projection again (the hook ran once).
      expect(h.calls.filter((c) => c === "projectContext" || c === "runPromptHooks")).toEqual(["projectContext", "runPromptHooks", "projectContext"]);
      h.actor.stop();
      track(h);
    }
  });

  it("a refused turn stays blocked when an abort or a yield arrives while it is recorded; the record completes", async () => {
    for (const event of ["ABORT", "YIELD"] as const) {
      const h = new TurnHarness(configs[3]!.input);
      await drive(h, ["HISTORY_OK", "ASSEMBLE_OK", "PROJECT_OK", "ADMIT_BLOCK", event]);
      expect(h.lifecycleState()).toBe("recordingBlock");
      await drive(h, ["RECORD_BLOCK_OK"]);
      expect(h.output?.status).toBe("blocked");
      expect(h.output?.blocked).toEqual({
        blockedBy: "guard",
        message: "Your message could not be sent: no (blocked by guard)",
        userMessage: { role: "user", content: [{ type: "text", text: "refused" }], timestamp: 1 },
      });
      expect(h.output?.engine).toMatchObject({ finalize: "skipped:blocked", maintenance: "skipped:blocked" });
      expect(h.output?.error).toEqual({ phase: "hooks", message: "Your message could not be sent: no (blocked by guard)", code: "turnBlocked" });
      expect(h.output?.trace.slice(-2)).toEqual(["hooks", "blocked"]);
      track(h);
    }
  });

  it("a gate that fails refuses the turn (fail-closed) with a warning; a record that fails only warns", async () => {
    const h = new TurnHarness(configs[3]!.input);
    await drive(h, ["HISTORY_OK", "ASSEMBLE_OK", "PROJECT_OK", "ADMIT_FAIL", "RECORD_BLOCK_FAIL"]);
    expect(h.output?.status).toBe("blocked");
    expect(h.output?.blocked).toEqual({ blockedBy: "beforeAgentRun", message: "Your message could not be sent: blocked by beforeAgentRun" });
    expect(h.output?.warnings).toEqual([
      "beforeAgentRun hook failed (admitTurn failed); the turn is blocked",
      "the blocked turn could not be recorded in the transcript (recordBlockedTurn failed)",
    ]);
    expect(h.calls).not.toContain("startThread");
    track(h);
  });

  it("ignores repeated abort and yield while interrupting (the first one decides)", async () => {
    const h = new TurnHarness(configs[0]!.input);
    await drive(h, ["HISTORY_OK", "PROJECT_OK", "THREAD_OK", "TURN_ACCEPTED", "ABORT", "ABORT", "YIELD"]);
    expect(h.forwarded).toEqual([{ type: "TURN.INTERRUPT", reason: "abort" }]);
    await drive(h, ["TURN_FAILED", "MIRROR_OK", "FINALIZE_OK"]);
    expect(h.output?.status).toBe("aborted");
    track(h);
  });

  // finalize's snapshot choice: the mirror provably the file's tail, else the re-read (when it holds the turn), else
  // history + snapshot. Returns the source finalize was given.
  const finalizeSource = async (opts: {
    mirror: unknown;
    reread?: { ok: unknown } | { fail: true };
    pendingFails?: boolean;
    guards?: Record<string, () => boolean>;
  }): Promise<{ source: string; messages: number; h: TurnHarness }> => {
    // An engine without bootstrap, so the loaded history (with its entry count) is what finalize builds on.
    const h = new TurnHarness(configs[2]!.input, turnMachine, opts.guards, ["recordPendingFinalize", "rereadHistoryForFinalize"]);
    await settle();
    h.resolve("readHistory", { history: { messages: [{ role: "user", content: "old", timestamp: 1 }], origins: [null], entryCount: 3 }, sessionFileExisted: true });
    await drive(h, ["ASSEMBLE_OK", "PROJECT_OK", "THREAD_OK", "TURN_ACCEPTED", "TURN_COMPLETED"]);
    if (opts.pendingFails) h.reject("recordPendingFinalize");
    else h.resolve("recordPendingFinalize", undefined);
    await settle();
    h.resolve("mirrorTranscript", opts.mirror);
    await settle();
    if (opts.reread && "ok" in opts.reread) h.resolve("rereadHistoryForFinalize", opts.reread.ok);
    else if (opts.reread) h.reject("rereadHistoryForFinalize");
    await settle();
    const input = h.finalizeInput();
    h.resolve("finalizeEngine", { mode: "afterTurn", usedFallback: false });
    await settle();
    track(h);
    return { source: input.source, messages: input.messages.length, h };
  };

  it("finalize uses the mirror tail only when the mirror provably is the file's tail", async () => {
    const tail = await finalizeSource({ mirror: { appended: 1, entryCount: 4 } });
    expect(tail).toMatchObject({ source: "mirrorTail", messages: 2 });
    expect(tail.h.calls).not.toContain("rereadHistoryForFinalize");
    const holds = { ok: { messages: [1, 2, 3].map(() => ({ role: "user", content: "x", timestamp: 1 })), origins: [null, null, { threadId: "thread-1", turnId: "turn-1" }] } };
    // Another writer appended in between (entry count off by one): re-read, which holds the turn.
    expect(await finalizeSource({ mirror: { appended: 1, entryCount: 5 }, reread: holds })).toMatchObject({ source: "reread", messages: 3 });
    // The re-read lacks the turn, or fails: history + this turn's snapshot.
    expect(await finalizeSource({ mirror: { appended: 0, entryCount: 3 }, reread: { ok: { messages: [], origins: [] } } })).toMatchObject({ source: "fallback", messages: 2 });
    expect(await finalizeSource({ mirror: { appended: 1 }, reread: { fail: true } })).toMatchObject({ source: "fallback" });
    // Mutants of the two new guards change the choice (so the tests above can fail).
    expect((await finalizeSource({ mirror: { appended: 1, entryCount: 4 }, reread: holds, guards: { mirrorIsTail: () => false } })).source).toBe("reread");
    expect((await finalizeSource({ mirror: { appended: 1, entryCount: 5 }, reread: holds, guards: { rereadHoldsTurn: () => false } })).source).toBe("fallback");
  });

  it("warns about an empty assembly only when the session has history (a new session assembles nothing)", async () => {
    const run = async (messages: number, guards?: Record<string, () => boolean>) => {
      // An engine without bootstrap: the loaded history is what assemble sees.
      const h = new TurnHarness(configs[2]!.input, turnMachine, guards);
      await settle();
      const loaded = Array.from({ length: messages }, (_, i) => ({ role: "user", content: `m${i}`, timestamp: i }));
      h.resolve("readHistory", { history: { messages: loaded, origins: loaded.map(() => null), entryCount: messages }, sessionFileExisted: true });
      await drive(h, ["ASSEMBLE_EMPTY", "PROJECT_OK", "THREAD_OK", "TURN_ACCEPTED", "TURN_COMPLETED", "MIRROR_OK", "FINALIZE_OK"]);
      track(h);
      expect(h.output?.status).toBe("completed");
      // Either way the unassembled prompt went: the outcome says so.
      expect(h.output?.engine.assemble).toBe("fallback");
      return h.output?.warnings ?? [];
    };
    const warning = "assemble returned no messages; using the unassembled prompt";
    expect(await run(0)).toEqual([]);
    expect(await run(2)).toEqual([warning]);
    // Mutants of the new guard change the outcome (so the two checks above can fail).
    expect(await run(2, { assembledEmptyDespiteHistory: () => false })).toEqual([]);
    expect(await run(0, { assembledEmptyDespiteHistory: () => true })).toEqual([warning]);
  });

  it("message write hooks: what they made of the turn is what the pending record, the mirror and finalize get; a failure keeps it", async () => {
    const turnThrough = async (outcome: "rewrite" | "fail", guards?: Record<string, () => boolean>) => {
      const h = new TurnHarness(configs[1]!.input, turnMachine, guards, ["prepareTranscriptMessages", "recordPendingFinalize"]);
      await drive(h, ["HISTORY_OK", "BOOTSTRAP_OK", "ASSEMBLE_OK", "PROJECT_OK", "HOOKS_OK", "ADMIT_PASS", "THREAD_OK", "TURN_ACCEPTED", "TURN_COMPLETED"]);
      const redacted = [{ role: "user", content: "[REDACTED]", timestamp: 1 }];
      if (h.pending.has("prepareTranscriptMessages")) {
        if (outcome === "rewrite") h.resolve("prepareTranscriptMessages", { messages: redacted, rewritten: 1, dropped: 0 });
        else h.reject("prepareTranscriptMessages", "hook crashed");
        await settle();
      }
      const pendingSaw = ctxOf(h).turn.record!.messagesSnapshot;
      h.resolve("recordPendingFinalize", undefined);
      await drive(h, ["MIRROR_OK", "FINALIZE_OK", "MAINTAIN_OK"]);
      track(h);
      return { h, pendingSaw, redacted };
    };
    const rewritten = await turnThrough("rewrite");
    expect(rewritten.pendingSaw).toEqual(rewritten.redacted);
    expect(rewritten.h.output?.record?.messagesSnapshot).toEqual(rewritten.redacted);
    expect(rewritten.h.output?.record?.assistantText).toBe("done");
    expect(rewritten.h.calls.indexOf("prepareTranscriptMessages")).toBeLessThan(rewritten.h.calls.indexOf("recordPendingFinalize"));
    const failed = await turnThrough("fail");
    expect(failed.pendingSaw).toEqual(record("completed").messagesSnapshot);
    expect(failed.h.output?.status).toBe("completed");
    expect(failed.h.output?.warnings).toContain("beforeMessageWrite failed (hook crashed); the turn's messages are stored as they are");
    // The guard's mutant skips the hooks: the unredacted turn would be stored (so the checks above can fail).
    const mutant = await turnThrough("rewrite", { hasMessageWriteHooks: () => false });
    expect(mutant.h.calls).not.toContain("prepareTranscriptMessages");
    expect(mutant.pendingSaw).not.toEqual(mutant.redacted);
  });

  it("a pending record that cannot be written is a warning; the mirror still runs", async () => {
    const { h } = await finalizeSource({ mirror: { appended: 1, entryCount: 4 }, pendingFails: true });
    expect(h.output?.status).toBe("completed");
    expect(h.output?.warnings).toContain("pending-finalize record not written; a crash before finalize would not be recovered");
  });

  it("a durable engine's failed turn is not committed; a record that cannot be cleared is a warning, the next attempt finds it", async () => {
    const h = new TurnHarness(configs[10]!.input, turnMachine, undefined, ["clearPendingRecord"]);
    await settle();
    for (const e of ["HISTORY_OK", "ASSEMBLE_OK", "PROJECT_OK", "THREAD_OK", "TURN_ACCEPTED", "TURN_FAILED", "MIRROR_OK"] as const) {
      exec[e](h);
      await settle();
    }
    h.reject("clearPendingRecord", "disk full");
    await settle();
    expect(h.calls).not.toContain("commitEngineTurn");
    expect(h.calls).not.toContain("finalizeEngine");
    expect(h.output?.status).toBe("failed");
    expect(h.output?.engine).toMatchObject({ finalize: "skipped:notCommitted", maintenance: "skipped:promptError" });
    expect(h.output?.warnings).toContain("pending-finalize record not cleared (disk full); the next attempt finds the turn again");
    track(h);
  });

  it("a recorded request is returned as recorded: a failed one says so, a cut one says it was cut; nothing runs", async () => {
    for (const [mark, code] of [
      [{ id: "req", status: "failed" as const }, "REQUEST_REPLAYED"],
      [{ id: "req", status: "failed" as const, cut: true }, "REQUEST_TURN_CUT"],
    ] as const) {
      const h = new TurnHarness(configs[10]!.input);
      await settle();
      h.resolve("readHistory", { history, sessionFileExisted: true, recordedRequest: { mark, record: { ...record("interrupted"), turnId: "turn-recorded" } } });
      await settle();
      expect(h.output).toMatchObject({ status: "failed", turnId: "turn-recorded", error: { phase: "loadHistory", code }, request: { id: "req", replayed: true } });
      expect(h.output?.request?.cut).toBe(mark.cut);
      expect(h.calls).toEqual(["acquireSessionLock", "readHistory"]);
      track(h);
    }
  });

  it("covers every state node and every transition of the real machine", () => {
    const allStates: string[] = [];
    const allTransitions: unknown[] = [];
    const walk = (node: { id: string; states: Record<string, unknown>; transitions: Map<string, unknown[]>; always?: unknown[] }) => {
      allStates.push(node.id);
      for (const list of node.transitions.values()) allTransitions.push(...list);
      allTransitions.push(...(node.always ?? []));
      for (const child of Object.values(node.states)) walk(child as typeof node);
    };
    walk(turnMachine.root as never);
    const missingStates = allStates.filter((id) => !coverage.states.has(id));
    const missingTransitions = allTransitions
      .map((t) => transitionKey(t as never))
      .filter((key) => !coverage.transitions.has(key));
    if (missingTransitions.length > 0) console.log(missingTransitions);
    console.log(
      `[turn model-based] paths=${coverage.paths} steps=${coverage.steps} ` +
        `states=${allStates.length - missingStates.length}/${allStates.length} ` +
        `transitions=${allTransitions.length - missingTransitions.length}/${allTransitions.length}`,
    );
    expect(missingStates).toEqual([]);
    expect(missingTransitions).toEqual([]);
  });
});

describe("guard mutants are caught by the model", () => {
  const mutants: Array<{ guard: string; impl: () => boolean; config: number }> = [
    { guard: "canMaintainForeground", impl: () => true, config: 1 },
    { guard: "shouldBootstrap", impl: () => false, config: 1 },
    { guard: "settlesAborted", impl: () => false, config: 1 },
    { guard: "isAborting", impl: () => false, config: 2 },
    { guard: "accordionDue", impl: () => false, config: 4 },
    { guard: "compactedBeforeTurn", impl: () => false, config: 4 },
    { guard: "planResumes", impl: () => false, config: 4 },
    { guard: "resumeFailedFallBackToFresh", impl: () => false, config: 4 },
    { guard: "crashedAttemptPending", impl: () => false, config: 0 },
    { guard: "crashedAttemptPending", impl: () => true, config: 0 },
    { guard: "hookChangedDeveloperInstructions", impl: () => false, config: 1 },
    { guard: "hookChangedDeveloperInstructions", impl: () => true, config: 1 },
    { guard: "admissionDue", impl: () => false, config: 1 },
    { guard: "admissionDue", impl: () => true, config: 5 },
    // Asked again after a refused resume (the turn was already admitted): caught on the re-projection paths.
    { guard: "admissionDue", impl: () => true, config: 4 },
    { guard: "hasHooksBeforeThread", impl: () => false, config: 3 },
    { guard: "turnRefused", impl: () => false, config: 1 },
    { guard: "turnRefused", impl: () => true, config: 3 },
    { guard: "settlesBlocked", impl: () => false, config: 3 },
    { guard: "overflowCompactionDue", impl: () => false, config: 6 },
    { guard: "turnOverflowedContext", impl: () => false, config: 6 },
    { guard: "turnOverflowedContext", impl: () => true, config: 6 },
    { guard: "nativeRevertDue", impl: () => false, config: 7 },
    { guard: "nativeRevertDue", impl: () => true, config: 9 },
    { guard: "nativeInjectDue", impl: () => false, config: 9 },
    { guard: "nativeInjectDue", impl: () => true, config: 8 },
    // Durable turns: commitTurn replaced by afterTurn (or the other way round), a failed turn committed.
    { guard: "engineCommitsTurns", impl: () => false, config: 10 },
    { guard: "engineCommitsTurns", impl: () => true, config: 2 },
    { guard: "engineSkipsTurnCommit", impl: () => false, config: 10 },
    { guard: "requestAlreadyRecorded", impl: () => false, config: 10 },
  ];
  const results: string[] = [];
  for (const mutant of mutants) {
    it(`mutant ${mutant.guard} := ${String(mutant.impl())} fails some paths`, async () => {
      const { paths, failures } = await runModel(configs[mutant.config]!.input, { [mutant.guard]: mutant.impl });
      results.push(`${mutant.guard}: ${failures.length}/${paths.length} paths fail`);
      expect(failures.length).toBeGreaterThan(0);
    }, 120_000);
  }
  afterAll(() => console.log(`[turn guard mutants] ${results.join("; ")}`));
});
