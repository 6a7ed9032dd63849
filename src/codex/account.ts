/**
 * The live preflight: before the first turn on a live app-server, Codex is asked for its account state
 * (`account/read`, answered from CODEX_HOME without any network), so that a setup with no login and no API key fails
 * in milliseconds with {@link CodexAppServerError} `AUTH_REQUIRED` instead of a turn that retries for minutes and ends
 * as `retryWithoutProgress` without a word about login. Offline settings (the fake provider) never ask.
 */
import { z } from "zod";
import { CodexAppServerError } from "./errors.js";

/** Environment variables that give Codex an API key without a login. */
export const API_KEY_ENV_VARS: readonly string[] = ["OPENAI_API_KEY", "CODEX_API_KEY"];

/** What the user runs to log in (the message of an `AUTH_REQUIRED` error names it). */
export const LOGIN_COMMAND = "npx codex login";

/** The part of `account/read`'s answer (src/codex/protocol/v2/GetAccountResponse.ts) the preflight relies on. */
const accountReadSchema = z
  .object({
    account: z.object({ type: z.string() }).passthrough().nullable(),
    requiresOpenaiAuth: z.boolean(),
  })
  .passthrough();

/** Codex's account state as `account/read` reports it, and whether the child has an API key in its environment. */
export interface CodexAccountState {
  /** The account Codex is logged in with (`apiKey`, `chatgpt`, `amazonBedrock`, `gcp`), or null when none. */
  accountType: string | null;
  /** The configured model provider needs OpenAI credentials (false for a custom provider with its own key). */
  requiresOpenaiAuth: boolean;
  /** An API key variable ({@link API_KEY_ENV_VARS}) is set, non-empty, in the app-server's environment. */
  apiKeyInEnv: boolean;
}

/**
 * Parse `account/read`'s answer; a shape we do not know throws INVALID_RESPONSE.
 *
 * @example
 * ```ts
 * parseAccountRead({ account: null, requiresOpenaiAuth: true, userId: null, workspaceRouting: null }, false);
 * // { accountType: null, requiresOpenaiAuth: true, apiKeyInEnv: false }
 * ```
 */
export function parseAccountRead(raw: unknown, apiKeyInEnv: boolean): CodexAccountState {
  const parsed = accountReadSchema.safeParse(raw);
  if (!parsed.success) throw new CodexAppServerError("INVALID_RESPONSE", `account/read: unexpected answer (${parsed.error.issues[0]?.message ?? "invalid"})`, { method: "account/read" });
  return { accountType: parsed.data.account?.type ?? null, requiresOpenaiAuth: parsed.data.requiresOpenaiAuth, apiKeyInEnv };
}

/**
 * Whether an API key variable is set (non-empty) in the environment the app-server gets: `env` (the spawn option)
 * first, then the `passEnv` names read from `parent`.
 *
 * @example
 * ```ts
 * apiKeyInChildEnv({ env: {}, passEnv: ["OPENAI_API_KEY"], parent: { OPENAI_API_KEY: "sk-..." } }); // true
 * ```
 */
export function apiKeyInChildEnv(o: { env?: Record<string, string> | undefined; passEnv?: readonly string[] | undefined; parent: NodeJS.ProcessEnv }): boolean {
  return API_KEY_ENV_VARS.some((name) => {
    const value = o.env?.[name] ?? (o.passEnv?.includes(name) ? o.parent[name] : undefined);
    return value !== undefined && value !== "";
  });
}

/**
 * The rule of the preflight: a provider that needs OpenAI credentials, no account, and no API key cannot run a turn.
 *
 * @example
 * ```ts
 * accountMissing({ accountType: null, requiresOpenaiAuth: true, apiKeyInEnv: false }); // true
 * accountMissing({ accountType: "chatgpt", requiresOpenaiAuth: true, apiKeyInEnv: false }); // false
 * ```
 */
export function accountMissing(state: CodexAccountState): boolean {
  return state.requiresOpenaiAuth && state.accountType === null && !state.apiKeyInEnv;
}

/**
 * The `AUTH_REQUIRED` error of a Codex home with no account and no key: it names `npx codex login` and
 * `OPENAI_API_KEY`, and the CODEX_HOME that was read.
 *
 * @example
 * ```ts
 * throw authRequiredError("/home/ada/.codex");
 * ```
 */
export function authRequiredError(codexHome: string): CodexAppServerError {
  return new CodexAppServerError(
    "AUTH_REQUIRED",
    `Codex has no account and no API key (CODEX_HOME ${codexHome}): run \`${LOGIN_COMMAND}\` once, or set OPENAI_API_KEY (and pass it through: passEnv ["OPENAI_API_KEY"])`,
    { method: "account/read" },
  );
}
