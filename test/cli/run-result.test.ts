/** What `run` / `chat` print of a result that first recovered a turn an earlier attempt left in flight. */
import { describe, expect, it } from "vitest";
import { cutTurnNote, runResultJson } from "../../src/cli/commands/run.js";
import { emptyResult } from "../../src/turn/result.js";

describe("a recovered turn cut short in the CLI's output", () => {
  it("the text note names the turn, Codex's status and the message count; --json carries the field only when there was one", () => {
    const cut = { turnId: "turn-7", codexStatus: "interrupted", messages: 3 };
    expect(cutTurnNote(cut)).toBe("note: an earlier turn (turn-7) was cut short (interrupted) and recovered from Codex's thread: 3 messages");
    const plain = emptyResult("completed", "run-1");
    expect(runResultJson(plain)).not.toHaveProperty("cutTurnRecovered");
    expect(runResultJson({ ...plain, cutTurnRecovered: cut })).toMatchObject({ status: "completed", cutTurnRecovered: cut });
  });
});
