/**
 * Harness-neutral context-engine lifecycle helpers (the spec's section 1 names). They apply the first-port rules:
 * bootstrap then bootstrap maintenance, assemble with validated output, finalize via afterTurn > ingestBatch > ingest,
 * and maintenance with a runtime context that omits what is unknown. Every engine call is bounded by a timeout and
 * receives an AbortSignal where the contract allows one.
 */
import type { TurnUsage } from "../../machines/turn.contract.js";
import type { AgentMessage, AssembleResult, ContextEngine, ContextEngineRuntimeContext, PromptCacheInfo } from "./types.js";
import {
  bootstrapResultSchema,
  ingestBatchResultSchema,
  maintainResultSchema,
  validateAssembleResult,
  validateEngineResult,
} from "./contract.js";

/** An engine call that did not settle in time; `method` names it. */
export class EngineCallTimeoutError extends Error {
  readonly code = "ENGINE_CALL_TIMEOUT";
  constructor(
    readonly method: string,
    readonly timeoutMs: number,
  ) {
    super(`context engine ${method}() did not settle within ${timeoutMs} ms`);
    this.name = "EngineCallTimeoutError";
  }
}

/** An engine call cut short because the turn was aborted. */
export class EngineCallAbortedError extends Error {
  readonly code = "ENGINE_CALL_ABORTED";
  constructor(readonly method: string) {
    super(`context engine ${method}() was aborted`);
    this.name = "EngineCallAbortedError";
  }
}

export const DEFAULT_ENGINE_CALL_TIMEOUT_MS = 60_000;

/**
 * Call an engine method bounded by a timeout and an abort signal. The engine's promise is not cancelled (the
 * contract has no cancellation beyond `abortSignal` on compact), but the turn stops waiting for it.
 *
 * @example
 * ```ts
 * await callEngine("assemble", () => engine.assemble(p), { timeoutMs: 30_000, signal });
 * ```
 */
export function callEngine<T>(
  method: string,
  fn: () => Promise<T>,
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_ENGINE_CALL_TIMEOUT_MS;
  const { signal } = opts;
  if (signal?.aborted) return Promise.reject(new EngineCallAbortedError(method));
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => finish(() => reject(new EngineCallTimeoutError(method, timeoutMs))), timeoutMs);
    const onAbort = () => finish(() => reject(new EngineCallAbortedError(method)));
    let settled = false;
    function finish(settle: () => void) {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      settle();
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    let pending: Promise<T>;
    try {
      pending = Promise.resolve(fn());
    } catch (error) {
      finish(() => reject(error));
      return;
    }
    pending.then(
      (value) => finish(() => resolve(value)),
      (error: unknown) => finish(() => reject(error)),
    );
  });
}

interface EngineIds {
  engine: ContextEngine;
  sessionId: string;
  sessionKey?: string;
  sessionFile: string;
  signal?: AbortSignal;
  timeoutMs?: number;
}

const withKey = (sessionKey: string | undefined) => (sessionKey !== undefined ? { sessionKey } : {});

/**
 * Usage as the turn reports it, plus optional last-call figures a host may carry (Codex's `tokenUsage.last`). The
 * `TurnUsage` totals are THREAD-cumulative in Codex, so they are never used as the last call's figures.
 */
export type RuntimeUsage = TurnUsage;

/**
 * The runtime context handed to afterTurn / maintain / compact: `tokenBudget`, `currentTokenCount` (prompt tokens of
 * the last model call) and `promptCache.lastCallUsage` — each only when known. Unknown values are omitted, never
 * invented as zero, and `promptCache` is omitted entirely when Codex reported no usage.
 *
 * `lastCallUsage` (e.g. the `usage` the mirror put on the turn's last assistant message, which comes from Codex's
 * `tokenUsage.last`) wins over the `usage` fields when given.
 *
 * @example
 * ```ts
 * buildHarnessContextEngineRuntimeContext({ tokenBudget: 8000 }); // { tokenBudget: 8000 }
 * buildHarnessContextEngineRuntimeContext({ tokenBudget: 8000, usage: record.usage });
 * // { tokenBudget: 8000, currentTokenCount: 512, promptCache: { lastCallUsage: { input: 512, total: 540 } } }
 * ```
 */
