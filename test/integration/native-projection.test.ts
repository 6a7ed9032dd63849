/**
 * Native projection (`projection.mode: "native"`) against the real app-server and the fake model: the engine's view
 * becomes the Codex thread (thread/revert + thread/inject_items), so the model input of every turn is exactly the
 * view plus the prompt, whatever the engine drops; a cut keeps the thread's prompt_cache_key and its prefix; a sync
 * cut short at any step is repaired by the next attempt; a native compaction is followed by a re-sync.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn, type CodexTurnResult } from "../../src/turn.js";
import type { AgentMessage, ContextEngine } from "../../src/context-engine/types.js";
import { startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";
import { setTranscriptFaultHook, type FaultPointName } from "../../src/transcript/fault.js";
import { readThreadBinding } from "../../src/transcript/binding.js";
import { NATIVE_REFERENCE_LABEL } from "../../src/projection/native.js";
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

const textOfContent = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.map((c: { text?: unknown }) => (typeof c.text === "string" ? c.text : "")).filter((t) => t.length > 0).join("\n")
      : "";

/** Codex's own framing: base/developer instructions, permissions, the environment context. */
function isFraming(item: Record<string, unknown>): boolean {
  if (item.type !== "message") return false;
  const text = textOfContent(item.content);
  if (item.role === "developer") return true;
  return item.role === "user" && (text.startsWith("<environment_context>") || text.startsWith("<skills_instructions>"));
}

/** The conversation the model received: `role: text` per item after Codex's framing. */
function conversation(req: RecordedRequest): string[] {
  const input = (req.body?.input ?? []) as Array<Record<string, unknown>>;
  return input.filter((i) => !isFraming(i)).map((i) => `${String(i.role ?? i.type)}: ${textOfContent(i.content)}`);
}

/** What the view says the model should see (user and assistant text; engine text as labelled reference data). */
function expected(view: readonly AgentMessage[], prompt: string): string[] {
  const out = view.map((m) => {
    if (m.role === "user" || m.role === "assistant") return `${m.role}: ${textOfContent((m as { content: unknown }).content)}`;
    return `user: ${NATIVE_REFERENCE_LABEL}`;
  });
  return [...out, `user: ${prompt}`];
}

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

const firstAndLastTwo = (messages: AgentMessage[]) => (messages.length <= 3 ? messages : [messages[0]!, ...messages.slice(-2)]);

async function turn(file: string, prompt: string, engine: ContextEngine, extra: Record<string, unknown> = {}): Promise<{ result: CodexTurnResult; request: RecordedRequest }> {
  const before = env.fake.requests.length;
  env.fake.enqueue({ text: `answer to ${prompt}` });
  const result = await runCodexTurn(turnParams(env, file, prompt, { contextEngine: engine, projection: { mode: "native" }, ...extra }));
  expect(result.status, JSON.stringify(result.error)).toBe("completed");
  const request = env.fake.requests.slice(before).find((r) => r.requestKind === "turn");
  expect(request).toBeDefined();
  return { result, request: request! };
}

describe("native projection: the view becomes the thread", () => {
  it("an engine whose view shrinks (first message + last two) gets exactly that view plus the prompt, every turn", async () => {
    const file = sessions.file("shrink");
    const engine = viewEngine("first-last-two", firstAndLastTwo);
    const threads = new Set<string>();
    const decisions: string[] = [];
    for (let i = 1; i <= 6; i++) {
      const prompt = `question-${i}-nx`;
      const { result, request } = await turn(file, prompt, engine);
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
});
