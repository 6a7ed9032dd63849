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
import { contextEntryOutputs, inputMessageTexts, startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";
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

/**
 * Context entries are `untrusted`: Codex 0.169.0 injects each as a `function_call_output` item (namespace "agent")
 * named after the key without its dots (`openclaw.context.000.<hash>` -> `openclawcontext000<hash>`), never as a
 * developer message.
 */
interface ContextItem {
  name: string;
  output: string;
}
function contextItems(req: RecordedRequest): ContextItem[] {
  return contextEntryOutputs(req.body);
}

/** Names of the request's context items (one per additionalContext entry the thread received). */
function contextTags(req: RecordedRequest): string[] {
  return contextItems(req).map((c) => c.name);
}

/** Text of the request's context items. */
const contextText = (req: RecordedRequest): string => contextItems(req).map((c) => c.output).join("\n");

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
  it("delta (the auto of before): one thread, context injected only when the engine's view changed", async () => {
    const engine = memoryEngine(createWindowEngine({ tokenBudget: 100_000 }));
    const obs = await runSession(sessions.file(), engine, { projection: { mode: "delta" }, contextTokenBudget: 100_000 });
    expectPromptOnce(obs);
    expect(new Set(obs.map((o) => o.threadId)).size).toBe(1);
    obs.forEach((o, i) => {
      expect(o.result.projection?.mode).toBe("delta");
      const added = contextTags(o.request).length - (i === 0 ? 0 : contextTags(obs[i - 1]!.request).length);
      // The memory note changes at turns 0, 5, 10, 15; history is held natively by the thread.
      const changed = i % 5 === 0;
      expect(added, `turn ${i} new context entries`).toBe(changed ? 1 : 0);
      expect(o.result.projection?.entriesSent).toBe(changed ? 1 : 0);
      // The engine-recalled note is quoted reference data (user role), never developer text.
      expect(contextText(o.request)).toContain(`ENGINE-MEMORY-v${Math.floor(i / 5)}`);
      expect(inputMessageTexts(o.request.body, "developer").join("\n")).not.toContain("ENGINE-MEMORY");
    });
    // Nothing held is re-sent: no history text inside injected context.
    const last = obs[TURNS - 1]!.request;
    for (const tag of contextTags(last)) expect(tag.startsWith("openclawcontext000")).toBe(true);
  });

  it("auto (the native sync): the model sees the current memory note only, once, never a superseded one", async () => {
    const engine = memoryEngine(createWindowEngine({ tokenBudget: 100_000 }));
    const obs = await runSession(sessions.file(), engine, { projection: { mode: "auto" }, contextTokenBudget: 100_000 });
    expectPromptOnce(obs);
    const threads = obs.map((o) => o.threadId);
    obs.forEach((o, i) => {
      expect(o.result.projection?.mode).toBe("native");
      const all = JSON.stringify(o.request.body?.input ?? []);
      const version = Math.floor(i / 5);
      expect(all.split(`ENGINE-MEMORY-v${version}`).length - 1, `turn ${i} current note`).toBe(1);
      for (let v = 0; v < version; v++) expect(all, `turn ${i} superseded note v${v}`).not.toContain(`ENGINE-MEMORY-v${v}"`);
      expect(inputMessageTexts(o.request.body, "developer").join("\n")).not.toContain("ENGINE-MEMORY");
      // Between note changes the thread already holds the view: nothing is cut or sent but the prompt.
      if (i % 5 !== 0) expect(o.result.projection?.reason, `turn ${i}`).toBe("match");
    });
    // Turn 0's note rode with turn 0 (it could be cut with it at turn 5, on the same thread); the note at the front of
    // the view then sits before the thread's first turn, where nothing can be reverted, so each later change rotates.
    expect(obs[5]!.result.projection?.reason).toBe("revert");
    expect(threads[5]).toBe(threads[0]);
    expect(new Set(threads).size).toBe(3);
  });

  it("delta with a small budget: the window steps, the rotation policy moves to a new thread that gets the view again", async () => {
    const inner = createWindowEngine({ tokenBudget: 600 });
    const engine = memoryEngine(inner);
    const obs = await runSession(sessions.file(), engine, { projection: { mode: "delta" }, contextTokenBudget: 600 });
    expectPromptOnce(obs);
    const threads = obs.map((o) => o.threadId);
    expect(new Set(threads).size).toBeGreaterThan(1);
    obs.forEach((o, i) => {
      const rotated = i > 0 && threads[i] !== threads[i - 1];
      const rotation = ["divergence", "staleCost"];
      if (rotated) {
        expect(rotation, `turn ${i}`).toContain(o.result.projection?.reason);
        expect(o.request.turnMetadata?.history_initialization).toBe("new");
        // A fresh thread holds nothing: the engine's whole view is injected, including earlier turns' text, quoted.
        expect(contextTags(o.request).length).toBeGreaterThan(0);
        expect(contextText(o.request)).toContain(markerOf(i - 1));
        expect(inputMessageTexts(o.request.body, "developer").join("\n")).not.toContain(markerOf(i - 1));
      } else if (i > 0) {
        expect(rotation, `turn ${i}`).not.toContain(o.result.projection?.reason);
      }
    });
    expect(obs.filter((o) => ["divergence", "staleCost"].includes(o.result.projection?.reason ?? "")).length).toBe(new Set(threads).size - 1);
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

describe("trust split and developer instructions", () => {
  const TOOL_OUTPUT = "TOOL-OUTPUT-SENTINEL-7731";
  const lookup = {
    name: "lookup_fact",
    description: "Look a fact up",
    inputSchema: { type: "object", properties: { q: { type: "string" } } },
    handler: () => TOOL_OUTPUT,
  };

  /**
   * Four turns; turn 0 calls a dynamic tool, turn 2 changes a projection option (a fresh thread that receives the
   * whole view, earlier prompts and tool output included). No developer-role item of any request may contain an
   * earlier prompt or the tool output.
   */
  it.each([
    ["auto (native)", { mode: "auto" }, true],
    ["delta", { mode: "delta" }, true],
    ["threadBootstrap", { mode: "threadBootstrap" }, true],
    ["prompt", { mode: "prompt" }, true],
    ["no engine", { mode: "auto" }, false],
  ] as const)("%s: no earlier user prompt or tool output in a developer-role item", async (_label, projection, withEngine) => {
    const file = sessions.file();
    const requests: RecordedRequest[] = [];
    for (let i = 0; i < 4; i++) {
      if (i === 0) env.fake.enqueue([{ functionCall: { name: "lookup_fact", arguments: { q: "x" } } }, { text: "ack" }]);
      const before = env.fake.requests.length;
      const result = await runCodexTurn(
        turnParams(env, file, promptOf(i), {
          ...(withEngine ? { contextEngine: createWindowEngine({ tokenBudget: 100_000 }), contextTokenBudget: 100_000 } : {}),
          projection: { ...projection, ...(i >= 2 ? { partCapChars: 5_000 } : {}) },
          dynamicTools: [lookup],
          developerInstructions: "HOST-INSTRUCTIONS",
        }),
      );
      expect(result.status, JSON.stringify(result.error)).toBe("completed");
      requests.push(...env.fake.requests.slice(before).filter((r) => r.requestKind === "turn"));
    }
    let sawToolOutput = false;
    let sawEarlierPromptAsContext = false;
    for (const req of requests) {
      const developer = inputMessageTexts(req.body, "developer").join("\n");
      expect(developer).toContain("HOST-INSTRUCTIONS");
      expect(developer).not.toContain(TOOL_OUTPUT);
      for (let i = 0; i < 4; i++) expect(developer, `prompt ${i} in a developer item`).not.toContain(markerOf(i));
      sawToolOutput ||= JSON.stringify(req.body).includes(TOOL_OUTPUT);
      sawEarlierPromptAsContext ||=
        contextText(req).includes(markerOf(0)) ||
        (projection.mode === "prompt" && inputMessageTexts(req.body, "user").some((t) => t.includes(PROMPT_HEADER) && t.includes(markerOf(0)))) ||
        // The native sync injects the view into the fresh thread as native user/assistant items.
        (projection.mode === "auto" && req.turnMetadata?.history_initialization === "new" && inputMessageTexts(req.body, "user").some((t) => t.includes(markerOf(0))));
    }
    // The checks above looked at real content: the tool output reached the model, and (with an engine) earlier
    // prompts travelled as quoted context on the fresh thread.
    expect(sawToolOutput).toBe(true);
    if (withEngine) expect(sawEarlierPromptAsContext).toBe(true);
  });

  /** Turns of one session (window engine, base instructions "BASE-DEV") with a beforePromptBuild hook per turn. */
  async function hookedTurns(turns: number, hook: (turn: number, pre: string | undefined) => string) {
    const file = sessions.file();
    const obs: Array<{ request: RecordedRequest; threadId: string; projection: unknown }> = [];
    for (let turn = 1; turn <= turns; turn++) {
      const before = env.fake.requests.length;
      const result = await runCodexTurn(
        turnParams(env, file, promptOf(turn), {
          contextEngine: createWindowEngine({ tokenBudget: 100_000 }),
          contextTokenBudget: 100_000,
          developerInstructions: "BASE-DEV",
          hooks: { beforePromptBuild: (e) => ({ developerInstructions: hook(turn, e.developerInstructions) }) },
        }),
      );
      expect(result.status, JSON.stringify(result.error)).toBe("completed");
      const request = env.fake.requests.slice(before).find((r) => r.requestKind === "turn")!;
      obs.push({ request, threadId: requestThreadId(request), projection: result.projection });
    }
    return obs;
  }

  it("a beforePromptBuild hook's developer instructions reach the model on every turn of one resumed thread (changes at turns 2 and 5)", async () => {
    const hookText = (turn: number) => (turn < 2 ? "HOOK-DEV-A" : turn < 5 ? "HOOK-DEV-B" : "HOOK-DEV-C");
    const obs = await hookedTurns(6, hookText);
    expect(new Set(obs.map((o) => o.threadId)).size).toBe(1);
    obs.forEach((o, index) => {
      const turn = index + 1;
      const developer = inputMessageTexts(o.request.body, "developer");
      // The latest developer text the model sees carries this turn's instructions.
      const latest = [...developer].reverse().find((t) => t.includes("HOOK-DEV-"));
      expect(latest, `turn ${turn}`).toContain(hookText(turn));
      expect(developer.join("\n"), `turn ${turn}`).not.toContain("BASE-DEV");
    });
    // One update per change (turns 2 and 5), and under auto (the native sync) the superseded copy is cut with its
    // turn: at turn 5 the thread is reverted before turn 2 and holds the current copy only.
    const updates = (o: (typeof obs)[number]) => inputMessageTexts(o.request.body, "developer").filter((t) => t.includes("<openclaw.developer.")).length;
    expect(obs.map(updates)).toEqual([0, 1, 1, 1, 1, 1]);
    expect(obs.map((o) => (o.projection as { reason?: string }).reason)).toEqual(["nothingAssembled", "match", "match", "match", "revert", "match"]);
    for (const o of obs.slice(4)) expect(inputMessageTexts(o.request.body, "developer").join("\n")).not.toContain("HOOK-DEV-B");
  });

  it("a hook that prepends the same large system context every turn keeps one thread and sends it once (lossless-claw's shape)", async () => {
    // ~1,400 tokens, far more than the young session's view: counted against the pre-hook instructions it looked stale.
    const policy = `RECALL-POLICY ${"Prefer the summary and the recent messages over guessing. ".repeat(95)}`;
    const obs = await hookedTurns(5, (_turn, pre) => `${policy}\n\n${pre ?? ""}`);
    expect(new Set(obs.map((o) => o.threadId)).size, JSON.stringify(obs.map((o) => o.projection))).toBe(1);
    for (const o of obs.slice(1)) expect(o.projection).toMatchObject({ staleTokens: 0 });
    // The model sees the policy once per request (the thread/start copy), never an update entry carrying it again.
    for (const o of obs) {
      const developer = inputMessageTexts(o.request.body, "developer");
      expect(developer.filter((t) => t.includes("RECALL-POLICY"))).toHaveLength(1);
      expect(developer.filter((t) => t.includes("<openclaw.developer."))).toEqual([]);
    }
  });
});

