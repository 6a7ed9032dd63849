/**
 * The "accordion" compaction cadence (lossless-claw#665): when the last model call filled the context window to
 * `contextThreshold` (90%), the context engine compacts down to `compactionTargetFraction` (35%) of the token
 * budget before the next turn is assembled, so Codex's own lossy auto-compaction (which fires at 90% of the window)
 * never gets to run. The turn host calls {@link evaluateAccordion} and {@link runAccordionCompaction} before
 * `assemble`, then rotates to a fresh Codex thread.
 */
import { z } from "zod";
import { accordionReason } from "../../machines/rules.js";
import type { Logger } from "pino";
import { CompactResultInvalidError, validateCompactResult } from "../context-engine/contract.js";
import type { ContextEngineRuntimeSettings, ContextEngineSessionTarget, CompactResult, ContextEngine, InterceptCompactionResult } from "../context-engine/types.js";
import { callEngine } from "../context-engine/lifecycle.js";
import { silentLogger } from "../log/logger.js";

/** Default bound on each engine call of an accordion compaction (engines may summarize with a model). */
export const DEFAULT_ACCORDION_TIMEOUT_MS = 300_000;
import { CompactionError, firstIssue } from "./errors.js";

/** lossless-claw's floor: below ~5% of the budget a sweep cannot even fit system prompt + tool definitions. */
export const MIN_COMPACTION_TARGET_FRACTION = 0.05;
export const DEFAULT_CONTEXT_THRESHOLD = 0.9;
export const DEFAULT_COMPACTION_TARGET_FRACTION = 0.35;

const show = (value: unknown): string => (typeof value === "number" ? String(value) : JSON.stringify(value) ?? String(value));

const fraction = (field: string, min: number, minInclusive: boolean, fallback: number) =>
  z
    .number({ error: (iss) => `${field} must be a finite number, got ${show(iss.input)}` })
    .superRefine((v, ctx) => {
      const aboveMin = minInclusive ? v >= min : v > min;
      if (!aboveMin || v > 1) {
        ctx.addIssue({
          code: "custom",
          message: `${field} must be within ${minInclusive ? "[" : "("}${min}, 1], got ${show(v)}`,
        });
      }
    })
    .default(fallback);

/**
 * Accordion configuration. `enabled` defaults to whether the engine owns compaction (lossless-claw#850: users who
 * configure such an engine expect it to own compaction); unknown keys are rejected so typos do not pass silently.
 *
 * @example
 * ```ts
 * accordionConfigSchema.parse({}); // { contextThreshold: 0.9, compactionTargetFraction: 0.35 }
 * ```
 */
export const accordionConfigSchema = z
  .object({
    enabled: z.boolean({ error: (iss) => `enabled must be a boolean, got ${show(iss.input)}` }).optional(),
    contextThreshold: fraction("contextThreshold", 0, false, DEFAULT_CONTEXT_THRESHOLD),
    compactionTargetFraction: fraction(
      "compactionTargetFraction",
      MIN_COMPACTION_TARGET_FRACTION,
      true,
      DEFAULT_COMPACTION_TARGET_FRACTION,
    ),
  })
  .strict();

/** A validated accordion configuration (defaults applied). */
export type AccordionConfig = z.output<typeof accordionConfigSchema>;
/** What a caller may pass (every field optional). */
export type AccordionConfigInput = z.input<typeof accordionConfigSchema>;

/**
 * Validate an accordion configuration and apply defaults. Throws {@link CompactionError} (code
 * `INVALID_ACCORDION_CONFIG`) whose message names the bad field and value.
 *
 * @example
 * ```ts
 * parseAccordionConfig({ compactionTargetFraction: 0.5 }).contextThreshold; // 0.9
 * parseAccordionConfig({ compactionTargetFraction: 0.01 });
 * // throws: compactionTargetFraction must be within [0.05, 1], got 0.01
 * ```
 */
