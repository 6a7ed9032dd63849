/**
 * The lifecycle decision rules of a turn, as plain functions. The turn machine's guards call them; tests call them
 * directly. They encode the spec's "Error handling" section and the OpenClaw first-port semantics.
 */
import type { AssembleOutput, EngineFacts, TurnRecord, TurnStatus } from "./turn.contract.js";

/** Bootstrap runs only for an active engine that has `bootstrap`, and only when the session file existed before. */
export function shouldBootstrap(engine: EngineFacts, hadSessionFile: boolean): boolean {
  return engine.active && engine.hasBootstrap && hadSessionFile;
}

/** Why bootstrap was skipped (for the `engine.bootstrap` outcome label). */
export function bootstrapSkipReason(engine: EngineFacts, hadSessionFile: boolean): string {
  if (!engine.active) return "skipped:noEngine";
  if (!engine.hasBootstrap) return "skipped:noBootstrap";
  if (!hadSessionFile) return "skipped:newSession";
  return "ran";
}

/** Assemble runs only with an active (non-legacy) engine. */
export function shouldAssemble(engine: EngineFacts): boolean {
  return engine.active;
}

/** An assemble result with no messages means "nothing assembled": fall back to the unassembled prompt. */
export function isAssembleEmpty(output: AssembleOutput | undefined): boolean {
  return !output || output.messages.length === 0;
}

/** The state of a finished attempt that the maintenance rule and the final status depend on. */
export interface SettleFacts {
  aborted: boolean;
  yieldAborted: boolean;
  /** Codex accepted the turn (turn/start succeeded). */
  turnAccepted: boolean;
  record?: Pick<TurnRecord, "codexStatus">;
  /** An error ended the attempt before the turn ran (threadStart or turn/start rejected). */
  failedBeforeTurn?: boolean;
}

/** The model call failed: Codex reported a failed, interrupted (not by us) or timed-out turn. */
export function hasPromptError(facts: SettleFacts): boolean {
  if (facts.failedBeforeTurn) return true;
  if (!facts.record) return facts.turnAccepted;
  return facts.record.codexStatus !== "completed";
}

/** Turn maintenance: no prompt error, not aborted, not yield-aborted, finalization succeeded, engine has `maintain`. */
export function canMaintain(facts: SettleFacts & { finalizeOk: boolean; engine: EngineFacts }): boolean {
  return maintenanceSkipReason(facts) === undefined;
}

/** Why maintenance does not run (undefined when it may run). */
export function maintenanceSkipReason(facts: SettleFacts & { finalizeOk: boolean; engine: EngineFacts }): string | undefined {
  if (!facts.engine.active) return "skipped:noEngine";
  if (facts.yieldAborted) return "skipped:yieldAborted";
  if (facts.aborted) return "skipped:aborted";
  if (hasPromptError(facts)) return "skipped:promptError";
  if (!facts.finalizeOk) return "skipped:finalizeFailed";
  if (!facts.engine.hasMaintain) return "skipped:noMaintain";
  return undefined;
}

/** Maintenance runs after the result is returned when the engine asks for background maintenance. */
export function isBackgroundMaintenance(engine: EngineFacts): boolean {
  return engine.turnMaintenanceMode === "background";
}

/** The final status: a yield wins over an abort, an abort over a failure, a failure over completion. */
export function settleStatus(facts: SettleFacts): TurnStatus {
  if (facts.yieldAborted) return "yieldAborted";
  if (facts.aborted) return "aborted";
  if (hasPromptError(facts)) return "failed";
  return "completed";
}
