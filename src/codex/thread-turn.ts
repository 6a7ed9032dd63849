/**
 * A turn as Codex itself recorded it in the thread (`thread/read` with `includeTurns`), rebuilt into the same
 * {@link TurnRecordCore} a live turn produces: its items go through the {@link TurnProjector} as `item/completed`
 * notifications would, so the messages (and their mirror keys) are the ones the live turn would have mirrored.
 *
 * Used to recover a turn whose attempt died while Codex ran it: Codex persists every item it completes in the thread's
 * rollout (observed with 0.169: a turn whose host was SIGKILLed at its first streamed delta reads back from a new
 * app-server as `status: "interrupted"` with the user message and the completed agent message), while the host had not
 * mirrored anything yet.
 */
import { z } from "zod";
import type { CodexAppServer } from "./app-server.js";
import { NATIVE_TOOL_KINDS } from "./native-items.js";
import { validateNotification } from "./rpc.js";
import type { AssistantMessage } from "../context-engine/types.js";
import { codexErrorInfoName, TurnProjector, type TurnRecordCore } from "./turn-projector.js";

/** What the host knew of the turn when Codex accepted it (the binding's `turnInFlight`). */
export interface TurnToRebuild {
  threadId: string;
  turnId: string;
  /** The original prompt (Codex may have received a projected or hook-rewritten text). */
  prompt: string;
  images?: ReadonlyArray<{ type: "image"; data: string; mimeType: string }> | undefined;
}

/** Codex's item types of tool calls (the model asked for them; their output went back to it). */
const TOOL_ITEM_TYPES: ReadonlySet<string> = new Set<string>(["dynamicToolCall", ...NATIVE_TOOL_KINDS]);

/** Only what is read; the items are validated one by one as `item/completed` notifications. */
const threadReadSchema = z.looseObject({
  thread: z.looseObject({
    model: z.string().nullable().optional(),
    modelProvider: z.string().nullable().optional(),
    turns: z
      .array(
        z.looseObject({
          id: z.string(),
          status: z.string(),
          items: z.array(z.unknown()),
          error: z.looseObject({ message: z.string().optional(), codexErrorInfo: z.unknown().optional() }).nullable().optional(),
        }),
      )
      .optional(),
  }),
});

/** Why a turn could not be rebuilt from Codex's record. */
export type ThreadTurnMissing = { found: false; reason: "turnNotInThread" | "malformedThreadRead" };

/**
 * Read `threadId` from Codex and rebuild `turnId` as a turn record, the original prompt first. A turn Codex did not
 * complete keeps Codex's status (`interrupted`, or `failed` with its error); one it still reports `inProgress` (its
 * app-server outlived the host) is recorded as interrupted. Rejects when Codex cannot read the thread.
 *
 * @example
 * ```ts
 * const out = await readThreadTurn(appServer, { threadId, turnId, prompt: "fix the test" });
 * if (out.found) console.log(out.record.messagesSnapshot.length, out.itemsSkipped);
 * ```
 */
