/**
 * Method names of the pinned protocol (codex 0.171.0). The type checks below fail to compile when the generated
 * protocol gains or loses a method, so the list cannot silently drift from `src/codex/protocol`.
 */
import type { ServerNotification } from "./protocol/ServerNotification.js";
import type { ServerRequest } from "./protocol/ServerRequest.js";

export const KNOWN_NOTIFICATION_METHODS = [
  "error",
  "thread/started",
  "thread/status/changed",
  "thread/readState/changed",
  "thread/archived",
  "thread/deleted",
  "thread/unarchived",
  "thread/closed",
  "thread/reverted",
  "skills/changed",
  "thread/name/updated",
  "thread/section/changed",
  "thread/attachment/updated",
  "thread/goal/updated",
  "thread/prediction/updated",
  "thread/goal/cleared",
  "thread/queue/changed",
  "project/changed",
  "thread/project/updated",
  "thread/environment/connected",
  "thread/environment/disconnected",
  "thread/settings/updated",
  "thread/tokenUsage/updated",
  "turn/started",
  "hook/started",
  "turn/completed",
  "hook/completed",
  "turn/diff/updated",
  "turn/plan/updated",
  "item/started",
  "item/autoApprovalReview/started",
  "item/autoApprovalReview/completed",
  "autoApprovalReview/strictReviewRequired",
  "item/completed",
  "rawResponseItem/completed",
  "rawResponse/completed",
  "item/agentMessage/delta",
  "item/plan/delta",
  "command/exec/outputDelta",
  "process/outputDelta",
  "thread/search/partial",
  "process/exited",
  "item/commandExecution/outputDelta",
  "item/commandExecution/terminalInteraction",
  "item/fileChange/outputDelta",
  "item/fileChange/patchUpdated",
  "serverRequest/resolved",
  "item/mcpToolCall/progress",
  "mcpServer/oauthLogin/completed",
  "mcpServer/startupStatus/updated",
  "mcpServer/event/stream/notification",
  "account/updated",
  "account/gatewayOAuth/changed",
  "account/rateLimits/updated",
  "app/list/updated",
  "remoteControl/status/changed",
  "externalAgentConfig/import/progress",
  "externalAgentConfig/import/completed",
  "fs/changed",
  "item/reasoning/summaryTextDelta",
  "item/reasoning/summaryPartAdded",
  "item/reasoning/textDelta",
  "thread/compacted",
  "model/rerouted",
  "model/verification",
  "modelProvider/authRecoveryStarted",
  "modelProvider/authRecoveryCompleted",
  "turn/moderationMetadata",
  "model/safetyBuffering/updated",
  "warning",
  "guardianWarning",
  "deprecationNotice",
  "configWarning",
  "fuzzyFileSearch/sessionUpdated",
  "fuzzyFileSearch/sessionCompleted",
  "thread/realtime/started",
  "thread/realtime/itemAdded",
  "thread/realtime/item/started",
  "thread/realtime/item/transcript/delta",
  "thread/realtime/item/completed",
  "thread/realtime/transcript/delta",
  "thread/realtime/transcript/done",
  "thread/realtime/outputAudio/delta",
  "thread/realtime/sdp",
  "thread/realtime/error",
  "thread/realtime/closed",
  "windows/worldWritableWarning",
  "windowsSandbox/setupCompleted",
  "account/login/completed",
] as const satisfies ReadonlyArray<ServerNotification["method"]>;

export const KNOWN_SERVER_REQUEST_METHODS = [
  "item/commandExecution/requestApproval",
  "item/fileChange/requestApproval",
  "item/tool/requestUserInput",
  "mcpServer/elicitation/request",
  "item/permissions/requestApproval",
  "item/tool/call",
  "account/chatgptAuthTokens/refresh",
  "attestation/generate",
  "applyPatchApproval",
  "execCommandApproval",
] as const satisfies ReadonlyArray<ServerRequest["method"]>;

// Compile-time completeness: every generated method must be listed.
type MissingNotification = Exclude<ServerNotification["method"], (typeof KNOWN_NOTIFICATION_METHODS)[number]>;
type MissingServerRequest = Exclude<ServerRequest["method"], (typeof KNOWN_SERVER_REQUEST_METHODS)[number]>;
const notificationsComplete: [MissingNotification] extends [never] ? true : MissingNotification = true;
const serverRequestsComplete: [MissingServerRequest] extends [never] ? true : MissingServerRequest = true;
void notificationsComplete;
void serverRequestsComplete;

export const knownNotificationMethods: ReadonlySet<string> = new Set(KNOWN_NOTIFICATION_METHODS);
export const knownServerRequestMethods: ReadonlySet<string> = new Set(KNOWN_SERVER_REQUEST_METHODS);

/** Notifications that are noise for this client; suppressed at `initialize` (agent message deltas are kept: we stream them). */
export const DEFAULT_OPT_OUT_NOTIFICATIONS: readonly string[] = [
  "account/rateLimits/updated",
  "remoteControl/status/changed",
  "thread/readState/changed",
];
