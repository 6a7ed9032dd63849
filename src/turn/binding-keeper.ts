/**
 * Keeps the session's thread binding while a turn runs and writes it through the session store. The machine decides
 * WHEN the binding changes (the `persistAcceptedBinding`, `persistUsage`, `persistContextOverflow`, `clearTurnInFlight`
 * and `persistNativeCompaction` actions on its transitions); this module only applies the change and serializes the
 * writes, so a slower earlier write can never land after (and undo) a later one.
 *
 * No binding write is fsynced. The binding describes the Codex thread, and what makes a turn durable is the transcript
 * append (fsynced before the result is reported). Each write is atomic (one line appended to the binding log, or the
 * log rewritten with a temp file + rename: docs/storage.md) and survives a crash of this process at once; after an OS
 * crash the binding can be one write behind, which the next turn treats like any binding that lags its thread (the
 * projection re-sends what it cannot prove the thread holds). An fsync here cost a journal commit per turn on the
 * critical path (issue 14's overhead budget).
 */
import type { Logger } from "pino";
import type { NativeCompactionRecord, ProjectionOutput, TurnUsage } from "../../machines/turn.contract.js";
import { errorLabel } from "../log/error-label.js";
import { nativeRecordOf, type ProjectionFingerprints } from "../projection/index.js";
import type { SessionStore } from "../store/session-store.js";
import {
  applyBindingUpdate,
  markNativeCompaction,
  withContextOverflow,
  withLastUsage,
  type ThreadBinding,
} from "../transcript/binding.js";
import type { NativeThreadRecord } from "../projection/native.js";

/** See the module comment. */
export interface BindingKeeper {
  /** The binding as loaded at the start of the attempt. */
  load(binding: ThreadBinding | undefined): void;
  /**
   * Codex accepted the turn: the thread holds what was injected. Written at once, while the Codex turn runs, so a crash
   * during the turn leaves a binding that knows what the thread holds.
   */
  accept(p: { threadId: string; turnId: string; prompt: string; projection?: ProjectionOutput | undefined; freshThread: boolean; requestId?: string | undefined }): void;
  /**
   * The turn's pending-finalize record is written: the turn no longer depends on the binding's `turnInFlight` marker
   * (set at accept with the original prompt) to be recovered. Written with the next queued write.
   */
  turnRecorded(turnId: string): void;
  /**
   * The ended turn reported usage: kept in the binding and written on the next macrotask, when the mirror is waiting
   * for its fsync (a write right here would sit between the end of the Codex turn and the transcript append; only the
   * next turn reads it). `settle()` waits for queued writes.
   */
  usage(threadId: string, usage: TurnUsage | undefined): void;
  /**
   * The turn failed because its input no longer fit the model's context window: kept in the binding (after the usage of
   * the turn's earlier calls) for the next turn's accordion; written with the usage, on the next macrotask.
   */
  contextOverflow(threadId: string, turnId: string): void;
  /**
   * Native compaction dropped injected context and earlier items: the next turn must re-send them. A compaction that
   * completed before this turn's user message started is Codex's pre-turn compaction: what this turn brings is held.
   */
  nativeCompaction(compaction: NativeCompactionRecord, preTurn: boolean): void;
  /**
   * Native mode: what the bound thread holds now, or the intent of the sync step about to run (revert, inject). Written
   * at once, durably, and awaited; a failed write rejects: the Codex call that follows must never run before its intent
   * is on disk.
   */
  nativeRecord(threadId: string, record: NativeThreadRecord): Promise<void>;
  /** Native mode: the intent of the step about to run, on the record the binding holds now (written and awaited). */
  nativeIntent(threadId: string, intent: NonNullable<NativeThreadRecord["intent"]>): Promise<void>;
  /** Wait for queued writes (before the result is reported). */
  settle(): Promise<void>;
}

