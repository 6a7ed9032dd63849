/**
 * codex-turn-machine: run one OpenAI Codex app-server turn as an explicit XState statechart, with a pluggable
 * OpenClaw context engine controlling what the model sees.
 *
 * The package root exports the public API only: running, recovering, compacting and resetting sessions; the Codex
 * app-server client and its options; context engines, their contract and the OpenClaw plugin host; the session store
 * seam; the statecharts (for inspectors); types, errors and the logger. Internals stay importable by path in this
 * repository's tests, never from here.
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
// Running turns.
export { runCodexTurn, startCodexTurn, drainBackgroundWork, type CodexTurnHandle } from "./turn/index.js";
export { createCodexSession, type CodexSession, type CodexSessionOptions, type CodexSessionTurnOptions } from "./turn/session.js";
export {
  CodexTurnParamsError,
  type CodexTurnParams,
  type CodexTurnResult,
  type TurnStreamEvent,
  type ProjectionConfig,
} from "./params.js";
export type { CodexTurnTimeouts, CodexTurnTool, CompactionCadence } from "./turn-params.js";
export type * from "../machines/turn.contract.js";

// Sessions: recovery, compaction, reset, reading, storage.
export { recoverCodexSession, RecoveryMirrorError, type CutPrompt, type CutTurnRecovery, type RecoverCodexSessionParams, type SessionRecovery } from "./recovery.js";
export { compactCodexSession, type CompactCodexSessionParams } from "./compaction/session.js";
export { CompactionError, type CompactionErrorCode } from "./compaction/errors.js";
export type { CompactionOutput, CompactionTrigger } from "./compaction/compact-session.js";
export { resetCodexSession, type ResetCodexSessionParams, type ResetCodexSessionResult } from "./transcript/reset.js";
export { readSessionHistory } from "./transcript/session-file.js";
export { sessionSidecarPaths, type SessionSidecarPaths } from "./transcript/paths.js";
export { SessionFileError, type SessionFileErrorCode } from "./transcript/errors.js";
export * from "./store/index.js";

// The Codex app-server client.
export {
  CodexAppServer,
  resolveCodexHome,
  type ApprovalCallback,
  type HostDecisionContext,
  type CodexApprovalDecision,
  type CodexApprovalRequest,
  type CodexAppServerOptions,
  type CodexAppServerStats,
  type CodexAccountState,
  type CodexTurn,
  type CodexUserInputRequest,
  type CompactThreadResult,
  type DynamicToolContext,
  type DynamicToolSpec,
  type ResumeThreadOptions,
  type StartThreadOptions,
  type StartTurnOptions,
  type ThreadInfo,
  type UserInputAnswers,
  type UserInputCallback,
} from "./codex/app-server.js";
export { CodexAppServerError, type CodexAppServerErrorCode } from "./codex/errors.js";
export type { CodexConfigWarning } from "./codex/config-warnings.js";
export type { PromptImage, PromptImageInput } from "./codex/prompt-images.js";
export { CODEX_PROTOCOL_VERSION } from "./codex/protocol-version.js";

// Context engines, their contract, and the OpenClaw plugin host.
export type * from "./context-engine/types.js";
export { legacyEngine, createWindowEngine, createRecordingEngine, type WindowEngineOptions, type RecordedEngineCall } from "./context-engine/engines/index.js";
export { assertContextEngine, engineFacts, isLegacyEngine, ContextEngineContractError, EngineResultInvalidError } from "./context-engine/contract.js";
export { EngineCallTimeoutError } from "./context-engine/lifecycle.js";
export {
  loadContextEngine,
  loadOpenClawPlugins,
  PluginLoadError,
  SubagentRequestError,
  type HostSubagentRuntime,
  type LoadContextEngineOptions,
  type LoadedContextEngine,
  type LoadOpenClawPluginsOptions,
  type LoadedOpenClawPlugins,
  type OpenClawPluginSpec,
  type PluginCommandInvocation,
  type PluginCommandOutcome,
  type PluginCommandSession,
  type PluginApprovalCallback,
  type PluginHookPolicy,
  type PluginApprovalDecision,
  type PluginToolApprovalRequest,
  type PluginWarning,
  type LlmPolicy,
  type PluginLoadErrorCode,
  readOpenClawConfigFile,
  OpenClawConfigError,
  type OpenClawConfigErrorCode,
} from "./openclaw/index.js";
export type * from "./hooks/types.js";

// The statecharts (for inspectors and diagrams).
export { turnMachine, type TurnMachine, type TurnContext } from "../machines/turn.machine.js";
export * as turnRules from "../machines/rules.js";
export { compactionMachine } from "../machines/compaction.machine.js";

// Logs and trajectories.
export { createLogger, silentLogger, REDACTED_LOG_PATHS } from "./log/logger.js";
export { createTrajectoryWriter, TrajectoryError, type TrajectoryWriter, type TrajectoryRecord } from "./trajectory/index.js";
