import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CodexAppServerError } from "../../src/codex/errors.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { processExists, waitFor } from "../codex/helpers.js";

let env: OfflineCodex;

beforeAll(async () => {
  env = await startOfflineCodex();
});
afterAll(async () => {
  const pid = env?.codex.pid;
  await env?.dispose();
  if (pid !== undefined) expect(processExists(pid)).toBe(false);
});

describe("failures of the model and of the app-server", () => {
  it("fails the turn with codexErrorInfo on a model HTTP 500, and the next turn works", async () => {
    const { fake, codex } = env;
    const { threadId } = await codex.startThread();
    fake.enqueue({ httpStatus: 500 });
    const r = await (await codex.startTurn({ threadId, text: "trigger 500" })).completion;
    expect(r.codexStatus).toBe("failed");
    expect(r.error?.codexErrorInfo).toBe("internalServerError");
    expect(r.error?.message).toBeTruthy();
    expect(r.messagesSnapshot).toEqual([expect.objectContaining({ role: "user", content: "trigger 500" })]);

    const ok = await (await codex.startTurn({ threadId, text: "recover" })).completion;
    expect(ok.codexStatus).toBe("completed");
  });

  it("fails the turn when the stream closes before response.completed", async () => {
    const { fake, codex } = env;
    const { threadId } = await codex.startThread();
    fake.enqueue({ text: "partial answer", dropStream: true });
    const r = await (await codex.startTurn({ threadId, text: "drop it" })).completion;
    expect(r.codexStatus).toBe("failed");
    expect(r.error?.message).toMatch(/stream/i);
  });

  it("fails the turn on an invalid SSE stream", async () => {
    const { fake, codex } = env;
    const { threadId } = await codex.startThread();
    fake.enqueue({ garbage: true });
    const r = await (await codex.startTurn({ threadId, text: "garbage" })).completion;
    expect(r.codexStatus).toBe("failed");
    expect(r.error).toBeDefined();
  });

  it("rejects pending requests and fails the turn when the app-server is killed; the next call restarts it", async () => {
    const { fake, codex } = env;
    const { threadId } = await codex.startThread({ developerInstructions: "DEV-AFTER-RESTART" });
    fake.enqueue({ text: Array.from({ length: 60 }, (_, i) => `w${i} `), delayMs: 40 });
    let deltas = 0;
    const turn = await codex.startTurn({
      threadId,
      text: "long running",
      onEvent: (e) => {
        if (e.type === "agentMessageDelta") deltas++;
      },
    });
    await waitFor(() => deltas > 0, 5_000, "the first delta");
    const pid = codex.pid!;
    // Freeze the process so a request is certainly pending when it dies.
    process.kill(pid, "SIGSTOP");
    const pending = codex.request("thread/read", { threadId }).catch((e: unknown) => e);
    process.kill(pid, "SIGKILL");

    const err = await pending;
    expect(err).toBeInstanceOf(CodexAppServerError);
    expect((err as CodexAppServerError).code).toBe("PROCESS_EXITED");
    expect((err as CodexAppServerError).signal).toBe("SIGKILL");
    expect(typeof (err as CodexAppServerError).stderrTail).toBe("string");

    const r = await turn.completion;
    expect(r.codexStatus).toBe("failed");
    expect(r.error).toMatchObject({ code: "PROCESS_EXITED" });
    expect(r.messagesSnapshot[0]).toMatchObject({ role: "user", content: "long running" });
    expect(codex.alive).toBe(false);
    await waitFor(() => !processExists(pid), 2_000, "the killed process to be reaped");

    // The next call starts a fresh process and re-attaches the thread (resume with the same instructions).
    const before = fake.requests.length;
    const next = await (await codex.startTurn({ threadId, text: "after restart" })).completion;
    expect(next.codexStatus).toBe("completed");
    expect(next.assistantText).toBe("reply to: after restart");
    expect(codex.pid).not.toBe(pid);
    expect(codex.stats()).toMatchObject({ restarts: 1, processes: 2 });
    expect(fake.requests[before]!.turnMetadata?.history_initialization).toBe("cold_resume");
  });
});
