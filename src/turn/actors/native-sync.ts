/**
 * `threadStart.reverting` and `threadStart.injecting` (native projection mode): make the Codex thread hold the engine's
 * view before the turn starts. Each step records its intent in the binding (awaited) before the Codex call and what
 * the thread holds after it, so an attempt killed between any two steps is repaired by the next one: a revert intent
 * makes the next sync cut before that turn again (Codex answers `turn not found` when it was done), an inject intent
 * makes it cut before the turn the items went after (or rotate, for a fresh thread's preamble), since Codex never
 * shows injected items. Only while the thread is idle: nothing runs on it before `turnRunning`.
 */
import type { NativeSyncOutput, NativeSyncResult } from "../../../machines/turn.contract.js";
import { recordInjected, type NativeThreadRecord } from "../../projection/native.js";
import { faultPoint } from "../../transcript/fault.js";
import type { TurnDeps } from "../deps.js";

/** Codex's answer to a revert before a turn the thread no longer has (an earlier attempt's revert went through). */
function alreadyReverted(error: unknown): boolean {
  return /turn not found/i.test(error instanceof Error ? error.message : String(error));
}

/** The turn the injected items go after: the last kept turn (null: the preamble). */
function injectAfter(record: NativeThreadRecord): string | null {
  return record.turns.length > 0 ? record.turns[record.turns.length - 1]!.id : null;
}

/**
 * Revert the thread before `sync.revertBeforeTurnId`: intent first, then `thread/revert`, then the kept record (with
 * the intent of the injection that follows, when there is one).
 */
export async function revertThread(deps: TurnDeps, input: { threadId: string; sync: NativeSyncOutput }): Promise<NativeSyncResult> {
  const before = input.sync.revertBeforeTurnId!;
  const kept = input.sync.record as NativeThreadRecord;
  // On the record as it stands (every turn still listed): a crash from here on cuts before `before` again.
  await deps.binding.nativeIntent(input.threadId, { step: "revert", beforeTurnId: before });
  faultPoint("native:before-revert");
  const started = performance.now();
  try {
    await deps.appServer.request("thread/revert", { threadId: input.threadId, beforeTurnId: before } as never);
  } catch (error) {
    if (!alreadyReverted(error)) throw error;
  }
  faultPoint("native:after-revert");
  const next: NativeThreadRecord = input.sync.units.length > 0 ? { ...kept, intent: { step: "inject", afterTurnId: injectAfter(kept), units: input.sync.units } } : kept;
  await deps.binding.nativeRecord(input.threadId, next);
  deps.logger.info(
    { ...deps.ids, event: "native revert", threadId: input.threadId, keptTurns: input.sync.counts.keptTurns, revertedTurns: input.sync.counts.revertedTurns, ms: Math.round(performance.now() - started) },
    "codex thread reverted to the view's last matching turn",
  );
  return { reverted: true, injectedItems: 0, injectedBytes: 0 };
}

/**
 * Inject the view's remaining items after the kept part. On a resumed thread the intent is recorded first (unless the
 * revert just did), and the record of what the thread holds after it; a fresh thread has no binding of its own yet
 * (its record comes with the accepted turn), and a crash leaves it unbound.
 */
export async function injectItems(deps: TurnDeps, input: { threadId: string; sync: NativeSyncOutput; fresh: boolean; reverted: boolean }): Promise<NativeSyncResult> {
  const record = input.sync.record as NativeThreadRecord;
  if (!input.fresh && !input.reverted) {
    await deps.binding.nativeRecord(input.threadId, { ...record, intent: { step: "inject", afterTurnId: injectAfter(record), units: input.sync.units } });
  }
  faultPoint("native:before-inject");
  const started = performance.now();
  await deps.appServer.request("thread/inject_items", { threadId: input.threadId, items: input.sync.items } as never);
  faultPoint("native:after-inject");
  if (!input.fresh) await deps.binding.nativeRecord(input.threadId, recordInjected(record, input.sync.units));
  deps.logger.info(
    { ...deps.ids, event: "native inject", threadId: input.threadId, items: input.sync.items.length, bytes: input.sync.counts.injectedBytes, fresh: input.fresh, ms: Math.round(performance.now() - started) },
    "view items injected into the codex thread",
  );
  return { reverted: input.reverted, injectedItems: input.sync.items.length, injectedBytes: input.sync.counts.injectedBytes };
}
