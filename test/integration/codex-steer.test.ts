import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CodexTurnEvent } from "../../src/codex/turn-projector.js";
import { lastUserText, startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { waitFor } from "../codex/helpers.js";

let env: OfflineCodex;

beforeAll(async () => {
  env = await startOfflineCodex();
});
afterAll(async () => {
  await env?.dispose();
});

const slowText = (words: number): string[] => Array.from({ length: words }, (_, i) => `word${i} `);

describe("steering, interrupt and idle timeout with the real app-server", () => {
  it("batches two steer texts into one turn/steer that the model sees in the next request", async () => {
    const { fake, codex } = env;
    const { threadId } = await codex.startThread();
    fake.enqueue({ text: slowText(300), delayMs: 40 });
    fake.enqueue({ text: "steered answer" });
    const before = fake.requests.length;
    let deltas = 0;
    const turn = await codex.startTurn({
      threadId,
      text: "start slow",
      steerQuietWindowMs: 50,
      onEvent: (e: CodexTurnEvent) => {
        if (e.type === "agentMessageDelta") deltas++;
      },
    });
    await waitFor(() => deltas > 0, 5_000, "the first delta");
    const [a, b] = await Promise.all([turn.steer("STEER-A"), turn.steer("STEER-B")]);
    expect(a).toEqual({ accepted: true });
    expect(b).toEqual({ accepted: true });
    const r = await turn.completion;
    expect(r.codexStatus).toBe("completed");
    expect(r.assistantText).toBe("steered answer");
    // One turn/steer: exactly one extra user message, with both texts in arrival order.
    const users = r.items.filter((i) => i.kind === "userMessage");
    expect(users.map((u) => u.kind === "userMessage" && u.text)).toEqual(["start slow", "STEER-A\n\nSTEER-B"]);
    expect(lastUserText(fake.requests[before + 1]!.body)).toBe("STEER-A\n\nSTEER-B");
    expect(fake.requests[before]!.aborted).toBe(true);
    // The abandoned partial message (P5) is not in the snapshot; the steer is, in order.
    expect(r.messagesSnapshot.map((m) => m.role)).toEqual(["user", "user", "assistant"]);
    expect(r.messagesSnapshot[1]).toMatchObject({ role: "user", content: "STEER-A\n\nSTEER-B" });
    expect(r.items.some((i) => i.kind === "agentMessage" && !i.completed)).toBe(true);

    // After completion, steer texts come straight back as follow-ups.
    const late = await turn.steer("too late");
    expect(late).toMatchObject({ accepted: false, followUp: ["too late"] });
  });

  it("interrupts a running turn", async () => {
    const { fake, codex } = env;
    const { threadId } = await codex.startThread();
    fake.enqueue({ text: slowText(300), delayMs: 40 });
    let deltas = 0;
    const turn = await codex.startTurn({
      threadId,
      text: "please be slow",
      onEvent: (e) => {
        if (e.type === "agentMessageDelta") deltas++;
      },
    });
    await waitFor(() => deltas > 0, 5_000, "the first delta");
    await turn.interrupt();
    const r = await turn.completion;
    expect(r.codexStatus).toBe("interrupted");
    expect(turn.done).toBe(true);
    expect(r.messagesSnapshot[0]).toMatchObject({ role: "user", content: "please be slow" });
    // A new turn on the same thread works afterwards.
    const next = await codex.startTurn({ threadId, text: "after interrupt" });
    expect((await next.completion).assistantText).toBe("reply to: after interrupt");
  });

  it("ends a silent turn as timedOut after interrupting it", async () => {
    const { fake, codex } = env;
    const { threadId } = await codex.startThread();
    // The model answers only after 4 s: no notification in between.
    fake.enqueue({ text: "late", delayMs: 4_000 });
    const turn = await codex.startTurn({ threadId, text: "are you there?", idleTimeoutMs: 600 });
    const r = await turn.completion;
    expect(r.codexStatus).toBe("timedOut");
    expect(r.error).toMatchObject({ code: "idleTimeout" });
    // The thread is usable again (Codex ended the interrupted turn).
    const next = await codex.startTurn({ threadId, text: "again" });
    expect((await next.completion).codexStatus).toBe("completed");
  });
});
