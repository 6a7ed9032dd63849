import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pino } from "pino";
import { compactCodexSession } from "../../src/compaction/session.js";
import { CompactionError } from "../../src/compaction/errors.js";
import type { NativeCompactor } from "../../src/compaction/compact-session.js";
import type { CompactResult, ContextEngine } from "../../src/context-engine/types.js";
import { readThreadBinding, writeThreadBinding, type ThreadBinding } from "../../src/transcript/binding.js";
import { withSessionLock } from "../../src/transcript/lock.js";

const THREAD = "thr-session-1";
const SECRET = "SECRET-SUMMARY-TEXT";

let dir: string;
let sessionFile: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-compact-session-"));
  sessionFile = path.join(dir, "s1.jsonl");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function binding(overrides: Partial<ThreadBinding> = {}): ThreadBinding {
  return {
    version: 1,
    threadId: THREAD,
    dynamicToolsFingerprint: "tools-fp",
    engineId: "lcm",
    policyFingerprint: "policy-fp",
    projectionMode: "delta",
    heldTurnIds: ["turn-a", "turn-b"],
    ledger: ["hash-1", "hash-2"],
    lastUsage: { inputTokens: 170_000, totalTokens: 171_000, modelContextWindow: 190_000 },
    ...overrides,
  };
}

function engine(o: { owns?: boolean; compact?: ContextEngine["compact"]; maintain?: ContextEngine["maintain"] } = {}) {
  const compact = vi.fn(
    o.compact ??
      (async (): Promise<CompactResult> => ({
        ok: true,
        compacted: true,
        result: { summary: SECRET, tokensBefore: 170_000, tokensAfter: 60_000, details: { rounds: 1 } },
      })),
  );
  const maintain = vi.fn(o.maintain ?? (async () => ({ changed: true, bytesFreed: 1, rewrittenEntries: 1 })));
  const e: ContextEngine = {
    info: { id: "lcm", name: "fake", ...(o.owns === false ? {} : { ownsCompaction: true }) },
    ingest: async () => ({ ingested: true }),
    assemble: async ({ messages }) => ({ messages, estimatedTokens: 0 }),
    compact,
    maintain,
  };
  return { engine: e, compact, maintain };
}

