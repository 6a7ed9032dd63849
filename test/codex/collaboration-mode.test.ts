/** `turn/start`'s collaboration mode (src/codex/app-server.ts): the turn's model goes in its settings; none is an error. */
import { describe, expect, it } from "vitest";
import { collaborationModeFor } from "../../src/codex/app-server.js";
import { CodexAppServerError } from "../../src/codex/errors.js";

describe("collaborationModeFor", () => {
  it("names the mode with the turn's model and effort", () => {
    expect(collaborationModeFor("plan", "fake-model", "high")).toEqual({ mode: "plan", settings: { model: "fake-model", reasoning_effort: "high", developer_instructions: null } });
    expect(collaborationModeFor("default", "m", undefined).settings.reasoning_effort).toBeNull();
  });

  it("without a known model: a typed INVALID_ARGUMENT naming collaborationMode", () => {
    let error: unknown;
    try {
      collaborationModeFor("plan", undefined, undefined);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(CodexAppServerError);
    expect(error).toMatchObject({ code: "INVALID_ARGUMENT", field: "collaborationMode" });
    expect((error as Error).message).toContain("collaborationMode needs the turn's model");
  });
});
