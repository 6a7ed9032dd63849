/**
 * Native projection (`projection.mode: "native"`) against the real app-server and the fake model: the engine's view
 * becomes the Codex thread (thread/revert + thread/inject_items), so the model input of every turn is exactly the
 * view plus the prompt, whatever the engine drops; a cut keeps the thread's prompt_cache_key and its prefix; a sync
 * cut short at any step is repaired by the next attempt; a native compaction is followed by a re-sync; `auto` adopts a
 * thread the old auto (delta) made.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn, type CodexTurnResult } from "../../src/turn.js";
import type { AgentMessage, ContextEngine } from "../../src/context-engine/types.js";
import { startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";
import { setTranscriptFaultHook, type FaultPointName } from "../../src/transcript/fault.js";
import { readThreadBinding, writeThreadBinding } from "../../src/transcript/binding.js";
import { fingerprintPolicy } from "../../src/projection/index.js";
import { conversation, expected, isFraming } from "../helpers/native-input.js";
import { disposeChecked, requestThreadId, tempSessions, turnParams } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("native-projection-");

beforeAll(async () => {
  env = await startOfflineCodex();
}, 60_000);
afterAll(async () => {
  setTranscriptFaultHook(undefined);
  await disposeChecked(env);
  sessions.cleanup();
});

/** An engine whose view is `pick(history)`; it remembers the last view it returned. */
function viewEngine(id: string, pick: (messages: AgentMessage[]) => AgentMessage[]): ContextEngine & { last: AgentMessage[] } {
  const engine = {
    last: [] as AgentMessage[],
    info: { id, name: id, version: "1" },
    async ingest() {
      return { ingested: true };
    },
    async assemble({ messages }: { messages: AgentMessage[] }) {
      engine.last = pick(messages);
      return { messages: engine.last, estimatedTokens: 10 };
    },
    async compact() {
      return { ok: true, compacted: false };
    },
  };
  return engine as ContextEngine & { last: AgentMessage[] };
}

/** The whole history until it has 8 messages, then everything after turns 1-2 folded into a summary. */
const foldAfterTwo = (messages: AgentMessage[]): AgentMessage[] =>
  messages.length < 8 ? messages : [...messages.slice(0, 4), { role: "compactionSummary", summary: `Summary of ${messages.length - 4} messages.`, tokensBefore: 40 }];

const firstAndLastTwo = (messages: AgentMessage[]) => (messages.length <= 3 ? messages : [messages[0]!, ...messages.slice(-2)]);

async function turn(
  file: string,
  prompt: string,
  engine: ContextEngine,
  extra: Record<string, unknown> = {},
  status: CodexTurnResult["status"] = "completed",
): Promise<{ result: CodexTurnResult; request: RecordedRequest }> {
  const before = env.fake.requests.length;
  if (status === "completed") env.fake.enqueue({ text: `answer to ${prompt}` });
  const result = await runCodexTurn(turnParams(env, file, prompt, { contextEngine: engine, projection: { mode: "native" }, ...extra }));
  expect(result.status, JSON.stringify(result.error)).toBe(status);
  if (status !== "completed") return { result, request: undefined as never };
  const request = env.fake.requests.slice(before).find((r) => r.requestKind === "turn");
  expect(request).toBeDefined();
  return { result, request: request! };
}

