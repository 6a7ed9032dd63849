/**
 * The real lossless-claw (vendored under test/fixtures/lossless-claw/<line>/, see its PROVENANCE.md) through this
 * host, asserted on the plugin's OWN SQLite database, not only on turn statuses. One file per line (main.test.ts:
 * 0.15.3, next-1.0.test.ts: 1.0.0-beta.x) so the two run side by side. They need `node:sqlite` (Node >= 22.5):
 * vitest.config.ts leaves this folder out on older Node, so it never shows as a skipped test there.
 *
 * 1. Through the CLI, one `codex-turn run --engine <vendored dir> --offline --json` per turn (a process each, as a user
 *    runs it; the offline Codex starts afresh every time): 12 turns with its summarizer on `runtime.llm`, one reply
 *    reporting a nearly full context window so the next turn runs the accordion compaction, then `/lcm status`, `/new`
 *    and `/reset`.
 * 2. Through the library (the CLI cannot stand in for an attempt that died mid-turn, nor show what `compact()`
 *    answered): the accordion's `compact()` result (1.x: `{ ok: false, compacted: true }`, "compacted but still over
 *    target"), then a cut turn (Codex ran it, nothing recorded it but the binding's in-flight marker) recovered by the
 *    next turn, and the database holding it once.
 */
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import type { ContextEngine } from "../../../src/context-engine/types.js";
import { loadContextEngine } from "../../../src/openclaw/index.js";
import { LLM_COMPLETE_INSTRUCTIONS } from "../../../src/openclaw/llm.js";
import { execCommandCall, startOfflineCodex } from "../../../src/testing/index.js";
import { readThreadBinding, writeThreadBinding } from "../../../src/transcript/binding.js";
import { readSessionTranscript } from "../../../src/transcript/session-file.js";
import { runCodexTurn } from "../../../src/turn.js";
import { runCli } from "../../helpers/cli.js";
import { testTempDir } from "../../helpers/temp-dir.js";

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../fixtures/lossless-claw");

/** A line vendored under test/fixtures/lossless-claw/. */
export interface LosslessClawLine {
  dir: "main" | "next-1.0";
  version: string;
}

/** The plugin's database, read with `node:sqlite` (imported here so that Node 20 never loads this module). */
async function openDb(file: string) {
  // The project's @types/node (Node 20) has no `node:sqlite`: the module's few members used here are typed locally.
  const sqlite = "node:sqlite";
  const { DatabaseSync } = (await import(sqlite)) as {
    DatabaseSync: new (file: string, options: { readOnly: boolean }) => { prepare(sql: string): { all(...args: unknown[]): unknown[] }; close(): void };
  };
  const db = new DatabaseSync(file, { readOnly: true });
  const all = (sql: string, ...args: Array<string | number>) => db.prepare(sql).all(...args) as Array<Record<string, unknown>>;
  return { all, close: () => db.close() };
}

/** The `user` and `assistant` messages of a transcript (text content), with their entry ids, in order. */
async function transcriptMessages(file: string): Promise<Array<{ role: string; text: string; entryId: string }>> {
  const t = await readSessionTranscript(file);
  return t.entries
    .filter((e) => e.type === "message")
    .map((e) => {
      const m = e["message"] as { role: string; content: unknown };
      const text = typeof m.content === "string" ? m.content : (m.content as Array<{ type: string; text?: string }>).filter((p) => p.type === "text").map((p) => p.text).join("\n");
      return { role: m.role, text, entryId: e.id };
    })
    .filter((m) => m.role === "user" || m.role === "assistant");
}

/** The rows of one conversation, in order. */
function messageRows(db: Awaited<ReturnType<typeof openDb>>, conversationId: unknown) {
  return db.all("SELECT role, content, transcript_entry_id FROM messages WHERE conversation_id = ? ORDER BY seq", Number(conversationId)) as Array<{ role: string; content: string; transcript_entry_id: string | null }>;
}

