import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { pino } from "pino";
import {
  runCodexCompaction,
  createBindingStore,
  type BindingStore,
  type RunCodexCompactionParams,
  type NativeCompactor,
} from "../../src/compaction/compact-session.js";
import { CompactionError } from "../../src/compaction/errors.js";
import type { CompactResult, ContextEngine } from "../../src/context-engine/types.js";
import type { CodexAppServer } from "../../src/codex/app-server.js";
import { readThreadBinding, writeThreadBinding, type ThreadBinding } from "../../src/transcript/binding.js";
import { FAKE_SESSION_FILE } from "./harness.js";

// The real Codex client plugs in as the native compactor (checked by tsc).
const clientFits: CodexAppServer extends NativeCompactor ? true : false = true;

const SECRET_SUMMARY = "SUMMARY-CONTENT-MUST-NOT-BE-LOGGED";
const SECRET_INSTRUCTIONS = "INSTRUCTIONS-MUST-NOT-BE-LOGGED";
const THREAD = "thr-1";

function captureLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const raw: string[] = [];
  const logger = pino({ level: "info" }, {
    write(chunk: string) {
      raw.push(chunk);
      lines.push(JSON.parse(chunk) as Record<string, unknown>);
    },
  });
  return { logger, lines, raw, events: () => lines.map((l) => l.event) };
}

interface EngineOptions {
  owns?: boolean;
  compact?: ContextEngine["compact"];
  maintain?: ContextEngine["maintain"] | null;
  id?: string;
}

function fakeEngine(order: string[], o: EngineOptions = {}) {
  const compact = vi.fn(
    o.compact ??
      (async (): Promise<CompactResult> => {
        order.push("engine.compact");
        return {
          ok: true,
          compacted: true,
          result: { summary: SECRET_SUMMARY, tokensBefore: 120_000, tokensAfter: 40_000, details: { rounds: 2 } },
        };
      }),
  );
  const maintain = vi.fn(async () => {
    order.push("engine.maintain");
    return { changed: true, bytesFreed: 10, rewrittenEntries: 1 };
  });
  const interceptCompaction = vi.fn(async () => ({ handled: false as const, reason: "unused" }));
  const engine: ContextEngine = {
    info: { id: o.id ?? "lcm", name: "fake", ...(o.owns === false ? {} : { ownsCompaction: true }) },
    ingest: async () => ({ ingested: true }),
    assemble: async ({ messages }) => ({ messages, estimatedTokens: 0 }),
    compact,
    interceptCompaction,
    ...(o.maintain === null ? {} : { maintain: o.maintain ?? maintain }),
  };
  return { engine, compact, maintain, interceptCompaction };
}

function fakeNative(order: string[], impl?: NativeCompactor["compactThread"]) {
  const compactThread = vi.fn(
    impl ??
      (async ({ threadId }: { threadId: string; timeoutMs: number }) => {
        order.push("native.compact");
        return { ok: true, threadId, turnId: "turn-compact", itemId: "item-compact" };
      }),
  );
  return { appServer: { compactThread } satisfies NativeCompactor, compactThread };
}

function fakeStore(order: string[], binding: Awaited<ReturnType<BindingStore["read"]>>) {
  const markNativeCompaction = vi.fn(async () => {
    order.push("binding.mark");
  });
  const read = vi.fn(async () => binding);
  return { store: { read, markNativeCompaction } satisfies BindingStore, markNativeCompaction, read };
}

const BOUND = { threadId: THREAD, lastUsage: { inputTokens: 120_000, totalTokens: 121_000, modelContextWindow: 190_000 } };

function baseParams(extra: Partial<RunCodexCompactionParams> & Pick<RunCodexCompactionParams, "appServer" | "bindingStore">) {
  return {
    sessionId: "s1",
    sessionKey: "agent:main",
    sessionFile: FAKE_SESSION_FILE,
    contextTokenBudget: 200_000,
    trigger: "manual" as const,
    ...extra,
  } satisfies RunCodexCompactionParams;
}

