/**
 * Explicit compaction (`compactCodexSession`) against the real codex app-server and the fake Responses API: a prior turn
 * (runCodexTurn) creates the thread binding, then the compaction runs the engine and/or Codex's native round.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { compactCodexSession } from "../../src/compaction/session.js";
import { createWindowEngine } from "../../src/context-engine/engines/index.js";
import type { ContextEngine } from "../../src/context-engine/types.js";
import { readThreadBinding } from "../../src/transcript/binding.js";
import { readSessionHistory, readSessionTranscript } from "../../src/transcript/session-file.js";
import { SessionManager } from "@mariozechner/pi-coding-agent";
import type { CompactionHookEvent } from "../../src/hooks/types.js";
import { mirrorTurnToTranscript } from "../../src/transcript/mirror.js";
import { runCodexTurn } from "../../src/turn.js";
import { inputMessageTexts, startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { waitFor } from "../codex/helpers.js";

let env: OfflineCodex;
let dir: string;
let counter = 0;

beforeAll(async () => {
  env = await startOfflineCodex({ offline: { lean: true } });
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-compaction-session-"));
});
afterAll(async () => {
  await env?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/**
 * The projection these tests run under: `delta`'s binding (ledger, held turns) is what a native round clears. Under
 * the native sync (`auto`) the next turn instead cuts before the compacted turn (docs/projection.md, "Limits designed
 * around"); that path is tested in native-projection.test.ts.
 */
const DELTA = { mode: "delta" as const };

/**
 * A fresh session that ran `turns` turns (each answered by the fake), so it is bound to a Codex thread. It starts
 * with one exchange from an earlier harness (another thread), so the first turn bootstraps its thread with context.
 */
async function boundSession(engine: ContextEngine, turns = 2, projection: { mode: "delta" | "threadBootstrap" } = DELTA) {
  const sessionId = `cs-${++counter}`;
  const sessionFile = path.join(dir, `${sessionId}.jsonl`);
  await mirrorTurnToTranscript({
    sessionFile,
    sessionId,
    threadId: "earlier-harness",
    turnId: "t0",
    messages: [
      { role: "user", content: `earlier question of ${sessionId}`, timestamp: 1 },
      { role: "assistant", content: [{ type: "text", text: `earlier answer of ${sessionId}` }], timestamp: 2 } as never,
    ],
  });
  for (let i = 0; i < turns; i++) {
    env.fake.enqueue({ text: `answer ${i} of ${sessionId}` });
    const r = await runCodexTurn({
      appServer: env.codex,
      sessionId,
      sessionFile,
      prompt: `prompt ${i} of ${sessionId}`,
      contextEngine: engine,
      contextTokenBudget: 16_000,
      projection,
    });
    expect(r.status).toBe("completed");
  }
  const binding = await readThreadBinding(sessionFile);
  expect(binding?.threadId).toBeTruthy();
  return { sessionId, sessionFile, binding: binding! };
}

function spyCompact<E extends ContextEngine>(engine: E) {
  const original = engine.compact.bind(engine);
  const compact = vi.fn(original);
  engine.compact = compact;
  return compact;
}

