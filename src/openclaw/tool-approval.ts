/**
 * A plugin's `before_tool_call` may answer `requireApproval: { title, description, severity?, timeoutMs?,
 * allowedDecisions?, onResolution? }`: the call runs only when someone approves it, as in OpenClaw. The loader's
 * `onPluginApproval` is asked (bounded by the request's `timeoutMs`, default 120 s, at most the loader's
 * `pluginApprovalTimeoutMs`, and withdrawn when the turn ends first: the plugin hears `cancelled`); without one, or
 * when it fails, times out or denies, the call is blocked with OpenClaw's reason. `allow-always` is remembered for the plugin, tool
 * and title while the plugins stay loaded. The plugin's `onResolution` hears the outcome.
 */
import { z } from "zod";

/** What an approver may answer. */
export type PluginApprovalDecision = "allow-once" | "allow-always" | "deny";

/** What the approver is asked. */
export interface PluginToolApprovalRequest {
  pluginId: string;
  /** The tool as the plugin knows it (Codex's shell is `exec`). */
  toolName: string;
  toolCallId: string;
  sessionId?: string | undefined;
  title: string;
  description: string;
  severity?: "info" | "warning" | "critical" | undefined;
  /** The answers the plugin accepts (another answer counts as `deny`). */
  allowedDecisions: PluginApprovalDecision[];
}

/**
 * Decides a plugin's approval request (a person, a policy). `signal` aborts when the request is no longer waited for
 * (it timed out): a person's question can be withdrawn then.
 */
export type PluginApprovalCallback = (request: PluginToolApprovalRequest, options: { signal: AbortSignal }) => PluginApprovalDecision | Promise<PluginApprovalDecision>;

/** Approvals `allow-always` granted, by plugin, tool and title. */
export type RememberedApprovals = Set<string>;

/** OpenClaw's default wait for a plugin approval, and this host's default cap on it (`pluginApprovalTimeoutMs`). */
export const DEFAULT_PLUGIN_APPROVAL_TIMEOUT_MS = 120_000;
const ALL_DECISIONS: PluginApprovalDecision[] = ["allow-once", "allow-always", "deny"];

const requestSchema = z.looseObject({
  title: z.string().trim().min(1),
  description: z.string().default(""),
  severity: z.enum(["info", "warning", "critical"]).optional(),
  timeoutMs: z.number().int().positive().optional(),
  timeoutReason: z.string().trim().min(1).optional(),
  allowedDecisions: z.array(z.enum(["allow-once", "allow-always", "deny"])).min(1).optional(),
  pluginId: z.string().min(1).optional(),
  onResolution: z.custom<(d: string) => unknown>((v) => typeof v === "function").optional(),
});

/** The outcome for the call: it runs, or it is blocked with a reason the model sees. */
export type ApprovalOutcome = { allow: true } | { allow: false; reason: string };

function tell(onResolution: ((d: string) => unknown) | undefined, resolution: string): void {
  if (!onResolution) return;
  try {
    void Promise.resolve(onResolution(resolution)).catch(() => undefined);
  } catch {
    // The plugin's observer failing changes nothing about the decision.
  }
}

async function ask(
  approver: PluginApprovalCallback,
  request: PluginToolApprovalRequest,
  timeoutMs: number,
  withdrawn: AbortSignal | undefined,
): Promise<PluginApprovalDecision | "timeout" | "withdrawn"> {
  const waiting = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let onWithdraw: (() => void) | undefined;
  const timeout = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), timeoutMs)));
  const gone = new Promise<"withdrawn">((resolve) => {
    onWithdraw = () => resolve("withdrawn");
    if (withdrawn?.aborted) onWithdraw();
    else withdrawn?.addEventListener("abort", onWithdraw, { once: true });
  });
  try {
    const answer = await Promise.race([Promise.resolve().then(() => approver(request, { signal: waiting.signal })), timeout, gone]);
    if (answer === "timeout" || answer === "withdrawn") waiting.abort();
    return answer;
  } finally {
    clearTimeout(timer);
    if (onWithdraw) withdrawn?.removeEventListener("abort", onWithdraw);
  }
}

/**
 * Decide a `requireApproval` answer for one call.
 *
 * @example
 * ```ts
 * const outcome = await decidePluginApproval(result.requireApproval, { pluginId: "guard", toolName: "exec", toolCallId: "c1" }, approver, new Set());
 * if (!outcome.allow) console.log(outcome.reason);
 * ```
 */
export async function decidePluginApproval(
  raw: unknown,
  call: { pluginId: string; toolName: string; toolCallId: string; sessionId?: string | undefined },
  approver: PluginApprovalCallback | undefined,
  remembered: RememberedApprovals,
  maxTimeoutMs: number = DEFAULT_PLUGIN_APPROVAL_TIMEOUT_MS,
  /** Aborts when nobody waits for the decision any more (the turn ended): the question is withdrawn. */
  withdrawn?: AbortSignal,
): Promise<ApprovalOutcome> {
  const parsed = requestSchema.safeParse(raw);
  if (!parsed.success) return { allow: false, reason: "Plugin approval required (the plugin's approval request is malformed)" };
  const a = parsed.data;
  const pluginId = a.pluginId ?? call.pluginId;
  const key = JSON.stringify([pluginId, call.toolName, a.title]);
  if (remembered.has(key)) {
    tell(a.onResolution, "allow-always");
    return { allow: true };
  }
  if (!approver) {
    tell(a.onResolution, "cancelled");
    return { allow: false, reason: "Plugin approval unavailable (no approval route)" };
  }
  const allowed = a.allowedDecisions ?? ALL_DECISIONS;
  const request: PluginToolApprovalRequest = {
    pluginId,
    toolName: call.toolName,
    toolCallId: call.toolCallId,
    ...(call.sessionId !== undefined ? { sessionId: call.sessionId } : {}),
    title: a.title,
    description: a.description,
    ...(a.severity ? { severity: a.severity } : {}),
    allowedDecisions: allowed,
  };
  let decision: PluginApprovalDecision | "timeout" | "withdrawn";
  try {
    decision = await ask(approver, request, Math.min(a.timeoutMs ?? DEFAULT_PLUGIN_APPROVAL_TIMEOUT_MS, maxTimeoutMs), withdrawn);
  } catch {
    tell(a.onResolution, "cancelled");
    return { allow: false, reason: "Plugin approval required (the approver failed)" };
  }
  if (decision === "withdrawn") {
    tell(a.onResolution, "cancelled");
    return { allow: false, reason: "Plugin approval withdrawn (the turn ended)" };
  }
  if (decision === "timeout") {
    tell(a.onResolution, "timeout");
    return { allow: false, reason: a.timeoutReason ?? "Approval timed out" };
  }
  const effective = allowed.includes(decision) ? decision : "deny";
  tell(a.onResolution, effective);
  if (effective === "deny") return { allow: false, reason: "Denied by user" };
  if (effective === "allow-always") remembered.add(key);
  return { allow: true };
}
