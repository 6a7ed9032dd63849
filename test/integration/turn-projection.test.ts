/**
 * Per projection mode, a 20-turn session through runCodexTurn against the real app-server: what the model received
 * (from the fake's recorded request bodies) must contain the engine's context, the current prompt exactly once, and
 * nothing Codex already holds.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn, type CodexTurnResult } from "../../src/turn.js";
import { createWindowEngine } from "../../src/context-engine/engines/index.js";
import type { AgentMessage, ContextEngine } from "../../src/context-engine/types.js";
import { PROMPT_HEADER } from "../../src/projection/render.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { inputMessageTexts, startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";
import { mirrorKeyCounts, requestThreadId, tempSessions, turnParams, disposeChecked } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("turn-projection-");
const TURNS = 20;

beforeAll(async () => {
  env = await startOfflineCodex();
  // A short fixed reply: the default echo would re-quote each wrapped prompt and grow the transcript geometrically.
  env.fake.setDefault(() => ({ text: "ack" }));
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

/** Engine context the transcript does not hold: a memory note that changes every 5th assemble. */
function memoryEngine(inner: ContextEngine & { windowStart(id: string): number }): ContextEngine & {
  assembles: number;
  memory(): string;
  windowStart(id: string): number;
} {
  const state = {
    assembles: 0,
    memory: () => `ENGINE-MEMORY-v${Math.floor(Math.max(0, state.assembles - 1) / 5)}`,
  };
  return Object.assign(state, {
    ...inner,
    info: { ...inner.info, id: `memory-${inner.info.id}` },
    windowStart: inner.windowStart,
    async assemble(p: Parameters<ContextEngine["assemble"]>[0]) {
      state.assembles++;
      const out = await inner.assemble(p);
      const note: AgentMessage = { role: "custom", customType: "memory", content: state.memory(), timestamp: 1 };
      return { ...out, messages: [note, ...out.messages] };
    },
  }) as never;
}

const OPENING_TAG = /<openclaw\.context\.[0-9]{3}\.[0-9a-f]+>/g;

/** Opening `<openclaw.context…>` tags in a request's developer messages. */
function contextTags(req: RecordedRequest): string[] {
  return inputMessageTexts(req.body, "developer").flatMap((t) => t.match(OPENING_TAG) ?? []);
}

const promptOf = (i: number): string => `question-${String(i).padStart(2, "0")}-zq ${"lorem ipsum dolor sit amet ".repeat(6)}`;
const markerOf = (i: number): string => `question-${String(i).padStart(2, "0")}-zq`;

interface TurnObservation {
  result: CodexTurnResult;
  request: RecordedRequest;
  threadId: string;
}

async function runSession(
  file: string,
  engine: ContextEngine,
  extra: Partial<Parameters<typeof turnParams>[3]>,
  onTurn?: (i: number) => void,
): Promise<TurnObservation[]> {
  const out: TurnObservation[] = [];
  for (let i = 0; i < TURNS; i++) {
    const before = env.fake.requests.length;
    const result = await runCodexTurn(turnParams(env, file, promptOf(i), { contextEngine: engine, ...extra }));
    expect(result.status, `turn ${i}: ${JSON.stringify(result.error)}`).toBe("completed");
    const request = env.fake.requests.slice(before).find((r) => r.requestKind === "turn");
    expect(request, `turn ${i} made a model request`).toBeDefined();
    out.push({ result, request: request!, threadId: requestThreadId(request!) });
    onTurn?.(i);
  }
  // Every accepted turn mirrored exactly once.
  const { byTurn, duplicates } = await mirrorKeyCounts(file);
  expect(duplicates).toEqual([]);
  expect(byTurn.size).toBe(TURNS);
  expect((await readSessionHistory(file)).messages).toHaveLength(2 * TURNS);
  return out;
}

/** The current prompt appears exactly once across the request's user messages. */
function expectPromptOnce(obs: TurnObservation[]): void {
  obs.forEach((o, i) => {
    const users = inputMessageTexts(o.request.body, "user").join("\n");
    expect(users.split(markerOf(i)).length - 1, `turn ${i} prompt occurrences`).toBe(1);
  });
}

