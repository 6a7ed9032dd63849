/**
 * `mirror.recordingPending` and `mirror.writing`: the turn reaches durable storage before anything else uses it. The
 * store asserts the session lock before each write (the seam owns the lock), so these actors do not repeat it.
 */
import type { MirrorOutput, PreparedMessagesOutput, RequestMark, TurnRecord } from "../../../machines/turn.contract.js";
import type { AgentMessage } from "../../context-engine/types.js";
import type { TurnDeps } from "../deps.js";
import { durableTurnAdvancementKey } from "../../context-engine/durable-turns.js";
import { engineCommitsTurns } from "../../../machines/rules.js";

/**
 * The turn's messages as they are to be stored: each put to `beforeMessageWrite` in order (a tool result with its tool's
 * name and call id); a rewrite replaces it, a block keeps it out. A hook failure keeps the message (the runner warns).
 */
export async function prepareTranscriptMessages(deps: TurnDeps, input: { record: TurnRecord }): Promise<PreparedMessagesOutput> {
  const messages: AgentMessage[] = [];
  let rewritten = 0;
  let dropped = 0;
  for (const message of input.record.messagesSnapshot) {
    const tool = message as { role?: string | undefined; toolName?: unknown; toolCallId?: unknown };
    const out = await deps.hooks.beforeMessageWrite({
      ...deps.hookIds,
      message,
      ...(tool.role === "toolResult" && typeof tool.toolName === "string" ? { toolName: tool.toolName } : {}),
      ...(tool.role === "toolResult" && typeof tool.toolCallId === "string" ? { toolCallId: tool.toolCallId } : {}),
    });
    if (out?.block) {
      dropped++;
      continue;
    }
    if (out?.message) rewritten++;
    messages.push(out?.message ?? message);
  }
  return { messages, rewritten, dropped };
}

/** The pending-finalize record, with the turn's snapshot: a crash from here on still leaves the turn for recovery. */
export async function recordPendingFinalize(deps: TurnDeps, input: { record: TurnRecord; prePromptMessageCount: number; request?: RequestMark | undefined }): Promise<void> {
  const { record } = input;
  await deps.store.recordPending({
    threadId: record.threadId,
    turnId: record.turnId,
    prePromptMessageCount: input.prePromptMessageCount,
    messageCount: record.messagesSnapshot.length,
    status: record.codexStatus,
    messages: record.messagesSnapshot,
    // A durable engine's turn: the key its commit uses, kept for a retry after a crash.
    ...(engineCommitsTurns(deps.facts)
      ? { advancementKey: durableTurnAdvancementKey({ sessionId: deps.params.sessionId, threadId: record.threadId, turnId: record.turnId }) }
      : {}),
    // With `requestId`: a recovery that mirrors the turn from this record marks its prompt too.
    ...(input.request ? { request: input.request } : {}),
  });
}

/** Append the turn to the transcript (idempotent by mirror keys). A failure rejects: the machine fails the turn. */
export async function mirrorTranscript(deps: TurnDeps, input: { record: TurnRecord; request?: RequestMark | undefined }): Promise<MirrorOutput> {
  const { record } = input;
  const out = await deps.store.appendTurn({
    threadId: record.threadId,
    turnId: record.turnId,
    messages: record.messagesSnapshot,
    ...(input.request ? { request: input.request } : {}),
    ...(deps.params.cwd !== undefined ? { cwd: deps.params.cwd } : {}),
  });
  deps.logger.info(
    { ...deps.ids, event: "mirror written", threadId: record.threadId, turnId: record.turnId, appended: out.appended, skipped: out.skipped },
    "transcript mirrored",
  );
  return { appended: out.appended, entryCount: out.entryCount };
}