describe("runCodexCompaction with an engine that owns compaction", () => {
  it("engine compact() first, then maintenance, then native; the engine result is primary", async () => {
    const order: string[] = [];
    const { engine, compact, maintain, interceptCompaction } = fakeEngine(order);
    const { appServer, compactThread } = fakeNative(order);
    const { store, markNativeCompaction } = fakeStore(order, BOUND);
    const log = captureLogger();

    const out = await runCodexCompaction(
      baseParams({
        appServer,
        bindingStore: store,
        contextEngine: engine,
        customInstructions: SECRET_INSTRUCTIONS,
        logger: log.logger,
        nativeTimeoutMs: 30_000,
      }),
    );

    expect(order).toEqual(["engine.compact", "engine.maintain", "native.compact", "binding.mark"]);
    expect(out.ok).toBe(true);
    expect(out.compacted).toBe(true);
    expect(out.primary).toBe("engine");
    expect(out.result).toEqual({
      summary: SECRET_SUMMARY,
      tokensBefore: 120_000,
      tokensAfter: 40_000,
      details: {
        rounds: 2,
        codexNativeCompaction: { ok: true, threadId: THREAD, turnId: "turn-compact", itemId: "item-compact" },
      },
    });
    expect(out.trace).toEqual(["loadBinding", "engineCompact", "maintain", "nativeCompact", "markBinding", "done"]);

    const compactArgs = compact.mock.calls[0]![0];
    expect(compactArgs).toMatchObject({
      sessionId: "s1",
      sessionKey: "agent:main",
      sessionFile: FAKE_SESSION_FILE,
      tokenBudget: 200_000,
      force: true,
      compactionTarget: "threshold",
      currentTokenCount: 120_000,
      customInstructions: SECRET_INSTRUCTIONS,
      runtimeContext: { tokenBudget: 200_000, currentTokenCount: 120_000 },
    });
    expect(compactArgs.abortSignal).toBeInstanceOf(AbortSignal);
    expect(maintain).toHaveBeenCalledTimes(1);
    expect(compactThread).toHaveBeenCalledWith({ threadId: THREAD, timeoutMs: 30_000 });
    expect(markNativeCompaction).toHaveBeenCalledWith(FAKE_SESSION_FILE, {
      threadId: THREAD,
      turnId: "turn-compact",
      itemId: "item-compact",
    });
    // interceptCompaction belongs to the accordion, never to explicit compaction.
    expect(interceptCompaction).not.toHaveBeenCalled();

    expect(log.events()).toEqual([
      "compaction started",
      "thread binding loaded",
      "engine compaction completed",
      "engine maintenance completed",
      "codex native compaction completed alongside context-engine compaction",
      "thread binding marked after native compaction",
      "compaction finished",
    ]);
    const allLogs = log.raw.join("");
    expect(allLogs).not.toContain(SECRET_SUMMARY);
    expect(allLogs).not.toContain(SECRET_INSTRUCTIONS);
    expect(log.lines.every((l) => l.sessionId === "s1" && l.engineId === "lcm")).toBe(true);
  });

  it("a budget trigger asks for compactionTarget 'budget' without forcing", async () => {
    const order: string[] = [];
    const { engine, compact } = fakeEngine(order);
    const out = await runCodexCompaction(
      baseParams({
        appServer: fakeNative(order).appServer,
        bindingStore: fakeStore(order, BOUND).store,
        contextEngine: engine,
        trigger: "budget",
      }),
    );
    expect(out.ok).toBe(true);
    const args = compact.mock.calls[0]![0];
    expect(args.compactionTarget).toBe("budget");
    expect(args).not.toHaveProperty("force");
  });

  it("a native failure (ok:false, throw or timeout) never fails an engine-owned compaction", async () => {
    const cases: Array<{ impl: NativeCompactor["compactThread"]; reason: string }> = [
      { impl: async ({ threadId }) => ({ ok: false, reason: "compactionTurnFailed", threadId }), reason: "compactionTurnFailed" },
      {
        impl: async () => {
          throw Object.assign(new Error("process exited"), { code: "PROCESS_EXITED" });
        },
        reason: "nativeError: PROCESS_EXITED",
      },
      { impl: () => new Promise(() => {}), reason: "timeout" },
    ];
    for (const c of cases) {
      const order: string[] = [];
      const { engine } = fakeEngine(order);
      const { appServer, compactThread } = fakeNative(order, c.impl);
      const { store, markNativeCompaction } = fakeStore(order, BOUND);
      const log = captureLogger();
      const out = await runCodexCompaction(
        baseParams({ appServer, bindingStore: store, contextEngine: engine, nativeTimeoutMs: 25, logger: log.logger }),
      );
      expect(out.ok).toBe(true);
      expect(out.compacted).toBe(true);
      expect(out.reason).toBeUndefined();
      expect(out.result?.summary).toBe(SECRET_SUMMARY);
      expect(out.result?.details.codexNativeCompaction).toMatchObject({ ok: false, reason: c.reason, threadId: THREAD });
      expect(compactThread).toHaveBeenCalledTimes(1); // never retried
      expect(markNativeCompaction).not.toHaveBeenCalled();
      expect(log.lines.some((l) => l.level === 40 && String(l.event).startsWith("codex native compaction"))).toBe(true);
    }
  });

  it("an engine failure is reported (ok:false naming it) and native compaction still runs", async () => {
    const order: string[] = [];
    const { engine, compact, maintain } = fakeEngine(order, {
      compact: async () => {
        order.push("engine.compact");
        throw new Error("db locked");
      },
    });
    const { appServer, compactThread } = fakeNative(order);
    const { store, markNativeCompaction } = fakeStore(order, BOUND);
    const out = await runCodexCompaction(baseParams({ appServer, bindingStore: store, contextEngine: engine }));
    expect(out.ok).toBe(false);
    expect(out.compacted).toBe(false);
    expect(out.reason).toBe("engineCompactionFailed: db locked");
    expect(out.outcomes.engineCompact).toBe("failed");
    expect(out.outcomes.maintenance).toBe("skipped:compactionFailed");
    expect(out.result?.details.codexNativeCompaction).toMatchObject({ ok: true, threadId: THREAD });
    expect(order).toEqual(["engine.compact", "native.compact", "binding.mark"]);
    expect(compact).toHaveBeenCalledTimes(1); // never retried
    expect(compactThread).toHaveBeenCalledTimes(1);
    expect(maintain).not.toHaveBeenCalled();
    expect(markNativeCompaction).toHaveBeenCalledTimes(1);
  });

  it.each([
    ["null", null, "(result): Invalid input: expected object, received null"],
    ["{ ok: \"yes\" }", { ok: "yes" }, "ok: Invalid input: expected boolean, received string"],
    ["compacted missing", { ok: true }, "compacted: Invalid input: expected boolean, received undefined"],
    ["result without tokensBefore", { ok: true, compacted: true, result: { tokensAfter: 5 } }, "result.tokensBefore: Invalid input: expected number, received undefined"],
  ])("a malformed compact() result (%s) is a typed engine compaction failure with a warning; native still runs", async (_label, bad, detail) => {
    const order: string[] = [];
    const { engine, maintain } = fakeEngine(order, { compact: (async () => bad) as unknown as ContextEngine["compact"] });
    const { appServer, compactThread } = fakeNative(order);
    const log = captureLogger();
    const out = await runCodexCompaction(
      baseParams({ appServer, bindingStore: fakeStore(order, BOUND).store, contextEngine: engine, logger: log.logger }),
    );
    expect(out).toMatchObject({ ok: false, compacted: false, primary: "engine" });
    expect(out.reason).toBe(`engineCompactionFailed: context engine compact() returned an invalid result: ${detail}`);
    expect(out.outcomes.engineCompact).toBe("failed");
    expect(out.warnings).toContain("context-engine compaction failed; still running Codex native compaction");
    expect(log.lines.find((l) => l.event === "engine compaction failed")).toMatchObject({ level: 40, err: "COMPACT_RESULT_INVALID" });
    expect(compactThread).toHaveBeenCalledTimes(1);
    expect(maintain).not.toHaveBeenCalled();
  });

  it("a compact() that never settles is bounded by engineTimeoutMs: a failure, and native still runs", async () => {
    const order: string[] = [];
    const { engine } = fakeEngine(order, { compact: () => new Promise<never>(() => undefined) });
    const { appServer, compactThread } = fakeNative(order);
    const out = await runCodexCompaction(
      baseParams({ appServer, bindingStore: fakeStore(order, BOUND).store, contextEngine: engine, engineTimeoutMs: 50 }),
    );
    expect(out).toMatchObject({ ok: false, compacted: false });
    expect(out.reason).toBe("engineCompactionFailed: context engine compact() did not settle within 50 ms");
    expect(out.outcomes.engineCompact).toBe("failed");
    expect(compactThread).toHaveBeenCalledTimes(1);
  });

  it("an engine ok:false result is reported with the engine's reason; native still runs", async () => {
    const order: string[] = [];
    const { engine } = fakeEngine(order, {
      compact: async () => ({ ok: false, compacted: false, reason: "conversation busy" }),
    });
    const { appServer, compactThread } = fakeNative(order);
    const out = await runCodexCompaction(
      baseParams({ appServer, bindingStore: fakeStore(order, BOUND).store, contextEngine: engine }),
    );
    expect(out).toMatchObject({ ok: false, compacted: false, reason: "conversation busy" });
    expect(out.outcomes.engineCompact).toBe("rejected");
    expect(compactThread).toHaveBeenCalledTimes(1);
    expect(out.result?.tokensBefore).toBe(120_000);
  });

  it("without a thread binding: engine result, native reported as noThreadBinding", async () => {
    const order: string[] = [];
    const { engine } = fakeEngine(order);
    const { appServer, compactThread } = fakeNative(order);
    const out = await runCodexCompaction(
      baseParams({ appServer, bindingStore: fakeStore(order, null).store, contextEngine: engine }),
    );
    expect(out.ok).toBe(true);
    expect(out.result?.details.codexNativeCompaction).toEqual({ ok: false, reason: "noThreadBinding" });
    expect(compactThread).not.toHaveBeenCalled();
    // Without a binding there is no last usage to tell the engine.
    expect(order).toEqual(["engine.compact", "engine.maintain"]);
  });

  it("an unreadable binding is treated as unbound, with a warning", async () => {
    const order: string[] = [];
    const { engine } = fakeEngine(order);
    const { appServer, compactThread } = fakeNative(order);
    const store: BindingStore = {
      read: async () => {
        throw new Error("EACCES");
      },
      markNativeCompaction: async () => {},
    };
    const out = await runCodexCompaction(baseParams({ appServer, bindingStore: store, contextEngine: engine }));
    expect(out.ok).toBe(true);
    expect(out.warnings).toContain("thread binding unreadable; treating the session as unbound");
    expect(compactThread).not.toHaveBeenCalled();
  });

  it("uses the injected maintenance runner with reason 'compaction'", async () => {
    const order: string[] = [];
    const { engine, maintain } = fakeEngine(order);
    const runMaintenance = vi.fn(async () => ({ changed: false }));
    const out = await runCodexCompaction(
      baseParams({
        appServer: fakeNative(order).appServer,
        bindingStore: fakeStore(order, BOUND).store,
        contextEngine: engine,
        runMaintenance,
      }),
    );
    expect(out.outcomes.maintenance).toBe("ran");
    expect(maintain).not.toHaveBeenCalled();
    expect(runMaintenance).toHaveBeenCalledWith(
      expect.objectContaining({
        engine,
        sessionId: "s1",
        reason: "compaction",
        runtimeContext: { tokenBudget: 200_000, currentTokenCount: 120_000 },
      }),
    );
  });

  it("a failing binding mark is a warning, not a failure", async () => {
    const order: string[] = [];
    const { engine } = fakeEngine(order);
    const store: BindingStore = {
      read: async () => BOUND,
      markNativeCompaction: async () => {
        throw new Error("ENOSPC");
      },
    };
    const out = await runCodexCompaction(
      baseParams({ appServer: fakeNative(order).appServer, bindingStore: store, contextEngine: engine }),
    );
    expect(out.ok).toBe(true);
    expect(out.outcomes.bindingMark).toBe("failed");
    expect(out.warnings.some((w) => w.includes("could not be marked"))).toBe(true);
  });
});

