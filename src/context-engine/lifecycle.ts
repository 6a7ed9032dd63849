/**
 * Harness-neutral context-engine lifecycle helpers (the spec's section 1 names). They apply the first-port rules:
 * bootstrap then bootstrap maintenance, assemble with validated output, finalize via afterTurn > ingestBatch > ingest,
 * and maintenance with a runtime context that omits what is unknown. Every engine call is bounded by a timeout and
 * receives an AbortSignal where the contract allows one.
 */
import type { TurnUsage } from "../../machines/turn.contract.js";
import { mirrorKeysForTurn } from "../transcript/mirror.js";
import type {
  AgentMessage,
  AssembleResult,
  ContextEngine,
  ContextEngineRuntimeContext,
  ContextEngineRuntimeSettings,
  ContextEngineSessionTarget,
  MemoryCitationsMode,
  PromptCacheInfo,
} from "./types.js";
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
 * A warning line for a failed engine call that keeps the engine's own message (engines explain themselves there:
 * "missing token budget in compact params", "database locked"). Timeouts and aborts have their own messages.
 *
 * @example
 * ```ts
 * describeEngineError("assemble", new Error("database locked")); // "context engine assemble() failed: database locked"
 * ```
 */
export function describeEngineError(method: string, error: unknown): string {
  if (error instanceof EngineCallTimeoutError || error instanceof EngineCallAbortedError) return error.message;
  const text = error instanceof Error ? error.message : String(error);
  if (text.startsWith("context engine ")) return text.replace(/\s+/g, " ").trim();
  return `context engine ${method}() failed: ${text.replace(/\s+/g, " ").trim() || (error instanceof Error ? error.name : "unknown error")}`;
}

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
  opts: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {},
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
  sessionKey?: string | undefined;
  sessionFile: string;
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
  /** OpenClaw's typed runtime settings ({@link buildHarnessContextEngineRuntimeSettings}); passed where OpenClaw passes them. */
  runtimeSettings?: ContextEngineRuntimeSettings | undefined;
  /** OpenClaw's `sessionTarget` (which session's transcript the engine may read); passed where OpenClaw passes it. */
  sessionTarget?: ContextEngineSessionTarget | undefined;
}

