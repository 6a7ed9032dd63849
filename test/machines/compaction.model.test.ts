/**
 * Model-based test of the compaction machine: an independent abstract model of the compaction policy (written from
 * the spec, not from compaction.rules.ts) is handed to createTestModel; every simple path of the model is replayed
 * against the real machine with controllable fake actors, checking state, actor inputs, abort signals and output.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { assign, setup } from "xstate";
import { createTestModel, getStateNodes } from "xstate/graph";
import type { CompactionMachineInput, CompactionOutput } from "../../machines/compaction.rules.js";
import { FAKE_SESSION_FILE, allTransitionKeys, createSut, type Sut } from "../compaction/harness.js";
import { compactionMachine } from "../../machines/compaction.machine.js";

interface Cfg {
  name: string;
  owns: boolean;
  active: boolean;
  hasMaintain: boolean;
  trigger: "manual" | "budget";
}

const CONFIGS: Cfg[] = [
  { name: "owning engine with maintain (/compact)", owns: true, active: true, hasMaintain: true, trigger: "manual" },
  { name: "owning engine without maintain (budget)", owns: true, active: true, hasMaintain: false, trigger: "budget" },
  { name: "non-owning engine with maintain", owns: false, active: true, hasMaintain: true, trigger: "manual" },
  { name: "non-owning engine without maintain", owns: false, active: true, hasMaintain: false, trigger: "budget" },
  { name: "no engine", owns: false, active: false, hasMaintain: false, trigger: "manual" },
];

type EngineOutcome = "ok" | "notOk" | "threw";
type NativeOutcome = "ok" | "notOk" | "threw" | "timeout" | "noBinding";

interface ModelContext {
  cfg: Cfg;
  binding: boolean;
  engine: EngineOutcome | null;
  native: NativeOutcome | null;
  maintenance: "ran" | "failed" | null;
  mark: "ok" | "failed" | null;
  aborted: boolean;
  trace: string[];
}

type ModelEvent =
  | { type: "BINDING_FOUND" }
  | { type: "BINDING_NONE" }
  | { type: "BINDING_ERROR" }
  | { type: "ENGINE_OK" }
  | { type: "ENGINE_NOT_OK" }
  | { type: "ENGINE_THROW" }
  | { type: "MAINTAIN_OK" }
  | { type: "MAINTAIN_FAIL" }
  | { type: "NATIVE_OK" }
  | { type: "NATIVE_NOT_OK" }
  | { type: "NATIVE_THROW" }
  | { type: "NATIVE_TIMEOUT" }
  | { type: "MARK_OK" }
  | { type: "MARK_FAIL" }
  | { type: "ABORT" };

/**
 * The policy, as the brief states it: an owning engine compacts first, then maintenance (only after an ok
 * compaction, only if it has maintain), then native when bound; otherwise native only (bound sessions), then
 * maintenance after a successful native round. An abort stops everything except a binding write in flight.
 */
