/**
 * The tail fast path of projection (`historyTailOffset` in src/projection/index.ts): when the engine's view is a tail
 * of the history's own objects (a pass-through or window engine), membership is decided by index instead of sets of
 * every message. It must decide exactly what the content path decides: checked against the same views handed over as
 * copies (which never take the fast path), and for content the thread holds under another message.
 */
import { describe, expect, it } from "vitest";
import { projectAssembledContext } from "../../src/projection/index.js";
import type { AgentMessage } from "../../src/context-engine/types.js";
import type { ThreadBinding } from "../../src/transcript/binding.js";

const fingerprints = { dynamicTools: "t", engineId: "e", policy: "p" };
const binding = (heldTurnIds: string[]): ThreadBinding =>
  ({ version: 1, threadId: "thr", dynamicToolsFingerprint: "t", engineId: "e", policyFingerprint: "p", projectionMode: "delta", heldTurnIds, ledger: [] }) as ThreadBinding;
const user = (text: string, t: number): AgentMessage => ({ role: "user", content: text, timestamp: t });
const reply = (text: string, t: number): AgentMessage => ({ role: "assistant", content: [{ type: "text", text }], timestamp: t }) as AgentMessage;

/** Six turns on thread "thr"; `held` says which the thread still holds; the last message is a repeat of a held one. */
function session(held: string[]) {
  const history: AgentMessage[] = [];
  const origins: Array<{ threadId: string; turnId: string } | null> = [];
  for (let i = 0; i < 6; i++) {
    history.push(user(`question ${i}`, i * 10), reply(i % 2 === 0 ? "ok" : `answer ${i}`, i * 10 + 1));
    origins.push({ threadId: "thr", turnId: `t${i}` }, { threadId: "thr", turnId: `t${i}` });
  }
  // A message from elsewhere (no origin) whose content the thread holds under a held turn ("ok").
  history.push(reply("ok", 99));
  origins.push(null);
  return { history, origins, binding: binding(held) };
}

const project = (s: ReturnType<typeof session>, view: AgentMessage[]) =>
  projectAssembledContext({
    mode: "delta",
    prompt: "next",
    history: s.history,
    origins: s.origins,
    assembled: { messages: view, estimatedTokens: 1 },
    binding: s.binding,
    fingerprints,
    tokenBudget: 1_000_000,
  });

describe("projection's tail fast path", () => {
  const cases: Array<[string, string[], (h: AgentMessage[]) => AgentMessage[]]> = [
    ["the whole history, all held", ["t0", "t1", "t2", "t3", "t4", "t5"], (h) => h],
    ["a window (tail), the oldest turns dropped", ["t0", "t1", "t2", "t3", "t4", "t5"], (h) => h.slice(6)],
    ["a window, some turns not held", ["t3", "t4"], (h) => h.slice(4)],
    ["not a tail (a middle slice)", ["t0", "t1", "t2", "t3", "t4", "t5"], (h) => h.slice(2, 8)],
  ];
  for (const [name, held, pick] of cases) {
    it(`decides as the content path does: ${name}`, () => {
      const s = session(held);
      const view = pick(s.history);
      const fast = project(s, view);
      const copies = project(s, view.map((m) => structuredClone(m)));
      expect(fast.reason).toBe(copies.reason);
      expect(fast.thread).toEqual(copies.thread);
      expect(fast.additionalContext).toEqual(copies.additionalContext);
      expect(fast.staleTokens).toBe(copies.staleTokens);
    });
  }

  it("a message not held by its turn but held by content is not sent again", () => {
    const s = session(["t0", "t1", "t2", "t3", "t4", "t5"]);
    const out = project(s, s.history);
    // The trailing "ok" (no origin) is the same content as turn t0's held "ok": nothing to send.
    expect(out.additionalContext).toBeUndefined();
    expect(out.reason).toBe("threadHoldsContext");
  });
});