export function buildHarnessContextEngineRuntimeContext(p: {
  tokenBudget?: number;
  usage?: RuntimeUsage;
  lastCallUsage?: { input?: number; output?: number; cacheRead?: number; cacheWrite?: number; total?: number };
  allowDeferredCompactionExecution?: boolean;
}): ContextEngineRuntimeContext {
  const ctx: ContextEngineRuntimeContext = {};
  if (p.tokenBudget !== undefined) ctx.tokenBudget = p.tokenBudget;
  const last: NonNullable<PromptCacheInfo["lastCallUsage"]> = {};
  const put = (key: keyof typeof last, value: number | undefined) => {
    if (typeof value === "number" && Number.isFinite(value) && value >= 0) last[key] = value;
  };
  if (p.usage) {
    put("input", p.usage.lastCallInputTokens);
    put("output", p.usage.lastCallOutputTokens);
    put("cacheRead", p.usage.lastCallCachedInputTokens);
    put("total", p.usage.lastCallTotalTokens);
  }
  if (p.lastCallUsage) {
    put("input", p.lastCallUsage.input);
    put("output", p.lastCallUsage.output);
    put("cacheRead", p.lastCallUsage.cacheRead);
    put("cacheWrite", p.lastCallUsage.cacheWrite);
    put("total", p.lastCallUsage.total);
  }
  if (last.input !== undefined) ctx.currentTokenCount = last.input;
  if (Object.keys(last).length > 0) ctx.promptCache = { lastCallUsage: last };
  if (p.allowDeferredCompactionExecution) ctx.allowDeferredCompactionExecution = true;
  return ctx;
}

/**
 * Bootstrap the engine, run bootstrap maintenance when the engine has `maintain` (errors swallowed, like turn
 * maintenance), then re-read the history through `readHistory` (bootstrap may rewrite the transcript). An engine
 * without `bootstrap` is not called; the history is still read. A bootstrap failure rejects (the caller warns and
 * continues, first-port rule 1).
 *
 * @example
 * ```ts
 * const out = await bootstrapHarnessContextEngine({ engine, sessionId, sessionFile, readHistory: () => readSessionHistory(sessionFile) });
 * out.bootstrapped; out.messages;
 * ```
 */
export async function bootstrapHarnessContextEngine<H extends { messages: AgentMessage[] }>(
  p: EngineIds & { readHistory: () => Promise<H>; runtimeContext?: ContextEngineRuntimeContext },
): Promise<H & { bootstrapped: boolean; importedMessages?: number; reason?: string }> {
  const { engine } = p;
  if (!engine.bootstrap) return { ...(await p.readHistory()), bootstrapped: false, reason: "engine has no bootstrap()" };
  const raw = await callEngine(
    "bootstrap",
    () => engine.bootstrap!({ sessionId: p.sessionId, ...withKey(p.sessionKey), sessionFile: p.sessionFile }),
    p,
  );
  const result = validateEngineResult("bootstrap", bootstrapResultSchema, raw);
  if (engine.maintain) {
    try {
      await runHarnessContextEngineMaintenance({ ...p, reason: "bootstrap", background: false, ...(p.runtimeContext ? { runtimeContext: p.runtimeContext } : {}) });
    } catch {
      // Bootstrap maintenance is best effort, like turn maintenance: errors are swallowed.
    }
  }
  const history = await p.readHistory();
  return {
    ...history,
    bootstrapped: result.bootstrapped,
    ...(result.importedMessages !== undefined ? { importedMessages: result.importedMessages } : {}),
    ...(result.reason !== undefined ? { reason: result.reason } : {}),
  };
}

/**
 * Assemble context from the mirrored history, with the token budget, the dynamic tool names (`availableTools`), the
 * model and the prompt. A malformed result throws `AssembleResultInvalidError` (an assemble failure); a hang past
 * `timeoutMs` throws {@link EngineCallTimeoutError}.
 *
 * @example
 * ```ts
 * const assembled = await assembleHarnessContextEngine({ engine, sessionId, messages: history.messages, tokenBudget: 8000,
 *   availableTools: new Set(["lookup"]), model: "gpt-5", prompt, timeoutMs: 30_000 });
 * ```
 */
