/** Content identity: what the model sees decides "held", never metadata. */
import { describe, expect, it } from "vitest";
import { watchedMessage } from "../helpers/watched-message.js";
import type { AgentMessage, AssistantMessage } from "../../src/context-engine/types.js";
import { ContentSet, cachedContentKey, contentSignature, messageContentKey } from "../../src/projection/identity.js";
import { deepFreeze, markDeepFrozen } from "../../src/transcript/freeze.js";

const assistant: AssistantMessage = {
  role: "assistant",
  content: [
    { type: "text", text: "Looking it up." },
    { type: "toolCall", id: "call_1", name: "lookup", arguments: { q: "x", n: 2 } },
  ],
  model: "gpt-x",
  usage: { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15 },
  stopReason: "toolUse",
  timestamp: 1_700_000_000_000,
};
const toolResult: AgentMessage = { role: "toolResult", toolCallId: "call_1", toolName: "lookup", content: [{ type: "text", text: "42" }], isError: false, timestamp: 5 };

describe("messageContentKey", () => {
  it("ignores timestamps, usage, model, stop reason and key order (a rebuilt message is the same message)", () => {
    const rebuilt = {
      timestamp: undefined,
      content: [
        { text: "Looking it up.", type: "text" },
        { arguments: { n: 2, q: "x" }, name: "lookup", id: "call_1", type: "toolCall" },
      ],
      role: "assistant",
      usage: { input: 1, output: 1, cacheRead: 9, cacheWrite: 0, totalTokens: 2 },
    } as unknown as AgentMessage;
    expect(messageContentKey(rebuilt)).toBe(messageContentKey(assistant));
    expect(messageContentKey({ role: "user", content: "hi", timestamp: 1 })).toBe(
      messageContentKey({ role: "user", content: [{ type: "text", text: "hi" }], timestamp: 2 }),
    );
  });

  it("distinguishes role, text, tool call id/name/arguments and tool result id/text", () => {
    const variants: AgentMessage[] = [
      { ...assistant, role: "user" } as AgentMessage,
      { ...assistant, content: [{ type: "text", text: "Looking it up!" }, assistant.content[1]] } as AgentMessage,
      { ...assistant, content: [assistant.content[0], { type: "toolCall", id: "call_2", name: "lookup", arguments: { q: "x", n: 2 } }] } as AgentMessage,
      { ...assistant, content: [assistant.content[0], { type: "toolCall", id: "call_1", name: "search", arguments: { q: "x", n: 2 } }] } as AgentMessage,
      { ...assistant, content: [assistant.content[0], { type: "toolCall", id: "call_1", name: "lookup", arguments: { q: "y", n: 2 } }] } as AgentMessage,
    ];
    for (const v of variants) expect(messageContentKey(v)).not.toBe(messageContentKey(assistant));
    expect(messageContentKey({ ...toolResult, toolCallId: "call_9" } as AgentMessage)).not.toBe(messageContentKey(toolResult));
    expect(messageContentKey({ ...toolResult, content: [{ type: "text", text: "43" }] } as AgentMessage)).not.toBe(messageContentKey(toolResult));
    expect(messageContentKey({ ...toolResult, timestamp: 99 } as AgentMessage)).toBe(messageContentKey(toolResult));
  });
});

describe("ContentSet", () => {
  it("answers by reference without serializing, and by content for copies", () => {
    let calls = 0;
    const keyOf = cachedContentKey();
    const counting = (m: AgentMessage) => {
      calls++;
      return keyOf(m);
    };
    const set = new ContentSet([assistant, toolResult], counting);
    expect(set.has(assistant)).toBe(true);
    expect(calls).toBe(0);
    expect(set.has({ ...toolResult, timestamp: 123 } as AgentMessage)).toBe(true);
    expect(set.has({ role: "user", content: "other", timestamp: 1 })).toBe(false);
  });
});

const watched = watchedMessage;

describe("identity of the history cache's own messages, kept from turn to turn", () => {
  it("keys and signs a message the history cache froze once, across projections, with what the uncached path gives", () => {
    const held = watched("the same words every turn", true);
    const expectedKey = messageContentKey(held.message);
    const expectedSignature = contentSignature({ role: "user", content: "the same words every turn", timestamp: 1 });
    const before = held.reads();
    // Each projection makes its own keyOf; the frozen message's key and signature come from its memo after the first.
    for (let turn = 0; turn < 3; turn++) {
      expect(cachedContentKey()(held.message)).toBe(expectedKey);
      expect(contentSignature(held.message)).toBe(expectedSignature);
    }
    // One read for the key, one for the signature: computed once each, not once per projection.
    expect(held.reads() - before).toBe(2);
  });

  it("keys anything else afresh in each projection: an engine's own objects may change between turns", () => {
    const engines = watched("engine text", false);
    cachedContentKey()(engines.message);
    cachedContentKey()(engines.message);
    contentSignature(engines.message);
    contentSignature(engines.message);
    expect(engines.reads()).toBe(4);

    // Shallowly frozen by an engine, changed between two projections: the second sees the change.
    const shallow = Object.freeze({ role: "user", content: [{ type: "text", text: "before" }], timestamp: 1 }) as unknown as AgentMessage & {
      content: Array<{ type: string; text: string }>;
    };
    const firstKey = cachedContentKey()(shallow);
    const firstSignature = contentSignature(shallow);
    shallow.content[0] = { type: "text", text: "after, longer" };
    expect(cachedContentKey()(shallow)).not.toBe(firstKey);
    expect(contentSignature(shallow)).not.toBe(firstSignature);
    expect(cachedContentKey()(shallow)).toBe(messageContentKey({ role: "user", content: "after, longer", timestamp: 1 }));
  });

  it("answers ContentSet membership for frozen messages as for their unfrozen copies", () => {
    const copy = (m: AgentMessage) => structuredClone(m);
    const frozen = [assistant, toolResult].map((m) => markDeepFrozen(deepFreeze(copy(m))));
    const set = new ContentSet(frozen);
    expect(set.hasContent(copy(assistant))).toBe(true);
    expect(set.hasContent(copy(toolResult))).toBe(true);
    expect(set.hasContent({ ...copy(toolResult), content: [{ type: "text", text: "43" }] } as AgentMessage)).toBe(false);
    // Again, now from the memos.
    expect(new ContentSet(frozen).hasContent(copy(assistant))).toBe(true);
  });
});
