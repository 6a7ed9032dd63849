/**
 * Warnings a turn raises without failing: a host callback or tool misbehaved and the client decided for it. They carry
 * ids, names and counts only (never tool arguments, results or prompt text), so a host may log them as they are.
 */

/** What went wrong. */
export type CodexTurnWarningCode =
  /** A dynamic tool handler did not answer within `toolCallTimeoutMs`; Codex got a "timed out" tool result. */
  | "toolCallTimeout"
  /** A dynamic tool handler returned something other than a string; Codex got an error result naming the type. */
  | "toolResultNotString"
  /** `beforeToolCall` / `afterToolCall` threw, timed out or returned a malformed decision; it was ignored. */
  | "toolInterceptorFailed"
  /** `onApproval` did not decide within `approvalTimeoutMs`; the request was denied. */
  | "approvalTimeout"
  /** `onApproval` threw or returned something else than "approve" / "approveForSession" / "deny"; denied. */
  | "approvalCallbackFailed"
  /** `onUserInput` threw, timed out or returned a malformed answer; the request was declined. */
  | "userInputCallbackFailed"
  /** `beforeFinalize` threw, timed out or returned a malformed decision; the turn ended with its answer. */
  | "finalizeCallbackFailed"
  /** `beforeFinalize` asked for more extra model passes than allowed in one turn; the turn ended. */
  | "finalizeRevisionLimit"
  /** Codex answered this turn with another model than asked (`model/rerouted`); the message names both. */
  | "modelRerouted"
  /** Codex's own warning for the thread (a `warning` notification), its concise message for the user. */
  | "codexWarning"
  /**
   * An MCP server configured for the thread failed to start (`mcpServer/startupStatus/updated`): the turn ran without
   * its tools. `mcpServer` names it; the message is Codex's error. Every turn on the thread reports it while it stays
   * failed.
   */
  | "mcpServerFailed";

/**
 * One warning of a running turn (also on `CodexTurn.warnings` and passed to `StartTurnOptions.onWarning`).
 *
 * @example
 * ```ts
 * const turn = await server.startTurn({ threadId, text, onWarning: (w) => logger.warn(w, "codex turn warning") });
 * ```
 */
export interface CodexTurnWarning {
  code: CodexTurnWarningCode;
  /**
   * Fixed text naming what happened (or Codex's own message, for `codexWarning` and `mcpServerFailed`); never
   * conversation content.
   */
  message: string;
  threadId: string;
  turnId?: string | undefined;
  /** The dynamic tool concerned. */
  tool?: string | undefined;
  callId?: string | undefined;
  /** The approval / user-input item concerned. */
  itemId?: string | undefined;
  /** The MCP server concerned (its name under `mcp_servers`). */
  mcpServer?: string | undefined;
}
