/**
 * Host-bound explicit compaction: {@link runCodexCompaction} wired to the session store (its binding, its compaction
 * entries, its lock: the JSONL store of `sessionFile` unless a `store` is given) and the real engine-maintenance
 * lifecycle helper, for users and the CLI (`/compact`).
 */
import { z } from "zod";
import type { Logger } from "pino";
import { runHarnessContextEngineMaintenance } from "../context-engine/lifecycle.js";
import { silentLogger } from "../log/logger.js";
import type { ThreadBinding } from "../transcript/binding.js";
import { createTranscriptRewriter } from "../context-engine/transcript-rewriter.js";
import { createJsonlSessionStore } from "../store/jsonl-store.js";
import type { SessionStore, SessionStoreLock } from "../store/session-store.js";
import { settleCompaction } from "../../machines/compaction.rules.js";
import {
  runCodexCompactionParamsSchema,
  runCodexCompaction,
  compactionEngineFacts,
  createBindingStore,
  type CompactionMaintenanceRunner,
  type CompactionOutput,
} from "./compact-session.js";
import { CompactionError, firstIssue } from "./errors.js";

/** Default bound on the post-compaction `maintain()` call (the turn's default engine-call bound). */
export const DEFAULT_COMPACTION_MAINTENANCE_TIMEOUT_MS = 60_000;

/**
 * Parameters of {@link compactCodexSession}: those of `runCodexCompaction` minus the host wiring it supplies itself
 * (`bindingStore`, `runMaintenance`, `withLock`), plus optional bounds on the lock wait and on maintenance.
 */
export const compactCodexSessionParamsSchema = runCodexCompactionParamsSchema
  .omit({ bindingStore: true, runMaintenance: true, withLock: true, appendCompactionEntry: true, readHistory: true })
  .extend({
    /** The transcript; optional with `store` (then `store.sessionFile`, which it must equal when given). */
    sessionFile: z.string().min(1).optional(),
    /** Where the session is stored (default: the JSONL store of `sessionFile`): binding, compaction entry and lock go through it. */
    store: z
      .custom<SessionStore>(
        (v) => typeof v === "object" && v !== null && typeof (v as SessionStore).address === "string" && typeof (v as SessionStore).acquireLock === "function" && typeof (v as SessionStore).readBinding === "function",
        "store must be a SessionStore",
      )
      .optional(),
    /** Give up waiting for the session lock after this long (default: the lock's own default, 10 minutes). */
    lockTimeoutMs: z.number().int().positive().optional(),
    /** Bound on the post-compaction engine `maintain()` call. */
    maintenanceTimeoutMs: z.number().int().positive().default(DEFAULT_COMPACTION_MAINTENANCE_TIMEOUT_MS),
  })
  .strict();

/** Parameters of {@link compactCodexSession}. */
export type CompactCodexSessionParams = z.input<typeof compactCodexSessionParamsSchema>;

type ParsedCompactSessionParams = Omit<z.output<typeof compactCodexSessionParamsSchema>, "sessionFile"> & { sessionFile: string };

function parseCompactSessionParams(params: unknown): ParsedCompactSessionParams {
  const parsed = compactCodexSessionParamsSchema.safeParse(params);
  if (parsed.success) {
    const { store, sessionFile } = parsed.data;
    if (store === undefined && sessionFile === undefined) {
      throw new CompactionError("INVALID_COMPACTION_PARAMS", "sessionFile", "invalid compaction parameter `sessionFile`: required (or a store)");
    }
    if (store !== undefined && sessionFile !== undefined && sessionFile !== store.sessionFile) {
      throw new CompactionError("INVALID_COMPACTION_PARAMS", "sessionFile", `invalid compaction parameter \`sessionFile\`: names another session than the store (${store.sessionFile})`);
    }
    return { ...parsed.data, sessionFile: sessionFile ?? store!.sessionFile };
  }
  const issue = parsed.error.issues[0];
  if (issue?.code === "unrecognized_keys") {
    const key = issue.keys[0] ?? "(unknown)";
    throw new CompactionError("INVALID_COMPACTION_PARAMS", key, `invalid compaction parameter \`${key}\`: unknown option`);
  }
  const { field, message } = firstIssue(parsed.error.issues, "(params)");
  throw new CompactionError("INVALID_COMPACTION_PARAMS", field, `invalid compaction parameter \`${field}\`: ${message}`);
}

