/** Codes of {@link CompactionError}; callers branch on these, never on messages. */
export type CompactionErrorCode =
  /** `runCodexCompaction` / `runAccordionCompaction` options failed validation. */
  | "INVALID_COMPACTION_PARAMS"
  /** The accordion configuration failed validation. */
  | "INVALID_ACCORDION_CONFIG";

/**
 * The error thrown by the compaction entry points for invalid input. `field` names the offending option and the
 * message repeats it, e.g. ``invalid compaction parameter `trigger`: ...``.
 *
 * @example
 * ```ts
 * try {
 *   parseAccordionConfig({ compactionTargetFraction: 0.01 });
 * } catch (err) {
 *   if (err instanceof CompactionError && err.code === "INVALID_ACCORDION_CONFIG") console.error(err.field);
 * }
 * ```
 */
export class CompactionError extends Error {
  readonly code: CompactionErrorCode;
  readonly field: string;

  constructor(code: CompactionErrorCode, field: string, message: string) {
    super(message);
    this.name = "CompactionError";
    this.code = code;
    this.field = field;
  }
}

/** The first zod issue as `field` + message (the path joined with dots, or `fallback` for a top-level issue). */
export function firstIssue(
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>,
  fallback: string,
): { field: string; message: string } {
  const issue = issues[0];
  const field = issue && issue.path.length > 0 ? issue.path.map(String).join(".") : fallback;
  return { field, message: issue?.message ?? "invalid" };
}
