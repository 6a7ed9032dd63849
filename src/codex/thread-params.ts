/**
 * Thread settings -> protocol params of `thread/start`, `thread/resume` and the sandbox part of `turn/start`
 * (src/codex/protocol/v2). Pure functions; the same settings always give the same params (key order included).
 */
import type { SandboxPolicy } from "./protocol/v2/SandboxPolicy.js";
import type { ThreadResumeParams } from "./protocol/v2/ThreadResumeParams.js";
import type { ThreadStartParams } from "./protocol/v2/ThreadStartParams.js";
import type { DynamicToolSpec } from "./dynamic-tools.js";
import type { ThreadSettings } from "./options.js";

/**
 * Drop `undefined` values (in place) so params carry only what was set.
 *
 * @example
 * ```ts
 * defined({ a: 1, b: undefined }); // { a: 1 }
 * ```
 */
export function defined<T extends Record<string, unknown>>(obj: T): T {
  for (const k of Object.keys(obj)) if (obj[k] === undefined) delete obj[k];
  return obj;
}

/**
 * The settings record of validated start/resume options (only the settings keys, undefined ones dropped).
 *
 * @example
 * ```ts
 * const settings = threadSettingsOf(parsed.data);
 * ```
 */
export function threadSettingsOf(o: ThreadSettings): ThreadSettings {
  return defined({
    cwd: o.cwd,
    developerInstructions: o.developerInstructions,
    model: o.model,
    approvalPolicy: o.approvalPolicy,
    sandbox: o.sandbox,
    writableRoots: o.writableRoots,
    networkAccess: o.networkAccess,
    reasoningEffort: o.reasoningEffort,
    reasoningSummary: o.reasoningSummary,
    serviceTier: o.serviceTier,
    config: o.config,
  });
}

/**
 * The thread `config` overrides: the caller's, plus the reasoning settings (`model_reasoning_effort`,
 * `model_reasoning_summary`) and the workspace-write sandbox details (`sandbox_workspace_write.*`), which
 * thread/start and thread/resume have no field for.
 */
function threadConfig(s: ThreadSettings): Record<string, unknown> | undefined {
  const config: Record<string, unknown> = { ...(s.config ?? {}) };
  if (s.reasoningEffort !== undefined) config.model_reasoning_effort = s.reasoningEffort;
  if (s.reasoningSummary !== undefined) config.model_reasoning_summary = s.reasoningSummary;
  if (s.sandbox === "workspace-write" && (s.writableRoots !== undefined || s.networkAccess !== undefined)) {
    const ww = defined({ writable_roots: s.writableRoots, network_access: s.networkAccess });
    config.sandbox_workspace_write = { ...((config.sandbox_workspace_write as Record<string, unknown> | undefined) ?? {}), ...ww };
  }
  return Object.keys(config).length > 0 ? config : undefined;
}

/** The fields thread/start and thread/resume share. Codex's built-in personality is always disabled ("none"). */
function sharedThreadParams(s: ThreadSettings, defaultCwd: string | undefined) {
  return {
    cwd: s.cwd ?? defaultCwd,
    developerInstructions: s.developerInstructions,
    model: s.model,
    approvalPolicy: s.approvalPolicy as ThreadStartParams["approvalPolicy"],
    sandbox: s.sandbox,
    serviceTier: s.serviceTier,
    config: threadConfig(s) as ThreadStartParams["config"],
    // The host's identity and workspace personality files stay authoritative (spec: codex-harness-runtime.md, Overview).
    personality: "none" as const,
  };
}

/**
 * `thread/start` params.
 *
 * @example
 * ```ts
 * const params = threadStartParams(settings, tools, { defaultCwd: process.cwd() });
 * ```
 */
export function threadStartParams(
  s: ThreadSettings,
  tools: DynamicToolSpec[],
  options: { defaultCwd: string; ephemeral?: boolean | undefined },
): ThreadStartParams {
  return defined({
    ...sharedThreadParams(s, options.defaultCwd),
    ephemeral: options.ephemeral,
    dynamicTools:
      tools.length > 0
        ? tools.map((t) => ({ type: "function" as const, name: t.name, description: t.description, inputSchema: t.inputSchema as never }))
        : undefined,
  });
}

/**
 * `thread/resume` params: every setting is re-sent (Codex does not restore developer instructions, sandbox or
 * approvals on resume); always `excludeTurns: true` (team notes P11).
 *
 * @example
 * ```ts
 * const params = threadResumeParams(threadId, settings);
 * ```
 */
export function threadResumeParams(threadId: string, s: ThreadSettings): ThreadResumeParams {
  return defined({ threadId, excludeTurns: true, ...sharedThreadParams(s, undefined) });
}

/**
 * The `sandboxPolicy` to send with `turn/start`, or `undefined` when the mode alone (sent on thread start/resume)
 * says it all. Sent only for what the mode cannot express: writable roots and network access.
 *
 * @example
 * ```ts
 * turnSandboxPolicy({ sandbox: "workspace-write", writableRoots: ["/data"], approvalPolicy: "never" });
 * // { type: "workspaceWrite", writableRoots: ["/data"], networkAccess: false, excludeTmpdirEnvVar: false, excludeSlashTmp: false }
 * ```
 */
export function turnSandboxPolicy(s: ThreadSettings): SandboxPolicy | undefined {
  if (s.writableRoots === undefined && s.networkAccess === undefined) return undefined;
  if (s.sandbox === "workspace-write") {
    return {
      type: "workspaceWrite",
      writableRoots: s.writableRoots ?? [],
      networkAccess: s.networkAccess ?? false,
      excludeTmpdirEnvVar: false,
      excludeSlashTmp: false,
    };
  }
  if (s.sandbox === "read-only") return { type: "readOnly", networkAccess: s.networkAccess ?? false };
  return undefined;
}
