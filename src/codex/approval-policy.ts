/**
 * The tool policy for approval requests, as OpenClaw's Codex runtime runs it (`runOpenClawToolPolicyForApprovalRequest`):
 * before the host's `onApproval` is asked, the turn's `beforeToolCall` sees the native call Codex wants to make outside
 * its sandbox. A block declines the request, a call the interceptor already has the user's approval for is granted
 * once, rewritten params decline it (the request cannot be changed, so the original is refused), anything else goes
 * on to `onApproval`. A call the interceptor was already asked about (Codex's `PreToolUse` hook through the relay, or
 * the turn host's observation as the item started) is not asked again: that decision stands.
 */
import type { BeforeToolCallDecision, ToolCallInfo } from "./dynamic-tools.js";

type Params = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const isObject = (v: unknown): v is Params => typeof v === "object" && v !== null && !Array.isArray(v);

/** What the interceptor sees for an approval request: the tool name and params of OpenClaw's policy request. */
export interface ApprovalPolicyCall {
  /** `shell` (OpenClaw plugins see `exec`), `apply_patch`, `codex_permission_approval` or `codex_network_approval`. */
  tool: string;
  arguments: Params;
}

/** The approval asks for network access (Codex names the host and protocol). */
function networkApproval(p: Params): boolean {
  const ctx = isObject(p.networkApprovalContext) ? p.networkApprovalContext : undefined;
  return str(ctx?.host) !== undefined && str(ctx?.protocol) !== undefined;
}

/** The command as one string: Codex's `command`, else its parsed command actions joined (OpenClaw's `readPolicyCommand`). */
function policyCommand(p: Params): string | undefined {
  if (typeof p.command === "string") return p.command;
  if (Array.isArray(p.command) && p.command.every((x) => typeof x === "string")) return p.command.join(" ");
  const actions = Array.isArray(p.commandActions) ? p.commandActions.map((a) => (isObject(a) ? str(a.command) : undefined)).filter((c): c is string => !!c) : [];
  return actions.length > 0 ? actions.join(" && ") : undefined;
}

/**
 * The policy call for an approval request, or `undefined` for requests OpenClaw's policy does not cover (legacy
 * `execCommandApproval` / `applyPatchApproval`, MCP elicitations).
 *
 * @example
 * ```ts
 * approvalPolicyCall("item/commandExecution/requestApproval", { command: "rm -rf build", cwd: "/w" });
 * // { tool: "shell", arguments: { command: "rm -rf build", cwd: "/w", approval: { command: "rm -rf build", cwd: "/w" } } }
 * ```
 */
export function approvalPolicyCall(method: string, params: unknown): ApprovalPolicyCall | undefined {
  const p = isObject(params) ? params : {};
  switch (method) {
    case "item/commandExecution/requestApproval": {
      if (networkApproval(p)) return { tool: "codex_network_approval", arguments: { approval: p } };
      const command = policyCommand(p);
      const cwd = str(p.cwd);
      return { tool: "shell", arguments: { ...(command !== undefined ? { command } : {}), ...(cwd !== undefined ? { cwd } : {}), approval: p } };
    }
    case "item/fileChange/requestApproval":
      return { tool: "apply_patch", arguments: p };
    case "item/permissions/requestApproval":
      return { tool: "codex_permission_approval", arguments: p };
    default:
      return undefined;
  }
}

/** JSON text with object keys sorted, to tell a real rewrite from params handed back unchanged. */
function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  if (isObject(value)) {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${stableJson(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * Whether an interceptor handed back the params it was asked with (key order aside): not a rewrite.
 *
 * @example
 * ```ts
 * sameParams({ a: 1, b: 2 }, { b: 2, a: 1 }); // true
 * ```
 */
export function sameParams(a: unknown, b: unknown): boolean {
  return stableJson(a) === stableJson(b);
}

/** How the policy answered: decline (with why), approve once, or leave it to the approval route. */
export type ApprovalPolicyOutcome = { outcome: "deny"; reason: string; rewritten: boolean } | { outcome: "approve" } | { outcome: "ask" };

/**
 * The approval's fate from the interceptor's decision on the call (`asked`: the arguments it was asked with).
 *
 * @example
 * ```ts
 * approvalPolicyOutcome({ block: true, blockReason: "no" }, {}); // { outcome: "deny", reason: "no", rewritten: false }
 * approvalPolicyOutcome({ approved: true }, {}); // { outcome: "approve" }
 * ```
 */
export function approvalPolicyOutcome(decision: BeforeToolCallDecision, asked: unknown): ApprovalPolicyOutcome {
  if (decision.block) return { outcome: "deny", reason: decision.blockReason ?? "blocked by a beforeToolCall hook", rewritten: false };
  if (decision.arguments !== undefined && !sameParams(decision.arguments, asked)) {
    return { outcome: "deny", reason: "beforeToolCall rewrote the approval request's params; the original request was refused", rewritten: true };
  }
  return decision.approved === true ? { outcome: "approve" } : { outcome: "ask" };
}

/** Key of one native call in a turn's decision memo: the thread and the call (sub-agents' call ids may repeat). */
export function nativeCallKey(call: Pick<ToolCallInfo, "threadId" | "callId">, fallbackThreadId: string): string {
  return `${call.threadId ?? fallbackThreadId}\u0000${call.callId}`;
}