export function parseAccordionConfig(input: unknown): AccordionConfig {
  const parsed = accordionConfigSchema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  if (issue?.code === "unrecognized_keys") {
    const key = issue.keys[0] ?? "(unknown)";
    throw new CompactionError("INVALID_ACCORDION_CONFIG", key, `unknown accordion config key \`${key}\``);
  }
  const { field, message } = firstIssue(parsed.error.issues, "(config)");
  throw new CompactionError("INVALID_ACCORDION_CONFIG", field, message);
}

/** Last token usage Codex reported for the bound thread. */
export interface AccordionUsage {
  inputTokens: number;
  totalTokens: number;
  modelContextWindow?: number | undefined;
}

/** Why the accordion does or does not compact. */
export type AccordionReason = "disabled" | "noUsage" | "noContextWindow" | "belowThreshold" | "thresholdReached";

export interface AccordionDecision {
  compact: boolean;
  /** totalTokens / context window, when both are known. */
  ratio?: number | undefined;
  reason: AccordionReason;
}

/**
 * Decide (purely) whether to compact before the next turn: total tokens of the last reported usage vs the model
 * context window (`usage.modelContextWindow`, else `contextWindow`). No usage known -> no compaction.
 *
 * @example
 * ```ts
 * evaluateAccordion({
 *   lastUsage: { inputTokens: 170_000, totalTokens: 171_000, modelContextWindow: 190_000 },
 *   config: parseAccordionConfig({}),
 *   engineOwnsCompaction: true,
 * }); // { compact: true, ratio: 0.9, reason: "thresholdReached" }
 * ```
 */
export function evaluateAccordion(p: {
  lastUsage?: AccordionUsage | null | undefined;
  contextWindow?: number | undefined;
  config: AccordionConfig;
  engineOwnsCompaction: boolean;
}): AccordionDecision {
  // One rule for the turn machine's `accordionDue` guard and this helper (machines/rules.ts).
  const d = accordionReason(
    { enabled: p.config.enabled ?? p.engineOwnsCompaction, contextThreshold: p.config.contextThreshold },
    p.lastUsage ?? undefined,
    p.contextWindow,
  );
  return { compact: d.due, reason: d.reason, ...(d.ratio !== undefined ? { ratio: d.ratio } : {}) };
}

const isFunction = (v: unknown): boolean => typeof v === "function";

const runParamsSchema = z.object({
  engine: z.custom<ContextEngine>(
    (v) => typeof v === "object" && v !== null && isFunction((v as ContextEngine).compact),
    "engine must be a context engine with compact()",
  ),
  sessionId: z.string().min(1),
  sessionKey: z.string().min(1).optional(),
  sessionFile: z.string().min(1),
  tokenBudget: z.number().int().positive().optional(),
  currentTokenCount: z.number().int().nonnegative().optional(),
  trigger: z.enum(["in-attempt-auto", "overflow"]).optional(),
  firstKeptEntryId: z.string().optional(),
  config: z.unknown(),
  timeoutMs: z.number().int().positive().optional(),
  signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal, "signal must be an AbortSignal").optional(),
  logger: z.custom<Logger>((v) => typeof v === "object" && v !== null && isFunction((v as Logger).info)).optional(),
});

/** Parameters of {@link runAccordionCompaction}. */
export interface RunAccordionParams {
  engine: ContextEngine;
  sessionId: string;
  sessionKey?: string | undefined;
  sessionFile: string;
  tokenBudget?: number | undefined;
  /** Prompt tokens of the last model call. */
  currentTokenCount?: number | undefined;
  /**
   * Why the accordion runs, as `interceptCompaction` is told: `"in-attempt-auto"` (default: the usage reached the
   * threshold) or `"overflow"` (the last turn's input no longer fit the model's context window).
   */
  trigger?: "in-attempt-auto" | "overflow" | undefined;
  /** Passed to `interceptCompaction` (pi's compaction preparation); "" when the host has none. */
  firstKeptEntryId?: string | undefined;
  /** Validated with {@link parseAccordionConfig} (a parsed config passes unchanged). */
  config: AccordionConfigInput | AccordionConfig;
  /** Extra runtime context for `compact()` (the host's `llm`, provider, model); budget and token count are added. */
  runtimeContext?: Record<string, unknown> | undefined;
  /** OpenClaw's `runtimeSettings`, passed through to `compact()`. */
  runtimeSettings?: ContextEngineRuntimeSettings | undefined;
  /** OpenClaw's `sessionTarget` (the session whose transcript the engine may read), passed through to `compact()`. */
  sessionTarget?: ContextEngineSessionTarget | undefined;
  /** Bound on each engine call (`interceptCompaction`, `compact`); default 300 s. A timeout counts as a failure. */
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
  logger?: Logger | undefined;
}

