/**
 * Codex's setup warnings (`configWarning`, `deprecationNotice`): read from the notification (zod at the boundary), kept
 * once each, at most MAX_CONFIG_WARNINGS of them. The real binary's warnings: test/integration/config-warnings.test.ts.
 */
import { describe, expect, it } from "vitest";
import { ConfigWarnings, configWarningOf, MAX_CONFIG_WARNINGS, type CodexConfigWarning } from "../../src/codex/config-warnings.js";

const rules: CodexConfigWarning = {
  kind: "config",
  summary: "Error parsing rules; custom rules not applied.",
  details: "failed to parse rules file /h/rules/default.rules: starlark error\n --> /h/rules/default.rules:2:1\n",
  path: "/h/rules/default.rules",
  range: { start: { line: 2, column: 1 }, end: { line: 2, column: 5 } },
};

describe("configWarningOf", () => {
  it("reads a configWarning with its file and range, and a deprecationNotice", () => {
    expect(configWarningOf({ method: "configWarning", params: { ...rules, kind: undefined } })).toEqual(rules);
    expect(configWarningOf({ method: "deprecationNotice", params: { summary: "x is deprecated", details: null } })).toEqual({
      kind: "deprecation",
      summary: "x is deprecated",
    });
    expect(configWarningOf({ method: "configWarning", params: { summary: "Using defaults.", details: null, path: null } })).toEqual({
      kind: "config",
      summary: "Using defaults.",
    });
  });

  it("reads a warning that names no thread as the process's; one for a thread belongs to its turn", () => {
    const budget = "Exceeded skills context budget of 2%.";
    expect(configWarningOf({ method: "warning", params: { threadId: null, message: budget } })).toEqual({ kind: "process", summary: budget });
    expect(configWarningOf({ method: "warning", params: { message: budget } })).toEqual({ kind: "process", summary: budget });
    expect(configWarningOf({ method: "warning", params: { threadId: "t", message: budget } })).toBeUndefined();
  });

  it("is undefined for other methods and for malformed params", () => {
    expect(configWarningOf({ method: "warning", params: { summary: "s" } })).toBeUndefined();
    expect(configWarningOf({ method: "toString", params: { summary: "s" } })).toBeUndefined();
    expect(configWarningOf({ method: "configWarning", params: { details: "no summary" } })).toBeUndefined();
    expect(configWarningOf({ method: "configWarning", params: null })).toBeUndefined();
    expect(configWarningOf({ method: "configWarning", params: { summary: "s", range: { start: 1 } } })).toBeUndefined();
  });
});

describe("ConfigWarnings", () => {
  it("keeps each distinct warning once, first seen first", () => {
    const kept = new ConfigWarnings();
    expect(kept.add({ ...rules })).toBe(true);
    // What a host gets can be neither edited in place nor change the list by being sorted or cleared.
    expect(Object.isFrozen(kept.list()[0])).toBe(true);
    (kept.list() as CodexConfigWarning[]).length = 0;
    expect(kept.list()).toHaveLength(1);
    expect(kept.add({ ...rules })).toBe(false);
    expect(kept.add({ ...rules, path: "/other/rules" })).toBe(true);
    expect(kept.add({ ...rules, kind: "deprecation" })).toBe(true);
    expect(kept.list().map((w) => [w.kind, w.path])).toEqual([
      ["config", "/h/rules/default.rules"],
      ["config", "/other/rules"],
      ["deprecation", "/h/rules/default.rules"],
    ]);
  });

  it(`keeps at most ${MAX_CONFIG_WARNINGS}`, () => {
    const kept = new ConfigWarnings();
    const added = Array.from({ length: MAX_CONFIG_WARNINGS + 5 }, (_, i) => kept.add({ kind: "config", summary: `w${i}` }));
    expect(added.filter(Boolean)).toHaveLength(MAX_CONFIG_WARNINGS);
    expect(kept.list().at(-1)?.summary).toBe(`w${MAX_CONFIG_WARNINGS - 1}`);
  });
});