function native(impl?: NativeCompactor["compactThread"]) {
  const compactThread = vi.fn(
    impl ?? (async ({ threadId }: { threadId: string; timeoutMs: number }) => ({ ok: true, threadId, turnId: "t-c", itemId: "i-c" })),
  );
  return { appServer: { compactThread } satisfies NativeCompactor, compactThread };
}

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe("compactCodexSession (host-bound compaction)", () => {
  it("engine-owned: engine result primary, native reported in details, binding ledger cleared on disk", async () => {
    await writeThreadBinding(sessionFile, binding());
    const { engine: e, compact, maintain } = engine();
    const { appServer, compactThread } = native();
    const out = await compactCodexSession({
      appServer,
      sessionId: "s1",
      sessionKey: "agent:main",
      sessionFile,
      contextEngine: e,
      contextTokenBudget: 200_000,
      trigger: "manual",
      customInstructions: "keep decisions",
      nativeTimeoutMs: 5_000,
    });
    expect(out).toMatchObject({ ok: true, compacted: true, primary: "engine", native: { ok: true, threadId: THREAD } });
    expect(out.result).toMatchObject({ summary: SECRET, tokensBefore: 170_000, tokensAfter: 60_000 });
    expect(out.result?.details).toMatchObject({
      rounds: 1,
      codexNativeCompaction: { ok: true, threadId: THREAD, turnId: "t-c", itemId: "i-c" },
    });
    expect(compact).toHaveBeenCalledTimes(1);
    expect(compact.mock.calls[0]![0]).toMatchObject({
      sessionId: "s1",
      sessionKey: "agent:main",
      sessionFile,
      tokenBudget: 200_000,
      force: true,
      compactionTarget: "threshold",
      currentTokenCount: 170_000,
      customInstructions: "keep decisions",
    });
    expect(compactThread).toHaveBeenCalledWith({ threadId: THREAD, timeoutMs: 5_000 });
    // The real lifecycle helper ran maintenance in the foreground (no deferred-compaction flag).
    expect(maintain).toHaveBeenCalledTimes(1);
    expect(maintain.mock.calls[0]![0]).toMatchObject({
      sessionId: "s1",
      sessionKey: "agent:main",
      runtimeContext: { tokenBudget: 200_000, currentTokenCount: 170_000 },
    });
    expect(maintain.mock.calls[0]![0]!.runtimeContext).not.toHaveProperty("allowDeferredCompactionExecution");
    // OpenClaw's transcript rewrite helper is in both calls; called after maintain returned, it takes the lock itself.
    expect(typeof compact.mock.calls[0]![0]!.runtimeContext!.rewriteTranscriptEntries).toBe("function");
    const rewrite = maintain.mock.calls[0]![0]!.runtimeContext!.rewriteTranscriptEntries!;
    expect(await rewrite({ replacements: [{ entryId: "a1b2c3d4", message: { role: "user", content: "x" } }] })).toMatchObject({ changed: false, rewrittenEntries: 0 });
    const after = await readThreadBinding(sessionFile);
    // Marked with the shared binding helper: ledger and held turns cleared, the native compaction counted.
    expect(after).toEqual({ ...binding(), ledger: [], heldTurnIds: [], nativeCompactions: 1, updatedBy: "compaction" });
  });

  it("hands the host's runtime context (a plugin host's provider, model, llm) to compact() and maintain()", async () => {
    await writeThreadBinding(sessionFile, binding());
    const { engine: e, compact, maintain } = engine();
    const { appServer } = native();
    const llm = { complete: async () => ({ text: "summary" }) };
    await compactCodexSession({
      appServer,
      sessionId: "s1",
      sessionFile,
      contextEngine: e,
      contextTokenBudget: 200_000,
      trigger: "manual",
      runtimeContext: { provider: "codex", model: "m1", llm, tokenBudget: 1 },
    });
    for (const call of [compact.mock.calls[0]![0]!, maintain.mock.calls[0]![0]!]) {
      expect(call.runtimeContext).toMatchObject({ provider: "codex", model: "m1", tokenBudget: 200_000 });
      expect(call.runtimeContext!.llm).toBe(llm);
    }
  });

  it("engine-owned with a failed native round: still ok, native ok:false with its reason, binding untouched", async () => {
    await writeThreadBinding(sessionFile, binding());
    const { engine: e } = engine();
    const { appServer } = native(async ({ threadId }) => ({ ok: false, threadId, reason: "http 500" }));
    const out = await compactCodexSession({ appServer, sessionId: "s1", sessionFile, contextEngine: e, trigger: "manual" });
    expect(out.ok).toBe(true);
    expect(out.primary).toBe("engine");
    expect(out.result?.details.codexNativeCompaction).toMatchObject({ ok: false, reason: "http 500" });
    expect(await readThreadBinding(sessionFile)).toEqual(binding());
  });

  it("non-owning engine: native compaction is the result, then maintenance", async () => {
    await writeThreadBinding(sessionFile, binding());
    const { engine: e, compact, maintain } = engine({ owns: false });
    const { appServer, compactThread } = native();
    const out = await compactCodexSession({ appServer, sessionId: "s1", sessionFile, contextEngine: e, trigger: "budget" });
    expect(out).toMatchObject({ ok: true, compacted: true, primary: "native", native: { ok: true, itemId: "i-c" } });
    expect(compact).not.toHaveBeenCalled();
    expect(compactThread).toHaveBeenCalledTimes(1);
    expect(maintain).toHaveBeenCalledTimes(1);
    expect((await readThreadBinding(sessionFile))?.ledger).toEqual([]);
  });

  it("without a thread binding there is nothing for Codex to compact", async () => {
    const { appServer, compactThread } = native();
    const out = await compactCodexSession({ appServer, sessionId: "s1", sessionFile, trigger: "manual" });
    expect(out).toMatchObject({ ok: false, primary: "native", reason: "noThreadBinding" });
    expect(compactThread).not.toHaveBeenCalled();
  });

  it("holds the session lock for the whole run: a turn waiting for the lock runs only afterwards", async () => {
    await writeThreadBinding(sessionFile, binding());
    const gate = deferred();
    const entered = deferred();
    const order: string[] = [];
    const { appServer } = native(async ({ threadId }) => {
      order.push("native:start");
      entered.resolve();
      await gate.promise;
      order.push("native:end");
      return { ok: true, threadId, turnId: "t", itemId: "i" };
    });
    const running = compactCodexSession({ appServer, sessionId: "s1", sessionFile, trigger: "manual" });
    await entered.promise;
    const other = withSessionLock(sessionFile, async () => {
      order.push("other");
    });
    // Give the waiting caller every chance to (wrongly) run before the compaction finishes.
    for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
    expect(order).toEqual(["native:start"]);
    gate.resolve();
    await running;
    await other;
    expect(order).toEqual(["native:start", "native:end", "other"]);
  });

  it("is not re-entrant: calling it inside the session's own lock throws SESSION_LOCK_REENTRANT", async () => {
    const { appServer, compactThread } = native();
    await expect(
      withSessionLock(sessionFile, () => compactCodexSession({ appServer, sessionId: "s1", sessionFile, trigger: "manual" })),
    ).rejects.toMatchObject({ code: "SESSION_LOCK_REENTRANT" });
    expect(compactThread).not.toHaveBeenCalled();
  });

  it("an abort while waiting for the lock resolves as aborted and changes nothing", async () => {
    await writeThreadBinding(sessionFile, binding());
    const { engine: e, compact } = engine();
    const { appServer, compactThread } = native();
    const release = deferred();
    const holding = deferred();
    const holder = withSessionLock(sessionFile, async () => {
      holding.resolve();
      await release.promise;
    });
    await holding.promise;
    const controller = new AbortController();
    const pending = compactCodexSession({ appServer, sessionId: "s1", sessionFile, contextEngine: e, trigger: "manual", signal: controller.signal });
    controller.abort();
    const out = await pending;
    release.resolve();
    await holder;
    expect(out).toMatchObject({
      ok: false,
      reason: "aborted",
      primary: "engine",
      native: { ok: false, reason: "aborted" },
      warnings: ["abortedBeforeSessionLock"],
    });
    expect(compact).not.toHaveBeenCalled();
    expect(compactThread).not.toHaveBeenCalled();
    expect(await readThreadBinding(sessionFile)).toEqual(binding());
  });

  it("bounds maintenance with maintenanceTimeoutMs; a hung maintain() does not fail the compaction", async () => {
    await writeThreadBinding(sessionFile, binding());
    const { engine: e } = engine({ maintain: () => new Promise(() => undefined) });
    const { appServer } = native();
    const out = await compactCodexSession({ appServer, sessionId: "s1", sessionFile, contextEngine: e, trigger: "manual", maintenanceTimeoutMs: 20 });
    expect(out.ok).toBe(true);
    expect(out.outcomes.maintenance).toBe("failed");
    expect(out.native.ok).toBe(true);
  });

  it("rejects invalid parameters with a CompactionError naming the field, including host-wired options", async () => {
    const { appServer } = native();
    const bad = (params: Record<string, unknown>) =>
      compactCodexSession({ appServer, sessionId: "s1", sessionFile, trigger: "manual", ...params } as never);
    await expect(bad({ trigger: "auto" })).rejects.toMatchObject({ name: "CompactionError", code: "INVALID_COMPACTION_PARAMS", field: "trigger" });
    await expect(bad({ maintenanceTimeoutMs: 0 })).rejects.toMatchObject({ field: "maintenanceTimeoutMs" });
    await expect(bad({ bindingStore: {} })).rejects.toThrow(/`bindingStore`: unknown option/);
    await expect(bad({ sessionFile: "" })).rejects.toBeInstanceOf(CompactionError);
  });

  it("logs steps with ids and counts but never summary text or instructions", async () => {
    await writeThreadBinding(sessionFile, binding());
    const raw: string[] = [];
    const logger = pino({ level: "info" }, { write: (chunk: string) => void raw.push(chunk) });
    const { engine: e } = engine();
    const { appServer } = native();
    await compactCodexSession({ appServer, sessionId: "s1", sessionFile, contextEngine: e, trigger: "manual", customInstructions: "SECRET-INSTR", logger });
    const events = raw.map((l) => (JSON.parse(l) as { event?: string }).event);
    expect(events).toContain("compaction started");
    expect(events).toContain("compaction finished");
    expect(raw.join("")).not.toContain(SECRET);
    expect(raw.join("")).not.toContain("SECRET-INSTR");
  });
});
