/**
 * `runtimeContext.rewriteTranscriptEntries` end to end: the transcript-GC test plugin (lossless-claw's transcript GC
 * shape in background `maintain`, ContextClaw's truncation shape in `afterTurn`) loaded through `loadContextEngine`,
 * real turns on the real `codex app-server` against the fake Responses API. The plugin finds entry ids by reading the
 * transcript; the host rewrites it under the session lock (held by the turn, or taken by background maintenance).
 */
import { readFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadContextEngine, type LoadedContextEngine } from "../../src/openclaw/index.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { drainBackgroundWork, runCodexTurn } from "../../src/turn.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { captureLogger, disposeChecked, messageText, mirrorKeyCounts, tempSessions, turnParams } from "../helpers/turn-env.js";
import type { ContextEngine } from "../../src/context-engine/types.js";
import { fixture } from "./helpers.js";

interface GcRecord {
  calls: Array<{ phase: string; hasRewrite: boolean; approved: boolean }>;
  results: Array<{ phase: string; changed: boolean; bytesFreed: number; rewrittenEntries: number; reason?: string }>;
}
const RECORD = Symbol.for("ctm.fixture.transcript-gc");
const record = () => (globalThis as Record<symbol, unknown>)[RECORD] as GcRecord;

/** A prompt with a pasted log, far over the plugin's limit; the fake model echoes it ("reply to: ..."). */
const PASTED = Array.from({ length: 60 }, (_, i) => `2026-11-24T10:00:${String(i).padStart(2, "0")}Z worker-7 retry ${i} of the upload`).join("\n");
const BIG_PROMPT = `Why does this keep failing?\n${PASTED}`;
const STUB = "[transcript-gc: collected";

let env: OfflineCodex;
const sessions = tempSessions("transcript-gc-");
let loaded: LoadedContextEngine | undefined;

beforeAll(async () => {
  env = await startOfflineCodex();
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});
beforeEach(() => {
  delete (globalThis as Record<symbol, unknown>)[RECORD];
});
afterEach(async () => {
  await drainBackgroundWork();
  await loaded?.close();
  loaded = undefined;
});

async function load(phase: "afterTurn" | "maintain", delayMs = 0): Promise<LoadedContextEngine> {
  loaded = await loadContextEngine(fixture("transcript-gc"), { cwd: process.cwd(), appServer: env.codex, pluginConfig: { phase, maxChars: 400, delayMs } });
  return loaded;
}