describe("runCodexCompaction without an owning engine", () => {
  it("native compaction only, then engine maintenance", async () => {
    const order: string[] = [];
    const { engine, compact, maintain } = fakeEngine(order, { owns: false, id: "plain" });
    const { appServer } = fakeNative(order);
    const { store, markNativeCompaction } = fakeStore(order, BOUND);
    const log = captureLogger();
    const out = await runCodexCompaction(
      baseParams({ appServer, bindingStore: store, contextEngine: engine, logger: log.logger }),
    );
    expect(order).toEqual(["native.compact", "binding.mark", "engine.maintain"]);
    expect(compact).not.toHaveBeenCalled();
    expect(maintain).toHaveBeenCalledTimes(1);
    expect(markNativeCompaction).toHaveBeenCalledTimes(1);
    expect(out).toMatchObject({ ok: true, compacted: true, primary: "native" });
    expect(out.reason).toBeUndefined();
    expect(out.result).toEqual({
      tokensBefore: 120_000,
      details: { codexNativeCompaction: { ok: true, threadId: THREAD, turnId: "turn-compact", itemId: "item-compact" } },
    });
    expect(out.outcomes.engineCompact).toBe("skipped:notOwner");
    expect(log.events()).toContain("codex native compaction completed");
  });

  it("no binding: ok:false reason noThreadBinding, nothing else runs", async () => {
    const order: string[] = [];
    const { engine, maintain } = fakeEngine(order, { owns: false });
    const { appServer, compactThread } = fakeNative(order);
    const out = await runCodexCompaction(
      baseParams({ appServer, bindingStore: fakeStore(order, undefined).store, contextEngine: engine }),
    );
    expect(out).toMatchObject({ ok: false, compacted: false, reason: "noThreadBinding" });
    expect(compactThread).not.toHaveBeenCalled();
    expect(maintain).not.toHaveBeenCalled();
    expect(out.outcomes.maintenance).toBe("skipped:compactionFailed");
  });

  it("a failed native round is the result and is not retried", async () => {
    const order: string[] = [];
    const { appServer, compactThread } = fakeNative(order, async () => {
      throw Object.assign(new Error("rpc"), { code: "RPC_ERROR" });
    });
    const out = await runCodexCompaction(baseParams({ appServer, bindingStore: fakeStore(order, BOUND).store }));
    expect(out).toMatchObject({ ok: false, compacted: false, reason: "nativeError: RPC_ERROR" });
    expect(compactThread).toHaveBeenCalledTimes(1);
    expect(out.outcomes.engineCompact).toBe("skipped:noEngine");
  });

  it("a legacy engine counts as no engine", async () => {
    const order: string[] = [];
    const { engine, compact, maintain } = fakeEngine(order, { id: "legacy" });
    const out = await runCodexCompaction(
      baseParams({ appServer: fakeNative(order).appServer, bindingStore: fakeStore(order, BOUND).store, contextEngine: engine }),
    );
    expect(out.primary).toBe("native");
    expect(compact).not.toHaveBeenCalled();
    expect(maintain).not.toHaveBeenCalled();
  });
});

