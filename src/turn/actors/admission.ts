/**
 * `hooks.admitting` and `recordingBlock`: the admission gate (the host's `beforeAgentRun`, OpenClaw's
 * `before_agent_run`) judges the final turn before any Codex work, and a refused turn is recorded as OpenClaw records
 * it: a user message carrying only the user-facing block text, never the prompt.
 */
import type { AdmissionInput, AdmissionOutput, BlockedTurnRecordOutput, TurnBlock } from "../../../machines/turn.contract.js";
import type { AgentMessage } from "../../context-engine/types.js";
import type { TurnDeps } from "../deps.js";

/** Ask the gate. Rejects when it throws, times out or answers something malformed: the machine then refuses the turn. */
export async function admitTurn(deps: TurnDeps, input: AdmissionInput, signal: AbortSignal): Promise<AdmissionOutput> {
  return deps.hooks.beforeAgentRun(
    {
      ...deps.hookIds,
      prompt: input.promptText,
      ...(input.developerInstructions !== undefined ? { developerInstructions: input.developerInstructions } : {}),
      messages: input.history.messages,
      ...(input.model !== undefined ? { model: input.model } : {}),
    },
    signal,
  );
}

/**
 * The redacted user message of a refused turn, shaped as OpenClaw's (`__openclaw.beforeAgentRunBlocked`, an
 * idempotency key of the `hook-block:before_agent_run:user:` family). Its time and key are the transcript's own
 * bookkeeping; the model never sees them.
 *
 * @example
 * ```ts
 * blockedUserMessage({ blockedBy: "guard", message: "Your message could not be sent: blocked by guard" }, 1700000000000, "k");
 * // { role: "user", content: [{ type: "text", text: "Your message could not be sent: blocked by guard" }], timestamp: 1700000000000, ... }
 * ```
 */
export function blockedUserMessage(block: TurnBlock, at: number, idempotencyKey: string): AgentMessage {
  return {
    role: "user",
    content: [{ type: "text", text: block.message }],
    timestamp: at,
    idempotencyKey,
    __openclaw: { beforeAgentRunBlocked: { blockedBy: block.blockedBy, blockedAt: at } },
  } as AgentMessage;
}

/**
 * Append the refused turn's redacted user message to the transcript (through the store, under the session lock). Keyed
 * by the run, as OpenClaw keys it: a retry of the same run (same `runId`) refused again records nothing twice.
 */
export async function recordBlockedTurn(deps: TurnDeps, block: TurnBlock): Promise<BlockedTurnRecordOutput> {
  const idempotencyKey = `hook-block:before_agent_run:user:${deps.ids.runId}`;
  const userMessage = blockedUserMessage(block, Date.now(), idempotencyKey);
  const out = await deps.store.appendMessage({
    message: userMessage,
    idempotencyKey,
    ...(deps.params.cwd !== undefined ? { cwd: deps.params.cwd } : {}),
  });
  return { entryId: out.entryId, userMessage };
}
