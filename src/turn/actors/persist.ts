/**
 * `mirror.recordingPending` and `mirror.writing`: the turn reaches durable storage before anything else uses it. The
 * store asserts the session lock before each write (the seam owns the lock), so these actors do not repeat it.
 */
import type { MirrorOutput, TurnRecord } from "../../../machines/turn.contract.js";
import type { TurnDeps } from "../deps.js";

/** The pending-finalize record, with the turn's snapshot: a crash from here on still leaves the turn for recovery. */
export async function recordPendingFinalize(deps: TurnDeps, input: { record: TurnRecord; prePromptMessageCount: number }): Promise<void> {
  const { record } = input;
  await deps.store.recordPending({
    threadId: record.threadId,
    turnId: record.turnId,
    prePromptMessageCount: input.prePromptMessageCount,
    messageCount: record.messagesSnapshot.length,
    status: record.codexStatus,
    messages: record.messagesSnapshot,
  });
}

/** Append the turn to the transcript (idempotent by mirror keys). A failure rejects: the machine fails the turn. */
export async function mirrorTranscript(deps: TurnDeps, input: { record: TurnRecord }): Promise<MirrorOutput> {
  const { record } = input;
  const out = await deps.store.appendTurn({
    threadId: record.threadId,
    turnId: record.turnId,
    messages: record.messagesSnapshot,
    ...(deps.params.cwd !== undefined ? { cwd: deps.params.cwd } : {}),
  });
  deps.logger.info(
    { ...deps.ids, event: "mirror written", threadId: record.threadId, turnId: record.turnId, appended: out.appended, skipped: out.skipped },
    "transcript mirrored",
  );
  return { appended: out.appended, entryCount: out.entryCount };
}
