/** Codes of {@link SessionFileError}; callers branch on these, never on messages. */
export type SessionFileErrorCode =
  /** The session path names a directory, not a file. */
  | "SESSION_PATH_IS_DIRECTORY"
  /** The session file (or a sidecar) exists but cannot be read (permissions, a parent that is a file, a dangling link). */
  | "SESSION_UNREADABLE"
  /** The session path resolves (after symlinks and `..`) outside the configured `sessionRoot`. */
  | "SESSION_OUTSIDE_ROOT"
  /** The first line is not a pi session header (`{"type":"session","id":...}`). */
  | "SESSION_HEADER_INVALID"
  /**
   * The header's version is one we must not append to (older than 3: pi migrates by rewriting; newer than 3: unknown).
   * The session store's `readHistory` throws it, so a turn fails before the model is called.
   */
  | "SESSION_VERSION_UNSUPPORTED"
  /** The transcript's header names another session id than the turn's `sessionId`; nothing was appended. */
  | "SESSION_ID_MISMATCH"
  /** Writing, fsyncing or repairing the transcript failed. */
  | "SESSION_WRITE_FAILED"
  /** The pending-finalize sidecar exists but is not valid JSON of the expected shape. */
  | "SESSION_PENDING_INVALID"
  /**
   * A sidecar (the pending-finalize record, the thread binding) is of a format version this version does not read:
   * written by a newer version of the library (e.g. before a rollback). Nothing is moved or changed; the turn fails.
   */
  | "SESSION_SIDECAR_VERSION_UNSUPPORTED"
  /** The session lock could not be acquired within `timeoutMs`. */
  | "SESSION_LOCK_TIMEOUT"
  /** Waiting for the session lock was aborted through the caller's signal. */
  | "SESSION_LOCK_ABORTED"
  /** `withSessionLock` was called for a session whose lock the current async context already holds (not re-entrant). */
  | "SESSION_LOCK_REENTRANT"
  /**
   * The session lock is not held any more: its directory or owner record was removed or replaced while held (or the
   * handle was already released). The holder's `signal` aborts with this error; `assertHeld()` throws it.
   */
  | "SESSION_LOCK_COMPROMISED"
  /** A caller passed invalid arguments (zod validation failed). */
  | "SESSION_INVALID_ARGUMENT";

/**
 * The one error type thrown by `src/transcript/*`. The message always names the path involved.
 *
 * @example
 * ```ts
 * try {
 *   await readSessionHistory("/data/s1.jsonl", { sessionRoot: "/data" });
 * } catch (err) {
 *   if (err instanceof SessionFileError && err.code === "SESSION_OUTSIDE_ROOT") console.error(err.path);
 * }
 * ```
 */
export class SessionFileError extends Error {
  readonly code: SessionFileErrorCode;
  /** The path the failure is about. */
  readonly path: string;

  constructor(code: SessionFileErrorCode, path: string, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "SessionFileError";
    this.code = code;
    this.path = path;
  }
}
