/**
 * Codex app-server client: process management, JSON-RPC, thread/turn helpers, steering, projection and the
 * hardened offline configuration.
 */
export {
  CodexAppServer,
  codexHomeTempBase,
  resolveCodexHome,
  type AfterToolCall,
  type ApprovalCallback,
  type ApprovalHandler,
  type BeforeToolCall,
  type BeforeToolCallDecision,
  type CodexApprovalDecision,
  type CodexApprovalRequest,
  type CodexAppServerOptions,
  type CodexAppServerStats,
  type CodexFileChange,
  type CodexTurn,
  type CodexTurnWarning,
  type CodexTurnWarningCode,
  type CodexUserInputRequest,
  type CompactThreadResult,
  type DynamicToolContext,
  type DynamicToolSpec,
  type ResumeThreadOptions,
  type StartThreadOptions,
  type StartTurnOptions,
  type ThreadInfo,
  type ToolCallInfo,
  type UserInputAnswers,
  type UserInputCallback,
} from "./app-server.js";
export type { CodexConfigWarning } from "./config-warnings.js";
export { INHERITED_ENV_VARS } from "./child-env.js";
export { checkCodexVersion, expectedCodexVersion } from "./codex-version.js";
export { MAX_TIMER_MS } from "./timeouts.js";
export { resolveCodexCommand, type CodexCommand } from "./binary.js";
export {
  OFFLINE_KEY_ENV,
  OFFLINE_KEY_VALUE,
  OFFLINE_MODEL,
  OFFLINE_PROVIDER_ID,
  buildModelCatalog,
  codexConfigArgs,
  encodeTomlValue,
  flattenCodexConfig,
  offlineCodexConfig,
  type ModelCatalog,
  type ModelCatalogEntry,
  type OfflineCodexConfigOptions,
  type OfflineCodexSettings,
} from "./config.js";
export { CodexAppServerError, type CodexAppServerErrorCode } from "./errors.js";
export { DEFAULT_OPT_OUT_NOTIFICATIONS, KNOWN_NOTIFICATION_METHODS, KNOWN_SERVER_REQUEST_METHODS } from "./known-methods.js";
export { JsonRpcConnection, validateNotification, type NotificationCheck, type RpcStats } from "./rpc.js";
export type { ConsumedNotification, IncomingNotification, PassthroughNotification } from "./schemas.js";
export { STEER_SEPARATOR, SteerBatcher, type SteerResult } from "./steering.js";
export {
  TurnProjector,
  codexErrorInfoName,
  type CodexTurnEvent,
  type ProjectedItem,
  type TurnRecordCore,
  type TurnRecordError,
} from "./turn-projector.js";