describe("native projection: the view becomes the thread", () => {
  it.each(["native", "auto"] as const)("%s: an engine whose view shrinks (first message + last two) gets exactly that view plus the prompt, every turn", async (mode) => {
    const file = sessions.file(`shrink-${mode}`);
    const engine = viewEngine("first-last-two", firstAndLastTwo);
    const threads = new Set<string>();
    const decisions: string[] = [];
    for (let i = 1; i <= 6; i++) {
      const prompt = `question-${i}-nx`;
      const { result, request } = await turn(file, prompt, engine, { projection: { mode } });
      expect(conversation(request)).toEqual(expected(engine.last, prompt));
      threads.add(requestThreadId(request));
      decisions.push(result.projection?.native?.decision ?? "");
      // Turn 1 has no history: nothing is assembled (mode none); its thread is adopted by the first native turn.
      expect(result.projection?.mode).toBe(i === 1 ? "none" : "native");
    }
    // Turns 1-2 extend the thread; turn 3 cuts it back to before turn 1 (the first message alone is not a turn
    // boundary), which puts the view before the thread's first turn where nothing can be reverted: from turn 4 on
    // the view's front changes every turn, so each turn needs a fresh thread.
    expect(decisions.slice(0, 3)).toEqual(["", "match", "revert"]);
    expect(threads.size).toBe(4);
  }, 120_000);

  it("auto adopts a thread the old auto (delta) made: same thread and prompt_cache_key, the earlier request a byte-identical prefix", async () => {
    const file = sessions.file("adopt");
    // Engine-made text first (delta sends it as a context entry in turn 1: the binding's ledger), then the history.
    const engine = viewEngine("noted", (messages) => [{ role: "custom", customType: "note", content: "Adopted note: keep answers short." }, ...messages]);
    const requests: RecordedRequest[] = [];
    for (let i = 1; i <= 2; i++) requests.push((await turn(file, `adopt-q${i}`, engine, { projection: { mode: "delta" } })).request);
    const made = await readThreadBinding(file);
    expect(made?.ledger.length).toBe(1);
    expect(made?.native).toBeUndefined();
    // What the old auto wrote: the same binding under mode "auto" (its policy fingerprint).
    const auto = fingerprintPolicy({ mode: "auto", divergenceTokens: undefined, partCapChars: undefined, totalCapChars: undefined });
    await writeThreadBinding(file, { ...made!, policyFingerprint: auto });
    const three = await turn(file, "adopt-q3", engine, { projection: { mode: "auto" } });
    expect(three.result.projection).toMatchObject({ mode: "native", reason: "match", native: { reverted: false, rotated: false, injectedItems: 0 } });
    expect(requestThreadId(three.request)).toBe(requestThreadId(requests[1]!));
    expect(three.request.body?.prompt_cache_key).toBe(requests[1]!.body?.prompt_cache_key);
    const input = (r: RecordedRequest) => (r.body?.input ?? []) as unknown[];
    expect(JSON.stringify(input(three.request).slice(0, input(requests[1]!).length))).toBe(JSON.stringify(input(requests[1]!)));
    expect(conversation(three.request)).toEqual(expected(engine.last, "adopt-q3"));
    expect((await readThreadBinding(file))?.native?.adopted?.through).toBe(made!.heldTurnIds.at(-1));
    // The engine drops its note: the adopted turns no longer match, so the thread is cut before its first turn (the
    // same thread) and the model again sees exactly the view.
    const dropping = viewEngine("noted", (messages) => messages);
    const four = await turn(file, "adopt-q4", dropping, { projection: { mode: "auto" } });
    expect(four.result.projection).toMatchObject({ mode: "native", reason: "revert", native: { reverted: true, rotated: false } });
    expect(requestThreadId(four.request)).toBe(requestThreadId(requests[1]!));
    expect(conversation(four.request)).toEqual(expected(dropping.last, "adopt-q4"));
  }, 120_000);

  it("an engine compaction the thread takes in place keeps the prompt_cache_key; tools, preamble and kept prefix are byte-identical", async () => {
    const file = sessions.file("in-place");
    // The whole history until the history has 8 messages, then turns 3-4 folded into a summary after turns 1-2.
    const engine = viewEngine("fold-after-two", foldAfterTwo);
    const requests: RecordedRequest[] = [];
    for (let i = 1; i <= 5; i++) requests.push((await turn(file, `fold-question-${i}`, engine)).request);
    const [before, after] = [requests[3]!, requests[4]!];
    const last = await readThreadBinding(file);
    expect(last?.native?.turns.length).toBe(3);
    expect(conversation(after)).toEqual(expected(engine.last, "fold-question-5"));
    expect(after.body?.prompt_cache_key).toBe(before.body?.prompt_cache_key);
    expect(requestThreadId(after)).toBe(requestThreadId(before));
    expect(JSON.stringify(after.body?.tools)).toBe(JSON.stringify(before.body?.tools));
    const input = (r: RecordedRequest) => (r.body?.input ?? []) as unknown[];
    // Codex's preamble and turns 1-2 (4 items) came first in both requests, byte for byte.
    const framing = input(before).findIndex((i) => !isFraming(i as Record<string, unknown>));
    const kept = framing + 4;
    expect(JSON.stringify(input(after).slice(0, kept))).toBe(JSON.stringify(input(before).slice(0, kept)));
    expect(JSON.stringify(input(after)[kept])).not.toBe(JSON.stringify(input(before)[kept]));
  }, 120_000);

  for (const point of ["native:before-revert", "native:after-revert", "native:before-inject", "native:after-inject"] as FaultPointName[]) {
    it(`a sync cut short at ${point}: the next attempt's model input is the view, each item once`, async () => {
      const file = sessions.file(`crash-${point.replace(/:/g, "-")}`);
      const engine = viewEngine("fold-after-two", foldAfterTwo);
      for (let i = 1; i <= 4; i++) await turn(file, `crash-q${i}-${point}`, engine);
      // Turn 5 must revert (turns 3-4 leave the view for a summary) and inject: the attempt dies at the fault point.
      setTranscriptFaultHook((p) => {
        if (p === point) throw new Error(`simulated crash at ${p}`);
      });
      try {
        await turn(file, `crash-q5-${point}`, engine, {}, "failed");
      } finally {
        setTranscriptFaultHook(undefined);
      }
      const binding = await readThreadBinding(file);
      expect(binding?.native?.intent, "the binding records the step in progress").toBeDefined();
      const { result, request } = await turn(file, `crash-q5-${point}`, engine);
      const lines = conversation(request);
      expect(lines).toEqual(expected(engine.last, `crash-q5-${point}`));
      expect(new Set(lines).size).toBe(lines.length);
      expect(result.projection?.native?.decision).toBe("resync");
    }, 120_000);
  }
});

