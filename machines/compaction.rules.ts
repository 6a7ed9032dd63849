/**
 * The decision rules of an explicit compaction (`/compact` or a plugin request), as plain functions. The compaction
 * machine's guards call them; tests call them directly. They encode spec §8 ("Compaction policy") and §10: the
 * context engine is primary when it owns compaction, Codex native `thread/compact/start` is a bounded, best-effort
 * secondary whose failure never fails the primary, and a compaction error is reported, never retried as a prompt.
 */
import type { CompactResult } from "../src/context-engine/types.js";

/** Why a compaction was requested: `/compact` (manual) or a token-budget request from a plugin (budget). */
export type CompactionTrigger = "manual" | "budget";

/** Facts about the context engine that guards read; the engine object itself stays in the host. */
export interface CompactionEngineFacts {
  /** A non-legacy engine is configured. */
  active: boolean;
  id: string;
  /** `info.ownsCompaction === true`. */
  ownsCompaction: boolean;
  hasMaintain: boolean;
}

/** Last token usage Codex reported for the bound thread (persisted in the thread binding). */
export interface BindingUsage {
  inputTokens: number;
  totalTokens: number;
  modelContextWindow?: number | undefined;
}

/** What the machine needs from the Codex thread binding (null/absent: the session has no bound thread). */
export interface BindingFacts {
  threadId?: string | undefined;
  lastUsage?: BindingUsage | undefined;
}

/** Input of the compaction machine (validated by the host with zod before `createActor`). */
export interface CompactionMachineInput {
  sessionId: string;
  sessionKey?: string | undefined;
  sessionFile: string;
  trigger: CompactionTrigger;
  engine: CompactionEngineFacts;
  /** Upper bound on the native `thread/compact/start` round (milliseconds). */
  nativeTimeoutMs: number;
}

/** The engine `compact()` parameters the machine decides (the host adds ids, budget and instructions). */
export interface EngineCompactionRequest {
  force?: boolean | undefined;
  compactionTarget: "budget" | "threshold";
  currentTokenCount?: number | undefined;
}

/** What a native compaction round returned (`CodexAppServer.compactThread`). */
export interface NativeCompactOutput {
  ok: boolean;
  reason?: string | undefined;
  threadId: string;
  turnId?: string | undefined;
  itemId?: string | undefined;
}

/** Reported as `details.codexNativeCompaction`: a separate backend action, never conflated with the engine's. */
export interface NativeCompactionStatus {
  ok: boolean;
  reason?: string | undefined;
  threadId?: string | undefined;
  turnId?: string | undefined;
  itemId?: string | undefined;
}

/** Outcome labels per step (for the result and the logs). */
export interface CompactionOutcomes {
  /** "ran" | "rejected" (ok:false) | "failed" (threw) | "skipped:<why>" | "pending" | "aborted". */
  engineCompact: string;
  /** "ran" | "failed" | "skipped:<why>" | "pending" | "aborted". */
  maintenance: string;
  /** "marked" | "failed" | "skipped:<why>" | "pending". */
  bindingMark: string;
}

/** The result of an explicit compaction (the machine's output). */
export interface CompactionOutput {
  ok: boolean;
  compacted: boolean;
  reason?: string | undefined;
  result?: {
    summary?: string | undefined;
    firstKeptEntryId?: string | undefined;
    tokensBefore: number;
    tokensAfter?: number | undefined;
    details: Record<string, unknown>;
  } | undefined;
  /** Which system produced the primary result. */
  primary: "engine" | "native";
  native: NativeCompactionStatus;
  outcomes: CompactionOutcomes;
  /** Lifecycle states in the order they were entered. */
  trace: string[];
  warnings: string[];
}

/** The engine is primary only when it is active and declares `info.ownsCompaction === true`. */
export function engineOwnsCompaction(engine: CompactionEngineFacts): boolean {
  return engine.active && engine.ownsCompaction;
}

/** A native compaction is possible only for a session bound to a Codex thread. */
export function hasThreadBinding(binding: BindingFacts | null | undefined): boolean {
  return typeof binding?.threadId === "string" && binding.threadId.length > 0;
}

/**
 * The engine `compact()` request for a trigger: `/compact` forces a threshold compaction; a budget request asks the
 * engine to get under the token budget (and leaves `force` to the engine).
 */
export function engineCompactionRequest(trigger: CompactionTrigger, currentTokenCount?: number): EngineCompactionRequest {
  const base: EngineCompactionRequest =
    trigger === "manual" ? { force: true, compactionTarget: "threshold" } : { compactionTarget: "budget" };
  return currentTokenCount === undefined ? base : { ...base, currentTokenCount };
}

/**
 * An engine `compact()` result that counts as success: `ok: true` (compacted or not), or `compacted: true` whatever
 * `ok` says (lossless-claw answers `{ ok: false, compacted: true }` for "compacted, still over target": it did compact,
 * so maintenance and the thread rotation must follow; its `reason` stays in the result).
 */
