/** Content identity: what the model sees decides "held", never metadata. */
import { describe, expect, it } from "vitest";
import type { AgentMessage, AssistantMessage } from "../../src/context-engine/types.js";
import { ContentSet, cachedContentKey, messageContentKey } from "../../src/projection/identity.js";

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