describe("native projection after a Codex native compaction", () => {
  const LIMIT = 5_000;
  let small: OfflineCodex;
  beforeAll(async () => {
    small = await startOfflineCodex({ offline: { lean: true, autoCompactTokenLimit: LIMIT } });
  }, 60_000);
  afterAll(async () => {
    await disposeChecked(small);
  });

  it("a compaction inside a turn is detected; the next turn's model input again equals the view", async () => {
    const file = sessions.file("native-compaction");
    // Engine-made text first (injected as a user-role reference item), then the whole history.
    const engine = viewEngine("noted-history", (messages) => [{ role: "custom", customType: "note", content: "Project note: keep answers short." }, ...messages]);
    const usage = { input_tokens: 500, output_tokens: 10, total_tokens: 510 };
    const params = (prompt: string) => ({
      ...turnParams(small, file, prompt, { contextEngine: engine, projection: { mode: "native" as const } }),
      dynamicTools: [{ name: "probe", description: "probe", inputSchema: { type: "object", properties: {} }, handler: () => "PROBE-RESULT" }],
    });
    const run = async (prompt: string, reply: Parameters<OfflineCodex["fake"]["enqueue"]>[0]) => {
      const from = small.fake.requests.length;
      small.fake.enqueue(reply);
      const result = await runCodexTurn(params(prompt));
      expect(result.status, JSON.stringify(result.error)).toBe("completed");
      return { result, requests: small.fake.requests.slice(from) };
    };
    await run("nc-first", { text: "nc-first-answer", usage });
    const two = await run("nc-second", { text: "nc-second-answer", usage });
    expect(conversation(two.requests.find((r) => r.requestKind === "turn")!)).toEqual(expected(engine.last, "nc-second"));
    // Turn 3: the tool call's usage crosses the limit, so Codex compacts before the follow-up request.
    const three = await run("nc-third", [
      { functionCall: { name: "probe", arguments: {} }, usage: { input_tokens: 600, output_tokens: 10, total_tokens: LIMIT + 2_000 } },
      { text: "nc-third-answer", usage },
    ]);
    expect(three.requests.map((r) => r.requestKind)).toEqual(["turn", "compaction", "turn"]);
    expect((await readThreadBinding(file))?.native?.unknownFrom).toBe(three.result.turnId);
    const four = await run("nc-fourth", { text: "nc-fourth-answer", usage });
    expect(four.result.projection?.native?.decision).toBe("resync");
    expect(four.result.threadId).toBe(three.result.threadId);
    const request = four.requests.find((r) => r.requestKind === "turn")!;
    expect(conversation(request)).toEqual(expected(engine.last, "nc-fourth"));
  }, 120_000);
});