describe("compactCodexSession against the real codex app-server", () => {
  it("engine-owned with native success: engine result primary, native round in details, ledger and held turns cleared", async () => {
    const engine = createWindowEngine({ ownsCompaction: true, threadBootstrap: true });
    const compact = spyCompact(engine);
    const { sessionId, sessionFile, binding } = await boundSession(engine, 2, { mode: "threadBootstrap" });
    // The bootstrap turn injected context and the thread holds the last turn: there is something to clear.
    expect(binding.ledger.length).toBeGreaterThan(0);
    expect(binding.heldTurnIds.length).toBeGreaterThan(0);

    const before = env.fake.requests.length;
    const out = await compactCodexSession({
      appServer: env.codex,
      sessionId,
      sessionFile,
      contextEngine: engine,
      contextTokenBudget: 16_000,
      trigger: "manual",
      nativeTimeoutMs: 15_000,
    });
    expect(out.ok).toBe(true);
    expect(out.compacted).toBe(true);
    expect(out.primary).toBe("engine");
    expect(compact).toHaveBeenCalledTimes(1);
    expect(out.result?.details).toMatchObject({
      targetFraction: expect.any(Number),
      codexNativeCompaction: { ok: true, threadId: binding.threadId, turnId: expect.any(String), itemId: expect.any(String) },
    });
    expect(env.fake.requests.slice(before).map((r) => r.requestKind)).toEqual(["compaction"]);

    const after = await readThreadBinding(sessionFile);
    expect(after).toMatchObject({ threadId: binding.threadId, ledger: [], heldTurnIds: [] });
    expect(after?.lastUsage).toEqual(binding.lastUsage);
  });

  it("engine-owned with a failed native round: still ok, native ok:false with a reason, binding untouched", async () => {
    const engine = createWindowEngine({ ownsCompaction: true, threadBootstrap: true });
    const { sessionId, sessionFile, binding } = await boundSession(engine);
    env.fake.enqueue({ httpStatus: 500 }, { kind: "compaction" });
    const out = await compactCodexSession({
      appServer: env.codex,
      sessionId,
      sessionFile,
      contextEngine: engine,
      contextTokenBudget: 16_000,
      trigger: "manual",
      nativeTimeoutMs: 15_000,
    });
    expect(out.ok).toBe(true);
    expect(out.primary).toBe("engine");
    const native = out.result?.details.codexNativeCompaction as { ok: boolean; reason?: string };
    expect(native.ok).toBe(false);
    expect(native.reason).toEqual(expect.any(String));
    expect(native.reason!.length).toBeGreaterThan(0);
    expect(out.native).toEqual(native);
    expect(await readThreadBinding(sessionFile)).toEqual(binding);
  });

  it("non-owning engine: Codex native compaction is the result and the engine's compact() is not called", async () => {
    const engine = createWindowEngine({ ownsCompaction: false });
    const compact = spyCompact(engine);
    const { sessionId, sessionFile, binding } = await boundSession(engine);
    const before = env.fake.requests.length;
    const out = await compactCodexSession({
      appServer: env.codex,
      sessionId,
      sessionFile,
      contextEngine: engine,
      contextTokenBudget: 16_000,
      trigger: "budget",
      nativeTimeoutMs: 15_000,
    });
    expect(out).toMatchObject({ ok: true, compacted: true, primary: "native", native: { ok: true, threadId: binding.threadId } });
    expect(out.result?.details).toEqual({ codexNativeCompaction: out.native });
    expect(compact).not.toHaveBeenCalled();
    expect(env.fake.requests.slice(before).map((r) => r.requestKind)).toEqual(["compaction"]);
    expect(await readThreadBinding(sessionFile)).toMatchObject({ ledger: [], heldTurnIds: [] });

    // The next turn resumes the compacted thread: Codex replays the summary instead of the old turns.
    env.fake.enqueue({ text: "after compaction" });
    const r = await runCodexTurn({
      appServer: env.codex,
      sessionId,
      sessionFile,
      prompt: "after the compaction",
      contextEngine: engine,
      contextTokenBudget: 16_000,
      projection: DELTA,
    });
    expect(r.status).toBe("completed");
    expect(r.threadId).toBe(binding.threadId);
    const last = env.fake.requests[env.fake.requests.length - 1]!;
    expect(inputMessageTexts(last.body, "user").some((t) => t.includes("FAKE-SUMMARY"))).toBe(true);
  });

  it("in an app-server process that never loaded the thread (a restarted host, a CLI compact run): resumed for the native round, released after it", async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), "ctm-compaction-home-"));
    const logged: Array<{ event?: string; threadId?: string }> = [];
    const logger = pino({ level: "info" }, { write: (line: string) => void logged.push(JSON.parse(line) as { event?: string; threadId?: string }) });
    const spawn = () => startOfflineCodex({ fake: env.fake, offline: { lean: true }, codex: { codexHome: home, logger } });
    const sessionId = `cs-${++counter}`;
    const sessionFile = path.join(dir, `${sessionId}.jsonl`);
    const engine = createWindowEngine({ ownsCompaction: false });
    try {
      const first = await spawn();
      let threadId: string;
      try {
        for (const i of [0, 1]) {
          env.fake.enqueue({ text: `answer ${i} of ${sessionId}` });
          const r = await runCodexTurn({ appServer: first.codex, sessionId, sessionFile, prompt: `prompt ${i} of ${sessionId}`, contextEngine: engine, contextTokenBudget: 16_000, projection: DELTA });
          expect(r.status).toBe("completed");
        }
        threadId = (await readThreadBinding(sessionFile))!.threadId;
      } finally {
        // One writer per thread: the first process lets go of it, as a host that restarts or a CLI run that ends.
        await first.dispose();
      }
      const second = await spawn();
      try {
        const before = env.fake.requests.length;
        const out = await compactCodexSession({ appServer: second.codex, sessionId, sessionFile, contextEngine: engine, contextTokenBudget: 16_000, trigger: "manual", nativeTimeoutMs: 15_000 });
        expect(out).toMatchObject({ ok: true, compacted: true, primary: "native", native: { ok: true, threadId } });
        expect(env.fake.requests.slice(before).map((r) => r.requestKind)).toEqual(["compaction"]);
        // Resumed with no overrides only for the compaction, and released after it: the client keeps no record of the
        // thread, so a turn must resume it with the host's settings.
        const events = (name: string) => logged.filter((l) => l.event === name && l.threadId === threadId).length;
        expect(events("codex.thread.resumedForCompaction")).toBe(1);
        await waitFor(() => events("codex.thread.released") === 1, 5_000, "the thread's release after the compaction");

        // The next turn resumes it with the host's settings; Codex replays the summary instead of the old turns.
        env.fake.enqueue({ text: "after compaction" });
        const r = await runCodexTurn({ appServer: second.codex, sessionId, sessionFile, prompt: "after the compaction", contextEngine: engine, contextTokenBudget: 16_000, projection: DELTA });
        expect(r.status).toBe("completed");
        expect(r.threadId).toBe(threadId);
        const last = env.fake.requests[env.fake.requests.length - 1]!;
        expect(inputMessageTexts(last.body, "user").some((t) => t.includes("FAKE-SUMMARY"))).toBe(true);
      } finally {
        await second.dispose();
      }
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });

  it("an engine's compaction is written to the transcript: readSessionHistory and pi's SessionManager see the compacted session", async () => {
    const inner = createWindowEngine({ ownsCompaction: true });
    let keepFrom = "";
    const engine: ContextEngine = {
      ...inner,
      info: { ...inner.info, id: "summarizing", ownsCompaction: true },
      async compact() {
        return { ok: true, compacted: true, result: { summary: "SUMMARY-OF-EARLIER-TURNS", firstKeptEntryId: keepFrom, tokensBefore: 900, tokensAfter: 200 } };
      },
    };
    const { sessionId, sessionFile } = await boundSession(engine, 2);
    const entries = (await readSessionTranscript(sessionFile)).entries;
    // Keep the last turn (its prompt and answer); the earlier ones are summarized.
    keepFrom = entries[entries.length - 2]!.id;
    const stored = (await readSessionHistory(sessionFile)).messages.length;
    expect(stored).toBeGreaterThan(2);
    const events: CompactionHookEvent[] = [];
    const hooks = { beforeCompaction: (e: CompactionHookEvent) => void events.push(e), afterCompaction: (e: CompactionHookEvent) => void events.push(e) };
    const out = await compactCodexSession({ appServer: env.codex, sessionId, sessionFile, contextEngine: engine, contextTokenBudget: 16_000, trigger: "manual", hooks });
    expect(out).toMatchObject({ ok: true, compacted: true, primary: "engine" });
    expect(events.map((e) => [e.backend, e.trigger, e.compacted])).toEqual([
      ["context-engine", "manual", undefined],
      ["context-engine", "manual", true],
    ]);
    // The session as it stood before, handed to beforeCompaction with the transcript (afterCompaction: the count).
    expect(events.map((e) => [e.sessionFile, e.messageCount, e.messages?.length])).toEqual([
      [sessionFile, stored, stored],
      [sessionFile, stored, undefined],
    ]);
    const history = await readSessionHistory(sessionFile);
    const roles = history.messages.map((m) => m.role);
    expect(roles).toEqual(["compactionSummary", "user", "assistant"]);
    expect(JSON.stringify(history.messages[0])).toContain("SUMMARY-OF-EARLIER-TURNS");
    expect(JSON.stringify(history.messages)).not.toContain(`earlier question of ${sessionId}`);
    // pi's own reader agrees with ours.
    const pi = SessionManager.open(sessionFile, dir);
    expect(pi.buildSessionContext().messages.map((m) => m.role)).toEqual(roles);
  });
});
