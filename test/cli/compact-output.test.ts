/** `compact`'s text output: measured figures (not the engine's target) and a failed native compaction shown. */
import { describe, expect, it } from "vitest";
import { compactTextLines } from "../../src/cli/commands/compact.js";

const base = {
  ok: true,
  compacted: true,
  primary: "engine" as const,
  outcomes: { engineCompact: "ran", maintenance: "ran", bindingMark: "marked" },
  trace: [],
  warnings: [],
};

describe("compact text output", () => {
  it("shows the context measured before and after, and the engine's figures as the engine's", () => {
    const lines = compactTextLines(
      { ...base, native: { ok: true }, result: { tokensBefore: 9000, tokensAfter: 3150, details: {} } },
      { messages: 40, estimatedTokens: 9100 },
      { messages: 6, estimatedTokens: 2400 },
    );
    expect(lines).toContain("context (measured from the transcript): 40 messages, ~9100 tokens -> 6 messages, ~2400 tokens");
    expect(lines).toContain("engine reported: tokensBefore=9000 tokensAfter=3150");
    expect(lines.join("\n")).not.toContain("native");
  });

  it("shows a native compaction that failed", () => {
    const lines = compactTextLines({ ...base, native: { ok: false, reason: "thread not loaded" } }, { messages: 2, estimatedTokens: 50 }, { messages: 2, estimatedTokens: 50 });
    expect(lines).toContain("codex native compaction failed: thread not loaded");
  });
});