const model = setup({
  types: { context: {} as ModelContext, events: {} as ModelEvent, input: {} as Cfg },
  guards: {
    owns: ({ context }) => context.cfg.owns,
    canMaintain: ({ context }) => context.cfg.active && context.cfg.hasMaintain,
    bound: ({ context }) => context.binding,
    ownsAndBound: ({ context }) => context.cfg.owns && context.binding,
  },
  actions: {
    enter: assign({ trace: ({ context }, p: { s: string }) => [...context.trace, p.s] }),
    bind: assign((_, p: { bound: boolean }) => ({ binding: p.bound })),
    noBinding: assign({ native: "noBinding" as NativeOutcome }),
    engine: assign((_, p: { o: EngineOutcome }) => ({ engine: p.o })),
    native: assign((_, p: { o: NativeOutcome }) => ({ native: p.o })),
    maintained: assign((_, p: { o: "ran" | "failed" }) => ({ maintenance: p.o })),
    marked: assign((_, p: { o: "ok" | "failed" }) => ({ mark: p.o })),
    abortFlag: assign({ aborted: true }),
  },
}).createMachine({
  id: "model",
  initial: "loadBinding",
  context: ({ input }) => ({
    cfg: input,
    binding: false,
    engine: null,
    native: null,
    maintenance: null,
    mark: null,
    aborted: false,
    trace: ["loadBinding"],
  }),
  states: {
    loadBinding: {
      on: {
        BINDING_FOUND: [
          { guard: "owns", target: "engineCompact", actions: { type: "bind", params: { bound: true } } },
          { target: "nativeCompact", actions: { type: "bind", params: { bound: true } } },
        ],
        BINDING_NONE: [
          { guard: "owns", target: "engineCompact", actions: { type: "bind", params: { bound: false } } },
          { target: "done", actions: [{ type: "bind", params: { bound: false } }, "noBinding"] },
        ],
        BINDING_ERROR: [
          { guard: "owns", target: "engineCompact", actions: { type: "bind", params: { bound: false } } },
          { target: "done", actions: [{ type: "bind", params: { bound: false } }, "noBinding"] },
        ],
        ABORT: { target: "aborted", actions: "abortFlag" },
      },
    },
    engineCompact: {
      entry: { type: "enter", params: { s: "engineCompact" } },
      on: {
        ENGINE_OK: [
          { guard: "canMaintain", target: "maintain", actions: { type: "engine", params: { o: "ok" } } },
          { guard: "bound", target: "nativeCompact", actions: { type: "engine", params: { o: "ok" } } },
          { target: "done", actions: [{ type: "engine", params: { o: "ok" } }, "noBinding"] },
        ],
        ENGINE_NOT_OK: [
          { guard: "bound", target: "nativeCompact", actions: { type: "engine", params: { o: "notOk" } } },
          { target: "done", actions: [{ type: "engine", params: { o: "notOk" } }, "noBinding"] },
        ],
        ENGINE_THROW: [
          { guard: "bound", target: "nativeCompact", actions: { type: "engine", params: { o: "threw" } } },
          { target: "done", actions: [{ type: "engine", params: { o: "threw" } }, "noBinding"] },
        ],
        ABORT: { target: "aborted", actions: "abortFlag" },
      },
    },
    maintain: {
      entry: { type: "enter", params: { s: "maintain" } },
      on: {
        MAINTAIN_OK: [
          { guard: "ownsAndBound", target: "nativeCompact", actions: { type: "maintained", params: { o: "ran" } } },
          { guard: "owns", target: "done", actions: [{ type: "maintained", params: { o: "ran" } }, "noBinding"] },
          { target: "done", actions: { type: "maintained", params: { o: "ran" } } },
        ],
        MAINTAIN_FAIL: [
          { guard: "ownsAndBound", target: "nativeCompact", actions: { type: "maintained", params: { o: "failed" } } },
          { guard: "owns", target: "done", actions: [{ type: "maintained", params: { o: "failed" } }, "noBinding"] },
          { target: "done", actions: { type: "maintained", params: { o: "failed" } } },
        ],
        ABORT: { target: "aborted", actions: "abortFlag" },
      },
    },
    nativeCompact: {
      entry: { type: "enter", params: { s: "nativeCompact" } },
      on: {
        NATIVE_OK: { target: "markBinding", actions: { type: "native", params: { o: "ok" } } },
        NATIVE_NOT_OK: { target: "done", actions: { type: "native", params: { o: "notOk" } } },
        NATIVE_THROW: { target: "done", actions: { type: "native", params: { o: "threw" } } },
        NATIVE_TIMEOUT: { target: "done", actions: { type: "native", params: { o: "timeout" } } },
        ABORT: { target: "aborted", actions: "abortFlag" },
      },
    },
    markBinding: {
      entry: { type: "enter", params: { s: "markBinding" } },
      on: {
        MARK_OK: [
          { guard: "owns", target: "done", actions: { type: "marked", params: { o: "ok" } } },
          { guard: "canMaintain", target: "maintain", actions: { type: "marked", params: { o: "ok" } } },
          { target: "done", actions: { type: "marked", params: { o: "ok" } } },
        ],
        MARK_FAIL: [
          { guard: "owns", target: "done", actions: { type: "marked", params: { o: "failed" } } },
          { guard: "canMaintain", target: "maintain", actions: { type: "marked", params: { o: "failed" } } },
          { target: "done", actions: { type: "marked", params: { o: "failed" } } },
        ],
        ABORT: { target: "markBindingAbortRequested", actions: "abortFlag" },
      },
    },
    // The binding write is never cut in half: the abort is honoured once it settles.
    markBindingAbortRequested: {
      on: {
        MARK_OK: { target: "aborted", actions: { type: "marked", params: { o: "ok" } } },
        MARK_FAIL: { target: "aborted", actions: { type: "marked", params: { o: "failed" } } },
      },
    },
    done: { type: "final", entry: { type: "enter", params: { s: "done" } } },
    aborted: { type: "final", entry: { type: "enter", params: { s: "aborted" } } },
  },
});