/**
 * Compact a Codex-backed session explicitly, holding the session lock for the whole run so no turn (in this or
 * another process) interleaves with it. The thread binding next to `sessionFile` supplies the Codex thread and its
 * last usage; after a successful native round its injection ledger and `heldTurnIds` are cleared, so the next turn
 * re-sends the context Codex dropped (P3). Engine maintenance afterwards runs with `reason: "compaction"`, bounded
 * by `maintenanceTimeoutMs`.
 *
 * The lock is not re-entrant: calling this from inside a turn of the same session (e.g. from a hook) throws
 * `SESSION_LOCK_REENTRANT` instead of deadlocking. An abort, while waiting for the lock or once it is held, resolves
 * with `{ ok: false, reason: "aborted" }` (nothing was changed if it came before the lock). A lock that cannot be
 * had within `lockTimeoutMs` throws the lock's `SESSION_LOCK_TIMEOUT`. Invalid parameters throw
 * {@link CompactionError}.
 *
 * @example
 * ```ts
 * const appServer = await CodexAppServer.spawn();
 * const out = await compactCodexSession({
 *   appServer,
 *   sessionId: "s1",
 *   sessionFile: "/data/s1.jsonl",
 *   contextEngine: engine,          // ownsCompaction: engine result primary, Codex native reported in details
 *   contextTokenBudget: 200_000,
 *   trigger: "manual",
 * });
 * console.log(out.ok, out.primary, out.result?.details.codexNativeCompaction);
 * ```
 */
export async function compactCodexSession(params: CompactCodexSessionParams): Promise<CompactionOutput> {
  const p = parseCompactSessionParams(params);
  const logger: Logger = p.logger ?? silentLogger;
  const store = p.store ?? createJsonlSessionStore({ sessionFile: p.sessionFile, sessionId: p.sessionId, logger });
  // Compaction writes the binding it marks durably: it is the only record that Codex dropped the thread's context.
  const bindingStore = createBindingStore<ThreadBinding>({ read: () => store.readBinding(), write: (_file, binding) => store.writeBinding(binding, { durable: true }), logger });
  /** The lock while the compaction holds it (its engine's transcript rewrites use it). */
  let held: SessionStoreLock | undefined;
  const withLock = async <T>(fn: () => Promise<T>): Promise<T> => {
    const lock = await store.acquireLock(lockOptions);
    held = lock;
    try {
      return await lock.runHeld(fn);
    } finally {
      held = undefined;
      await lock.release();
    }
  };
  const runMaintenance: CompactionMaintenanceRunner = (m) =>
    runHarnessContextEngineMaintenance({
      engine: m.engine,
      sessionId: m.sessionId,
      ...(m.sessionKey !== undefined ? { sessionKey: m.sessionKey } : {}),
      sessionFile: m.sessionFile,
      reason: m.reason,
      // Foreground: the caller waits for the compaction; deferred execution belongs to background maintenance.
      background: false,
      runtimeContext: m.runtimeContext,
      signal: m.signal,
      timeoutMs: p.maintenanceTimeoutMs,
    });
  const lockOptions = {
    logger,
    ...(p.signal ? { signal: p.signal } : {}),
    ...(p.lockTimeoutMs !== undefined ? { timeoutMs: p.lockTimeoutMs } : {}),
  };
  try {
    return await runCodexCompaction({
      appServer: p.appServer,
      bindingStore,
      sessionId: p.sessionId,
      ...(p.sessionKey !== undefined ? { sessionKey: p.sessionKey } : {}),
      sessionFile: p.sessionFile,
      ...(p.contextEngine ? { contextEngine: p.contextEngine } : {}),
      ...(p.contextTokenBudget !== undefined ? { contextTokenBudget: p.contextTokenBudget } : {}),
      trigger: p.trigger,
      ...(p.customInstructions !== undefined ? { customInstructions: p.customInstructions } : {}),
      // compact() and maintain() run inside withLock below: their transcript rewrites use that lock.
      runtimeContext: {
        ...(p.runtimeContext ?? {}),
        rewriteTranscriptEntries: createTranscriptRewriter({ store, logger, ids: { sessionId: p.sessionId }, lock: "ambient", lockTimeoutMs: p.lockTimeoutMs, heldLock: () => held }),
      },
      ...(p.signal ? { signal: p.signal } : {}),
      logger,
      nativeTimeoutMs: p.nativeTimeoutMs,
      engineTimeoutMs: p.engineTimeoutMs,
      runMaintenance,
      ...(p.hooks ? { hooks: p.hooks } : {}),
      appendCompactionEntry: (entry) => store.appendCompaction(entry),
      readHistory: () => store.readHistory(),
      withLock,
    });
  } catch (error) {
    if (!(p.signal?.aborted && (error as { code?: unknown } | null)?.code === "SESSION_LOCK_ABORTED")) throw error;
    logger.warn(
      { sessionId: p.sessionId, event: "compaction aborted waiting for the session lock", trigger: p.trigger },
      "codex compaction: aborted before the session lock was held",
    );
    return abortedBeforeLock(p);
  }
}

/** The result of an abort that came before the lock was held: nothing ran, nothing changed. */
function abortedBeforeLock(p: ParsedCompactSessionParams): CompactionOutput {
  return settleCompaction({
    input: {
      sessionId: p.sessionId,
      ...(p.sessionKey !== undefined ? { sessionKey: p.sessionKey } : {}),
      sessionFile: p.sessionFile,
      trigger: p.trigger,
      engine: compactionEngineFacts(p.contextEngine),
      nativeTimeoutMs: p.nativeTimeoutMs,
    },
    binding: null,
    aborted: true,
    outcomes: { engineCompact: "aborted", maintenance: "aborted", bindingMark: "skipped:aborted" },
    trace: ["aborted"],
    warnings: ["abortedBeforeSessionLock"],
  });
}
