/** The view's units kept from turn to turn: exactly renderUnits(view), rendering only what the view gained. */
import { describe, expect, it } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { renderUnits, viewUnits } from "../../src/projection/entries.js";
import { deepFreeze, markDeepFrozen } from "../../src/transcript/freeze.js";
import { watchedMessage } from "../helpers/watched-message.js";

const own = (text: string): AgentMessage => markDeepFrozen(deepFreeze({ role: "user", content: text, timestamp: 1 })) as unknown as AgentMessage;
const ids = (units: ReadonlyArray<{ id: string }>) => new Set(units.map((u) => u.id));

describe("viewUnits", () => {
  it("gives renderUnits' units and ids for a view, its extensions, a diverging view and a shorter one", () => {
    const [a, b, c, d, e] = ["alpha", "beta", "gamma", "delta", "epsilon"].map(own);
    // `again` renders like `a`: across the point where the kept view was extended, it is still occurrence #1.
    const again = own("alpha");
    const views: AgentMessage[][] = [[a!, b!], [a!, b!, again, c!], [a!, b!, again, c!, d!], [a!, b!, e!], [a!, b!], [a!], [b!, c!, again, a!]];
    const session = own("the session's first message");
    for (const view of views) {
      const out = viewUnits(view, undefined, undefined, session);
      const expected = renderUnits(view);
      expect(out.units).toEqual(expected);
      expect(out.ids).toEqual(ids(expected));
    }
    expect(viewUnits([a!, b!, again], undefined, undefined, session).units[2]!.id).toMatch(/#1$/);
    expect(viewUnits([], undefined, undefined, session).units).toEqual([]);
    expect(viewUnits([a!, b!]).units).toEqual(renderUnits([a!, b!]));
  });

  it("keeps the units of the view it extends (the same unit objects) and renders only what the view gained", () => {
    const first = watchedMessage("first message of the window", true);
    const rest = Array.from({ length: 4 }, (_, i) => watchedMessage(`message ${i}`, true));
    const view = [first.message, ...rest.map((r) => r.message)];
    const session = own("the session's first message");
    const short = viewUnits(view.slice(0, 3), undefined, undefined, session);
    const reads = () => first.reads() + rest.reduce((n, r) => n + r.reads(), 0);
    const before = reads();
    const grown = viewUnits(view, undefined, undefined, session);
    expect(reads() - before).toBe(2);
    // Not walked again: the kept view's unit objects are reused, where renderUnits makes new ones on every call.
    for (let i = 0; i < 3; i++) expect(grown.units[i]).toBe(short.units[i]);
    expect(renderUnits(view)[0]).not.toBe(short.units[0]);
    expect(grown.units).toEqual(renderUnits(view));
    // Without a key (or with one that is not the history cache's own) nothing is kept.
    const unkeyed = viewUnits(view);
    expect(unkeyed.units[0]).not.toBe(short.units[0]);
    expect(viewUnits(view, undefined, undefined, { role: "user", content: "plain", timestamp: 1 }).units[0]).not.toBe(short.units[0]);
    // A window that moved (another first message) replaces the session's kept view, and is kept in turn.
    const moved = viewUnits(view.slice(1), undefined, undefined, session);
    expect(moved.units).toEqual(renderUnits(view.slice(1)));
    expect(viewUnits(view.slice(1), undefined, undefined, session).units[0]).toBe(moved.units[0]);
  });

  it("renders an engine's own objects afresh: a message of the view that can change is never kept", () => {
    const a = own("kept message");
    const mutable = { role: "user", content: [{ type: "text", text: "before" }], timestamp: 1 } as unknown as AgentMessage & {
      content: Array<{ type: string; text: string }>;
    };
    const session = own("the session's first message");
    expect(viewUnits([a, mutable], undefined, undefined, session).units[1]!.block).toBe("[user]\nbefore");
    mutable.content[0] = { type: "text", text: "after" };
    expect(viewUnits([a, mutable], undefined, undefined, session).units[1]!.block).toBe("[user]\nafter");
    // A view that starts with one.
    const head = watchedMessage("engine's first", false);
    viewUnits([head.message, a], undefined, undefined, session);
    viewUnits([head.message, a], undefined, undefined, session);
    expect(head.reads()).toBe(2);
  });

  it("hands out units a later view does not change", () => {
    const [a, b, c] = ["one", "two", "three"].map(own);
    const session = own("the session's first message");
    const short = viewUnits([a!, b!], undefined, undefined, session);
    const units = [...short.units];
    viewUnits([a!, b!, c!], undefined, undefined, session);
    expect(short.units).toEqual(units);
  });
});