const THREAD = "thr-1";
const NATIVE_TIMEOUT_MS = 5_000;
const ENGINE_OK_RESULT = {
  ok: true,
  compacted: true,
  result: { summary: "engine summary", tokensBefore: 1000, tokensAfter: 300, details: { engine: "x" } },
};

function machineInput(cfg: Cfg): CompactionMachineInput {
  return {
    sessionId: "s1",
    sessionFile: FAKE_SESSION_FILE,
    trigger: cfg.trigger,
    engine: { active: cfg.active, id: cfg.active ? "eng" : "none", ownsCompaction: cfg.owns, hasMaintain: cfg.hasMaintain },
    nativeTimeoutMs: NATIVE_TIMEOUT_MS,
  };
}

/** Model event -> what the fake world does to the real machine. */
function executors(getSut: () => Sut) {
  const s = () => getSut();
  return {
    BINDING_FOUND: () =>
      s().resolve("loadBinding", { threadId: THREAD, lastUsage: { inputTokens: 1000, totalTokens: 1100, modelContextWindow: 190000 } }),
    BINDING_NONE: () => s().resolve("loadBinding", null),
    BINDING_ERROR: () => s().reject("loadBinding", new Error("unreadable")),
    ENGINE_OK: () => s().resolve("engineCompact", ENGINE_OK_RESULT),
    ENGINE_NOT_OK: () => s().resolve("engineCompact", { ok: false, compacted: false, reason: "nothing to compact" }),
    ENGINE_THROW: () => s().reject("engineCompact", new Error("engine boom")),
    MAINTAIN_OK: () => s().resolve("maintain", { changed: true }),
    MAINTAIN_FAIL: () => s().reject("maintain", new Error("maintain boom")),
    NATIVE_OK: () => s().resolve("nativeCompact", { ok: true, threadId: THREAD, turnId: "t-c", itemId: "i-c" }),
    NATIVE_NOT_OK: () => s().resolve("nativeCompact", { ok: false, reason: "codexCompactionFailed", threadId: THREAD }),
    NATIVE_THROW: () => s().reject("nativeCompact", Object.assign(new Error("client closed"), { code: "CLOSED" })),
    NATIVE_TIMEOUT: () => s().fireNativeTimeout(),
    MARK_OK: () => s().resolve("markBinding", undefined),
    MARK_FAIL: () => s().reject("markBinding", new Error("disk full")),
    ABORT: () => s().abort(),
  };
}

function expectedNative(ctx: ModelContext): Record<string, unknown> {
  switch (ctx.native) {
    case "ok":
      return { ok: true, threadId: THREAD, turnId: "t-c", itemId: "i-c" };
    case "notOk":
      return { ok: false, reason: "codexCompactionFailed", threadId: THREAD };
    case "threw":
      return { ok: false, reason: "nativeError: CLOSED", threadId: THREAD };
    case "timeout":
      return { ok: false, reason: "timeout", threadId: THREAD };
    case "noBinding":
      return { ok: false, reason: "noThreadBinding" };
    default:
      return { ok: false, reason: ctx.aborted ? "aborted" : "notAttempted" };
  }
}

