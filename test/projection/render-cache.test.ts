import { describe, expect, it } from "vitest";
import { watchedMessage } from "../helpers/watched-message.js";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { ledgerUnit, ledgerUnitId, renderedBlockOf, renderingMemo, renderUnits } from "../../src/projection/entries.js";
import { renderMessageBlock } from "../../src/projection/render.js";
import { deepFreeze, markDeepFrozen } from "../../src/transcript/freeze.js";

const watched = watchedMessage;

describe("rendering cache of history messages", () => {
  it("renders a message the history cache froze once, and gives the units the uncached path gives", () => {
    const a = watched("same words", true);
    const b = watched("same words", true);
    const c = watched("other words", true);
    const view = [a.message, b.message, c.message];
    const first = renderUnits(view);
    const readsAfterFirst = a.reads() + b.reads() + c.reads();
    const second = renderUnits(view);
    expect(a.reads() + b.reads() + c.reads()).toBe(readsAfterFirst);
    expect(second).toEqual(first);
    // The same strings ledgerUnit builds from the block: the second identical block is occurrence #1.
    const block = renderMessageBlock(a.message)!;
    expect(first.map((u) => u.unit)).toEqual([ledgerUnit(block, 0), ledgerUnit(block, 1), ledgerUnit(renderMessageBlock(c.message)!, 0)]);
    // Each unit carries its id (what ledger membership is decided on), the second identical block's with its #1.
    expect(first.map((u) => u.id)).toEqual(first.map((u) => ledgerUnitId(u.unit)));
    expect(first[1]!.id).toMatch(/^[0-9a-f]{20}#1$/);
    expect(renderedBlockOf(c.message)).toMatchObject({ block: "[user]\nother words", tokens: 5 });
  });

  it("keys the cache by the part cap", () => {
    const long = watched("x".repeat(50), true);
    const capped = renderedBlockOf(long.message, 10)!;
    const full = renderedBlockOf(long.message)!;
    expect(capped.block).toBe(renderMessageBlock(long.message, 10));
    expect(full.block).toBe(renderMessageBlock(long.message));
    expect(capped.block).not.toBe(full.block);
    expect(capped.hash).not.toBe(full.hash);
  });

  it("renders anything else afresh: an engine's own objects, even frozen ones, may change between turns", () => {
    const engines = watched("engine text", false);
    renderUnits([engines.message]);
    renderUnits([engines.message]);
    expect(engines.reads()).toBe(2);

    const shallow = Object.freeze({ role: "user", content: [{ type: "text", text: "before" }], timestamp: 1 }) as unknown as AgentMessage & {
      content: Array<{ type: string; text: string }>;
    };
    const before = renderUnits([shallow])[0]!;
    shallow.content[0] = { type: "text", text: "after" };
    const after = renderUnits([shallow])[0]!;
    expect(after.block).toBe("[user]\nafter");
    expect(after.unit).not.toBe(before.unit);

    // A message rendering to nothing is cached as nothing, and stays skipped.
    const empty = markDeepFrozen(deepFreeze({ role: "assistant", content: [], timestamp: 1 })) as unknown as AgentMessage;
    expect(renderUnits([empty, empty])).toEqual([]);
  });

  it("renders an engine's own message once per projection when the projection passes one memo", () => {
    const rebuilt = watched("rebuilt every turn", false);
    const memo = renderingMemo();
    const view = renderUnits([rebuilt.message], undefined, memo);
    const missing = renderUnits([rebuilt.message], undefined, memo);
    expect(rebuilt.reads()).toBe(1);
    expect(missing).toEqual(view);
    // The next projection brings a fresh memo: the message is rendered again (it may have changed in between).
    renderUnits([rebuilt.message], undefined, renderingMemo());
    expect(rebuilt.reads()).toBe(2);
    // A memo made for another part cap is not consulted.
    expect(renderUnits([rebuilt.message], 5, memo)[0]!.block).toMatch(/^\[user\]\n\[truncated \d+ chars\]/);
    expect(rebuilt.reads()).toBe(3);
  });
});
