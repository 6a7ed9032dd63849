/**
 * The OpenClaw plugin host: load a plugin (or a bare engine module) and get the engine, tools, hooks and runtime
 * context to run turns with.
 */
export {
  loadContextEngine,
  loadOpenClawPlugins,
  type LoadContextEngineOptions,
  type LoadedContextEngine,
  type LoadOpenClawPluginsOptions,
  type LoadedOpenClawPlugins,
  type OpenClawPluginSpec,
} from "./loader.js";
export type { PluginHookPolicy } from "./registry.js";
export type { PluginApprovalCallback, PluginApprovalDecision, PluginToolApprovalRequest } from "./tool-approval.js";
export type { PluginCommandInvocation, PluginCommandOutcome, PluginCommandSession } from "./commands.js";
export { PluginLoadError, type PluginLoadErrorCode } from "./errors.js";
export { readOpenClawConfigFile, OpenClawConfigError, type OpenClawConfigErrorCode } from "./config-file.js";
export { OPENCLAW_PLUGIN_API_VERSION, type HostPluginApi, type HostPluginRuntime } from "./api.js";
export {
  createCodexLlm,
  CODEX_LLM_PROVIDER,
  CODEX_DEFAULT_MODEL,
  DEFAULT_LLM_POLICY,
  type CodexLlm,
  type LlmCompleteRequest,
  type LlmCompleteResponse,
  type LlmPolicy,
} from "./llm.js";
export { installOpenClawSdkResolver } from "./sdk-resolver.js";
export { hostCapabilities, unmetHostRequirements, KNOWN_HOST_CAPABILITIES } from "./requirements.js";
export type { PluginDynamicTool } from "./tools.js";
export type { PluginWarning } from "./plugin-warnings.js";
export { SubagentRequestError, DEFAULT_SUBAGENT_WAIT_MS, type HostSubagentRuntime, type SubagentRunParams, type SubagentWaitResult } from "./subagent.js";
