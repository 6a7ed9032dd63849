import { describe, expect, it } from "vitest";
import type { SessionEntry } from "../../src/transcript/entries.js";
import { deepFreeze } from "../../src/transcript/freeze.js";
import { SKIPPED_ENTRY_TYPE, validateEntry } from "../../src/transcript/validate.js";

const base = { type: "message", id: "a1b2c3d4", parentId: "00000000", timestamp: "2026-01-01T00:00:00.000Z" };

function entry(extra: Record<string, unknown>): SessionEntry {
  return { ...base, ...extra } as SessionEntry;
}

describe("validateEntry", () => {
  it("keeps well-formed entries as they are", () => {
    for (const e of [
      entry({ message: { role: "user", content: "hi", timestamp: 1 } }),
      entry({ message: { role: "assistant", content: [{ type: "text", text: "x" }] } }),
      entry({ parentId: null, message: { role: "toolResult", content: [], toolCallId: "c" } }),
      entry({ type: "custom_message", customType: "codex.plan", content: "p", display: true }),
      entry({ type: "compaction", summary: "s", firstKeptEntryId: "x", tokensBefore: 3 }),
      entry({ type: "branch_summary", fromId: "x", summary: "s" }),
      entry({ type: "model_change", provider: "p" }),
    ]) {
      expect(validateEntry(e)).toEqual({ entry: e });
    }
  });

  // Each of these must be rejected whether the hand-written fast path or zod looks at it.
  const malformed: Array<[string, Record<string, unknown>]> = [
    ["no message", {}],
    ["message null", { message: null }],
    ["message an array", { message: [] }],
    ["role missing", { message: { content: "x" } }],
    ["role a number", { message: { role: 1, content: "x" } }],
    ["role empty", { message: { role: "", content: "x" } }],
    ["content a number", { message: { role: "user", content: 5 } }],
    ["message timestamp a string", { message: { role: "user", content: "x", timestamp: "now" } }],
    ["entry timestamp a number", { timestamp: 5, message: { role: "user", content: "x" } }],
    ["parentId a number", { parentId: 7, message: { role: "user", content: "x" } }],
    ["parentId empty", { parentId: "", message: { role: "user", content: "x" } }],
    ["compaction tokensBefore a string", { type: "compaction", summary: "s", firstKeptEntryId: "x", tokensBefore: "3" }],
    ["custom_message without customType", { type: "custom_message", content: "p" }],
    ["custom_message display a string", { type: "custom_message", customType: "t", content: "p", display: "yes" }],
    ["branch_summary without fromId", { type: "branch_summary", summary: "s" }],
  ];
  for (const [name, extra] of malformed) {
    it(`replaces a malformed entry (${name}) by a chain-only stub with a reason`, () => {
      const r = validateEntry(entry(extra));
      expect(r.invalid).toMatch(/^\w+: /);
      expect(r.entry).toMatchObject({ type: SKIPPED_ENTRY_TYPE, id: base.id, originalType: extra.type ?? "message" });
      // The stub keeps a usable parent link (so the chain behind it stays reachable) and drops an unusable one.
      const expectedParent = "parentId" in extra ? null : base.parentId;
      expect(r.entry.parentId).toBe(expectedParent);
    });
  }

  it("never puts entry content in the reason", () => {
    const r = validateEntry(entry({ message: { role: "user", content: 12345678 } }));
    expect(r.invalid).not.toContain("12345678");
  });
});

describe("deepFreeze", () => {
  it("freezes nested objects and arrays and returns the same value", () => {
    const m = { role: "user", content: [{ type: "text", text: "hi", meta: { n: 1 } }] };
    expect(deepFreeze(m)).toBe(m);
    expect(Object.isFrozen(m.content)).toBe(true);
    expect(Object.isFrozen(m.content[0]!.meta)).toBe(true);
    expect(() => {
      "use strict";
      (m.content[0]!.meta as { n: number }).n = 2;
    }).toThrow(TypeError);
  });
});