describe("projection over 20-turn sessions", () => {
  it("auto (per-turn engine => delta): one thread, context injected only when the engine's view changed", async () => {
    const engine = memoryEngine(createWindowEngine({ tokenBudget: 100_000 }));
    const obs = await runSession(sessions.file(), engine, { projection: { mode: "auto" }, contextTokenBudget: 100_000 });
    expectPromptOnce(obs);
    expect(new Set(obs.map((o) => o.threadId)).size).toBe(1);
    obs.forEach((o, i) => {
      expect(o.result.projection?.mode).toBe("delta");
      const added = contextTags(o.request).length - (i === 0 ? 0 : contextTags(obs[i - 1]!.request).length);
      // The memory note changes at turns 0, 5, 10, 15; history is held natively by the thread.
      const changed = i % 5 === 0;
      expect(added, `turn ${i} new context entries`).toBe(changed ? 1 : 0);
      expect(o.result.projection?.entriesSent).toBe(changed ? 1 : 0);
      const developer = inputMessageTexts(o.request.body, "developer").join("\n");
      expect(developer).toContain(`ENGINE-MEMORY-v${Math.floor(i / 5)}`);
    });
    // Nothing held is re-sent: no history text inside injected context.
    const last = obs[TURNS - 1]!.request;
    for (const tag of contextTags(last)) expect(tag.startsWith("<openclaw.context.000.")).toBe(true);
  });

  it("delta with a small budget: the window steps, divergence rotates to a new thread that gets the view again", async () => {
    const inner = createWindowEngine({ tokenBudget: 600 });
    const engine = memoryEngine(inner);
    const obs = await runSession(sessions.file(), engine, { projection: { mode: "delta" }, contextTokenBudget: 600 });
    expectPromptOnce(obs);
    const threads = obs.map((o) => o.threadId);
    expect(new Set(threads).size).toBeGreaterThan(1);
    obs.forEach((o, i) => {
      const rotated = i > 0 && threads[i] !== threads[i - 1];
      if (rotated) {
        expect(o.result.projection?.reason, `turn ${i}`).toBe("divergence");
        expect(o.request.turnMetadata?.history_initialization).toBe("new");
        // A fresh thread holds nothing: the engine's whole view is injected, including earlier turns' text.
        expect(contextTags(o.request).length).toBeGreaterThan(0);
        expect(inputMessageTexts(o.request.body, "developer").join("\n")).toContain(markerOf(i - 1));
      } else if (i > 0) {
        expect(o.result.projection?.reason, `turn ${i}`).not.toBe("divergence");
      }
    });
    expect(obs.filter((o) => o.result.projection?.reason === "divergence").length).toBe(new Set(threads).size - 1);
  });

  it("threadBootstrap: context entries appear once per epoch, each epoch on its own thread", async () => {
    const inner = createWindowEngine({ tokenBudget: 600, threadBootstrap: true });
    const epochs: string[] = [];
    const file = sessions.file();
    const sessionId = file.split("/").pop()!.replace(/\.jsonl$/, "");
    const obs = await runSession(file, inner, { projection: { mode: "threadBootstrap" }, contextTokenBudget: 600 }, () =>
      epochs.push(`w${inner.windowStart(sessionId)}`),
    );
    expectPromptOnce(obs);
    expect(new Set(epochs).size).toBeGreaterThan(1);
    obs.forEach((o, i) => {
      const sameThread = i > 0 && o.threadId === obs[i - 1]!.threadId;
      // Turn 0 assembles nothing (empty session): it starts a thread without context.
      if (i === 0) {
        expect(o.result.projection?.mode).toBe("none");
        return;
      }
      expect(o.result.projection?.mode).toBe("threadBootstrap");
      const epochChanged = epochs[i] !== epochs[i - 1];
      if (i > 1) expect(sameThread, `turn ${i}: thread kept iff epoch unchanged`).toBe(!epochChanged);
      if (sameThread) {
        expect(o.result.projection?.entriesSent).toBe(0);
        expect(contextTags(o.request).length).toBe(contextTags(obs[i - 1]!.request).length);
      } else {
        expect(o.result.projection?.entriesSent).toBeGreaterThan(0);
        expect(contextTags(o.request).length).toBe(o.result.projection?.entriesSent);
      }
    });
    expect(new Set(obs.map((o) => o.threadId)).size).toBeGreaterThanOrEqual(new Set(epochs.slice(1)).size);
  });

  it("prompt: the first-port wrapper carries the engine's context in the user message", async () => {
    const engine = memoryEngine(createWindowEngine({ tokenBudget: 100_000 }));
    const file = sessions.file();
    const obs = await runSession(file, engine, { projection: { mode: "prompt" }, contextTokenBudget: 100_000 });
    expectPromptOnce(obs);
    obs.forEach((o, i) => {
      expect(o.result.projection?.mode).toBe("prompt");
      const users = inputMessageTexts(o.request.body, "user");
      const current = users.find((u) => u.includes(markerOf(i)))!;
      expect(current).toContain(PROMPT_HEADER);
      expect(current).toContain(`ENGINE-MEMORY-v${Math.floor(i / 5)}`);
      expect(contextTags(o.request)).toEqual([]);
    });
    // The mirror records the ORIGINAL prompt, never the wrapper.
    const history = await readSessionHistory(file);
    expect(history.messages.filter((m) => m.role === "user").map((m) => m.content)).toEqual(obs.map((_, i) => promptOf(i)));
  });
});
