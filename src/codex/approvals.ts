/**
 * Approval server requests as one typed union for the host (`StartTurnOptions.onApproval`), and the host's decision as
 * the JSON result each request method expects. No callback, a timeout, a throw or an unknown answer all mean DENY.
 */
import type { ServerRequestMessage } from "./rpc.js";

/** A file change Codex wants to apply (from the `fileChange` item or the legacy `applyPatchApproval` request). */
export interface CodexFileChange {
  path: string;
  /** "add", "delete" or "update". */
  kind: string;
  /** Unified diff (for "update"), or the new content (for "add"), when Codex sent it. */
  diff?: string | undefined;
  /** Target path of a move. */
  movePath?: string | undefined;
}

interface ApprovalBase {
  /** The protocol method the request came in as (v2 `item/.../requestApproval`, or legacy `execCommandApproval` / `applyPatchApproval`). */
  method: string;
  /**
   * The asking thread: the turn's own, or a sub-agent's (`spawn_agent`) working for the turn, whose requests the turn's
   * `onApproval` decides too.
   */
  threadId: string;
  turnId?: string | undefined;
  /** The item (or legacy call id) the request belongs to. */
  itemId: string;
  /** Codex's explanation (e.g. "needs network access"), when given. */
  reason?: string | undefined;
}

/**
 * An approval request, by kind:
 * - `commandExecution`: run `command` in `cwd` (outside the sandbox, or with more permissions);
 * - `fileChange`: apply `changes` (paths and diffs; `grantRoot` when Codex asks for write access under a root);
 * - `permissions`: grant extra `permissions` (network / file-system profile as Codex describes it) in `cwd`;
 * - `mcpToolCall`: let MCP server `server` run its tool `tool` with `arguments` (Codex asks through an MCP elicitation
 *   marked `codex_approval_kind: "mcp_tool_call"`; other elicitations are not approvals and are declined).
 *
 * @example
 * ```ts
 * const onApproval = (r: CodexApprovalRequest) =>
 *   r.kind === "commandExecution" && r.command?.startsWith("ls ") ? "approve" : "deny";
 * ```
 */
export type CodexApprovalRequest =
  | (ApprovalBase & {
      kind: "commandExecution";
      command?: string | undefined;
      cwd?: string | undefined;
      /**
       * What is asked (Codex's approval kind): `command` (run it), `humanCommand` (a command the user typed),
       * `writeStdin` (send input to a command already running); absent from older servers (a command).
       */
      commandKind?: string | undefined;
      /** Set when the command needs network access Codex's managed network would block: which host, by which protocol. */
      network?: { host: string; protocol: string } | undefined;
    })
  | (ApprovalBase & { kind: "fileChange"; changes: CodexFileChange[]; grantRoot?: string | undefined })
  | (ApprovalBase & { kind: "permissions"; cwd?: string | undefined; permissions: Record<string, unknown> })
  | (ApprovalBase & {
      kind: "mcpToolCall";
      server: string;
      tool: string;
      arguments: Record<string, unknown>;
      /** Codex's question, e.g. `Allow the docs MCP server to run tool "search"?`. */
      message?: string | undefined;
      toolDescription?: string | undefined;
      /** How long Codex offers to remember an approval (`["session", "always"]`); `approveForSession` uses "session". */
      persist: string[];
    });

/** The host's answer: approve once, approve for the rest of the session (Codex stops asking for the same thing), or deny. */
export type CodexApprovalDecision = "approve" | "approveForSession" | "deny";

/**
 * What a host decision (`onApproval`, `onUserInput`) is given besides the request: `signal` aborts when Codex no longer
 * waits for the answer (it resolved the request itself, `serverRequest/resolved`: the turn was interrupted or ended).
 * A question shown to a person can then be withdrawn; a late answer is not sent.
 */
export interface HostDecisionContext {
  signal: AbortSignal;
}

/** Host callback deciding approval requests. */
export type ApprovalCallback = (request: CodexApprovalRequest, context: HostDecisionContext) => CodexApprovalDecision | Promise<CodexApprovalDecision>;

/** Methods this module maps; others (MCP elicitation) keep the spawn-level `approvalHandler` / decline path. */
export const HOST_APPROVAL_METHODS = new Set([
  "item/commandExecution/requestApproval",
  "item/fileChange/requestApproval",
  "item/permissions/requestApproval",
  "execCommandApproval",
  "applyPatchApproval",
  // Only its MCP tool-call approvals (toApprovalRequest); a real elicitation (a form to fill) is declined.
  "mcpServer/elicitation/request",
]);

type Params = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const opt = <K extends string>(key: K, v: string | undefined): Partial<Record<K, string>> =>
  (v === undefined ? {} : { [key]: v }) as Partial<Record<K, string>>;

/** Legacy `applyPatchApproval.fileChanges` (`{ [path]: { type, content | unified_diff, move_path } }`) as a list. */
function legacyFileChanges(raw: unknown): CodexFileChange[] {
  if (typeof raw !== "object" || raw === null) return [];
  return Object.entries(raw as Record<string, Params>).map(([p, c]) => ({
    path: p,
    kind: str(c?.type) ?? "update",
    ...opt("diff", str(c?.unified_diff) ?? str(c?.content)),
    ...opt("movePath", str(c?.move_path)),
  }));
}

