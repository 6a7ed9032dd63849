/**
 * Durable turns end to end (OpenClaw 2026.8.1+'s `commitTurn`): the durable-turns test plugin
 * (test/fixtures/openclaw-plugins/durable-turns, type-checked against OpenClaw's vendored declarations by
 * sdk-conformance.test.ts) loaded with `loadContextEngine`, real turns on the real `codex app-server` against the fake
 * Responses API. The plugin's ledger is its durable store: every call it got, fsynced.
 *
 * 1. In process: three turns, one of them failed by the model: each accepted turn is committed once with the key
 *    derived from the session and Codex's turn, the anchors match the transcript's entries, `afterTurn` / `ingest` /
 *    `ingestBatch` are never called, the failed turn is not committed, and the log says so (one event per commit).
 * 2. kill -9 between the commit and the pending record's clearing (the plugin kills its process right after its commit
 *    is durable): the next process's first turn recovers the pending turn and retries commitTurn with the SAME key and
 *    byte-identical parameters (the plugin refuses a key whose payload changed); the engine answers `duplicate`.
 */
import { spawn } from "node:child_process";
import { mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { durableTurnAdvancementKey } from "../../src/context-engine/durable-turns.js";
import { loadContextEngine } from "../../src/openclaw/index.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { listPendingFinalize } from "../../src/transcript/pending.js";
import { readSessionTranscript } from "../../src/transcript/session-file.js";
import { parseMirrorKey } from "../../src/transcript/entries.js";
import { runCodexTurn } from "../../src/turn.js";
import type { DurableTurnJob } from "../reliability/fixtures/durable-turn-worker.js";
import { testTempDir } from "../helpers/temp-dir.js";
import { captureLogger, disposeChecked } from "../helpers/turn-env.js";
import { fixture } from "./helpers.js";

interface LedgerLine {
  kind: string;
  pid: number;
  status?: string;
  advancementKey?: string;
  prompt?: string;
  messages?: number;
  admissionEntryId?: string;
  terminalEntryId?: string;
  roles?: string[];
}

async function ledger(file: string): Promise<LedgerLine[]> {
  const text = await readFile(file, "utf8").catch(() => "");
  return text.split("\n").filter(Boolean).map((l) => JSON.parse(l) as LedgerLine);
}

/** The transcript's entries of one Codex turn (by mirror key), in order. */
async function turnEntries(file: string, turnId: string) {
  const t = await readSessionTranscript(file);
  return t.entries.filter((e) => typeof e.idempotencyKey === "string" && parseMirrorKey(e.idempotencyKey)?.turnId === turnId);
}

let env: OfflineCodex;
beforeAll(async () => {
  env = await startOfflineCodex();
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
});

describe("an engine that declares durable turns (OpenClaw commitTurn)", () => {
  it("gets commitTurn once per accepted turn with the derived key and the transcript's anchors, never afterTurn; a failed turn is not committed", async () => {
    const dir = await testTempDir("ctm-durable-");
    const ledgerPath = path.join(dir, "ledger.jsonl");
    const file = path.join(dir, "s.jsonl");
    const loaded = await loadContextEngine(fixture("durable-turns"), { cwd: dir, appServer: env.codex, pluginConfig: { ledgerPath } });
    const log = captureLogger();
    try {
      const run = (prompt: string) =>
        runCodexTurn({ appServer: env.codex, sessionId: "s", sessionFile: file, prompt, contextEngine: loaded.engine, runtimeContext: loaded.runtimeContext, logger: log.logger });
      const first = await run("first question");
      env.fake.enqueue({ httpStatus: 400, body: JSON.stringify({ error: { message: "bad request", type: "invalid_request_error" } }) });
      const failed = await run("this one fails");
      const third = await run("third question");
      expect([first.status, failed.status, third.status]).toEqual(["completed", "failed", "completed"]);
      expect([first.engine.finalize, failed.engine.finalize, third.engine.finalize]).toEqual(["commitTurn", "skipped:notCommitted", "commitTurn"]);

      const lines = await ledger(ledgerPath);
      expect(lines.filter((l) => ["afterTurn", "ingest", "ingestBatch"].includes(l.kind))).toEqual([]);
      const commits = lines.filter((l) => l.kind === "commit");
      expect(commits.map((c) => [c.prompt, c.status])).toEqual([
        ["first question", "committed"],
        ["third question", "committed"],
      ]);
      for (const [c, r] of [[commits[0]!, first], [commits[1]!, third]] as const) {
        expect(c.advancementKey).toBe(durableTurnAdvancementKey({ sessionId: "s", threadId: r.threadId!, turnId: r.turnId! }));
        const entries = await turnEntries(file, r.turnId!);
        // The anchors are the turn's first and last transcript entries, the messages every entry between them.
        expect([c.admissionEntryId, c.terminalEntryId]).toEqual([entries[0]!.id, entries.at(-1)!.id]);
        expect(c.messages).toBe(entries.length);
        expect(c.roles?.[0]).toBe("user");
      }
      // The failed turn is in the transcript, but the engine never advanced over it; nothing is left pending.
      expect((await turnEntries(file, failed.turnId!)).length).toBeGreaterThan(0);
      expect(await listPendingFinalize(file)).toEqual([]);
      // Maintenance ran after each committed turn only.
      expect(lines.filter((l) => l.kind === "maintain")).toHaveLength(2);
      // One log event per commit, with the ids and counts.
      const logged = log.events.filter((e) => e.event === "turn committed");
      expect(logged.map((e) => [e.turnId, e.status, e.advancementKey, e.messages])).toEqual([
        [first.turnId, "committed", commits[0]!.advancementKey, commits[0]!.messages],
        [third.turnId, "committed", commits[1]!.advancementKey, commits[1]!.messages],
      ]);
      expect(log.events.filter((e) => e.event === "turn commit skipped").map((e) => e.turnId)).toEqual([failed.turnId]);
    } finally {
      await loaded.close();
    }
  }, 120_000);

  it("kill -9 between the commit and the pending record's clearing: the next process retries commitTurn with the same key, answered duplicate", async () => {
    const dir = await testTempDir("ctm-durable-kill-");
    const ledgerPath = path.join(dir, "ledger.jsonl");
    const base = { file: path.join(dir, "s.jsonl"), sessionId: "s", codexHome: path.join(dir, "codex-home") };
    await mkdir(base.codexHome, { recursive: true });
    const first = await runWorker({ ...base, pluginConfig: { ledgerPath, dieAfterCommitOf: "a1" }, prompts: ["a0", "a1", "a2"] });
    expect(first.signal, first.stderr).toBe("SIGKILL");
    // Killed after a1's commit: its pending record (holding the key) is still there.
    const pending = await listPendingFinalize(base.file);
    expect(pending).toHaveLength(1);
    const committed = (await ledger(ledgerPath)).filter((l) => l.kind === "commit");
    expect(committed.map((c) => [c.prompt, c.status])).toEqual([
      ["a0", "committed"],
      ["a1", "committed"],
    ]);
    expect(pending[0]!.advancementKey).toBe(committed[1]!.advancementKey);

    const second = await runWorker({ ...base, pluginConfig: { ledgerPath }, prompts: ["b0"] });
    expect(second.code, second.stderr).toBe(0);
    const results = second.stdout.trim().split("\n").map((l) => JSON.parse(l) as { status: string; finalize: string; warnings: string[] });
    expect(results.map((r) => [r.status, r.finalize])).toEqual([["completed", "commitTurn"]]);
    expect(results[0]!.warnings).toEqual([]);

    const lines = await ledger(ledgerPath);
    const commits = lines.filter((l) => l.kind === "commit");
    // a1 once committed by the killed process, then retried by the next one with the same key: duplicate.
    expect(commits.map((c) => [c.prompt, c.status])).toEqual([
      ["a0", "committed"],
      ["a1", "committed"],
      ["a1", "duplicate"],
      ["b0", "committed"],
    ]);
    expect(commits[2]!.advancementKey).toBe(commits[1]!.advancementKey);
    expect(new Set(commits.map((c) => c.pid)).size).toBe(2);
    expect(commits[2]!.pid).not.toBe(commits[1]!.pid);
    expect(new Set(commits.filter((c) => c.status === "committed").map((c) => c.advancementKey)).size).toBe(3);
    expect(lines.filter((l) => ["afterTurn", "ingest", "ingestBatch"].includes(l.kind))).toEqual([]);
    expect(await listPendingFinalize(base.file)).toEqual([]);
    // Every prompt once in the transcript (a2 never ran: its process was killed before it).
    const t = await readSessionTranscript(base.file);
    const users = t.entries.filter((e) => e.type === "message" && (e["message"] as { role: string }).role === "user");
    expect(users.map((e) => (e["message"] as { content: unknown }).content)).toEqual(["a0", "a1", "b0"]);
  }, 120_000);
});

const WORKER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../reliability/fixtures/durable-turn-worker.ts");

function runWorker(job: DurableTurnJob): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", WORKER, JSON.stringify(job)], { cwd: path.resolve(path.dirname(WORKER), "../../.."), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
