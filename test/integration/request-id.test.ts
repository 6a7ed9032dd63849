/**
 * `requestId` against the real app-server and the fake Responses API: the id is recorded with the prompt's transcript
 * entry (and with the in-flight marker); a retry of a request the transcript already holds returns the recorded outcome
 * (the reply, the status) without running Codex: the fake model gets no request; a request whose turn a crash cut short
 * (its attempt died mid-turn, stood in for here by a turn run on the bound thread with the client alone) is recovered
 * from Codex's thread and reported `cut`; a bad id is a typed error naming it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CodexTurnParamsError } from "../../src/params.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { readThreadBinding, writeThreadBinding } from "../../src/transcript/binding.js";
import { readSessionTranscript } from "../../src/transcript/session-file.js";
import { runCodexTurn } from "../../src/turn.js";
import { disposeChecked, tempSessions, turnParams } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("request-id-");
beforeAll(async () => {
  env = await startOfflineCodex();
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

const requestMarks = async (file: string) => (await readSessionTranscript(file)).entries.filter((e) => e["request"] !== undefined).map((e) => e["request"]);

describe("requestId", () => {
  it("is recorded with the prompt; a retry returns the recorded reply and status without a model request", async () => {
    const file = sessions.file();
    env.fake.enqueue({ text: "the first answer" });
    const first = await runCodexTurn(turnParams(env, file, "what is the plan?", { requestId: "req-1" }));
    expect(first).toMatchObject({ status: "completed", assistantText: "the first answer", request: { id: "req-1", replayed: false } });
    expect(await requestMarks(file)).toEqual([{ id: "req-1", status: "completed" }]);
    const entries = (await readSessionTranscript(file)).entries.length;

    const requests = env.fake.requests.length;
    const retry = await runCodexTurn(turnParams(env, file, "what is the plan?", { requestId: "req-1" }));
    expect(env.fake.requests.length).toBe(requests);
    expect(retry).toMatchObject({ status: "completed", assistantText: "the first answer", threadId: first.threadId, turnId: first.turnId, request: { id: "req-1", replayed: true } });
    expect(retry.messagesSnapshot.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(retry.trace).toEqual(["loadHistory", "completed"]);
    expect(retry.engine).toEqual({ bootstrap: "skipped:replayed", assemble: "skipped:replayed", finalize: "skipped:replayed", maintenance: "skipped:replayed" });
    expect((await readSessionTranscript(file)).entries.length).toBe(entries);

    // Another id runs as usual (and a turn without one is not marked).
    env.fake.enqueue({ text: "another answer" });
    const other = await runCodexTurn(turnParams(env, file, "and then?", { requestId: "req-2" }));
    expect(other).toMatchObject({ status: "completed", assistantText: "another answer", request: { id: "req-2", replayed: false } });
    expect(env.fake.requests.length).toBe(requests + 1);
  });

  it("a failed request is returned failed on retry, still without running Codex", async () => {
    const file = sessions.file();
    env.fake.enqueue({ httpStatus: 400, body: JSON.stringify({ error: { message: "bad request", type: "invalid_request_error" } }) });
    const first = await runCodexTurn(turnParams(env, file, "this one fails", { requestId: "req-failed" }));
    expect(first.status).toBe("failed");
    expect(await requestMarks(file)).toEqual([{ id: "req-failed", status: "failed" }]);
    const requests = env.fake.requests.length;
    const retry = await runCodexTurn(turnParams(env, file, "this one fails", { requestId: "req-failed" }));
    expect(env.fake.requests.length).toBe(requests);
    expect(retry).toMatchObject({ status: "failed", turnId: first.turnId, request: { id: "req-failed", replayed: true }, error: { phase: "loadHistory", code: "REQUEST_REPLAYED" } });
  });

  it("a request whose attempt died mid-turn: recovered from Codex's thread, marked cut, and returned without running Codex again", async () => {
    const file = sessions.file();
    await runCodexTurn(turnParams(env, file, "hello"));
    const binding = await readThreadBinding(file);
    if (!binding) throw new Error("no binding after the first turn");
    // The dead attempt: Codex ran the turn, nothing recorded it but the in-flight marker (with the request id).
    env.fake.enqueue({ text: "the cut answer" });
    const cut = await env.codex.startTurn({ threadId: binding.threadId, text: "the cut prompt" });
    await cut.completion;
    await writeThreadBinding(file, { ...binding, heldTurnIds: [...binding.heldTurnIds, cut.turnId], turnInFlight: { turnId: cut.turnId, prompt: "the cut prompt", requestId: "req-cut" } });

    const requests = env.fake.requests.length;
    const retry = await runCodexTurn(turnParams(env, file, "the cut prompt", { requestId: "req-cut" }));
    expect(env.fake.requests.length).toBe(requests);
    expect(retry.cutTurnRecovered?.turnId).toBe(cut.turnId);
    // Codex had finished it: the recovered reply is the outcome, reported as cut.
    expect(retry).toMatchObject({ status: "completed", turnId: cut.turnId, assistantText: "the cut answer", request: { id: "req-cut", replayed: true, cut: true } });
    expect(await requestMarks(file)).toEqual([{ id: "req-cut", status: "completed", cut: true }]);
  });

  it("a bad requestId is a typed error naming it; nothing is written", async () => {
    const file = sessions.file();
    for (const requestId of ["", "has space", "x".repeat(201), 42]) {
      const err = await runCodexTurn(turnParams(env, file, "hi", { requestId: requestId as string })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CodexTurnParamsError);
      expect(err).toMatchObject({ field: "requestId" });
    }
    expect((await readSessionTranscript(file)).exists).toBe(false);
  });
});