describe("runCodexCompaction abort", () => {
  it("abort during engine compaction stops at once and reaches the engine's abortSignal", async () => {
    const order: string[] = [];
    const controller = new AbortController();
    let engineSignal: AbortSignal | undefined;
    const { engine } = fakeEngine(order, {
      compact: ({ abortSignal }) => {
        engineSignal = abortSignal;
        queueMicrotask(() => controller.abort());
        return new Promise(() => {});
      },
    });
    const { appServer, compactThread } = fakeNative(order);
    const out = await runCodexCompaction(
      baseParams({ appServer, bindingStore: fakeStore(order, BOUND).store, contextEngine: engine, signal: controller.signal }),
    );
    expect(out).toMatchObject({ ok: false, compacted: false, reason: "aborted" });
    expect(out.trace).toEqual(["loadBinding", "engineCompact", "aborted"]);
    expect(engineSignal?.aborted).toBe(true);
    expect(compactThread).not.toHaveBeenCalled();
    expect(out.result?.details.codexNativeCompaction).toEqual({ ok: false, reason: "aborted" });
  });

  it("an already-aborted signal runs no compaction at all", async () => {
    const order: string[] = [];
    const { engine, compact } = fakeEngine(order);
    const { appServer, compactThread } = fakeNative(order);
    const out = await runCodexCompaction(
      baseParams({
        appServer,
        bindingStore: fakeStore(order, BOUND).store,
        contextEngine: engine,
        signal: AbortSignal.abort(),
      }),
    );
    expect(out).toMatchObject({ ok: false, reason: "aborted" });
    expect(compact).not.toHaveBeenCalled();
    expect(compactThread).not.toHaveBeenCalled();
  });

  it("abort during native compaction: aborted, binding not marked", async () => {
    const order: string[] = [];
    const controller = new AbortController();
    const { engine } = fakeEngine(order, { owns: false });
    const { appServer } = fakeNative(order, () => {
      queueMicrotask(() => controller.abort());
      return new Promise(() => {});
    });
    const { store, markNativeCompaction } = fakeStore(order, BOUND);
    const out = await runCodexCompaction(
      baseParams({ appServer, bindingStore: store, contextEngine: engine, signal: controller.signal }),
    );
    expect(out).toMatchObject({ ok: false, compacted: false, reason: "aborted" });
    expect(markNativeCompaction).not.toHaveBeenCalled();
  });
});