export interface AccordionRunResult {
  compacted: boolean;
  tokensBefore: number;
  tokensAfter?: number | undefined;
  /** Which engine entry point did the work ("none": aborted before anything ran). */
  via: "intercept" | "compact" | "none";
  /**
   * Why nothing was compacted: "aborted", "compactFailed" (`compact()` threw), "compactResultInvalid" (it returned a
   * malformed result, see `error`), "notCompacted" / "compactRejected", or the engine's own reason.
   */
  reason?: string | undefined;
  /** Set when `compact()` returned a malformed result: `code` "COMPACT_RESULT_INVALID" and a message naming the field. */
  error?: { code: string; message: string } | undefined;
  /** The engine's summary and first kept entry, when it reported them (written to the transcript as a compaction entry). */
  summary?: string | undefined;
  firstKeptEntryId?: string | undefined;
  /** `compact()` said `ok: false` while it did compact ("compacted, still over target"): kept, with its reason. */
  stillOverTarget?: boolean | undefined;
}

function errorLabel(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") return code;
  return error instanceof Error ? error.name : "unknown";
}

/** Engines' reasons are short codes; cap them anyway so a misbehaving engine cannot flood the log. */
const capReason = (reason: unknown): string | undefined =>
  typeof reason === "string" ? reason.slice(0, 120) : undefined;

/**
 * Whether the accordion calls the engine's `interceptCompaction`: whenever the engine implements it, unless it opts out
 * with `info.interceptsCompaction === false`.
 *
 * @example
 * ```ts
 * usesInterceptCompaction({ ...engine, info: { ...engine.info, interceptsCompaction: false } }); // false
 * ```
 */
export function usesInterceptCompaction(engine: ContextEngine): boolean {
  return typeof engine.interceptCompaction === "function" && engine.info?.interceptsCompaction !== false;
}

/**
 * Run one accordion compaction in the engine. `interceptCompaction` first when the engine implements it and does not
 * opt out with `info.interceptsCompaction: false` (a throw counts as `handled: false`); otherwise, or when it declines,
 * `compact({ force: true, compactionTarget: "threshold", compactionTargetFraction })`, whose result is validated
 * (`compactResultSchema`; a malformed one is a failure: `reason: "compactResultInvalid"`, `error.code:
 * "COMPACT_RESULT_INVALID"`, logged as a warning). Never throws for engine failures (they come back as `compacted:
 * false`) because the caller runs it on the way to `assemble`, which must not fail because of it. Invalid parameters
 * do throw {@link CompactionError}.
 *
 * @example
 * ```ts
 * const decision = evaluateAccordion({ lastUsage: binding.lastUsage, config, engineOwnsCompaction: true });
 * if (decision.compact) {
 *   const r = await runAccordionCompaction({ engine, sessionId, sessionFile, tokenBudget: 200_000,
 *     currentTokenCount: binding.lastUsage.inputTokens, config, signal, logger });
 *   if (r.compacted) rotateThread();
 * }
 * ```
 */