/**
 * The typed request for a host approval method, or `undefined` when the method is not one of
 * {@link HOST_APPROVAL_METHODS} or its params lack the thread id. `changesOf(itemId)` supplies the file changes of a v2
 * `fileChange` item (Codex sends them on the item, not in the approval request).
 *
 * @example
 * ```ts
 * const request = toApprovalRequest(req, (itemId) => run.fileChanges.get(itemId) ?? []);
 * ```
 */
export function toApprovalRequest(
  req: Pick<ServerRequestMessage, "method" | "params">,
  changesOf: (itemId: string) => CodexFileChange[],
): CodexApprovalRequest | undefined {
  const p = (typeof req.params === "object" && req.params !== null ? req.params : {}) as Params;
  const threadId = str(p.threadId) ?? str(p.conversationId);
  if (threadId === undefined) return undefined;
  const itemId = str(p.itemId) ?? str(p.callId) ?? "";
  const base = { method: req.method, threadId, itemId, ...opt("turnId", str(p.turnId)), ...opt("reason", str(p.reason)) };
  switch (req.method) {
    case "item/commandExecution/requestApproval": {
      const net = (typeof p.networkApprovalContext === "object" && p.networkApprovalContext !== null ? p.networkApprovalContext : {}) as Params;
      const host = str(net.host);
      const protocol = str(net.protocol);
      return {
        ...base,
        kind: "commandExecution",
        ...opt("command", str(p.command)),
        ...opt("cwd", str(p.cwd)),
        ...opt("commandKind", str(p.kind)),
        ...(host !== undefined && protocol !== undefined ? { network: { host, protocol } } : {}),
      };
    }
    case "execCommandApproval": {
      const command = Array.isArray(p.command) ? p.command.map(String).join(" ") : str(p.command);
      return { ...base, kind: "commandExecution", ...opt("command", command), ...opt("cwd", str(p.cwd)) };
    }
    case "item/fileChange/requestApproval":
      return { ...base, kind: "fileChange", changes: changesOf(itemId), ...opt("grantRoot", str(p.grantRoot)) };
    case "applyPatchApproval":
      return { ...base, kind: "fileChange", changes: legacyFileChanges(p.fileChanges), ...opt("grantRoot", str(p.grantRoot)) };
    case "item/permissions/requestApproval":
      return { ...base, kind: "permissions", ...opt("cwd", str(p.cwd)), permissions: (p.permissions as Params | undefined) ?? {} };
    case "mcpServer/elicitation/request":
      return mcpToolCallApproval(base, p);
    default:
      return undefined;
  }
}

/** An MCP elicitation that is Codex asking to run an MCP tool, as an approval request; undefined for any other one. */
function mcpToolCallApproval(base: ApprovalBase, p: Params): CodexApprovalRequest | undefined {
  const meta = (typeof p._meta === "object" && p._meta !== null ? p._meta : {}) as Params;
  if (meta.codex_approval_kind !== "mcp_tool_call") return undefined;
  const args = typeof meta.tool_params === "object" && meta.tool_params !== null && !Array.isArray(meta.tool_params) ? (meta.tool_params as Params) : {};
  const persist = Array.isArray(meta.persist) ? meta.persist.filter((x): x is string => typeof x === "string") : typeof meta.persist === "string" ? [meta.persist] : [];
  return {
    ...base,
    kind: "mcpToolCall",
    server: str(p.serverName) ?? "",
    tool: str(meta.tool_name) ?? str(meta.tool_title) ?? "",
    arguments: args,
    ...opt("message", str(p.message)),
    ...opt("toolDescription", str(meta.tool_description)),
    persist,
  };
}

/** Requested permissions granted as asked: the non-null parts of the request profile. */
function grantedPermissions(requested: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(requested)) if (v !== null && v !== undefined) out[k] = v;
  return out;
}

/**
 * The JSON result for `request.method` that carries `decision`.
 *
 * @example
 * ```ts
 * rpc.respond(req.id, approvalResponse(request, "deny", "declined by the host"));
 * ```
 */
export function approvalResponse(request: CodexApprovalRequest, decision: CodexApprovalDecision, denyReason: string): unknown {
  switch (request.method) {
    case "item/commandExecution/requestApproval":
    case "item/fileChange/requestApproval":
      return { decision: decision === "approve" ? "accept" : decision === "approveForSession" ? "acceptForSession" : "decline" };
    case "item/permissions/requestApproval":
      if (decision === "deny" || request.kind !== "permissions") return { permissions: {}, scope: "turn" };
      return { permissions: grantedPermissions(request.permissions), scope: decision === "approveForSession" ? "session" : "turn" };
    case "mcpServer/elicitation/request": {
      if (decision === "deny" || request.kind !== "mcpToolCall") return { action: "decline", content: null, _meta: null };
      // Remembered for the session only when Codex offers it; otherwise this one call is approved.
      const persist = decision === "approveForSession" && request.persist.includes("session") ? { persist: "session" } : null;
      return { action: "accept", content: {}, _meta: persist };
    }
    default:
      // Legacy execCommandApproval / applyPatchApproval: ReviewDecision.
      if (decision === "approve") return { decision: "approved" };
      if (decision === "approveForSession") return { decision: "approved_for_session" };
      return { decision: { denied: { rejection: denyReason } } };
  }
}

/**
 * Check a callback's answer: one of the three decisions, else `undefined`.
 *
 * @example
 * ```ts
 * parseApprovalDecision("approve"); // "approve"
 * parseApprovalDecision({ ok: true }); // undefined
 * ```
 */
export function parseApprovalDecision(value: unknown): CodexApprovalDecision | undefined {
  return value === "approve" || value === "approveForSession" || value === "deny" ? value : undefined;
}