describe("runCodexCompaction parameter validation", () => {
  const order: string[] = [];
  const ok = () => baseParams({ appServer: fakeNative(order).appServer, bindingStore: fakeStore(order, BOUND).store });

  it.each([
    ["trigger", { trigger: "auto" }],
    ["sessionId", { sessionId: "" }],
    ["sessionFile", { sessionFile: 7 }],
    ["contextTokenBudget", { contextTokenBudget: 1.5 }],
    ["nativeTimeoutMs", { nativeTimeoutMs: -1 }],
    ["appServer", { appServer: {} }],
    ["bindingStore", { bindingStore: { read: async () => null } }],
    ["contextEngine", { contextEngine: { info: {} } }],
    ["signal", { signal: "nope" }],
    ["bogusOption", { bogusOption: true }],
  ])("rejects a bad %s with a typed error naming it", async (field, bad) => {
    const attempt = runCodexCompaction({ ...ok(), ...bad } as unknown as RunCodexCompactionParams);
    await expect(attempt).rejects.toBeInstanceOf(CompactionError);
    await expect(attempt).rejects.toMatchObject({ code: "INVALID_COMPACTION_PARAMS", field });
    await expect(attempt).rejects.toThrow(`\`${field}\``);
  });

  it("runs under the given lock", async () => {
    let locked = 0;
    const withLock = <T,>(fn: () => Promise<T>): Promise<T> => {
      locked++;
      return fn();
    };
    const out = await runCodexCompaction({ ...ok(), withLock });
    expect(locked).toBe(1);
    expect(out.primary).toBe("native");
  });
});