export async function readThreadTurn(
  appServer: Pick<CodexAppServer, "request">,
  turn: TurnToRebuild,
): Promise<{ found: true; record: TurnRecordCore; codexStatus: string; itemsSkipped: number } | ThreadTurnMissing> {
  const raw = await appServer.request("thread/read", { threadId: turn.threadId, includeTurns: true });
  const parsed = threadReadSchema.safeParse(raw);
  if (!parsed.success) return { found: false, reason: "malformedThreadRead" };
  const recorded = parsed.data.thread.turns?.find((t) => t.id === turn.turnId);
  if (!recorded) return { found: false, reason: "turnNotInThread" };
  const { model, modelProvider } = parsed.data.thread;
  const projector = new TurnProjector({
    threadId: turn.threadId,
    turnId: turn.turnId,
    ...(typeof model === "string" ? { model } : {}),
    ...(typeof modelProvider === "string" ? { provider: modelProvider } : {}),
    originalPrompt: turn.prompt,
    ...(turn.images && turn.images.length > 0 ? { promptImages: turn.images } : {}),
  });
  let itemsSkipped = 0;
  for (const item of recorded.items) {
    // Started, then completed, in Codex's order: the projector splits the model's responses where the live turn did
    // (text after a tool's output begins the next response).
    const { startedAtMs, completedAtMs } = item as { startedAtMs?: unknown; completedAtMs?: unknown };
    const params = { threadId: turn.threadId, turnId: turn.turnId, item };
    const started = validateNotification({ method: "item/started", params: { ...params, ...(typeof startedAtMs === "number" ? { startedAtMs } : {}) } });
    const completed = validateNotification({ method: "item/completed", params: { ...params, ...(typeof completedAtMs === "number" ? { completedAtMs } : {}) } });
    // An item this client does not understand is left out (counted), as a live turn leaves out an invalid notification.
    if (started.kind !== "ok" || completed.kind !== "ok") {
      itemsSkipped++;
      continue;
    }
    if (started.notification.consumed && TOOL_ITEM_TYPES.has(String((item as { type?: unknown }).type))) projector.nextResponseAfterToolOutput();
    projector.apply(started.notification);
    projector.apply(completed.notification);
  }
  const codexStatus = recorded.status;
  const record =
    codexStatus === "completed"
      ? projector.finish({ codexStatus: "completed" })
      : codexStatus === "failed"
        ? projector.finish({ codexStatus: "failed", error: failedTurnError(recorded.error) })
        : withCutShortOutcome(projector.finish({ codexStatus: "interrupted", error: { message: "the attempt running this turn ended before the turn did", code: "attemptEnded" } }));
  return { found: true, record, codexStatus, itemsSkipped };
}

/**
 * The text of the assistant entry that ends a turn cut short by the death of its attempt (see
 * {@link withCutShortOutcome}): what the transcript, the engine and the model of later turns read in place of the
 * answer that never came.
 */
export const CUT_TURN_NOTICE =
  "[Cut short: the process running this turn ended before Codex finished it, so what the turn did may be incomplete.]";

/**
 * A turn Codex did not finish because its attempt died ends, in the transcript, with an assistant entry marked as
 * interrupted (`stopReason: "aborted"`) that says so: the answer text Codex kept (its completed agent messages), then
 * {@link CUT_TURN_NOTICE}. Without it a cut turn whose answer was still streaming reads back as a bare prompt, a
 * question with no outcome. The entry's timestamp is the turn's last message's, so a replay writes the same bytes.
 *
 * @example
 * ```ts
 * const record = withCutShortOutcome(projector.finish({ codexStatus: "interrupted" }));
 * record.messagesSnapshot.at(-1); // { role: "assistant", stopReason: "aborted", content: [..., { type: "text", text: CUT_TURN_NOTICE }] }
 * ```
 */
export function withCutShortOutcome(record: TurnRecordCore): TurnRecordCore {
  const messages = record.messagesSnapshot.map((m) => m);
  const last = messages.at(-1);
  const notice = { type: "text" as const, text: CUT_TURN_NOTICE };
  const errorMessage = record.error?.message ?? "the turn did not finish";
  if (last && last.role === "assistant") {
    const answer = last as AssistantMessage;
    messages[messages.length - 1] = { ...answer, content: [...answer.content, notice], stopReason: "aborted", errorMessage };
  } else {
    const lastAssistant = messages.findLast((m): m is AssistantMessage => m.role === "assistant");
    const cut: AssistantMessage = {
      role: "assistant",
      content: [notice],
      api: lastAssistant?.api ?? "codex-app-server",
      provider: lastAssistant?.provider ?? "codex",
      model: lastAssistant?.model ?? "unknown",
      usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0 },
      stopReason: "aborted",
      errorMessage,
      timestamp: typeof last?.timestamp === "number" ? last.timestamp : 0,
    };
    messages.push(cut);
  }
  return { ...record, messagesSnapshot: messages };
}

/** A failed turn's error as Codex recorded it, with its `codexErrorInfo` (e.g. `contextWindowExceeded`) when it gave one. */
function failedTurnError(error: { message?: string | undefined; codexErrorInfo?: unknown } | null | undefined): { message: string; code: string; codexErrorInfo?: string | undefined } {
  const info = codexErrorInfoName(error?.codexErrorInfo);
  return { message: error?.message ?? "the turn failed", code: "turnFailed", ...(info !== undefined ? { codexErrorInfo: info } : {}) };
}
