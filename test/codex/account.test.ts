/** The live preflight's rule and its parsing (src/codex/account.ts); the real Codex answer: test/integration/live-preflight. */
import { describe, expect, it } from "vitest";
import { accountMissing, apiKeyInChildEnv, authRequiredError, parseAccountRead } from "../../src/codex/account.js";
import { CodexAppServerError } from "../../src/codex/errors.js";

describe("account preflight rule", () => {
  it("parses account/read as Codex 0.171 answers it", () => {
    expect(parseAccountRead({ account: null, userId: null, requiresOpenaiAuth: true, workspaceRouting: null }, false)).toEqual({
      accountType: null,
      requiresOpenaiAuth: true,
      apiKeyInEnv: false,
    });
    expect(parseAccountRead({ account: { type: "chatgpt", email: null, planType: "plus", workspaceName: null }, requiresOpenaiAuth: true }, true).accountType).toBe("chatgpt");
    expect(() => parseAccountRead({ account: null }, false)).toThrow(CodexAppServerError);
  });

  it("fails only when the provider needs OpenAI credentials and there is neither an account nor a key", () => {
    expect(accountMissing({ accountType: null, requiresOpenaiAuth: true, apiKeyInEnv: false })).toBe(true);
    expect(accountMissing({ accountType: "apiKey", requiresOpenaiAuth: true, apiKeyInEnv: false })).toBe(false);
    expect(accountMissing({ accountType: null, requiresOpenaiAuth: true, apiKeyInEnv: true })).toBe(false);
    // A custom provider with its own key variable.
    expect(accountMissing({ accountType: null, requiresOpenaiAuth: false, apiKeyInEnv: false })).toBe(false);
  });

  it("finds a key in the spawn env or in a passed-through, non-empty parent variable", () => {
    expect(apiKeyInChildEnv({ env: { OPENAI_API_KEY: "sk-1" }, parent: {} })).toBe(true);
    expect(apiKeyInChildEnv({ passEnv: ["OPENAI_API_KEY"], parent: { OPENAI_API_KEY: "sk-1" } })).toBe(true);
    expect(apiKeyInChildEnv({ passEnv: ["OPENAI_API_KEY"], parent: { OPENAI_API_KEY: "" } })).toBe(false);
    // Set in the parent but not passed: Codex would not see it.
    expect(apiKeyInChildEnv({ passEnv: [], parent: { OPENAI_API_KEY: "sk-1" } })).toBe(false);
  });

  it("the error names the login command, the key variable and the home", () => {
    const err = authRequiredError("/home/ada/.codex");
    expect(err.code).toBe("AUTH_REQUIRED");
    expect(err.message).toContain("npx codex login");
    expect(err.message).toContain("OPENAI_API_KEY");
    expect(err.message).toContain("/home/ada/.codex");
  });
});