it("the Codex client satisfies NativeCompactor", () => {
  expect(clientFits).toBe(true);
});

describe("createBindingStore", () => {
  type B = { threadId: string; ledger: string[]; heldTurnIds: string[]; lastUsage?: { inputTokens: number; totalTokens: number } };

  it("reads only what compaction needs and clears ledger + held turns of the compacted thread", async () => {
    let saved: B = { threadId: THREAD, ledger: ["ctx-a"], heldTurnIds: ["t1"], lastUsage: { inputTokens: 5, totalTokens: 6 } };
    const write = vi.fn(async (_f: string, b: B) => {
      saved = b;
    });
    const store = createBindingStore<B>({ read: async () => saved, write });
    expect(await store.read("/f")).toEqual({ threadId: THREAD, lastUsage: { inputTokens: 5, totalTokens: 6 } });
    await store.markNativeCompaction("/f", { threadId: "other-thread" });
    expect(write).not.toHaveBeenCalled();
    await store.markNativeCompaction("/f", { threadId: THREAD, turnId: "tc" });
    expect(saved).toEqual({
      threadId: THREAD,
      ledger: [],
      heldTurnIds: [],
      lastUsage: { inputTokens: 5, totalTokens: 6 },
      nativeCompactions: 1,
      updatedBy: "compaction",
    });
    // Each native compaction is counted (the shared `markNativeCompaction` helper of the binding module).
    saved = { ...saved, ledger: ["ctx-b"], heldTurnIds: ["t2"] };
    await store.markNativeCompaction("/f", { threadId: THREAD });
    expect(saved).toMatchObject({ ledger: [], heldTurnIds: [], nativeCompactions: 2 });
    expect(write).toHaveBeenCalledTimes(2);
  });

  it("with the real sidecar: a native compaction of the bound thread increments nativeCompactions on disk", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "ctm-binding-store-"));
    try {
      const file = path.join(dir, "s.jsonl");
      const binding: ThreadBinding = {
        version: 1,
        threadId: THREAD,
        dynamicToolsFingerprint: "tools",
        engineId: "lcm",
        policyFingerprint: "policy",
        projectionMode: "delta",
        heldTurnIds: ["t1"],
        ledger: ["ctx-a"],
      };
      await writeThreadBinding(file, binding);
      const store = createBindingStore({ read: readThreadBinding, write: writeThreadBinding });
      await store.markNativeCompaction(file, { threadId: THREAD });
      expect(await readThreadBinding(file)).toEqual({ ...binding, ledger: [], heldTurnIds: [], nativeCompactions: 1, updatedBy: "compaction" });
      await store.markNativeCompaction(file, { threadId: THREAD });
      expect((await readThreadBinding(file))?.nativeCompactions).toBe(2);
      // Another thread's compaction leaves the binding alone.
      await store.markNativeCompaction(file, { threadId: "other-thread" });
      expect((await readThreadBinding(file))?.nativeCompactions).toBe(2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("an absent binding reads as null", async () => {
    const store = createBindingStore<B>({ read: async () => undefined, write: async () => {} });
    expect(await store.read("/f")).toBeNull();
  });
});
