import { describe, expect, it } from "vitest";
import { applyBindingPatches, bindingPatch, readBindingLog } from "../../src/transcript/binding-log.js";

describe("binding log format", () => {
  it("readBindingLog: which binding a text holds, and whether the next write may append to it", () => {
    const a = JSON.stringify({ n: 1 });
    const b = JSON.stringify({ n: 2 });
    const bytes = (line: string) => Buffer.byteLength(line) + 1;
    expect(readBindingLog(`${a}\n${b}\n`)).toEqual({ ok: true, json: { n: 2 }, appendable: true, baseBytes: bytes(b) });
    expect(readBindingLog(`${a}\n${b}\n{"n":`)).toEqual({ ok: true, json: { n: 2 }, appendable: false, baseBytes: bytes(b) });
    expect(readBindingLog(`${a}\n{"n":\n`)).toEqual({ ok: true, json: { n: 1 }, appendable: false, baseBytes: bytes(a) });
    expect(readBindingLog(`${JSON.stringify({ n: 3 }, null, 2)}\n`)).toMatchObject({ ok: true, json: { n: 3 }, appendable: false });
    expect(readBindingLog(a)).toMatchObject({ ok: true, json: { n: 1 }, appendable: false });
    expect(readBindingLog(`{"n":`)).toEqual({ ok: false, reason: "not JSON" });
  });

  it("readBindingLog: patch records apply in order to the whole record before them; a torn last one is ignored", () => {
    const base = JSON.stringify({ version: 1, threadId: "t", heldTurnIds: ["a", "b"], ledger: [], turnInFlight: { turnId: "b", prompt: "p" } });
    const p1 = JSON.stringify({ patch: 1, unset: ["turnInFlight"], set: { lastUsage: { totalTokens: 5 } } });
    const p2 = JSON.stringify({ patch: 1, arrays: { heldTurnIds: [1, ["c"]], ledger: [0, ["x:1"]] } });
    const expected = { version: 1, threadId: "t", heldTurnIds: ["b", "c"], ledger: ["x:1"], lastUsage: { totalTokens: 5 } };
    expect(readBindingLog(`${base}\n${p1}\n${p2}\n`)).toEqual({ ok: true, json: expected, appendable: true, baseBytes: Buffer.byteLength(base) + 1 });
    // An OS crash left the last patch half on disk: one write behind.
    expect(readBindingLog(`${base}\n${p1}\n{"patch":1,"arr\u0000\n`)).toMatchObject({ ok: true, json: { heldTurnIds: ["a", "b"], lastUsage: { totalTokens: 5 } }, appendable: false });
    // A whole record after patches starts over: only the patches after it apply, to it.
    const other = JSON.stringify({ version: 1, threadId: "u", heldTurnIds: ["z"], ledger: ["y:2"] });
    expect(readBindingLog(`${base}\n${p1}\n${other}\n${p2}\n`)).toEqual({
      ok: true,
      json: { version: 1, threadId: "u", heldTurnIds: ["c"], ledger: ["y:2", "x:1"] },
      appendable: true,
      baseBytes: Buffer.byteLength(other) + 1,
    });
  });

  it("readBindingLog: patches without a record before them, a malformed patch, one that does not apply, a torn middle line are corrupt", () => {
    const base = JSON.stringify({ version: 1, threadId: "t", heldTurnIds: ["a"], ledger: [] });
    expect(readBindingLog(`${JSON.stringify({ patch: 1 })}\n`)).toEqual({ ok: false, reason: "patch records without a binding before them" });
    expect(readBindingLog(`${base}\n${JSON.stringify({ patch: 2 })}\n`)).toEqual({ ok: false, reason: "patch 1 after the binding: unknown patch version" });
    expect(readBindingLog(`${base}\n${JSON.stringify({ patch: 1, arrays: { heldTurnIds: [2, []] } })}\n`)).toEqual({
      ok: false,
      reason: "patch 1 after the binding: drops 2 of 1 heldTurnIds",
    });
    expect(readBindingLog(`${base}\n${JSON.stringify({ patch: 1, arrays: { threadId: [0, []] } })}\n`)).toEqual({
      ok: false,
      reason: "patch 1 after the binding: arrays.threadId is not a list field",
    });
    expect(readBindingLog(`${base}\n${JSON.stringify({ patch: 1, set: [] })}\n`)).toEqual({ ok: false, reason: "patch 1 after the binding: set is not an object" });
    expect(readBindingLog(`${base}\ngarbage\n${JSON.stringify({ patch: 1 })}\n`)).toEqual({ ok: false, reason: "not JSON" });
  });

  it("bindingPatch: what changed, as the smallest record the format allows; applying it gives the new binding back", () => {
    const prev = { version: 1, threadId: "t", heldTurnIds: ["a", "b", "c"], ledger: ["x:1"], lastUsage: { totalTokens: 5 }, turnInFlight: { turnId: "c", prompt: "p" } };
    expect(bindingPatch(prev, { ...prev, heldTurnIds: [...prev.heldTurnIds], lastUsage: { totalTokens: 5 } })).toBeUndefined();
    const next = { version: 1, threadId: "t", heldTurnIds: ["b", "c", "d"], ledger: ["y:2"], lastUsage: { totalTokens: 9 }, staleTokens: 3 };
    const patch = bindingPatch(prev, next)!;
    expect(patch).toEqual({
      patch: 1,
      unset: ["turnInFlight"],
      // The ledger does not continue the old one: given whole.
      set: { ledger: ["y:2"], lastUsage: { totalTokens: 9 }, staleTokens: 3 },
      arrays: { heldTurnIds: [1, ["d"]] },
    });
    expect(applyBindingPatches(prev, [JSON.parse(JSON.stringify(patch)) as Record<string, unknown>])).toEqual({ value: next });
    // Emptied lists and fields set to undefined (absent in JSON).
    expect(bindingPatch(prev, { ...prev, heldTurnIds: [], turnInFlight: undefined })).toEqual({ patch: 1, unset: ["turnInFlight"], set: { heldTurnIds: [] } });
    // The base and its arrays are not changed by applying.
    const base = { heldTurnIds: Object.freeze(["a"]) };
    expect(applyBindingPatches(base, [{ patch: 1, arrays: { heldTurnIds: [0, ["b"]] } }, { patch: 1, arrays: { heldTurnIds: [1, ["c"]] } }])).toEqual({ value: { heldTurnIds: ["b", "c"] } });
    expect(base.heldTurnIds).toEqual(["a"]);
  });
});