/** Build the keeper for one attempt. */
// Long (about 110 lines) on purpose: one closure over the attempt's binding and its write queue (the native sync's durable
// steps included); each method is a few lines.
export function createBindingKeeper(deps: {
  store: SessionStore;
  logger: Logger;
  ids: Record<string, string>;
  fingerprints: ProjectionFingerprints;
  /** The turn's prompt images, recorded with the original prompt in `turnInFlight`. */
  promptImages?: ReadonlyArray<{ data: string; mimeType: string }> | undefined;
}): BindingKeeper {
  const images = deps.promptImages?.map(({ data, mimeType }) => ({ type: "image" as const, data, mimeType }));
  let binding: ThreadBinding | undefined;
  let lastProjection: ProjectionOutput | undefined;
  let writes: Promise<void> = Promise.resolve();
  /** The binding changed since the last write was queued (the usage, written on the next macrotask or at settle). */
  let dirty = false;
  const persist = (): Promise<void> => {
    dirty = false;
    writes = writes.then(async () => {
      if (!binding) return;
      try {
        await deps.store.writeBinding(binding, { durable: false });
      } catch (error) {
        deps.logger.warn({ ...deps.ids, event: "binding write failed", err: errorLabel(error) }, "thread binding write failed");
      }
    });
    return writes;
  };
  /**
   * A native sync step's record: durable (fsynced, so an OS crash cannot lose an intent whose Codex call went through)
   * and never swallowed: a failed write fails the step before Codex is asked to do anything. Only turns that revert or
   * inject pay for it.
   */
  const persistNative = (): Promise<void> => {
    dirty = false;
    const next = writes.then(async () => {
      if (binding) await deps.store.writeBinding(binding, { durable: true });
    });
    writes = next.catch(() => undefined);
    return next;
  };
  // Written once the mirror has started its fsync (the next macrotask), so the write overlaps the wait for the disk
  // instead of delaying the mirror; settle() waits for it.
  const persistOnNextMacrotask = (): void => {
    dirty = true;
    setImmediate(() => {
      if (dirty) void persist();
    });
  };
  return {
    load(loaded) {
      binding = loaded;
    },
    accept(accepted) {
      lastProjection = accepted.projection;
      binding = acceptedBinding(accepted.freshThread ? undefined : binding, accepted, deps.fingerprints, images);
      void persist();
    },
    turnRecorded(turnId) {
      if (binding?.turnInFlight?.turnId !== turnId) return;
      const { turnInFlight: _recorded, ...rest } = binding;
      binding = rest;
      persistOnNextMacrotask();
    },
    usage(threadId, usage) {
      if (!binding || !usage || binding.threadId !== threadId) return;
      binding = withLastUsage(binding, threadId, {
        inputTokens: usage.lastCallInputTokens ?? usage.inputTokens,
        totalTokens: usage.lastCallTotalTokens ?? usage.totalTokens,
        ...(usage.modelContextWindow ? { modelContextWindow: usage.modelContextWindow } : {}),
      });
      persistOnNextMacrotask();
    },
    contextOverflow(threadId, turnId) {
      if (!binding || binding.threadId !== threadId) return;
      binding = withContextOverflow(binding, threadId, turnId);
      persistOnNextMacrotask();
    },
    nativeCompaction(compaction, preTurn) {
      // Only a completed compaction dropped anything (the started notification comes first).
      if (!compaction.completed || !binding || binding.threadId !== compaction.threadId) return;
      binding = markNativeCompaction(binding, compaction.threadId);
      // Native mode: Codex's compaction dropped the injected non-user items; what the thread holds from this turn on is
      // unknown, and the next sync cuts before it (Codex then restores the history before the compaction).
      if (binding.native) binding = { ...binding, native: { ...binding.native, unknownFrom: compaction.turnId } };
      if (preTurn && !binding.native) {
        const update = lastProjection?.bindingUpdate as { ledgerAdd?: string[] | undefined } | undefined;
        binding = { ...binding, heldTurnIds: [compaction.turnId], ledger: [...(update?.ledgerAdd ?? [])] };
      }
      void persist();
    },
    async nativeRecord(threadId, record) {
      if (!binding || binding.threadId !== threadId) return;
      binding = { ...binding, native: record, heldTurnIds: record.turns.map((t) => t.id) };
      await persistNative();
    },
    async nativeIntent(threadId, intent) {
      if (!binding || binding.threadId !== threadId) return;
      // A thread adopted from a binding without a record (its turns ran before native mode): the record the sync
      // planned on (`nativeRecordOf`), so an adopted delta thread keeps its adopted turns' ledger.
      const record: NativeThreadRecord = nativeRecordOf(binding) ?? { preamble: [], turns: binding.heldTurnIds.map((id) => ({ id, units: [] })) };
      binding = { ...binding, native: { ...record, intent } };
      await persistNative();
    },
    async settle() {
      if (dirty) void persist();
      await writes;
    },
  };
}

/** The binding once Codex accepted the turn, with the in-flight marker of the turn. */
function acceptedBinding(
  current: ThreadBinding | undefined,
  a: Parameters<BindingKeeper["accept"]>[0],
  fingerprints: ProjectionFingerprints,
  images: Array<{ type: "image"; data: string; mimeType: string }> | undefined,
): ThreadBinding {
  const next = applyBindingUpdate(current, {
    threadId: a.threadId,
    turnId: a.turnId,
    update: a.projection?.bindingUpdate,
    dynamicToolsFingerprint: fingerprints.dynamicTools,
    engineId: fingerprints.engineId,
    policyFingerprint: fingerprints.policy,
    projectionMode: a.projection?.mode ?? "none",
  } as Parameters<typeof applyBindingUpdate>[1]);
  // Until its pending record exists, this marker is how a crash of this attempt leaves the turn recoverable.
  return {
    ...next,
    turnInFlight: { turnId: a.turnId, prompt: a.prompt, ...(images && images.length > 0 ? { images } : {}), ...(a.requestId !== undefined ? { requestId: a.requestId } : {}) },
  };
}