function expectedReason(ctx: ModelContext): string | undefined {
  if (ctx.aborted) return "aborted";
  if (ctx.cfg.owns) {
    if (ctx.engine === "notOk") return "nothing to compact";
    if (ctx.engine === "threw") return "engineCompactionFailed: engine boom";
    return undefined;
  }
  return ctx.native === "ok" ? undefined : (expectedNative(ctx).reason as string);
}

/** Compare the real machine with the model at one model state. */
function checkState(sut: Sut, modelSnap: { value: unknown; status: string; context: ModelContext }): void {
  const real = sut.snapshot();
  const ctx = modelSnap.context;
  const modelValue = modelSnap.value === "markBindingAbortRequested" ? "markBinding" : modelSnap.value;
  expect(real.value).toEqual(modelValue);
  expect(real.context.trace).toEqual(ctx.trace.filter((s) => s !== "markBindingAbortRequested"));

  // Nothing is ever retried: each effect is invoked at most once per compaction.
  const counts = new Map<string, number>();
  for (const c of sut.calls) counts.set(c.id, (counts.get(c.id) ?? 0) + 1);
  for (const [, n] of counts) expect(n).toBe(1);

  switch (modelValue) {
    case "engineCompact": {
      const request = sut.pending("engineCompact")?.input as { request: Record<string, unknown> } | undefined;
      const tokens = ctx.binding ? { currentTokenCount: 1000 } : {};
      expect(request?.request).toEqual(
        ctx.cfg.trigger === "manual"
          ? { force: true, compactionTarget: "threshold", ...tokens }
          : { compactionTarget: "budget", ...tokens },
      );
      break;
    }
    case "maintain":
      expect(sut.pending("maintain")?.input).toEqual({ reason: "compaction" });
      break;
    case "nativeCompact":
      expect(sut.pending("nativeCompact")?.input).toEqual({ threadId: THREAD, timeoutMs: NATIVE_TIMEOUT_MS });
      break;
    case "markBinding":
      expect(sut.pending("markBinding")?.input).toEqual({ threadId: THREAD, turnId: "t-c", itemId: "i-c" });
      expect(real.context.aborted).toBe(ctx.aborted);
      break;
    default:
      break;
  }

  if (modelSnap.status !== "done") return;
  expect(real.status).toBe("done");
  // An abort stops every in-flight effect through its AbortSignal.
  for (const p of sut.unsettled()) expect(p.signal.aborted).toBe(true);
  if (modelValue === "done" && ctx.native !== "timeout") expect(sut.unsettled()).toHaveLength(0);

  const out = real.output as CompactionOutput;
  const primaryOk = ctx.cfg.owns ? ctx.engine === "ok" : ctx.native === "ok";
  expect(out.ok).toBe(!ctx.aborted && primaryOk);
  expect(out.compacted).toBe(primaryOk);
  expect(out.reason).toBe(expectedReason(ctx));
  expect(out.primary).toBe(ctx.cfg.owns ? "engine" : "native");
  expect(out.native).toEqual(expectedNative(ctx));
  expect(out.result?.details.codexNativeCompaction).toEqual(expectedNative(ctx));
  if (ctx.cfg.owns && ctx.engine === "ok") {
    expect(out.result).toMatchObject({ summary: "engine summary", tokensBefore: 1000, tokensAfter: 300 });
    expect(out.result?.details.engine).toBe("x");
  } else {
    expect(out.result?.summary).toBeUndefined();
    expect(out.result?.tokensBefore).toBe(ctx.binding ? 1000 : 0);
  }
  if (ctx.maintenance) expect(out.outcomes.maintenance).toBe(ctx.maintenance);
  else expect(["ran", "failed"]).not.toContain(out.outcomes.maintenance);
  if (ctx.mark) expect(out.outcomes.bindingMark).toBe(ctx.mark === "ok" ? "marked" : "failed");
  else expect(["marked", "failed"]).not.toContain(out.outcomes.bindingMark);
  expect(out.trace).toEqual(real.context.trace);
}

