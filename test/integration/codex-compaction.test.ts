import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CodexTurnEvent } from "../../src/codex/turn-projector.js";
import { inputMessageTexts, startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";

let env: OfflineCodex;
const LIMIT = 5_000;

beforeAll(async () => {
  env = await startOfflineCodex({ offline: { autoCompactTokenLimit: LIMIT } });
});
afterAll(async () => {
  await env?.dispose();
});

const small = { input_tokens: 900, output_tokens: 10, total_tokens: 910 };

describe("native Codex compaction", () => {
  it("runs manual compaction and waits for the compaction item and turn", async () => {
    const { fake, codex } = env;
    const { threadId } = await codex.startThread({ developerInstructions: "DEV-KEEP" });
    fake.enqueue({ text: "first answer", usage: small });
    await (await codex.startTurn({ threadId, text: "before compaction" })).completion;

    const before = fake.requests.length;
    const result = await codex.compactThread({ threadId, timeoutMs: 10_000 });
    expect(result).toMatchObject({ ok: true, threadId });
    expect(result.turnId).toBeTruthy();
    expect(result.itemId).toBeTruthy();
    const compactionReq = fake.requests[before]!;
    expect(compactionReq.requestKind).toBe("compaction");
    expect(compactionReq.body?.tools).toEqual([]);

    fake.enqueue({ text: "after answer", usage: small });
    const r = await (await codex.startTurn({ threadId, text: "after compaction" })).completion;
    expect(r.codexStatus).toBe("completed");
    const next = fake.requests[fake.requests.length - 1]!;
    expect(next.turnMetadata?.window_number).toBe(1);
    // The summary replaced the history; developer instructions were re-inserted (same process).
    expect(inputMessageTexts(next.body, "user").some((t) => t.includes("FAKE-SUMMARY"))).toBe(true);
    expect(inputMessageTexts(next.body, "assistant")).not.toContain("first answer");
    expect(inputMessageTexts(next.body, "developer").join("\n")).toContain("DEV-KEEP");
    // A manual compaction turn is not a user turn: the next turn's record has no compaction.
    expect(r.compactions).toEqual([]);
  });

  it("observes pre-turn auto-compaction when the last response crossed the limit", async () => {
    const { fake, codex } = env;
    const { threadId } = await codex.startThread();
    fake.enqueue({ text: "big answer", usage: { input_tokens: 100, output_tokens: 10, total_tokens: LIMIT + 1_000 } });
    const r1 = await (await codex.startTurn({ threadId, text: "fill the context" })).completion;
    expect(r1.compactions).toEqual([]);

    const events: CodexTurnEvent[] = [];
    fake.enqueue({ text: "fresh answer", usage: small });
    const turn = await codex.startTurn({ threadId, text: "next turn", onEvent: (e) => events.push(e) });
    const r2 = await turn.completion;
    expect(r2.codexStatus).toBe("completed");
    expect(r2.compactions).toHaveLength(1);
    expect(r2.compactions[0]).toMatchObject({ backend: "codex-app-server", threadId, turnId: turn.turnId, completed: true });
    expect(r2.items.map((i) => i.kind)).toContain("contextCompaction");
    expect(events.filter((e) => e.type === "compactionStarted")).toHaveLength(1);
    expect(events.filter((e) => e.type === "compactionCompleted")).toHaveLength(1);
    const kinds = fake.requests.slice(-2).map((q) => q.requestKind);
    expect(kinds).toEqual(["compaction", "turn"]);
    expect(r2.assistantText).toBe("fresh answer");
  });

  it("observes mid-turn auto-compaction after a tool call crossed the limit", async () => {
    const { fake, codex } = env;
    const { threadId } = await codex.startThread({
      dynamicTools: [
        {
          name: "probe",
          description: "probe",
          inputSchema: { type: "object", properties: {} },
          handler: () => "probe result",
        },
      ],
    });
    fake.enqueue([
      { functionCall: { name: "probe", arguments: {} }, usage: { input_tokens: 100, output_tokens: 10, total_tokens: LIMIT + 3_000 } },
      { text: "done after compaction", usage: small },
    ]);
    const before = fake.requests.length;
    const turn = await codex.startTurn({ threadId, text: "use the tool" });
    const r = await turn.completion;
    expect(r.codexStatus).toBe("completed");
    expect(fake.requests.slice(before).map((q) => q.requestKind)).toEqual(["turn", "compaction", "turn"]);
    expect(r.compactions).toEqual([
      { backend: "codex-app-server", threadId, turnId: turn.turnId, itemId: expect.any(String), completed: true },
    ]);
    expect(r.items.map((i) => i.kind)).toEqual(["userMessage", "dynamicToolCall", "contextCompaction", "agentMessage"]);
    // Usage of the tool-call response went to its assistant message, not to a compaction update.
    expect(r.messagesSnapshot[1]).toMatchObject({ role: "assistant", usage: { totalTokens: LIMIT + 3_000 } });
    expect(r.assistantText).toBe("done after compaction");
  });
});
