/**
 * runCodexTurn end to end: the real `codex app-server` against the fake Responses API, with and without a context
 * engine. Asserts the lifecycle trace, the engine call order, what the model received, and what was mirrored.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import path from "node:path";
import { drainBackgroundWork, runCodexTurn, startCodexTurn } from "../../src/turn.js";
import { createRecordingEngine, createWindowEngine, legacyEngine } from "../../src/context-engine/engines/index.js";
import type { ContextEngine } from "../../src/context-engine/types.js";
import { discardedName } from "../../src/transcript/discard.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { inputMessageTexts, startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { captureLogger, deferred, messageText, mirrorKeyCounts, tempSessions, turnParams, until, disposeChecked } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("turn-lifecycle-");

beforeAll(async () => {
  env = await startOfflineCodex();
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

const slowText = (words: number): string[] => Array.from({ length: words }, (_, i) => `w${i} `);

describe("runCodexTurn without an engine", () => {
  it("runs a 2-turn session on one resumed thread and mirrors both turns", async () => {
    const file = sessions.file();
    const log = captureLogger();
    const r1 = await runCodexTurn(turnParams(env, file, "first prompt", { logger: log.logger }));
    const r2 = await runCodexTurn(turnParams(env, file, "second prompt", { logger: log.logger }));
    for (const r of [r1, r2]) {
      expect(r.status).toBe("completed");
      expect(r.trace).toEqual(["loadHistory", "project", "threadStart", "turnRunning", "mirror", "finalize", "completed"]);
      expect(r.engine).toEqual({
        bootstrap: "skipped:noEngine",
        assemble: "skipped:noEngine",
        finalize: "skipped:noEngine",
        maintenance: "skipped:noEngine",
      });
    }
    expect(r1.assistantText).toBe("reply to: first prompt");
    expect(r2.assistantText).toBe("reply to: second prompt");
    expect(r2.threadId).toBe(r1.threadId);
    // The pending record and the lock are gone when the result is reported (renamed away, removed in the background).
    const sidecars = sessionSidecarPaths(file);
    expect([sidecars.pendingFinalize, sidecars.lock].filter((p) => existsSync(p))).toEqual([]);
    expect(existsSync(sidecars.binding)).toBe(true);
    await drainBackgroundWork();
    expect([discardedName(sidecars.pendingFinalize), discardedName(sidecars.lock)].filter((p) => existsSync(p))).toEqual([]);
    expect(log.names()).toContain("thread resumed");
    // Every lifecycle log line of a turn carries its run id (distinct per attempt): grep one run's lines by it.
    expect(r1.runId).not.toBe(r2.runId);
    const runIdsOf = (event: string) => log.events.filter((e) => e.event === event).map((e) => e.runId);
    for (const event of ["session lock acquired", "mirror written", "turn settled"]) expect(runIdsOf(event), event).toEqual([r1.runId, r2.runId]);
    const history = await readSessionHistory(file);
    expect(history.messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
    expect(history.messages.map(messageText)).toEqual(["first prompt", "reply to: first prompt", "second prompt", "reply to: second prompt"]);
    const { byTurn, duplicates } = await mirrorKeyCounts(file);
    expect(duplicates).toEqual([]);
    expect([...byTurn.keys()]).toEqual([r1.turnId, r2.turnId]);
  });
});

describe("runCodexTurn with the legacy engine", () => {
  it("a rerouted model (Codex's model/rerouted) is recorded: responseModel on the answer, result.modelRerouted, Codex's warnings", async () => {
    const file = sessions.file();
    // The API answers with another model than asked, as it does for a request flagged as high-risk cyber activity.
    env.fake.enqueue([{ text: "answered by the fallback", answeredBy: "gpt-5.2-fallback" }]);
    const result = await runCodexTurn(turnParams(env, file, "a question"));
    expect(result.status).toBe("completed");
    expect(result.modelRerouted).toEqual({ fromModel: "fake-model", toModel: "gpt-5.2-fallback", reason: "highRiskCyberActivity" });
    expect(result.warnings).toContain("codex answered with gpt-5.2-fallback instead of fake-model (highRiskCyberActivity)");
    // Codex's own message for the user came too (its text is Codex's, so only its start is checked).
    expect(result.warnings.some((w) => /flagged/i.test(w))).toBe(true);
    const answer = (await readSessionHistory(file)).messages.at(-1) as { role: string; model?: string; responseModel?: string };
    expect(answer).toMatchObject({ role: "assistant", model: "fake-model", responseModel: "gpt-5.2-fallback" });
    // The next turn, answered by the model asked for, carries no reroute.
    env.fake.enqueue([{ text: "back to normal" }]);
    const next = await runCodexTurn(turnParams(env, file, "another"));
    expect(next.modelRerouted).toBeUndefined();
    expect((await readSessionHistory(file)).messages.at(-1)).not.toHaveProperty("responseModel");
  });

  it("behaves exactly as without an engine", async () => {
    const file = sessions.file();
    const r = await runCodexTurn(turnParams(env, file, "legacy turn", { contextEngine: legacyEngine }));
    expect(r.status).toBe("completed");
    expect(r.trace).toEqual(["loadHistory", "project", "threadStart", "turnRunning", "mirror", "finalize", "completed"]);
    expect(r.engine.assemble).toBe("skipped:noEngine");
    expect(r.projection?.mode).toBe("none");
  });
});

describe("runCodexTurn with a recording engine", () => {
  it("calls the engine in lifecycle order and hands afterTurn the whole turn", async () => {
    const file = sessions.file();
    const engine = createRecordingEngine();
    const r1 = await runCodexTurn(turnParams(env, file, "engine one", { contextEngine: engine, contextTokenBudget: 8_000 }));
    expect(r1.status).toBe("completed");
    expect(r1.trace).toEqual(["loadHistory", "assemble", "project", "threadStart", "turnRunning", "mirror", "finalize", "maintain", "completed"]);
    expect(engine.calls.map((c) => c.method)).toEqual(["assemble", "afterTurn", "maintain"]);
    const first = engine.calls.find((c) => c.method === "afterTurn")!;
    expect(first).toMatchObject({ prePromptMessageCount: 0, messageCount: 2 });
    expect(first.runtimeContextKeys).toEqual(expect.arrayContaining(["tokenBudget", "currentTokenCount"]));

    engine.calls.length = 0;
    const r2 = await runCodexTurn(turnParams(env, file, "engine two", { contextEngine: engine, contextTokenBudget: 8_000 }));
    expect(r2.status).toBe("completed");
    expect(r2.trace).toEqual([
      "loadHistory", "bootstrap", "assemble", "project", "threadStart", "turnRunning", "mirror", "finalize", "maintain", "completed",
    ]);
    expect(engine.calls.map((c) => c.method)).toEqual(["bootstrap", "maintain", "assemble", "afterTurn", "maintain"]);
    expect(engine.calls[2]).toMatchObject({ method: "assemble", messageCount: 2 });
    expect(engine.calls[3]).toMatchObject({ method: "afterTurn", prePromptMessageCount: 2, messageCount: 4 });
    expect(engine.calls[3]!.runtimeContextKeys).toEqual(expect.arrayContaining(["tokenBudget", "currentTokenCount"]));
    expect(r2.engine).toEqual({ bootstrap: "ran", assemble: "ran", finalize: "afterTurn", maintenance: "ran" });
  });

  it("afterTurn gets exactly the re-read session, from the mirror's tail without re-parsing the transcript", async () => {
    const file = sessions.file();
    const seen: unknown[][] = [];
    const engine = createRecordingEngine();
    const afterTurn = engine.afterTurn!.bind(engine);
    engine.afterTurn = async (params) => {
      seen.push(structuredClone(params.messages));
      return afterTurn(params);
    };
    const log = captureLogger();
    for (const prompt of ["tail one", "tail two", "tail three"]) {
      const r = await runCodexTurn(turnParams(env, file, prompt, { contextEngine: engine, contextTokenBudget: 8_000, logger: log.logger }));
      expect(r.status).toBe("completed");
      // What a full re-read of the file gives, byte for byte.
      expect(seen.at(-1)).toEqual((await readSessionHistory(file)).messages);
    }
    expect(log.events.filter((e) => e.event === "finalize snapshot").map((e) => e.source)).toEqual(["mirrorTail", "mirrorTail", "mirrorTail"]);
    expect(log.events.some((e) => e.event === "finalize fallback")).toBe(false);
  });

  it("finalizes with ingestBatch when afterTurn is missing, and ingest when both are", async () => {
    const batchFile = sessions.file();
    const batch = createRecordingEngine(undefined, { omit: ["afterTurn"] });
    const rb = await runCodexTurn(turnParams(env, batchFile, "batch me", { contextEngine: batch }));
    expect(rb.engine.finalize).toBe("ingestBatch");
    expect(batch.calls.filter((c) => c.method === "ingestBatch")).toEqual([{ method: "ingestBatch", messageCount: 2 }]);

    const singleFile = sessions.file();
    const single = createRecordingEngine(undefined, { omit: ["afterTurn", "ingestBatch"] });
    const rs = await runCodexTurn(turnParams(env, singleFile, "ingest me", { contextEngine: single }));
    expect(rs.engine.finalize).toBe("ingest");
    expect(single.calls.filter((c) => c.method === "ingest")).toHaveLength(2);
    expect(single.calls.some((c) => c.method === "afterTurn" || c.method === "ingestBatch")).toBe(false);
  });

  it("puts systemPromptAddition in developer instructions, never in the user message", async () => {
    const file = sessions.file();
    // An engine that always contributes context, so the addition applies on the first (thread-starting) turn.
    const engine: ContextEngine = {
      info: { id: "addition", name: "addition" },
      async ingest() {
        return { ingested: true };
      },
      async compact() {
        return { ok: true, compacted: false };
      },
      async assemble(p) {
        return {
          messages: [...p.messages, { role: "custom", customType: "note", content: "ENGINE-NOTE-CONTENT", timestamp: 1 }],
          estimatedTokens: 10,
          systemPromptAddition: "  SYS-ADDITION-MARKER-77\n",
        };
      },
    };
    const before = env.fake.requests.length;
    const r = await runCodexTurn(turnParams(env, file, "with addition", { contextEngine: engine, developerInstructions: "BASE-DEV" }));
    expect(r.status).toBe("completed");
    expect(r.engine.assemble).toBe("ran");
    const req = env.fake.requests.slice(before).find((q) => q.requestKind === "turn")!;
    const dev = inputMessageTexts(req.body, "developer").join("\n");
    // Base first, then the trimmed addition as the last section.
    expect(dev).toContain("BASE-DEV\n\nSYS-ADDITION-MARKER-77");
    const users = inputMessageTexts(req.body, "user").join("\n");
    expect(users).not.toContain("SYS-ADDITION-MARKER-77");
    expect(users).toContain("with addition");
    const history = await readSessionHistory(file);
    expect(history.messages.map(messageText).join("\n")).not.toContain("SYS-ADDITION-MARKER-77");
  });
});

describe("steer, abort and yield", () => {
  it("steers a slow turn; the model sees the steer text", async () => {
    const file = sessions.file();
    env.fake.enqueue({ text: slowText(400), delayMs: 30 });
    env.fake.enqueue({ text: "steered reply" });
    let deltas = 0;
    const handle = startCodexTurn(
      turnParams(env, file, "go slowly", {
        steerQuietWindowMs: 20,
        onEvent: (e) => {
          if (e.type === "agentMessageDelta") deltas++;
        },
      }),
    );
    await until(() => deltas > 0, 10_000, "the first delta");
    handle.steer("STEER-TEXT-9");
    const r = await handle.result;
    expect(r.status).toBe("completed");
    expect(r.assistantText).toBe("steered reply");
    expect(r.followUps).toEqual([]);
    expect(r.messagesSnapshot.map(messageText)).toContain("STEER-TEXT-9");
    const last = env.fake.requests[env.fake.requests.length - 1]!;
    expect(inputMessageTexts(last.body, "user")).toContain("STEER-TEXT-9");
  });

  it("aborts a running turn: interrupted, mirrored once, maintenance skipped", async () => {
    const file = sessions.file();
    const engine = createRecordingEngine();
    env.fake.enqueue({ text: slowText(400), delayMs: 30 });
    let deltas = 0;
    const handle = startCodexTurn(
      turnParams(env, file, "abort me", {
        contextEngine: engine,
        onEvent: (e) => {
          if (e.type === "agentMessageDelta") deltas++;
        },
      }),
    );
    await until(() => deltas > 0, 10_000, "the first delta");
    const streaming = env.fake.requests[env.fake.requests.length - 1]!;
    handle.abort("test");
    const r = await handle.result;
    expect(r.status).toBe("aborted");
    // Codex interrupted the turn: the model stream was cut before it finished.
    await until(() => streaming.aborted, 5_000, "the model stream to be cut");
    expect(r.assistantText.length).toBeLessThan(slowText(400).join("").length);
    expect(r.trace).toContain("mirror");
    expect(r.trace).not.toContain("maintain");
    expect(r.engine.maintenance).toBe("skipped:aborted");
    expect(r.engine.finalize).toBe("afterTurn");
    expect(engine.calls.map((c) => c.method)).toEqual(["assemble", "afterTurn"]);
    const { byTurn, duplicates } = await mirrorKeyCounts(file);
    expect(duplicates).toEqual([]);
    expect([...byTurn.keys()]).toEqual([r.turnId]);
    expect((await readSessionHistory(file)).messages[0]).toMatchObject({ role: "user", content: "abort me" });
  });

  it("yields a running turn: status yieldAborted", async () => {
    const file = sessions.file();
    env.fake.enqueue({ text: slowText(400), delayMs: 30 });
    let deltas = 0;
    const handle = startCodexTurn(
      turnParams(env, file, "yield me", {
        contextEngine: createRecordingEngine(),
        onEvent: (e) => {
          if (e.type === "agentMessageDelta") deltas++;
        },
      }),
    );
    await until(() => deltas > 0, 10_000, "the first delta");
    handle.yield();
    const r = await handle.result;
    expect(r.status).toBe("yieldAborted");
    expect(r.engine.maintenance).toBe("skipped:yieldAborted");
    expect((await mirrorKeyCounts(file)).byTurn.size).toBe(1);
  });

  it("aborts before the turn starts: nothing mirrored, finalize not called", async () => {
    const file = sessions.file();
    const gate = deferred<void>();
    const entered = deferred<void>();
    const inner = createRecordingEngine();
    const engine: ContextEngine & { calls: typeof inner.calls } = {
      ...inner,
      async assemble(p) {
        entered.resolve();
        await gate.promise;
        return inner.assemble(p);
      },
    };
    const requestsBefore = env.fake.requests.length;
    const handle = startCodexTurn(turnParams(env, file, "never sent", { contextEngine: engine }));
    await entered.promise;
    handle.abort();
    const r = await handle.result;
    gate.resolve();
    expect(r.status).toBe("aborted");
    expect(r.trace).toEqual(["loadHistory", "assemble", "aborted"]);
    expect(r.engine.finalize).toBe("skipped:turnNotStarted");
    expect(inner.calls.some((c) => c.method === "afterTurn" || c.method === "maintain")).toBe(false);
    expect((await readSessionHistory(file)).messages).toEqual([]);
    expect(env.fake.requests.length).toBe(requestsBefore);
  });
});

describe("edges of the attempt", () => {
  it("an already-aborted signal stops before the lifecycle starts and writes no transcript", async () => {
    const file = sessions.file();
    const controller = new AbortController();
    controller.abort();
    const requestsBefore = env.fake.requests.length;
    const r = await runCodexTurn(turnParams(env, file, "never runs", { contextEngine: createRecordingEngine(), signal: controller.signal }));
    expect(r.status).toBe("aborted");
    expect(r.trace).toEqual(["aborted"]);
    expect(r.warnings).toContain("ended while waiting for the session lock; nothing ran");
    expect(existsSync(file)).toBe(false);
    expect(env.fake.requests.length).toBe(requestsBefore);
  });

  it("a session file outside sessionRoot fails in the session step with a typed code and writes nothing", async () => {
    const outside = tempSessions("turn-outside-");
    try {
      // In a directory that does not exist yet: nothing (not even the lock's directory) may be created outside the root.
      const file = path.join(outside.dir, "not-yet", "s.jsonl");
      const r = await runCodexTurn(turnParams(env, file, "outside the root", { sessionRoot: sessions.dir }));
      expect(r.status).toBe("failed");
      expect(r.trace).toEqual(["failed"]);
      expect(r.error).toMatchObject({ phase: "lock", code: "SESSION_OUTSIDE_ROOT" });
      expect(existsSync(file)).toBe(false);
      expect(existsSync(path.dirname(file))).toBe(false);
    } finally {
      outside.cleanup();
    }
  });

  it("a throwing beforePromptBuild hook keeps the prompt and says so", async () => {
    const file = sessions.file();
    const r = await runCodexTurn(
      turnParams(env, file, "hooked prompt", {
        hooks: {
          beforePromptBuild: () => {
            throw new Error("hook failure");
          },
        },
      }),
    );
    expect(r.status).toBe("completed");
    expect(r.trace).toContain("hooks");
    expect(r.warnings.some((w) => /^beforePromptBuild hook failed \(.+\); keeping the unmodified prompt$/.test(w))).toBe(true);
    expect(r.assistantText).toBe("reply to: hooked prompt");
  });

  it("a steer sent before the turn runs comes back as a follow-up", async () => {
    const file = sessions.file();
    const handle = startCodexTurn(turnParams(env, file, "steer early"));
    handle.steer("EARLY-STEER");
    const r = await handle.result;
    expect(r.status).toBe("completed");
    expect(r.followUps).toEqual(["EARLY-STEER"]);
    expect(r.assistantText).toBe("reply to: steer early");
  });

  it("background maintenance runs after the result, with deferred compaction allowed", async () => {
    const file = sessions.file();
    const inner = createWindowEngine();
    const engine = createRecordingEngine({ ...inner, info: { ...inner.info, turnMaintenanceMode: "background" } });
    const r = await runCodexTurn(turnParams(env, file, "background please", { contextEngine: engine, contextTokenBudget: 8_000 }));
    expect(r.status).toBe("completed");
    expect(r.engine.maintenance).toBe("background");
    expect(r.trace).not.toContain("maintain");
    await r.backgroundMaintenance;
    await drainBackgroundWork();
    const maintain = engine.calls.filter((c) => c.method === "maintain");
    expect(maintain).toHaveLength(1);
    expect(maintain[0]!.runtimeContextKeys).toEqual(expect.arrayContaining(["allowDeferredCompactionExecution", "tokenBudget"]));
  });
});

describe("model failures", () => {
  it("fails on HTTP 500: internalServerError, mirrored, finalized, maintenance skipped:promptError", async () => {
    const file = sessions.file();
    const engine = createRecordingEngine();
    env.fake.enqueue({ httpStatus: 500 });
    const r = await runCodexTurn(turnParams(env, file, "will fail", { contextEngine: engine }));
    expect(r.status).toBe("failed");
    expect(r.error?.code).toBe("internalServerError");
    expect(r.trace).toEqual(["loadHistory", "assemble", "project", "threadStart", "turnRunning", "mirror", "finalize", "failed"]);
    expect(r.engine.finalize).toBe("afterTurn");
    expect(r.engine.maintenance).toBe("skipped:promptError");
    expect(engine.calls.map((c) => c.method)).toEqual(["assemble", "afterTurn"]);
    const history = await readSessionHistory(file);
    expect(history.messages[0]).toMatchObject({ role: "user", content: "will fail" });
    expect((await mirrorKeyCounts(file)).duplicates).toEqual([]);
  });
});