/** Every user and assistant message of the transcript is in the conversation exactly once, in order. */
function expectIngestedOnce(rows: ReturnType<typeof messageRows>, messages: Awaited<ReturnType<typeof transcriptMessages>>): void {
  expect(rows.map((r) => [r.role, r.content])).toEqual(messages.map((m) => [m.role, m.text]));
  // Where the plugin records the transcript entry (1.x), it is that very message's entry, each entry once. 1.x takes
  // its turns through commitTurn (it declares durable turns): committed messages carry no entry ids (as under
  // OpenClaw, whose outbox stores them as JSON), and it anchors them when it next reconciles with the transcript, so
  // the last turns' rows may not be anchored yet.
  const anchored = rows.flatMap((r, i) => (r.transcript_entry_id !== null ? [[r.transcript_entry_id, messages[i]!.entryId]] : []));
  for (const [stored, entry] of anchored) expect(stored).toBe(entry);
  expect(new Set(anchored.map(([id]) => id)).size).toBe(anchored.length);
}

const question = (i: number) => `question ${i}: ${"please check the worker logs again. ".repeat(20)}`;

/** The CLI test and the library test for one line. */
export function losslessClawSuite(line: LosslessClawLine): void {
  const pluginDir = path.join(FIXTURES, line.dir);

  it(`lossless-claw ${line.version} through the CLI: 12 turns, every message in its database once, summaries by runtime.llm, the accordion, /lcm, /new, /reset`, async () => {
    const dir = await testTempDir(`ctm-lcm-${line.dir}-`);
    const session = path.join(dir, "s.jsonl");
    const db = path.join(dir, "lcm.db");
    await writeFile(path.join(dir, "config.json"), JSON.stringify({ databasePath: db, freshTailCount: 2, leafChunkTokens: 400 }));
    await writeFile(path.join(dir, "full-window.json"), JSON.stringify([{ text: "offline reply", usage: { input_tokens: 180_000, output_tokens: 10, total_tokens: 180_010 } }]));
    // HOME: lossless-claw keeps state under ~/.openclaw.
    const run = (prompt: string, extra: string[] = []) =>
      runCli(["run", prompt, "--session", session, "--engine", pluginDir, "--plugin-config", path.join(dir, "config.json"), "--budget", "4000", "--offline", "--json", "--cwd", dir, ...extra], { cwd: dir, env: { HOME: dir } });
    const results: Array<Record<string, unknown>> = [];
    for (let i = 1; i <= 12; i++) {
      const r = await run(question(i), ["--offline-requests", path.join(dir, `requests-${i}.jsonl`), ...(i === 9 ? ["--offline-script", path.join(dir, "full-window.json")] : [])]);
      expect(r.code, r.stderr).toBe(0);
      const result = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { status: string; trace: string[]; warnings: string[]; engine: { finalize: string } };
      expect(result.status).toBe("completed");
      // 1.x declares durable turns: commitTurn took the turn (never afterTurn); 0.15.3 does not.
      expect(result.engine.finalize).toBe(line.dir === "next-1.0" ? "commitTurn" : "afterTurn");
      // A plugin's warnings are in the result and on stderr; none says it skipped persisting the turn (1.x fails closed).
      for (const w of result.warnings.filter((x) => x.startsWith("plugin "))) expect(r.stderr).toContain(`warning: ${w}`);
      expect(result.warnings.filter((w) => w.includes("skipping afterTurn persistence"))).toEqual([]);
      results.push(result);
    }
    const traces = results.map((r) => r.trace as string[]);
    // Turn 9 reported 180,010 of a 190,000 window: turn 10 (and no other) compacted in the engine first.
    expect(traces.map((t, i) => (t.includes("compactBeforeTurn") ? i + 1 : 0)).filter(Boolean)).toEqual([10]);

    const messages = await transcriptMessages(session);
    expect(messages.filter((m) => m.role === "user").map((m) => m.text)).toEqual(Array.from({ length: 12 }, (_, i) => question(i + 1)));
    expect(messages.filter((m) => m.role === "assistant")).toHaveLength(12);
    const store = await openDb(db);
    try {
      const conversations = store.all("SELECT conversation_id, session_id, active FROM conversations");
      expect(conversations).toHaveLength(1);
      expectIngestedOnce(messageRows(store, conversations[0]!.conversation_id), messages);
      const summaries = store.all("SELECT content FROM summaries");
      expect(summaries.length).toBeGreaterThan(0);
      // Its summarizer ran through runtime.llm (the offline model's answer is in a summary it wrote).
      expect(summaries.some((s) => String(s.content).includes("offline reply"))).toBe(true);
    } finally {
      store.close();
    }
    let summarizerCalls = 0;
    for (let i = 1; i <= 12; i++) {
      const lines = (await readFile(path.join(dir, `requests-${i}.jsonl`), "utf8")).trim().split("\n");
      summarizerCalls += lines.filter((l) => l.includes(LLM_COMPLETE_INSTRUCTIONS.slice(0, 60))).length;
    }
    expect(summarizerCalls).toBeGreaterThan(0);

    const lcm = await run("/lcm status");
    expect(lcm.code, lcm.stderr).toBe(0);
    const status = JSON.parse(lcm.stdout.trim()) as { command: string; text: string; isError?: boolean };
    expect(status).toMatchObject({ command: "lcm" });
    expect(status.isError).not.toBe(true);
    expect(status.text).toContain(line.version);
    expect(status.text).toMatch(/messages: 24\b/);

    // /new, then /reset: each starts a fresh session with a new id (the fresh transcript's header names it).
    const fresh = await run("/new");
    expect(fresh.code, fresh.stderr).toBe(0);
    expect(JSON.parse(fresh.stdout.trim())).toMatchObject({ command: "/new", sessionReset: { reason: "new" } });
    const reset = await run("/reset");
    expect(reset.code, reset.stderr).toBe(0);
    expect(JSON.parse(reset.stdout.trim())).toMatchObject({ command: "/reset", sessionReset: { reason: "reset" } });
    // The fresh session is remembered too: with the old id, lossless-claw 1.x took the fresh transcript for the old
    // session's starting over and skipped persisting its turns.
    const next = await run("after the reset");
    expect(next.code, next.stderr).toBe(0);
    const nextResult = JSON.parse(next.stdout.trim().split("\n").at(-1)!) as { status: string; warnings: string[] };
    expect(nextResult.status).toBe("completed");
    expect(nextResult.warnings.filter((w) => w.includes("skipping afterTurn persistence"))).toEqual([]);
    const freshMessages = await transcriptMessages(session);
    expect(freshMessages.map((m) => m.role)).toEqual(["user", "assistant"]);
    const after = await openDb(db);
    try {
      // Each session id has its conversation: the old one keeps every message (nothing lost), and the fresh session's
      // turn is in the conversation of the id its transcript's header names, once.
      const freshId = (JSON.parse((await readFile(session, "utf8")).split("\n")[0]!) as { id: string }).id;
      expect(freshId).toMatch(/^s-[0-9a-f-]{36}$/);
      const bySession = (id: string) => after.all("SELECT conversation_id FROM conversations WHERE session_id = ?", id);
      expect(bySession("s")).toHaveLength(1);
      expectIngestedOnce(messageRows(after, bySession("s")[0]!.conversation_id), messages);
      expect(bySession(freshId)).toHaveLength(1);
      expectIngestedOnce(messageRows(after, bySession(freshId)[0]!.conversation_id), freshMessages);
    } finally {
      after.close();
    }
  }, 420_000);

  it(`lossless-claw ${line.version} through the library: the accordion's compact() result, a cut turn recovered into its database once`, async () => {
    const dir = await testTempDir(`ctm-lcm-lib-${line.dir}-`);
    // HOME: lossless-claw's state dir, and no shell startup files in the command's output.
    const offline = await startOfflineCodex({ offline: { lean: false }, codex: { env: { HOME: dir } } });
    const sessionFile = path.join(dir, "s.jsonl");
    const sessionId = "lcm-lib";
    offline.fake.setDefault((request) =>
      JSON.stringify(request.body?.input ?? "").includes(LLM_COMPLETE_INSTRUCTIONS.slice(0, 60)) ? { text: "Summary: the user asked about the worker logs." } : { text: "ok" },
    );
    const db = path.join(dir, "lcm.db");
    const loaded = await loadContextEngine(pluginDir, { cwd: dir, appServer: offline.codex, tokenBudget: 4_000, pluginConfig: { databasePath: db, freshTailCount: 2, leafChunkTokens: 400 } });
    try {
      const compacts: Array<Record<string, unknown>> = [];
      const finalizes: string[] = [];
      // The plugin's engine is a class instance: a proxy records compact(), which of afterTurn / commitTurn took each
      // turn, and leaves every other member as it is.
      const engine = new Proxy(loaded.engine, {
        get(target, key, receiver) {
          if ((key === "afterTurn" || key === "commitTurn") && typeof Reflect.get(target, key, receiver) === "function") {
            const method = (Reflect.get(target, key, receiver) as (p: unknown) => Promise<unknown>).bind(target);
            return async (p: unknown) => {
              finalizes.push(key);
              return method(p);
            };
          }
          if (key === "compact") {
            return async (p: Parameters<ContextEngine["compact"]>[0]) => {
              const res = await target.compact(p);
              compacts.push(res as unknown as Record<string, unknown>);
              return res;
            };
          }
          const value: unknown = Reflect.get(target, key, receiver);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
      const base = { appServer: offline.codex, sessionId, sessionFile, cwd: dir, sandbox: "workspace-write" as const, approvalPolicy: "never" as const, contextEngine: engine, contextTokenBudget: 4_000, runtimeContext: loaded.runtimeContext, hooks: loaded.hooks, dynamicTools: loaded.dynamicTools };
      for (let i = 1; i <= 7; i++) {
        // Turn 7: a prompt bigger than the budget (the fresh tail stays over target), and a nearly full window.
        if (i === 7) offline.fake.enqueue({ text: "noted", usage: { input_tokens: 180_000, output_tokens: 10, total_tokens: 180_010 } });
        const r = await runCodexTurn({ ...base, prompt: i === 7 ? `question 7: ${"please check the worker logs again. ".repeat(500)}` : question(i) });
        expect(r.status).toBe("completed");
        await r.backgroundMaintenance;
      }
      const eighth = await runCodexTurn({ ...base, prompt: "question 8" });
      expect(eighth.status).toBe("completed");
      expect(eighth.trace).toContain("compactBeforeTurn");
      expect(compacts).toHaveLength(1);
      if (line.dir === "next-1.0") expect(compacts[0]).toMatchObject({ ok: false, compacted: true, reason: "compacted but still over target" });
      // 0.15.3 has compacted in its deferred maintenance already: nothing left above its fresh tail, still over target.
      else expect(compacts[0]).toMatchObject({ ok: false });
      await eighth.backgroundMaintenance;

      // The attempt that died: Codex ran the turn, nothing recorded it but the marker.
      const binding = await readThreadBinding(sessionFile);
      if (!binding) throw new Error("no binding after the eighth turn");
      offline.fake.enqueue([{ text: "running it", functionCall: execCommandCall("echo CUT-MARKER-42", { workdir: dir }) }, { text: "cut answer" }]);
      const cut = await offline.codex.startTurn({ threadId: binding.threadId, text: "the cut prompt" });
      await cut.completion;
      await writeThreadBinding(sessionFile, { ...binding, heldTurnIds: [...binding.heldTurnIds, cut.turnId], turnInFlight: { turnId: cut.turnId, prompt: "the cut prompt" } });
      const tenth = await runCodexTurn({ ...base, prompt: "question 10" });
      expect(tenth.status).toBe("completed");
      expect(tenth.cutTurnRecovered?.turnId).toBe(cut.turnId);
      // The recovered turn's finalize had a session target too: 1.x did not skip persisting it.
      expect(tenth.warnings.filter((w) => w.includes("skipping afterTurn persistence"))).toEqual([]);
      await tenth.backgroundMaintenance;

      // 1.x declares durable turns: every turn (the recovered cut turn included) went through commitTurn, none through
      // afterTurn (as OpenClaw >= 2026.9.3 runs it); 0.15.3 does not: afterTurn only.
      expect(finalizes).toEqual(Array.from({ length: 10 }, () => (line.dir === "next-1.0" ? "commitTurn" : "afterTurn")));
      const messages = await transcriptMessages(sessionFile);
      expect(messages.map((m) => m.text)).toContain("the cut prompt");
      expect(messages.map((m) => m.text)).toContain("cut answer");
      const store = await openDb(db);
      try {
        const [conversation, ...others] = store.all("SELECT conversation_id FROM conversations");
        expect(others).toHaveLength(0);
        const rows = messageRows(store, conversation!.conversation_id).filter((r) => r.role === "user" || r.role === "assistant");
        expectIngestedOnce(rows, messages);
        expect(rows.filter((r) => r.content === "the cut prompt")).toHaveLength(1);
        expect(store.all("SELECT count(*) AS n FROM summaries")[0]!.n).toBeGreaterThan(0);
      } finally {
        store.close();
      }
    } finally {
      await loaded.close();
      await offline.dispose();
    }
  }, 180_000);
}
