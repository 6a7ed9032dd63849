/** The host's llm policy for `runtime.llm.complete` (OpenClaw's plugins.entries.<id>.llm). */
import { describe, expect, it } from "vitest";
import { DEFAULT_LLM_POLICY, llmPolicyRefusal } from "../../src/openclaw/llm.js";

describe("llmPolicyRefusal", () => {
  it("never refuses a request that names no model, the default, or the host's model", () => {
    const closed = { allowModelOverride: false, allowedModels: [] };
    for (const ref of [undefined, "", "default", "codex/default", "gpt-host", "codex/gpt-host"]) {
      expect(llmPolicyRefusal(closed, ref, "gpt-host"), String(ref)).toBeUndefined();
    }
    expect(llmPolicyRefusal(closed, "gpt-other", "gpt-host")).toBe("model overrides are not allowed (allowModelOverride is false; asked for gpt-other)");
  });

  it("matches allowedModels by the ref as given, the bare name, or codex/<name>; '*' allows any", () => {
    const policy = { allowModelOverride: true, allowedModels: ["codex/gpt-small", "o3"] };
    expect(llmPolicyRefusal(policy, "gpt-small", undefined)).toBeUndefined();
    expect(llmPolicyRefusal(policy, "codex/o3", undefined)).toBeUndefined();
    expect(llmPolicyRefusal(policy, "openai/gpt-large", undefined)).toBe("model openai/gpt-large is not in allowedModels (codex/gpt-small, o3)");
    expect(llmPolicyRefusal({ allowModelOverride: true, allowedModels: [] }, "o3", undefined)).toBe("model o3 is not in allowedModels (none)");
    expect(llmPolicyRefusal(DEFAULT_LLM_POLICY, "anything/at-all", "gpt-host")).toBeUndefined();
  });
});
