/** The machine's output as the public {@link CodexTurnResult}. */
import type { TurnMachineOutput } from "../../machines/turn.contract.js";
import type { CodexTurnResult } from "../params.js";
import type { PromptImage } from "../codex/prompt-images.js";

/** An empty result of the given status (a turn that never ran). */
export function emptyResult(status: CodexTurnResult["status"], runId: string): CodexTurnResult {
  return {
    status,
    runId,
    assistantText: "",
    messagesSnapshot: [],
    trace: [],
    engine: { bootstrap: "pending", assemble: "pending", finalize: "pending", maintenance: "pending" },
    nativeCompactions: [],
    followUps: [],
    followUpImages: [],
    warnings: [],
    backgroundMaintenance: Promise.resolve(),
  };
}

/**
 * Build the result. Host warnings (observer failures, history read warnings) come first; `hostWarningCount` lets the
 * caller append the ones raised later (by `agentEnd`) without repeating these.
 */
export function toTurnResult(
  output: TurnMachineOutput,
  background: Promise<void>,
  hostWarnings: readonly string[],
  runId: string,
): CodexTurnResult & { hostWarningCount: number } {
  const res = emptyResult(output.status, runId);
  res.trace = output.trace;
  res.engine = output.engine;
  res.warnings = [...hostWarnings, ...output.warnings];
  res.followUps = output.followUps;
  res.followUpImages = output.followUpImages as PromptImage[][];
  res.backgroundMaintenance = background;
  if (output.threadId) res.threadId = output.threadId;
  if (output.turnId) res.turnId = output.turnId;
  if (output.error) res.error = output.error;
  if (output.projection) res.projection = output.projection;
  if (output.cutTurn?.outcome === "recovered") {
    const { turnId, codexStatus, messages } = output.cutTurn;
    res.cutTurnRecovered = { turnId, codexStatus: codexStatus ?? "interrupted", messages: messages ?? 0 };
  }
  if (output.request) res.request = output.request;
  if (output.blocked) {
    const { userMessage, ...block } = output.blocked;
    res.blocked = block;
    // The refused turn's only message is the redacted one the transcript records (never the prompt).
    if (userMessage) res.messagesSnapshot = [userMessage];
  }
  if (output.record) {
    res.assistantText = output.record.assistantText;
    res.messagesSnapshot = output.record.messagesSnapshot;
    res.nativeCompactions = output.record.compactions;
    if (output.record.usage) res.usage = output.record.usage;
    if (output.record.modelRerouted) res.modelRerouted = output.record.modelRerouted;
    if (output.record.generatedImages) res.generatedImages = output.record.generatedImages;
    if (output.record.proposedPlan !== undefined) res.proposedPlan = output.record.proposedPlan;
    if (output.record.error && !res.error) {
      const code = output.record.error.codexErrorInfo ?? output.record.error.code;
      res.error = { phase: "turnRunning", message: output.record.error.message, ...(code ? { code } : {}) };
    }
  }
  return { ...res, hostWarningCount: hostWarnings.length };
}
