/** What `run` / `chat` print of a result beyond the reply: a recovered turn cut short, images Codex generated. */
import { describe, expect, it } from "vitest";
import { cutTurnNote, imageLine, planBlock, runResultJson } from "../../src/cli/commands/run.js";
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

describe("images Codex generated, in the CLI's output", () => {
  it("a line per saved file; --json carries them only when there were some", () => {
    const images = [{ itemId: "ig_1", path: "/codex-home/images/ig_1.png" }];
    expect(imageLine(images[0]!)).toBe("image: /codex-home/images/ig_1.png");
    const plain = emptyResult("completed", "run-1");
    expect(runResultJson(plain)).not.toHaveProperty("generatedImages");
    expect(runResultJson({ ...plain, generatedImages: images })).toMatchObject({ generatedImages: images });
  });
});

describe("the plan Codex proposed (Plan mode), in the CLI's output", () => {
  it("printed under plan: without trailing blank lines; --json carries it only when there was one", () => {
    expect(planBlock("# Button\n1. Add it\n2. Test it\n\n")).toBe("plan:\n# Button\n1. Add it\n2. Test it");
    const plain = emptyResult("completed", "run-1");
    expect(runResultJson(plain)).not.toHaveProperty("proposedPlan");
    expect(runResultJson({ ...plain, proposedPlan: "1. Add it" })).toMatchObject({ proposedPlan: "1. Add it" });
  });
});
