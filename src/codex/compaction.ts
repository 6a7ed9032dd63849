/**
 * Native manual compaction (`thread/compact/start`): Codex runs it as its own turn; we wait, bounded, for its
 * `contextCompaction` item and the end of that turn. One compaction per thread at a time; turns wait for it.
 */
import type { Logger } from "pino";
import { z } from "zod";
import { CodexAppServerError, invalidArgument } from "./errors.js";
import type { IncomingNotification } from "./schemas.js";
import { defined } from "./thread-params.js";
import { timeoutMsSchema } from "./timeouts.js";
import { deferred, type Deferred } from "./turn-run.js";

export interface CompactThreadResult {
  ok: boolean;
  reason?: string | undefined;
  threadId: string;
  /** The compaction turn's id (manual compaction runs as its own turn). */
  turnId?: string | undefined;
  /** The `contextCompaction` item id. */
  itemId?: string | undefined;
}

type WatchOutcome = { status: string; error?: string | undefined } | { status: "exited"; error: string };

interface CompactionWatch {
  threadId: string;
  turnId?: string | undefined;
  itemId?: string | undefined;
  itemCompleted: boolean;
  done: Deferred<WatchOutcome>;
}

/** What compaction needs from the client. */
export interface CompactionDeps {
  logger: Logger;
  rpcRequest(method: "thread/compact/start", params: unknown): Promise<unknown>;
  ensureAlive(): Promise<void>;
  turnRunning(threadId: string): boolean;
  /** Make sure Codex holds the thread; true when it was resumed only for this compaction (see `ThreadRegistry`). */
  loadForCompaction(threadId: string): Promise<boolean>;
  /** Release a thread resumed only for a compaction, once it is done. */
  releaseUnrecorded(threadId: string): void;
}

const compactOptionsSchema = z.object({ threadId: z.string().min(1), timeoutMs: timeoutMsSchema.default(60_000) }).strict();

/**
 * @example
 * ```ts
 * const compactions = new CompactionRunner(deps);
 * const r = await compactions.compact({ threadId, timeoutMs: 30_000 });
 * ```
 */
export class CompactionRunner {
  private readonly watches = new Map<string, CompactionWatch>();

  constructor(private readonly deps: CompactionDeps) {}

  /** A compaction runs on the thread. */
  running(threadId: string): boolean {
    return this.watches.has(threadId);
  }

  /** Resolves when no compaction is running on the thread. */
  async idle(threadId: string): Promise<void> {
    const w = this.watches.get(threadId);
    if (w) await w.done.promise;
  }

  /** See `CodexAppServer.compactThread`. */
  async compact(options: { threadId: string; timeoutMs?: number | undefined }): Promise<CompactThreadResult> {
    const parsed = compactOptionsSchema.safeParse(options);
    if (!parsed.success) invalidArgument("compactThread options", parsed.error.issues);
    const { threadId, timeoutMs } = parsed.data;
    await this.deps.ensureAlive();
    if (this.deps.turnRunning(threadId)) return { ok: false, reason: "a turn is running on this thread", threadId };
    await this.idle(threadId);
    let loadedForThis: boolean;
    try {
      loadedForThis = await this.deps.loadForCompaction(threadId);
    } catch (err) {
      // A thread Codex will not load (no rollout in this CODEX_HOME): nothing to compact, as when it refuses the
      // compaction itself. Anything else (the process died, the client closed) still throws.
      if (err instanceof CodexAppServerError && err.code === "RPC_ERROR") return { ok: false, reason: err.rpcMessage ?? err.message, threadId };
      throw err;
    }
    const watch: CompactionWatch = { threadId, itemCompleted: false, done: deferred() };
    this.watches.set(threadId, watch);
    try {
      return await this.run(watch, timeoutMs);
    } finally {
      if (this.watches.get(threadId) === watch) this.watches.delete(threadId);
      watch.done.resolve({ status: "abandoned" });
      if (loadedForThis) this.deps.releaseUnrecorded(threadId);
    }
  }

  private async run(watch: CompactionWatch, timeoutMs: number): Promise<CompactThreadResult> {
    const { threadId } = watch;
    const result = (ok: boolean, reason?: string): CompactThreadResult =>
      defined({ ok, reason, threadId, turnId: watch.turnId, itemId: watch.itemId });
    try {
      await this.deps.rpcRequest("thread/compact/start", { threadId });
    } catch (err) {
      return result(false, err instanceof CodexAppServerError ? (err.rpcMessage ?? err.message) : String(err));
    }
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      watch.done.promise,
      new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), timeoutMs))),
    ]).finally(() => clearTimeout(timer));
    if (outcome === "timeout") return result(false, `compaction did not finish within ${timeoutMs} ms`);
    if (outcome.status === "exited") return result(false, outcome.error);
    if (outcome.status !== "completed") return result(false, outcome.error ?? `compaction turn ${outcome.status}`);
    if (!watch.itemCompleted) return result(false, "compaction turn completed without a contextCompaction item");
    this.deps.logger.info({ event: "codex.compaction.completed", threadId, turnId: watch.turnId, itemId: watch.itemId }, "manual compaction done");
    return result(true);
  }

  /** Feed a notification of the thread. */
  onNotification(threadId: string, n: IncomingNotification): void {
    const watch = this.watches.get(threadId);
    if (!watch || !n.consumed) return;
    switch (n.method) {
      case "turn/started":
        watch.turnId ??= n.params.turn.id;
        break;
      case "item/started":
      case "item/completed":
        if (watch.turnId !== undefined && n.params.turnId !== watch.turnId) return;
        watch.turnId ??= n.params.turnId;
        if (n.params.item.type === "contextCompaction") {
          watch.itemId = n.params.item.id;
          if (n.method === "item/completed") watch.itemCompleted = true;
        }
        break;
      case "turn/completed":
        if (watch.turnId !== undefined && n.params.turn.id !== watch.turnId) return;
        watch.turnId ??= n.params.turn.id;
        watch.done.resolve(defined({ status: n.params.turn.status, error: n.params.turn.error?.message }) as WatchOutcome);
        break;
      default:
        break;
    }
  }

  /** The process exited: every waiting compaction ends with `message`. */
  failAll(message: string): void {
    for (const watch of this.watches.values()) watch.done.resolve({ status: "exited", error: message });
  }
}
