/**
 * codex-turn-machine: run one OpenAI Codex app-server turn as an explicit XState statechart, with a pluggable
 * OpenClaw context engine controlling what the model sees.
 *
 * @example
 * ```ts
 * import { CodexAppServer, runCodexTurn, createWindowEngine } from "codex-turn-machine";
 *
 * const appServer = await CodexAppServer.spawn();
 * const result = await runCodexTurn({
 *   appServer,
 *   sessionId: "s1",
 *   sessionFile: "/data/sessions/s1.jsonl",
 *   prompt: "What changed since yesterday?",
 *   contextEngine: createWindowEngine({ tokenBudget: 16_000 }),
 *   contextTokenBudget: 16_000,
 * });
 * console.log(result.status, result.trace.join(" -> "));
 * await appServer.close();
 * ```
 */
export {
  runCodexTurn,
  startCodexTurn,
  drainBackgroundWork,
  type CodexTurnHandle,
} from "./turn.js";
export { recoverCodexSession, type RecoverCodexSessionParams, type SessionRecovery } from "./recovery.js";
export {
  CodexTurnParamsError,
  parseCodexTurnParams,
  type CodexTurnParams,
  type CodexTurnResult,
  type TurnStreamEvent,
  type ProjectionConfig,
} from "./params.js";
export { turnMachine, type TurnMachine, type TurnContext } from "../machines/turn.machine.js";
export * as turnRules from "../machines/rules.js";
export type * from "../machines/turn.contract.js";
export { compactionMachine } from "../machines/compaction.machine.js";
export { compactCodexSession, createBindingStore, type CompactCodexSessionParams } from "./compaction/compact-session.js";
export { CompactionError, type CompactionErrorCode } from "./compaction/errors.js";
export { compactSession } from "./compaction/session.js";
export { parseAccordionConfig, evaluateAccordion, runAccordionCompaction, type AccordionConfig } from "./compaction/accordion.js";
export { resetCodexSession, type ResetCodexSessionParams, type ResetCodexSessionResult } from "./transcript/reset.js";
export { readSessionHistory, readSessionTranscript } from "./transcript/session-file.js";
export { mirrorTurnToTranscript } from "./transcript/mirror.js";
export { withSessionLock } from "./transcript/lock.js";
export { listPendingFinalize, movePendingFinalizeAside, type PendingFinalizeRecord } from "./transcript/pending.js";
export { createTrajectoryWriter, TrajectoryError, type TrajectoryWriter, type TrajectoryRecord } from "./trajectory/index.js";
export { sessionSidecarPaths } from "./transcript/paths.js";
export { SessionFileError } from "./transcript/errors.js";
export * from "./codex/index.js";
export type * from "./context-engine/types.js";
export type { CodexTurnHooks, BeforePromptBuildContext, BeforePromptBuildResult, CompactionHookEvent } from "./hooks/types.js";
export { createLogger, silentLogger, REDACTED_LOG_PATHS } from "./log/logger.js";
export { legacyEngine, createWindowEngine, createRecordingEngine, type WindowEngineOptions, type RecordedEngineCall } from "./context-engine/engines/index.js";
export { assertContextEngine, engineFacts, isLegacyEngine, ContextEngineContractError, EngineResultInvalidError } from "./context-engine/contract.js";
export {
  bootstrapHarnessContextEngine,
  assembleHarnessContextEngine,
  finalizeHarnessContextEngineTurn,
  buildHarnessContextEngineRuntimeContext,
  runHarnessContextEngineMaintenance,
  EngineCallTimeoutError,
} from "./context-engine/lifecycle.js";
export {
  projectAssembledContext,
  renderPromptProjection,
  fingerprintDynamicTools,
  fingerprintPolicy,
  type ProjectionMode,
} from "./projection/index.js";
export { readThreadBinding, writeThreadBinding, clearThreadBinding, type ThreadBinding, type WriteThreadBindingOptions } from "./transcript/binding.js";
export { machineToMermaid } from "./inspect/mermaid.js";
