/**
 * Codex's own auto-compaction inside a turn (real app-server, small `model_auto_compact_token_limit`): it is
 * reported as a native compaction with the hooks, never as an engine compaction, and the next `delta` turn re-sends the
 * context the compaction dropped (the binding's held turns and ledger were cleared, P3).
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createWindowEngine } from "../../src/context-engine/engines/index.js";
import type { CompactionHookEvent } from "../../src/hooks/types.js";
import { readThreadBinding } from "../../src/transcript/binding.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { runCodexTurn, type CodexTurnParams } from "../../src/turn.js";
import { contextEntryOutputs, inputMessageTexts, startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";

const LIMIT = 5_000;
let env: OfflineCodex;
let dir: string;

beforeAll(async () => {
  env = await startOfflineCodex({ offline: { lean: true, autoCompactTokenLimit: LIMIT } });
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-native-auto-"));
});
afterAll(async () => {
  await env?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const small = { input_tokens: 500, output_tokens: 10, total_tokens: 510 };
/** Our injected context entries (untrusted: `function_call_output` items, see `contextEntryOutputs`), as text. */
const contextEntries = (body: Record<string, unknown> | null) => contextEntryOutputs(body).map((e) => e.output);

describe("in-turn native auto-compaction through runCodexTurn", () => {
  it("reports Codex's compaction as native, fires the hooks, and the next turn re-sends the dropped context", async () => {
    const { fake, codex } = env;
    const sessionId = "native-auto";
    const sessionFile = path.join(dir, `${sessionId}.jsonl`);
    const engine = createWindowEngine({ ownsCompaction: true });
    const compact = vi.spyOn(engine, "compact");
    const before: CompactionHookEvent[] = [];
    const after: CompactionHookEvent[] = [];
    const streamed: string[] = [];
    const params = (prompt: string): CodexTurnParams => ({
      appServer: codex,
      sessionId,
      sessionFile,
      prompt,
      contextEngine: engine,
      // delta's handling (held turns and ledger cleared, the dropped context re-sent as entries); the native sync's
      // (auto's) is tested in native-projection.test.ts.
      projection: { mode: "delta" },
      contextTokenBudget: 16_000,
      dynamicTools: [
        {
          name: "probe",
          description: "probe the environment",
          inputSchema: { type: "object", properties: {} },
          handler: () => "PROBE-RESULT-MARKER",
        },
      ],
      hooks: { beforeCompaction: (e) => void before.push(e), afterCompaction: (e) => void after.push(e) },
      onEvent: (e) => {
        if (e.type === "compaction") streamed.push(e.phase);
      },
    });

    // Turn 1: a plain answer; the thread now holds it natively.
    fake.enqueue({ text: "ALPHA-ANSWER-MARKER", usage: small });
    const r1 = await runCodexTurn(params("ALPHA-PROMPT-MARKER"));
    expect(r1.status).toBe("completed");
    expect(r1.nativeCompactions).toEqual([]);

    // Turn 2: the tool-call response crosses the limit, so Codex compacts mid-turn before the follow-up request.
    fake.enqueue([
      { functionCall: { name: "probe", arguments: {} }, usage: { input_tokens: 600, output_tokens: 10, total_tokens: LIMIT + 2_000 } },
      { text: "BETA-ANSWER-MARKER", usage: small },
    ]);
    const from2 = fake.requests.length;
    const r2 = await runCodexTurn(params("BETA-PROMPT-MARKER"));
    expect(r2.status).toBe("completed");
    expect(r2.threadId).toBe(r1.threadId);
    expect(fake.requests.slice(from2).map((r) => r.requestKind)).toEqual(["turn", "compaction", "turn"]);
    // Before the compaction the thread held turn 1 natively: nothing was injected.
    expect(contextEntries(fake.requests[from2]!.body)).toEqual([]);

    expect(r2.nativeCompactions).toHaveLength(1);
    expect(r2.nativeCompactions[0]).toMatchObject({
      backend: "codex-app-server",
      threadId: r2.threadId,
      turnId: r2.turnId,
      itemId: expect.any(String),
      completed: true,
    });
    // Never an engine compaction: the accordion did not run and compactCodexSession was not involved.
    expect(compact).not.toHaveBeenCalled();
    expect(streamed).toEqual(["started", "completed"]);
    expect(before).toHaveLength(1);
    expect(after).toHaveLength(1);
    expect(before[0]).toMatchObject({ backend: "codex-app-server", ownsCompaction: true, threadId: r2.threadId, completed: false });
    expect(after[0]).toMatchObject({ backend: "codex-app-server", ownsCompaction: true, itemId: r2.nativeCompactions[0]!.itemId, completed: true });
    // What OpenClaw hands before_compaction: the transcript, and the session's messages as stored (turn 1; turn 2 is
    // mirrored after it ends), with their count; after_compaction gets the count, not the messages.
    expect(before[0]).toMatchObject({ sessionFile, messageCount: 2, runId: r2.runId });
    expect(before[0]!.messages!.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(after[0]).toMatchObject({ sessionFile, messageCount: 2 });
    expect(after[0]!.messages).toBeUndefined();

    // The binding forgot what the compaction dropped.
    const binding = await readThreadBinding(sessionFile);
    expect(binding).toMatchObject({ threadId: r2.threadId, heldTurnIds: [], ledger: [] });

    // Turn 3 resumes the same thread and re-sends the context Codex summarized away.
    fake.enqueue({ text: "GAMMA-ANSWER-MARKER", usage: small });
    const from3 = fake.requests.length;
    const r3 = await runCodexTurn(params("GAMMA-PROMPT-MARKER"));
    expect(r3.status).toBe("completed");
    expect(r3.threadId).toBe(r1.threadId);
    expect(r3.nativeCompactions).toEqual([]);
    expect(r3.projection).toMatchObject({ mode: "delta", reason: "newContext" });
    const req3 = fake.requests[from3]!;
    expect(req3.requestKind).toBe("turn");
    const entries = contextEntries(req3.body).join("\n");
    expect(entries).toContain("ALPHA-PROMPT-MARKER");
    expect(entries).toContain("ALPHA-ANSWER-MARKER");
    expect(entries).toContain("BETA-PROMPT-MARKER");
    // The summary is what the thread itself kept of the old turns.
    expect(inputMessageTexts(req3.body, "user").some((t) => t.includes("FAKE-SUMMARY"))).toBe(true);
    expect(inputMessageTexts(req3.body, "user").some((t) => t === "GAMMA-PROMPT-MARKER")).toBe(true);

    // The re-sent context is recorded again, so turn 4 does not send it a second time.
    const b3 = await readThreadBinding(sessionFile);
    expect(b3!.ledger.length).toBeGreaterThan(0);
    fake.enqueue({ text: "DELTA-ANSWER-MARKER", usage: small });
    const from4 = fake.requests.length;
    const r4 = await runCodexTurn(params("DELTA-PROMPT-MARKER"));
    expect(r4.status).toBe("completed");
    expect(r4.projection).toMatchObject({ mode: "delta", reason: "threadHoldsContext", entriesSent: 0 });
    // Codex replays turn 3's entries from the thread history; none was added a second time.
    expect(contextEntries(fake.requests[from4]!.body)).toEqual(contextEntries(req3.body));

    // Every turn is still in the mirror, compaction or not.
    const history = await readSessionHistory(sessionFile, { sessionId });
    const userTexts = history.messages
      .filter((m) => (m as { role?: string }).role === "user")
      .map((m) => JSON.stringify((m as { content?: unknown }).content));
    for (const marker of ["ALPHA", "BETA", "GAMMA", "DELTA"]) {
      expect(userTexts.some((t) => t.includes(`${marker}-PROMPT-MARKER`))).toBe(true);
    }
  });

  it("pre-turn auto-compaction (the previous answer crossed the limit) is reported the same way", async () => {
    const { fake, codex } = env;
    const sessionId = "native-pre-turn";
    const sessionFile = path.join(dir, `${sessionId}.jsonl`);
    const engine = createWindowEngine({ ownsCompaction: true });
    const compact = vi.spyOn(engine, "compact");
    const hookEvents: string[] = [];
    const params = (prompt: string): CodexTurnParams => ({
      appServer: codex,
      sessionId,
      sessionFile,
      prompt,
      contextEngine: engine,
      // delta's handling (held turns and ledger cleared, the dropped context re-sent as entries); the native sync's
      // (auto's) is tested in native-projection.test.ts.
      projection: { mode: "delta" },
      contextTokenBudget: 16_000,
      hooks: {
        beforeCompaction: (e) => void hookEvents.push(`before:${e.ownsCompaction}`),
        afterCompaction: (e) => void hookEvents.push(`after:${e.ownsCompaction}`),
      },
    });
    fake.enqueue({ text: "ONE-ANSWER-MARKER", usage: small });
    expect((await runCodexTurn(params("ONE-PROMPT-MARKER"))).status).toBe("completed");
    // A plain answer over the limit: Codex defers the compaction to the start of the next turn (P9).
    fake.enqueue({ text: "TWO-ANSWER-MARKER", usage: { input_tokens: 600, output_tokens: 10, total_tokens: LIMIT + 500 } });
    const r2 = await runCodexTurn(params("TWO-PROMPT-MARKER"));
    expect(r2.nativeCompactions).toEqual([]);

    fake.enqueue({ text: "THREE-ANSWER-MARKER", usage: small });
    const from3 = fake.requests.length;
    const r3 = await runCodexTurn(params("THREE-PROMPT-MARKER"));
    expect(r3.status).toBe("completed");
    expect(fake.requests.slice(from3).map((r) => r.requestKind)).toEqual(["compaction", "turn"]);
    expect(r3.nativeCompactions).toEqual([
      { backend: "codex-app-server", threadId: r2.threadId, turnId: r3.turnId, itemId: expect.any(String), completed: true },
    ]);
    expect(hookEvents).toEqual(["before:true", "after:true"]);
    expect(compact).not.toHaveBeenCalled();
    // The compaction ran before turn three's own message: the thread still holds turn three, only 1 and 2 are gone.
    expect(await readThreadBinding(sessionFile)).toMatchObject({ heldTurnIds: [r3.turnId], ledger: [], nativeCompactions: 1 });

    // The next turn re-sends what the compaction dropped (turns one and two): the thread only has their summary.
    fake.enqueue({ text: "FOUR-ANSWER-MARKER", usage: small });
    const from4 = fake.requests.length;
    const r4 = await runCodexTurn(params("FOUR-PROMPT-MARKER"));
    expect(r4.projection).toMatchObject({ mode: "delta", reason: "newContext" });
    const entries = contextEntries(fake.requests[from4]!.body).join("\n");
    for (const marker of ["ONE-PROMPT-MARKER", "ONE-ANSWER-MARKER", "TWO-PROMPT-MARKER", "TWO-ANSWER-MARKER"]) expect(entries).toContain(marker);
    // Turn three is still in the thread natively: it is not injected a second time.
    expect(entries).not.toContain("THREE-PROMPT-MARKER");
    expect(entries).not.toContain("THREE-ANSWER-MARKER");
    expect(inputMessageTexts(fake.requests[from4]!.body, "user")).toContain("THREE-PROMPT-MARKER");
  });
});
