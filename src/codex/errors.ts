/** Codes of {@link CodexAppServerError}; callers branch on these, never on messages. */
export type CodexAppServerErrorCode =
  /** The codex binary could not be found or started. */
  | "SPAWN_FAILED"
  /** `initialize` failed or the process died during startup. */
  | "INITIALIZE_FAILED"
  /** The app-server process exited (crash, kill, or EOF) while the request was pending. */
  | "PROCESS_EXITED"
  /** `close()` was called while the request was pending, or a call was made after `close()`. */
  | "CLOSED"
  /** No response arrived within the per-request timeout. */
  | "REQUEST_TIMEOUT"
  /** Codex answered a request with a JSON-RPC error. */
  | "RPC_ERROR"
  /** Codex rejected `turn/start` (the turn never began). */
  | "TURN_START_REJECTED"
  /** `startTurn` was called for a thread that already has a running turn in this client. */
  | "TURN_ALREADY_ACTIVE"
  /** Too many restarts within the crash-loop window. */
  | "CRASH_LOOP"
  /** A caller passed invalid options (zod validation failed). */
  | "INVALID_ARGUMENT"
  /** A response did not have the shape we rely on. */
  | "INVALID_RESPONSE"
  /**
   * The live preflight (`account/read`, before the first thread or turn): the provider needs OpenAI credentials and
   * Codex has no account and no API key. Log in with `npx codex login`, or set `OPENAI_API_KEY`.
   */
  | "AUTH_REQUIRED";

/**
 * The one error type thrown by the Codex app-server client. `code` says what went wrong; `stderrTail` carries the last
 * lines the process wrote to stderr (diagnostics only, never prompt content: codex runs with RUST_LOG=warn).
 *
 * @example
 * ```ts
 * try {
 *   await server.startTurn({ threadId, text: "hi" });
 * } catch (err) {
 *   if (err instanceof CodexAppServerError && err.code === "TURN_START_REJECTED") console.error(err.rpcMessage);
 * }
 * ```
 */
export class CodexAppServerError extends Error {
  readonly code: CodexAppServerErrorCode;
  /** The JSON-RPC method of the request that failed, if any. */
  readonly method?: string;
  /** JSON-RPC error code and message when Codex answered with an error. */
  readonly rpcCode?: number;
  readonly rpcMessage?: string;
  /** Last part of the process's stderr at the time of the failure. */
  readonly stderrTail?: string;
  /** Exit code / signal when the process exited. */
  readonly exitCode?: number | null;
  readonly signal?: string | null;
  /** INVALID_ARGUMENT: the option that was invalid (dotted path, e.g. `sandbox` or `dynamicTools.1.name`). */
  readonly field?: string;

  constructor(
    code: CodexAppServerErrorCode,
    message: string,
    details: {
      method?: string | undefined;
      rpcCode?: number | undefined;
      rpcMessage?: string | undefined;
      stderrTail?: string | undefined;
      exitCode?: number | null | undefined;
      signal?: string | null | undefined;
      field?: string | undefined;
      cause?: unknown;
    } = {},
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "CodexAppServerError";
    this.code = code;
    if (details.method !== undefined) this.method = details.method;
    if (details.rpcCode !== undefined) this.rpcCode = details.rpcCode;
    if (details.rpcMessage !== undefined) this.rpcMessage = details.rpcMessage;
    if (details.stderrTail !== undefined) this.stderrTail = details.stderrTail;
    if (details.exitCode !== undefined) this.exitCode = details.exitCode;
    if (details.signal !== undefined) this.signal = details.signal;
    if (details.field !== undefined) this.field = details.field;
  }
}

/**
 * Throw a {@link CodexAppServerError} with code INVALID_ARGUMENT naming the first bad field of a zod result (for an
 * unknown key, the key itself: `sandboxx`, not the object).
 *
 * @example
 * ```ts
 * const parsed = schema.safeParse(options);
 * if (!parsed.success) invalidArgument("startThread options", parsed.error.issues);
 * ```
 */
export function invalidArgument(
  what: string,
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string; code?: string | undefined; keys?: ReadonlyArray<string> | undefined }>,
): never {
  const issue = issues[0];
  const pathParts = issue ? issue.path.map(String) : [];
  if (issue?.code === "unrecognized_keys" && issue.keys && issue.keys.length > 0) pathParts.push(issue.keys[0]!);
  const field = pathParts.length > 0 ? pathParts.join(".") : "(options)";
  throw new CodexAppServerError("INVALID_ARGUMENT", `invalid ${what}: \`${field}\`: ${issue?.message ?? "invalid"}`, { field });
}