export async function runAccordionCompaction(params: RunAccordionParams): Promise<AccordionRunResult> {
  const parsed = runParamsSchema.safeParse(params);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error.issues, "(params)");
    throw new CompactionError("INVALID_COMPACTION_PARAMS", field, `invalid accordion parameter \`${field}\`: ${message}`);
  }
  const run: AccordionRun = {
    params,
    config: parseAccordionConfig(params.config),
    logger: params.logger ?? silentLogger,
    timeoutMs: params.timeoutMs ?? DEFAULT_ACCORDION_TIMEOUT_MS,
    ids: { sessionId: params.sessionId, engineId: params.engine.info?.id },
    tokensBefore: params.currentTokenCount ?? 0,
  };
  const { engine, signal } = params;
  if (signal?.aborted) {
    run.logger.info({ ...run.ids, event: "accordion compaction aborted" }, "accordion compaction aborted");
    return { compacted: false, tokensBefore: run.tokensBefore, via: "none", reason: "aborted" };
  }
  if (typeof engine.interceptCompaction === "function" && !usesInterceptCompaction(engine)) {
    run.logger.info(
      { ...run.ids, event: "accordion intercept skipped", reason: "interceptsCompaction false" },
      "engine opted out of interceptCompaction (info.interceptsCompaction: false); using compact()",
    );
  }
  if (usesInterceptCompaction(engine)) {
    const intercepted = await interceptPhase(run);
    if (intercepted) return intercepted;
    if (signal?.aborted) return { compacted: false, tokensBefore: run.tokensBefore, via: "none", reason: "aborted" };
  }
  return compactPhase(run);
}

/** What the phases of one accordion run share. */
interface AccordionRun {
  params: RunAccordionParams;
  config: AccordionConfig;
  logger: Logger;
  timeoutMs: number;
  ids: { sessionId: string; engineId: string | undefined };
  tokensBefore: number;
}

/** `interceptCompaction` first: the result when the engine handled it, undefined when it declined (or threw). */
async function interceptPhase(run: AccordionRun): Promise<AccordionRunResult | undefined> {
  const { engine, sessionId, sessionKey, sessionFile, tokenBudget, currentTokenCount, signal } = run.params;
  const { logger, ids, tokensBefore } = run;
  let intercepted: InterceptCompactionResult;
  try {
    intercepted = await callEngine("interceptCompaction", () => engine.interceptCompaction!({
      sessionId,
      ...(sessionKey !== undefined ? { sessionKey } : {}),
      sessionFile,
      ...(tokenBudget !== undefined ? { tokenBudget } : {}),
      ...(currentTokenCount !== undefined ? { currentTokenCount } : {}),
      firstKeptEntryId: run.params.firstKeptEntryId ?? "",
      tokensBefore,
      trigger: run.params.trigger ?? "in-attempt-auto",
      ...(signal ? { signal } : {}),
    }), { timeoutMs: run.timeoutMs, ...(signal ? { signal } : {}) });
  } catch (error) {
    // The contract says interceptCompaction never throws; if it does, treat it as declined (lossless-claw#665).
    intercepted = { handled: false, reason: `threw: ${errorLabel(error)}` };
  }
  if (intercepted && intercepted.handled === true) {
    const result: AccordionRunResult = {
      compacted: true,
      tokensBefore: intercepted.tokensBefore ?? tokensBefore,
      via: "intercept",
      ...(intercepted.summary ? { summary: intercepted.summary } : {}),
      ...(intercepted.firstKeptEntryId ? { firstKeptEntryId: intercepted.firstKeptEntryId } : {}),
    };
    if (intercepted.tokensAfter !== undefined) result.tokensAfter = intercepted.tokensAfter;
    logger.info(
      { ...ids, event: "accordion intercept handled", tokensBefore: result.tokensBefore, tokensAfter: result.tokensAfter },
      "accordion compaction handled by interceptCompaction",
    );
    return result;
  }
  logger.info(
    { ...ids, event: "accordion intercept declined", interceptReason: capReason(intercepted?.reason) },
    "interceptCompaction declined; falling back to compact()",
  );
  return undefined;
}