const MODEL_STATES = [
  "loadBinding",
  "engineCompact",
  "maintain",
  "nativeCompact",
  "markBinding",
  "markBindingAbortRequested",
  "done",
  "aborted",
];

function testModelFor(cfg: Cfg) {
  return createTestModel(model, { input: cfg, filterEvents: (s: { status: string }) => s.status !== "done" } as never);
}

/** Replay every simple path of the model against a machine; returns the failures and the coverage data. */
async function replayModel(cfg: Cfg, guards?: Parameters<typeof createSut>[1]) {
  const testModel = testModelFor(cfg);
  const paths = testModel.getSimplePaths();
  let sut: Sut | undefined;
  const ex = executors(() => sut!);
  const states = Object.fromEntries(MODEL_STATES.map((name) => [name, (snap: any) => checkState(sut!, snap)]));
  const failures: string[] = [];
  const taken = new Set<string>();
  const visited = new Set<string>();
  for (const path of paths) {
    sut = await createSut(machineInput(cfg), guards);
    try {
      await path.test({ states, events: ex as never });
    } catch (error) {
      failures.push(`${path.description}: ${(error as Error).message.split("\n")[0]}`);
    } finally {
      for (const k of sut.taken) taken.add(k);
      for (const n of sut.visitedNodes) visited.add(n);
      sut.stop();
    }
  }
  const adjacency = testModel.getAdjacencyMap();
  const modelStates = Object.keys(adjacency).length;
  const modelTransitions = Object.values(adjacency).reduce((n, v) => n + Object.keys(v.transitions).length, 0);
  return { paths: paths.length, failures, taken, visited, modelStates, modelTransitions };
}

describe("compaction machine vs an independent model (createTestModel)", () => {
  const results = new Map<string, Awaited<ReturnType<typeof replayModel>>>();

  // Replay once for all configs, so each assertion below (including coverage) stands on its own under -t filters.
  beforeAll(async () => {
    for (const cfg of CONFIGS) {
      const r = await replayModel(cfg);
      results.set(cfg.name, r);
      console.log(
        `[compaction MBT] ${cfg.name}: ${r.paths} paths, ${r.modelStates} model states, ${r.modelTransitions} model transitions`,
      );
    }
  });

  for (const cfg of CONFIGS) {
    it(`every model path holds on the real machine: ${cfg.name}`, () => {
      const r = results.get(cfg.name)!;
      expect(r.paths).toBeGreaterThan(3);
      expect(r.failures).toEqual([]);
    });
  }

  it("covers every state node and every transition of the real machine", () => {
    const allTaken = new Set<string>();
    const allVisited = new Set<string>();
    let totalPaths = 0;
    for (const r of results.values()) {
      totalPaths += r.paths;
      for (const k of r.taken) allTaken.add(k);
      for (const n of r.visited) allVisited.add(n);
    }
    const allNodes = getStateNodes(compactionMachine.root).map((n) => n.id);
    const allEdges = allTransitionKeys(compactionMachine);
    const missingNodes = allNodes.filter((id) => !allVisited.has(id));
    const missingEdges = [...allEdges].filter((k) => !allTaken.has(k));
    console.log(
      `[compaction MBT] total ${totalPaths} paths; real machine: ${allNodes.length - missingNodes.length}/${allNodes.length} state nodes, ` +
        `${allEdges.size - missingEdges.length}/${allEdges.size} transitions covered`,
    );
    expect(missingNodes).toEqual([]);
    expect(missingEdges).toEqual([]);
  });

  it("a guard mutant (ownsCompaction := false) is caught", async () => {
    const r = await replayModel(CONFIGS[0]!, { ownsCompaction: () => false });
    console.log(`[compaction MBT] mutant ownsCompaction=false: ${r.failures.length}/${r.paths} paths fail`);
    expect(r.failures.length).toBeGreaterThan(0);
  });
});