export function isEngineCompactionOk(result: CompactResult | undefined): boolean {
  return result?.ok === true || result?.compacted === true;
}

/** A native round that completed its `contextCompaction` item. */
export function isNativeCompactionOk(result: NativeCompactOutput | undefined): boolean {
  return result?.ok === true;
}

/**
 * Engine maintenance after a compaction runs only when the engine has `maintain` and the primary compaction
 * succeeded (the same "maintenance only after success" rule turns follow). Returns why it is skipped, or undefined.
 */
export function compactionMaintenanceSkipReason(engine: CompactionEngineFacts, primaryOk: boolean): string | undefined {
  if (!engine.active) return "skipped:noEngine";
  if (!engine.hasMaintain) return "skipped:noMaintain";
  if (!primaryOk) return "skipped:compactionFailed";
  return undefined;
}

/** Whether maintenance runs after the primary compaction. */
export function canMaintainAfterCompaction(engine: CompactionEngineFacts, primaryOk: boolean): boolean {
  return compactionMaintenanceSkipReason(engine, primaryOk) === undefined;
}

/** The native status when the session has no bound thread. */
export const NO_THREAD_BINDING: NativeCompactionStatus = Object.freeze({ ok: false, reason: "noThreadBinding" });

/** Native status from a completed `compactThread` call (only defined fields are kept). */
export function nativeStatusFromOutput(output: NativeCompactOutput): NativeCompactionStatus {
  const status: NativeCompactionStatus = { ok: output.ok };
  if (output.reason !== undefined) status.reason = output.reason;
  if (output.threadId) status.threadId = output.threadId;
  if (output.turnId !== undefined) status.turnId = output.turnId;
  if (output.itemId !== undefined) status.itemId = output.itemId;
  return status;
}

/** The facts {@link settleCompaction} needs (a subset of the machine context). */
export interface SettleCompactionFacts {
  input: CompactionMachineInput;
  binding: BindingFacts | null;
  engineResult?: CompactResult | undefined;
  engineError?: string | undefined;
  native?: NativeCompactionStatus | undefined;
  aborted: boolean;
  outcomes: CompactionOutcomes;
  trace: string[];
  warnings: string[];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Engine details stay intact; a non-object value is kept under `engineDetails` so nothing is lost. */
function mergeDetails(details: unknown, native: NativeCompactionStatus): Record<string, unknown> {
  if (isPlainObject(details)) return { ...details, codexNativeCompaction: native };
  if (details === undefined) return { codexNativeCompaction: native };
  return { engineDetails: details, codexNativeCompaction: native };
}

/**
 * The compaction result. Engine-owned: the engine's result is primary (ok/compacted/reason/summary/tokens) and the
 * native round is reported only in `details.codexNativeCompaction`. Otherwise the native round is the result.
 * An abort wins: ok:false, reason "aborted" (what already happened is still reported).
 */
export function settleCompaction(facts: SettleCompactionFacts): CompactionOutput {
  const owns = engineOwnsCompaction(facts.input.engine);
  const native: NativeCompactionStatus =
    facts.native ?? (facts.aborted ? { ok: false, reason: "aborted" } : { ok: false, reason: "notAttempted" });
  // Without a number from the engine, the last prompt size Codex reported is the best "before" we have.
  const fallbackBefore = facts.binding?.lastUsage?.inputTokens ?? 0;
  let ok: boolean;
  let compacted: boolean;
  let reason: string | undefined;
  let result: CompactionOutput["result"];

  if (owns) {
    const engine = facts.engineResult;
    if (facts.engineError !== undefined) {
      ok = false;
      compacted = false;
      reason = `engineCompactionFailed: ${facts.engineError}`;
    } else if (engine) {
      ok = engine.ok;
      compacted = engine.ok && engine.compacted;
      reason = engine.reason ?? (engine.ok ? undefined : "engineCompactionFailed");
    } else {
      ok = false;
      compacted = false;
      reason = undefined;
    }
    const r = engine?.result;
    result = { tokensBefore: r?.tokensBefore ?? fallbackBefore, details: mergeDetails(r?.details, native) };
    if (r?.summary !== undefined) result.summary = r.summary;
    if (r?.firstKeptEntryId !== undefined) result.firstKeptEntryId = r.firstKeptEntryId;
    if (r?.tokensAfter !== undefined) result.tokensAfter = r.tokensAfter;
  } else {
    ok = native.ok;
    compacted = native.ok;
    reason = native.ok ? undefined : (native.reason ?? "nativeCompactionFailed");
    result = { tokensBefore: fallbackBefore, details: { codexNativeCompaction: native } };
  }

  if (facts.aborted) {
    ok = false;
    reason = "aborted";
  }

  const output: CompactionOutput = {
    ok,
    compacted,
    result,
    primary: owns ? "engine" : "native",
    native,
    outcomes: facts.outcomes,
    trace: facts.trace,
    warnings: facts.warnings,
  };
  if (reason !== undefined) output.reason = reason;
  return output;
}
