/**
 * Which loaded threads a client releases (`thread/unsubscribe`), and which of the threads it no longer holds it forgets,
 * so one long-running app-server serving many sessions does not keep every thread it ever touched in memory (nor this
 * client a record of each).
 *
 * Observed with codex 0.169: a loaded thread stays in the app-server's memory until its last subscriber unsubscribes
 * (about 1 MiB of RSS per short thread; 150 threads of two turns took the process from 139 to 299 MiB, with or without
 * an unsubscribe 200 ms later), and Codex unloads it 30-60 s after the unsubscribe (`thread/closed`). A released thread
 * is resumed from its rollout by the next turn (one `thread/resume`), with its whole history.
 */

/** A thread the client holds loaded, as the policy sees it. */
export interface LoadedThread {
  threadId: string;
  /** When a thread operation or turn last used it (ms, any monotonic clock). */
  lastUsedMs: number;
  /** A turn or compaction runs on it: never released. */
  busy: boolean;
}

/** The release policy (see `CodexAppServerOptions.releaseIdleThreadsAfterMs` and `maxLoadedThreads`). */
export interface ThreadReleasePolicy {
  /** Release a thread unused for this long. 0: never for idleness. */
  idleMs: number;
  /** Beyond this many loaded threads, release the least recently used ones. 0: no limit. */
  maxLoaded: number;
  /** A thread used more recently than this is never released for the limit (an attempt resumes it, then starts its turn). */
  graceMs: number;
}

/** The grace before a thread may be released for the limit: 30 s, or the idle time when shorter. */
export function releaseGraceMs(idleMs: number): number {
  return idleMs > 0 ? Math.min(30_000, idleMs) : 30_000;
}

/**
 * The threads to release now: every idle one unused for `idleMs`, then, while more than `maxLoaded` stay loaded, the
 * least recently used idle ones unused for `graceMs`. A busy thread is never released.
 *
 * @example
 * ```ts
 * threadsToRelease([{ threadId: "a", lastUsedMs: 0, busy: false }], 700_000, { idleMs: 600_000, maxLoaded: 0, graceMs: 30_000 }); // ["a"]
 * ```
 */
export function threadsToRelease(threads: readonly LoadedThread[], nowMs: number, policy: ThreadReleasePolicy): string[] {
  const idleFor = (t: LoadedThread) => nowMs - t.lastUsedMs;
  const released = new Set<string>();
  if (policy.idleMs > 0) for (const t of threads) if (!t.busy && idleFor(t) >= policy.idleMs) released.add(t.threadId);
  if (policy.maxLoaded > 0) {
    let loaded = threads.length - released.size;
    const oldestFirst = threads.filter((t) => !t.busy && !released.has(t.threadId) && idleFor(t) >= policy.graceMs).sort((a, b) => a.lastUsedMs - b.lastUsedMs);
    for (const t of oldestFirst) {
      if (loaded <= policy.maxLoaded) break;
      released.add(t.threadId);
      loaded--;
    }
  }
  return [...released];
}

/** A thread the client remembers but does not hold loaded (released, unloaded by Codex, or loaded by an exited process). */
export interface RememberedThread {
  threadId: string;
  /** When a thread operation or turn last used it (ms, any monotonic clock). */
  lastUsedMs: number;
  /**
   * Released by this client in the running app-server and not reported closed yet: Codex may still hold it, and a turn
   * started on it without a resume would get no notifications (the client unsubscribed). Never forgotten.
   */
  mayStillBeLoaded: boolean;
}

/**
 * The remembered threads to forget now: while more than `maxRemembered` are remembered, the least recently used ones
 * Codex no longer holds. A forgotten thread is resumed like any thread this client never saw (`resumeThread`); what
 * the client kept of it (its settings, with the developer instructions it was last given, and its tool handlers) can
 * then be collected. `maxRemembered` 0: no limit.
 *
 * @example
 * ```ts
 * threadsToForget([{ threadId: "a", lastUsedMs: 1, mayStillBeLoaded: false }, { threadId: "b", lastUsedMs: 2, mayStillBeLoaded: false }], 1); // ["a"]
 * ```
 */
export function threadsToForget(threads: readonly RememberedThread[], maxRemembered: number): string[] {
  if (maxRemembered <= 0 || threads.length <= maxRemembered) return [];
  const oldestFirst = threads.filter((t) => !t.mayStillBeLoaded).sort((a, b) => a.lastUsedMs - b.lastUsedMs);
  return oldestFirst.slice(0, threads.length - maxRemembered).map((t) => t.threadId);
}