export async function assembleHarnessContextEngine(p: {
  engine: ContextEngine;
  sessionId: string;
  sessionKey?: string;
  messages: AgentMessage[];
  tokenBudget?: number;
  availableTools?: Set<string>;
  citationsMode?: string;
  model?: string;
  prompt?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
}): Promise<AssembleResult> {
  const raw = await callEngine(
    "assemble",
    () =>
      p.engine.assemble({
        sessionId: p.sessionId,
        ...withKey(p.sessionKey),
        messages: p.messages,
        ...(p.tokenBudget !== undefined ? { tokenBudget: p.tokenBudget } : {}),
        ...(p.availableTools ? { availableTools: p.availableTools } : {}),
        ...(p.citationsMode !== undefined ? { citationsMode: p.citationsMode } : {}),
        ...(p.model !== undefined ? { model: p.model } : {}),
        ...(p.prompt !== undefined ? { prompt: p.prompt } : {}),
      }),
    p,
  );
  return validateAssembleResult(raw);
}

/** How the engine took the turn. */
export type FinalizeMode = "afterTurn" | "ingestBatch" | "ingest";

/**
 * Hand the finished turn to the engine: `afterTurn` with the full snapshot when implemented, else `ingestBatch` of
 * the new messages, else `ingest` per new message.
 *
 * @example
 * ```ts
 * const mode = await finalizeHarnessContextEngineTurn({ engine, sessionId, sessionFile, messages, prePromptMessageCount: 4 });
 * ```
 */
export async function finalizeHarnessContextEngineTurn(
  p: EngineIds & {
    messages: AgentMessage[];
    prePromptMessageCount: number;
    tokenBudget?: number;
    runtimeContext?: ContextEngineRuntimeContext;
    /** The Codex turn id, so an engine can dedupe a replayed finalize after a crash. */
    turnId?: string;
    isHeartbeat?: boolean;
  },
): Promise<FinalizeMode> {
  const { engine } = p;
  const newMessages = p.messages.slice(p.prePromptMessageCount);
  if (engine.afterTurn) {
    await callEngine(
      "afterTurn",
      () =>
        engine.afterTurn!({
          sessionId: p.sessionId,
          ...withKey(p.sessionKey),
          sessionFile: p.sessionFile,
          messages: p.messages,
          prePromptMessageCount: p.prePromptMessageCount,
          ...(p.tokenBudget !== undefined ? { tokenBudget: p.tokenBudget } : {}),
          ...(p.runtimeContext ? { runtimeContext: p.runtimeContext } : {}),
          ...(p.turnId !== undefined ? { turnId: p.turnId } : {}),
          ...(p.isHeartbeat ? { isHeartbeat: true } : {}),
        } as Parameters<NonNullable<ContextEngine["afterTurn"]>>[0]),
      p,
    );
    return "afterTurn";
  }
  if (engine.ingestBatch) {
    const raw = await callEngine(
      "ingestBatch",
      () => engine.ingestBatch!({ sessionId: p.sessionId, ...withKey(p.sessionKey), messages: newMessages }),
      p,
    );
    validateEngineResult("ingestBatch", ingestBatchResultSchema, raw);
    return "ingestBatch";
  }
  for (const message of newMessages) {
    await callEngine("ingest", () => engine.ingest({ sessionId: p.sessionId, ...withKey(p.sessionKey), message }), p);
  }
  return "ingest";
}

/**
 * Run engine maintenance. Background maintenance passes `allowDeferredCompactionExecution: true` (lossless-claw
 * runs deferred compaction only there); foreground maintenance never does. Returns undefined when the engine has no
 * `maintain`. `reason` is for the caller's logs (the contract's `maintain` takes no reason).
 *
 * @example
 * ```ts
 * await runHarnessContextEngineMaintenance({ engine, sessionId, sessionFile, reason: "turn", background: true });
 * ```
 */
export async function runHarnessContextEngineMaintenance(
  p: EngineIds & { reason: "bootstrap" | "turn" | "compaction"; background: boolean; runtimeContext?: ContextEngineRuntimeContext },
): Promise<{ changed: boolean; bytesFreed?: number; rewrittenEntries?: number; reason?: string } | undefined> {
  const { engine } = p;
  if (!engine.maintain) return undefined;
  const runtimeContext: ContextEngineRuntimeContext = { ...(p.runtimeContext ?? {}) };
  if (p.background) runtimeContext.allowDeferredCompactionExecution = true;
  const raw = await callEngine(
    "maintain",
    () => engine.maintain!({ sessionId: p.sessionId, ...withKey(p.sessionKey), sessionFile: p.sessionFile, runtimeContext }),
    p,
  );
  return validateEngineResult("maintain", maintainResultSchema, raw);
}