/** `compact()`: validated before it is read (a malformed result is a failure, never half-read). */
async function compactPhase(run: AccordionRun): Promise<AccordionRunResult> {
  const { engine, sessionId, sessionKey, sessionFile, tokenBudget, currentTokenCount, signal } = run.params;
  const { logger, ids, tokensBefore, config } = run;
  let res: CompactResult;
  const runtimeContext = {
    ...(run.params.runtimeContext ?? {}),
    ...(tokenBudget !== undefined ? { tokenBudget } : {}),
    ...(currentTokenCount !== undefined ? { currentTokenCount } : {}),
  };
  try {
    const raw: unknown = await callEngine("compact", () => engine.compact({
      sessionId,
      ...(sessionKey !== undefined ? { sessionKey } : {}),
      sessionFile,
      ...(tokenBudget !== undefined ? { tokenBudget } : {}),
      ...(currentTokenCount !== undefined ? { currentTokenCount } : {}),
      force: true,
      compactionTarget: "threshold",
      compactionTargetFraction: config.compactionTargetFraction,
      runtimeContext,
      // OpenClaw's embedded-runtime compaction parameters (provider, model, llm): lossless-claw 1.x resolves its
      // summarizer in compact() from these alone, and falls back to truncating without them.
      legacyParams: runtimeContext,
      ...(run.params.runtimeSettings ? { runtimeSettings: run.params.runtimeSettings } : {}),
      ...(run.params.sessionTarget ? { sessionTarget: run.params.sessionTarget } : {}),
      ...(signal ? { abortSignal: signal } : {}),
    }), { timeoutMs: run.timeoutMs, ...(signal ? { signal } : {}) });
    res = validateCompactResult(raw);
  } catch (error) {
    return compactFailed(run, error);
  }
  // `compacted: true` means compacted, whatever `ok` says: lossless-claw answers `{ ok: false, compacted: true }` for
  // "compacted, but still over target", and the thread must still rotate onto the compacted view.
  const compacted = res.compacted;
  const result: AccordionRunResult = { compacted, tokensBefore: res.result?.tokensBefore ?? tokensBefore, via: "compact" };
  if (res.result?.tokensAfter !== undefined) result.tokensAfter = res.result.tokensAfter;
  if (res.result?.summary) result.summary = res.result.summary;
  if (res.result?.firstKeptEntryId) result.firstKeptEntryId = res.result.firstKeptEntryId;
  if (compacted && !res.ok) {
    result.stillOverTarget = true;
    const reason = capReason(res.reason);
    if (reason) result.reason = reason;
  }
  if (!compacted) result.reason = capReason(res.reason) ?? (res.ok ? "notCompacted" : "compactRejected");
  logger.info(
    { ...ids, event: "accordion compaction completed", compacted, tokensBefore: result.tokensBefore, tokensAfter: result.tokensAfter, compactionTargetFraction: config.compactionTargetFraction },
    "accordion compaction completed",
  );
  return result;
}

/** A `compact()` that threw, timed out, was aborted or returned a malformed result. */
function compactFailed(run: AccordionRun, error: unknown): AccordionRunResult {
  const aborted = run.params.signal?.aborted === true;
  const invalid = error instanceof CompactResultInvalidError;
  run.logger.warn(
    {
      ...run.ids,
      event: aborted ? "accordion compaction aborted" : "accordion compaction failed",
      err: errorLabel(error),
      // The field path and the schema's complaint only (no values), so no content reaches the log.
      ...(invalid ? { detail: error.detail } : {}),
    },
    invalid ? "accordion compaction failed: compact() returned an invalid result" : "accordion compaction failed",
  );
  const failed: AccordionRunResult = {
    compacted: false,
    tokensBefore: run.tokensBefore,
    via: "compact",
    reason: aborted ? "aborted" : invalid ? "compactResultInvalid" : "compactFailed",
  };
  // Our own message (method, field path, schema complaint): safe to report, unlike whatever an engine threw.
  if (invalid && !aborted) failed.error = { code: error.code, message: error.message };
  return failed;
}
