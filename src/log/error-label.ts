/**
 * How errors appear in logs: the class and the code, never the message (a model or engine error message can echo
 * request content or transcript text).
 */

/** A string `code` property of an error, if it has one. */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/**
 * For logs: `Name:CODE`, or just the name.
 *
 * @example
 * ```ts
 * logger.warn({ event: "binding write failed", err: errorLabel(error) }); // err: "SessionFileError:SESSION_WRITE_FAILED"
 * ```
 */
export function errorLabel(error: unknown): string {
  const name = error instanceof Error ? error.name : typeof error;
  const code = errorCode(error);
  return code ? `${name}:${code}` : name;
}
