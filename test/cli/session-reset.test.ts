/** `/new` and `/reset` as OpenClaw's reset triggers: the command alone or followed by the fresh session's first prompt. */
import { describe, expect, it } from "vitest";
import { sessionResetCommand } from "../../src/cli/session-reset.js";

describe("sessionResetCommand", () => {
  it("recognises /new and /reset, with the rest of the line as the first prompt; nothing else", () => {
    expect(sessionResetCommand("/new")).toEqual({ action: "new", rest: "" });
    expect(sessionResetCommand("  /reset  ")).toEqual({ action: "reset", rest: "" });
    expect(sessionResetCommand("/new let's start over\nwith two lines")).toEqual({ action: "new", rest: "let's start over\nwith two lines" });
    for (const line of ["/newsletter", "/resets", "new", "please /new", "/lcm status", "/New"]) expect(sessionResetCommand(line)).toBeUndefined();
  });
});
