/**
 * Sidecar files kept next to a session transcript. One place defines them so the mirror, the thread binding,
 * reset and inspection agree on where things live.
 */
export interface SessionSidecarPaths {
  /** The pi session JSONL transcript itself. */
  transcript: string;
  /** Codex thread binding (thread id, fingerprints, projection epoch, injection ledger). */
  binding: string;
  /** Durable record of turns mirrored but not yet finalized (exactly-once finalize across crashes). */
  pendingFinalize: string;
  /** Cross-process per-session lock (a directory created with mkdir, heartbeat in its owner.json: src/transcript/lock.ts). */
  lock: string;
}

/**
 * Sidecar paths for a session file.
 *
 * @example
 * ```ts
 * sessionSidecarPaths("/data/s1.jsonl").binding; // "/data/s1.jsonl.codex-binding.json"
 * ```
 */
export function sessionSidecarPaths(sessionFile: string): SessionSidecarPaths {
  return {
    transcript: sessionFile,
    binding: `${sessionFile}.codex-binding.json`,
    pendingFinalize: `${sessionFile}.codex-pending.json`,
    lock: `${sessionFile}.lock`,
  };
}