describe("an engine's transcript rewrites (runtimeContext.rewriteTranscriptEntries)", () => {
  it("afterTurn: collects the turn's oversized messages under the turn's lock; the next turn runs on the rewritten transcript", async () => {
    const engine = await load("afterTurn");
    const file = sessions.file();
    const log = captureLogger();
    const params = (prompt: string) => turnParams(env, file, prompt, { contextEngine: engine.engine, runtimeContext: engine.runtimeContext, logger: log.logger });

    const r1 = await runCodexTurn(params(BIG_PROMPT));
    expect(r1.status).toBe("completed");
    expect(r1.engine.finalize).toBe("afterTurn");
    expect(record().calls).toEqual([{ phase: "afterTurn", hasRewrite: true, approved: false }]);
    expect(record().results).toHaveLength(1);
    expect(record().results[0]).toMatchObject({ phase: "afterTurn", changed: true, rewrittenEntries: 2 });
    expect(record().results[0]!.bytesFreed).toBeGreaterThan(2 * PASTED.length - 400);
    const text = readFileSync(file, "utf8");
    expect(text).not.toContain("worker-7 retry 17");
    const h1 = await readSessionHistory(file);
    expect(h1.messages.map((m) => messageText(m).startsWith(STUB))).toEqual([true, true]);
    expect(h1.origins.map((o) => o?.turnId)).toEqual([r1.turnId, r1.turnId]);

    const r2 = await runCodexTurn(params("and now?"));
    expect(r2.status).toBe("completed");
    expect(r2.assistantText).toBe("reply to: and now?");
    const h2 = await readSessionHistory(file);
    expect(h2.messages.map(messageText).slice(2)).toEqual(["and now?", "reply to: and now?"]);
    const { byTurn, duplicates } = await mirrorKeyCounts(file);
    expect(duplicates).toEqual([]);
    expect([...byTurn.entries()]).toEqual([
      [r1.turnId, 2],
      [r2.turnId, 2],
    ]);
    // The rewrite is logged with counts; the pasted text never reaches a log line.
    expect(log.events.find((e) => e.event === "transcript rewrite")).toMatchObject({ changed: true, rewrittenEntries: 2 });
    expect(JSON.stringify(log.events)).not.toContain("worker-7 retry");
  });

  it("background maintain: host-approved GC takes the session lock itself, also while the next turn holds it", async () => {
    // The GC rewrites 30 ms after maintenance starts: after the first turn released its lock, likely while the
    // second turn holds it.
    const engine = await load("maintain", 30);
    const file = sessions.file();
    const params = (prompt: string) => turnParams(env, file, prompt, { contextEngine: engine.engine, runtimeContext: engine.runtimeContext });

    const r1 = await runCodexTurn(params(BIG_PROMPT));
    expect(r1.status).toBe("completed");
    expect(r1.engine.maintenance).toBe("background");
    // The next turn starts at once: the background rewrite and the turn take the lock one after the other.
    const r2 = await runCodexTurn(params("second question"));
    expect(r2.status).toBe("completed");
    await drainBackgroundWork();

    expect(record().calls.filter((c) => c.phase === "maintain").every((c) => c.hasRewrite && c.approved)).toBe(true);
    expect(record().results.filter((r) => r.changed)).toEqual([{ phase: "maintain", changed: true, bytesFreed: expect.any(Number), rewrittenEntries: 2 }]);
    expect(readFileSync(file, "utf8")).not.toContain("worker-7 retry 17");
    const history = await readSessionHistory(file);
    expect(history.messages.map((m) => messageText(m).startsWith(STUB))).toEqual([true, true, false, false]);
    expect(history.messages.map(messageText).slice(2)).toEqual(["second question", "reply to: second question"]);
    const { duplicates, byTurn } = await mirrorKeyCounts(file);
    expect(duplicates).toEqual([]);
    expect([...byTurn.keys()]).toEqual([r1.turnId, r2.turnId]);
  });

  it("bootstrap: a redaction at bootstrap is what the same turn's assemble sees (the history is re-read after it)", async () => {
    const SECRET = "sk-live-4c9f0e7a";
    const results: unknown[] = [];
    const assembled: string[][] = [];
    // Redacts API keys from its session transcript when it starts on an existing session.
    const redactor: ContextEngine = {
      info: { id: "redactor", name: "Redacting engine" },
      async bootstrap({ sessionFile, runtimeContext }) {
        const replacements = readFileSync(sessionFile, "utf8")
          .split("\n")
          .filter((l) => l.includes(SECRET))
          .map((l) => JSON.parse(l) as { id: string; message: { content: unknown } })
          .map((e) => ({ entryId: e.id, message: { ...e.message, content: JSON.parse(JSON.stringify(e.message.content).replaceAll(SECRET, "[redacted]")) } }));
        results.push(await runtimeContext!.rewriteTranscriptEntries!({ replacements }));
        return { bootstrapped: true };
      },
      async ingest() {
        return { ingested: true };
      },
      async assemble({ messages }) {
        assembled.push(messages.map(messageText));
        return { messages, estimatedTokens: 0 };
      },
      async compact() {
        return { ok: true, compacted: false };
      },
    };
    const file = sessions.file();
    const r1 = await runCodexTurn(turnParams(env, file, `deploy with key ${SECRET}`, { contextEngine: redactor }));
    expect(r1.engine.bootstrap).toBe("skipped:newSession");
    const r2 = await runCodexTurn(turnParams(env, file, "is it deployed?", { contextEngine: redactor }));
    expect(r2.status).toBe("completed");
    expect(r2.engine.bootstrap).toBe("ran");
    expect(results).toEqual([{ changed: true, bytesFreed: expect.any(Number), rewrittenEntries: 2 }]);
    expect(assembled[1]).toEqual(["deploy with key [redacted]", "reply to: deploy with key [redacted]"]);
    expect(readFileSync(file, "utf8")).not.toContain(SECRET);
    const { duplicates, byTurn } = await mirrorKeyCounts(file);
    expect(duplicates).toEqual([]);
    expect([...byTurn.keys()]).toEqual([r1.turnId, r2.turnId]);
  });
});
