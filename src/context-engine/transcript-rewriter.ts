/**
 * `runtimeContext.rewriteTranscriptEntries`: the helper OpenClaw's runtime hands engines so they can shrink or redact
 * transcript entries (lossless-claw's transcript GC replaces tool results it has summarized; other engines truncate
 * oversized tool output). The engine decides what is safe to rewrite; the session store does the rewrite
 * (`SessionStore.rewriteEntries`: copy-on-write, atomic).
 *
 * Like OpenClaw's helper it never throws: a refused or failed rewrite resolves `{ changed: false, reason }`, and the
 * session is left as it was. Who holds the session lock is decided by the caller:
 * - `"held"`: the call that receives the helper runs under the turn's (or recovery's) lock (finalize, foreground
 *   maintenance, the accordion compaction). A call after that lock was released is refused (`SESSION_LOCK_COMPROMISED`).
 * - `"acquire"`: background maintenance runs after the turn released the lock; each rewrite takes the lock (waiting for
 *   a turn that holds it) and releases it.
 * - `"ambient"`: the call may run while the caller holds the store's lock or after (the host-level compaction): a
 *   rewrite while `heldLock()` returns the caller's lock uses it, a later one takes the lock.
 */
import type { Logger } from "pino";
import { errorLabel } from "../log/error-label.js";
import type { SessionStore, SessionStoreLock, TranscriptRewriteRequest, TranscriptRewriteResult } from "../store/session-store.js";

/** The engine-facing signature (OpenClaw's `ContextEngineRuntimeContext["rewriteTranscriptEntries"]`). */
export type RewriteTranscriptEntries = (request: TranscriptRewriteRequest) => Promise<TranscriptRewriteResult>;

/** Options of {@link createTranscriptRewriter}. */
export interface TranscriptRewriterOptions {
  store: SessionStore;
  logger: Logger;
  /** Ids for the log lines (session, engine). */
  ids: Record<string, string>;
  lock: "held" | "acquire" | "ambient";
  /** `"acquire"` / `"ambient"`: give up waiting for the lock after this long (default 60 s). */
  lockTimeoutMs?: number | undefined;
  /** `"ambient"`: the lock the caller holds on `store` right now, undefined once it let go of it. */
  heldLock?: (() => SessionStoreLock | undefined) | undefined;
}

/**
 * Build the `rewriteTranscriptEntries` helper for one engine call.
 *
 * @example
 * ```ts
 * const rewriteTranscriptEntries = createTranscriptRewriter({ store, logger, ids: { sessionId }, lock: "held" });
 * await engine.maintain({ sessionId, sessionFile, runtimeContext: { rewriteTranscriptEntries } });
 * ```
 */
export function createTranscriptRewriter(opts: TranscriptRewriterOptions): RewriteTranscriptEntries {
  const { store, logger, ids } = opts;
  return async (request) => {
    const requested = Array.isArray((request as { replacements?: unknown } | undefined)?.replacements) ? request.replacements.length : 0;
    try {
      const result =
        opts.lock === "held"
          ? await store.rewriteEntries(request)
          : opts.lock === "ambient" && opts.heldLock?.() !== undefined
            ? await store.rewriteEntries(request)
            : await rewriteUnderOwnLock(opts, request);
      logger.info(
        { ...ids, event: "transcript rewrite", requested, changed: result.changed, rewrittenEntries: result.rewrittenEntries, bytesFreed: result.bytesFreed, ...(result.reason ? { reason: result.reason } : {}) },
        "engine transcript rewrite",
      );
      return result;
    } catch (error) {
      const reason = errorLabel(error);
      logger.warn({ ...ids, event: "transcript rewrite refused", requested, err: reason }, "engine transcript rewrite refused");
      return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: error instanceof Error ? error.message : reason };
    }
  };
}

async function rewriteUnderOwnLock(opts: TranscriptRewriterOptions, request: TranscriptRewriteRequest): Promise<TranscriptRewriteResult> {
  const lock = await opts.store.acquireLock({ logger: opts.logger, timeoutMs: opts.lockTimeoutMs ?? 60_000 });
  try {
    return await opts.store.rewriteEntries(request);
  } finally {
    await lock.release();
  }
}