const withKey = (sessionKey: string | undefined) => (sessionKey !== undefined ? { sessionKey } : {});
const withTarget = (sessionTarget: ContextEngineSessionTarget | undefined) => (sessionTarget ? { sessionTarget } : {});
const withSettings = (runtimeSettings: ContextEngineRuntimeSettings | undefined) => (runtimeSettings ? { runtimeSettings } : {});

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
 * buildHarnessContextEngineRuntimeContext({ tokenBudget: 8000, runtimeContext: loaded.runtimeContext });
 * // { provider: "codex", model: "default", llm: { complete }, tokenBudget: 8000 }
 * ```
 */
export function buildHarnessContextEngineRuntimeContext(p: {
  tokenBudget?: number | undefined;
  usage?: RuntimeUsage | undefined;
  lastCallUsage?: { input?: number | undefined; output?: number | undefined; cacheRead?: number | undefined; cacheWrite?: number | undefined; total?: number | undefined } | undefined;
  allowDeferredCompactionExecution?: boolean | undefined;
  /**
   * Host extras merged in first (e.g. a plugin host's `provider`, `model`, `llm`); the measured figures above win
   * over same-named extras.
   */
  runtimeContext?: Record<string, unknown> | undefined;
}): ContextEngineRuntimeContext {
  const ctx: ContextEngineRuntimeContext = { ...(p.runtimeContext ?? {}) };
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

/** The execution host id engines see in `runtimeSettings.executionHost` (Codex frames the prompt itself). */
export const CODEX_EXECUTION_HOST = { id: "codex-app-server", label: "Codex app-server (codex-turn-machine)" } as const;

/**
 * OpenClaw's `runtimeSettings` for this host: runtime `codex-turn-machine` on the Codex app-server, the model (when
 * known), the selected engine, the prompt token budget. Unknown values are `null`, as OpenClaw's type has them.
 *
 * @example
 * ```ts
 * buildHarnessContextEngineRuntimeSettings({ engineId: "lossless-claw", model: "gpt-5", tokenBudget: 32_000 });
 * // { schemaVersion: 1, runtime: { host: "openclaw", mode: "normal", harnessId: "codex-turn-machine", ... }, ... }
 * ```
 */
export function buildHarnessContextEngineRuntimeSettings(p: {
  engineId?: string | undefined;
  model?: string | undefined;
  provider?: string | undefined;
  tokenBudget?: number | undefined;
  /** How the engine was chosen: `configured` (the host named it), else `default`. */
  selection?: "configured" | "default" | "unknown" | undefined;
}): ContextEngineRuntimeSettings {
  const family = p.model?.match(/^[a-z]+(?:-\d+(?:\.\d+)?)?/i)?.[0] ?? null;
  return {
    schemaVersion: 1,
    runtime: { host: "openclaw", mode: "normal", harnessId: "codex-turn-machine", runtimeId: "codex-app-server" },
    model: { requested: p.model ?? null, resolved: p.model ?? null, provider: p.provider ?? null, family },
    contextEngineSelection: { selectedId: p.engineId ?? null, source: p.selection ?? (p.engineId ? "configured" : "unknown") },
    executionHost: { ...CODEX_EXECUTION_HOST },
    limits: { promptTokenBudget: p.tokenBudget ?? null, maxOutputTokens: null },
    diagnostics: { fallbackReason: null, degradedReason: null },
  };
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
  p: EngineIds & { readHistory: () => Promise<H>; runtimeContext?: ContextEngineRuntimeContext | undefined },
): Promise<H & { bootstrapped: boolean; importedMessages?: number | undefined; reason?: string | undefined }> {
  const { engine } = p;
  if (!engine.bootstrap) return { ...(await p.readHistory()), bootstrapped: false, reason: "engine has no bootstrap()" };
  const raw = await callEngine(
    "bootstrap",
    () =>
      engine.bootstrap!({
        sessionId: p.sessionId,
        ...withKey(p.sessionKey),
        ...withTarget(p.sessionTarget),
        sessionFile: p.sessionFile,
        ...withSettings(p.runtimeSettings),
        ...(p.runtimeContext ? { runtimeContext: p.runtimeContext } : {}),
      }),
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
 * model, the prompt, and (as OpenClaw passes them) the runtime context and runtime settings. A malformed result
 * throws `AssembleResultInvalidError` (an assemble failure); a hang past `timeoutMs` throws
 * {@link EngineCallTimeoutError}.
 *
 * @example
 * ```ts
 * const assembled = await assembleHarnessContextEngine({ engine, sessionId, messages: history.messages, tokenBudget: 8000,
 *   availableTools: new Set(["lookup"]), model: "gpt-5", prompt, timeoutMs: 30_000,
 *   runtimeContext: buildHarnessContextEngineRuntimeContext({ tokenBudget: 8000, runtimeContext: loaded.runtimeContext }) });
 * ```
 */
export async function assembleHarnessContextEngine(p: {
  engine: ContextEngine;
  sessionId: string;
  sessionKey?: string | undefined;
  messages: AgentMessage[];
  tokenBudget?: number | undefined;
  availableTools?: Set<string> | undefined;
  citationsMode?: MemoryCitationsMode | undefined;
  model?: string | undefined;
  prompt?: string | undefined;
  runtimeContext?: ContextEngineRuntimeContext | undefined;
  runtimeSettings?: ContextEngineRuntimeSettings | undefined;
  sessionTarget?: ContextEngineSessionTarget | undefined;
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
}): Promise<AssembleResult> {
  const raw = await callEngine(
    "assemble",
    () =>
      p.engine.assemble({
        sessionId: p.sessionId,
        ...withKey(p.sessionKey),
        ...withTarget(p.sessionTarget),
        messages: p.messages,
        ...(p.tokenBudget !== undefined ? { tokenBudget: p.tokenBudget } : {}),
        ...(p.availableTools ? { availableTools: p.availableTools } : {}),
        ...(p.citationsMode !== undefined ? { citationsMode: p.citationsMode } : {}),
        ...(p.model !== undefined ? { model: p.model } : {}),
        ...(p.prompt !== undefined ? { prompt: p.prompt } : {}),
        ...withSettings(p.runtimeSettings),
        ...(p.runtimeContext ? { runtimeContext: p.runtimeContext } : {}),
      }),
    p,
  );
  return validateAssembleResult(raw);
}

/** How the engine took the turn. */
export type FinalizeMode = "afterTurn" | "ingestBatch" | "ingest";

/** Parameters of {@link finalizeHarnessContextEngineTurn}. */
export type FinalizeTurnParams = EngineIds & {
  messages: AgentMessage[];
  prePromptMessageCount: number;
  tokenBudget?: number | undefined;
  runtimeContext?: ContextEngineRuntimeContext | undefined;
  /** The Codex thread id; with `turnId` it gives each new message its mirror key (`mirrorKeysForTurn`). */
  threadId?: string | undefined;
  /** The Codex turn id, so an engine can dedupe a replayed finalize after a crash. */
  turnId?: string | undefined;
  /**
   * One key per NEW message (`messages.slice(prePromptMessageCount)`), in order. Default: the transcript mirror's
   * keys, `mirrorKeysForTurn(threadId, turnId, newMessages)`, when both ids are given.
   */
  messageKeys?: readonly string[] | undefined;
  /** Keys whose messages the engine already took (a replayed finalize): they are not handed over again. */
  alreadyIngested?: ReadonlySet<string> | undefined;
  /** Called after the engine took each message (per key), so the host can persist progress before going on. */
  onIngested?: ((key: string) => Promise<void>) | undefined;
  isHeartbeat?: boolean | undefined;
};

/** Thrown when `messageKeys` does not have one key per new message. */
export class FinalizeKeysError extends Error {
  readonly code = "FINALIZE_KEYS_MISMATCH";
  constructor(keys: number, messages: number) {
    super(`finalize: messageKeys has ${keys} keys for ${messages} new messages (one key per new message expected)`);
    this.name = "FinalizeKeysError";
  }
}

function keysForNewMessages(p: FinalizeTurnParams, newMessages: AgentMessage[]): readonly string[] | undefined {
  const keys = p.messageKeys ?? (p.threadId !== undefined && p.turnId !== undefined ? mirrorKeysForTurn(p.threadId, p.turnId, newMessages) : undefined);
  if (keys && keys.length !== newMessages.length) throw new FinalizeKeysError(keys.length, newMessages.length);
  return keys;
}

async function markIngested(p: FinalizeTurnParams, keys: readonly (string | undefined)[]): Promise<void> {
  if (!p.onIngested) return;
  for (const key of keys) if (key !== undefined) await p.onIngested(key);
}

/**
 * Hand the finished turn to the engine: `afterTurn` with the full snapshot when implemented, else `ingestBatch` of
 * the new messages, else `ingest` per new message.
 *
 * Replays are idempotent per message: each new message has a key (`messageKey` on `ingest`, `messageKeys` on
 * `ingestBatch`); keys in `alreadyIngested` are skipped, and `onIngested(key)` is awaited after each message the
 * engine took, so a finalize that failed halfway and is replayed hands over only what had not succeeded.
 * `afterTurn` takes the turn as one unit: it is skipped when every key was already taken, and marks all keys after.
 *
 * @example
 * ```ts
 * const mode = await finalizeHarnessContextEngineTurn({ engine, sessionId, sessionFile, messages, prePromptMessageCount: 4,
 *   threadId: record.threadId, turnId: record.turnId, alreadyIngested: new Set(pending.ingested),
 *   onIngested: (key) => recordProgress(key) });
 * ```
 */
export async function finalizeHarnessContextEngineTurn(p: FinalizeTurnParams): Promise<FinalizeMode> {
  const { engine } = p;
  const newMessages = p.messages.slice(p.prePromptMessageCount);
  const keys = keysForNewMessages(p, newMessages);
  const done = (i: number) => keys !== undefined && p.alreadyIngested?.has(keys[i]!) === true;
  if (engine.afterTurn) {
    if (keys && keys.length > 0 && keys.every((_, i) => done(i))) return "afterTurn";
    await callEngine(
      "afterTurn",
      () =>
        engine.afterTurn!({
          sessionId: p.sessionId,
          ...withKey(p.sessionKey),
          ...withTarget(p.sessionTarget),
          sessionFile: p.sessionFile,
          messages: p.messages,
          prePromptMessageCount: p.prePromptMessageCount,
          ...(p.tokenBudget !== undefined ? { tokenBudget: p.tokenBudget } : {}),
          ...withSettings(p.runtimeSettings),
          ...(p.runtimeContext ? { runtimeContext: p.runtimeContext } : {}),
          ...(p.turnId !== undefined ? { turnId: p.turnId } : {}),
          ...(p.isHeartbeat ? { isHeartbeat: true } : {}),
        } as Parameters<NonNullable<ContextEngine["afterTurn"]>>[0]),
      p,
    );
    await markIngested(p, keys ?? []);
    return "afterTurn";
  }
  const pending = newMessages.map((message, i) => ({ message, key: keys?.[i] })).filter((_, i) => !done(i));
  if (engine.ingestBatch) {
    if (pending.length === 0 && newMessages.length > 0) return "ingestBatch";
    const raw = await callEngine(
      "ingestBatch",
      () =>
        engine.ingestBatch!({
          sessionId: p.sessionId,
          ...withKey(p.sessionKey),
          messages: pending.map((m) => m.message),
          ...(keys ? { messageKeys: pending.map((m) => m.key!) } : {}),
          ...(p.isHeartbeat ? { isHeartbeat: true } : {}),
        }),
      p,
    );
    validateEngineResult("ingestBatch", ingestBatchResultSchema, raw);
    await markIngested(p, pending.map((m) => m.key));
    return "ingestBatch";
  }
  for (const { message, key } of pending) {
    await callEngine(
      "ingest",
      () =>
        engine.ingest({
          sessionId: p.sessionId,
          ...withKey(p.sessionKey),
          message,
          ...(key !== undefined ? { messageKey: key } : {}),
          ...(p.isHeartbeat ? { isHeartbeat: true } : {}),
        }),
      p,
    );
    if (key !== undefined) await p.onIngested?.(key);
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
  p: EngineIds & { reason: "bootstrap" | "turn" | "compaction"; background: boolean; runtimeContext?: ContextEngineRuntimeContext | undefined },
): Promise<{ changed: boolean; bytesFreed?: number | undefined; rewrittenEntries?: number | undefined; reason?: string | undefined } | undefined> {
  const { engine } = p;
  if (!engine.maintain) return undefined;
  const runtimeContext: ContextEngineRuntimeContext = { ...(p.runtimeContext ?? {}) };
  if (p.background) runtimeContext.allowDeferredCompactionExecution = true;
  const raw = await callEngine(
    "maintain",
    () =>
      engine.maintain!({
        sessionId: p.sessionId,
        ...withKey(p.sessionKey),
        ...withTarget(p.sessionTarget),
        sessionFile: p.sessionFile,
        ...withSettings(p.runtimeSettings),
        runtimeContext,
        ...(p.signal ? { abortSignal: p.signal } : {}),
      }),
    p,
  );
  return validateEngineResult("maintain", maintainResultSchema, raw);
}
