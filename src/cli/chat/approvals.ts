/**
 * `chat --approve ask`: the person at the chat answers Codex's approval requests (and plugins' `requireApproval`). A
 * request is shown as a question in the chat's question queue (./questions.ts) and the next line typed answers it. A
 * question nobody answers within the queue's timeout is denied, shown as such, before the turn's own bound
 * (`timeouts.approvalMs`) would deny it silently; an aborted turn denies what is still open.
 */
import type { CodexApprovalDecision } from "../../codex/approvals.js";
import type { ChatQuestion } from "./questions.js";

/** What to type: `y`/`yes` approve once, `s`/`session` approve for the session, anything else denies. */
export const APPROVAL_CHOICES = "[y]es / [s]ession / [N]o";

/**
 * A typed answer as a decision.
 *
 * @example
 * ```ts
 * parseApprovalAnswer("Y"); // "approve"
 * parseApprovalAnswer("session"); // "approveForSession"
 * parseApprovalAnswer("later"); // "deny"
 * ```
 */
export function parseApprovalAnswer(line: string): CodexApprovalDecision {
  const a = line.trim().toLowerCase();
  if (a === "y" || a === "yes") return "approve";
  if (a === "s" || a === "session") return "approveForSession";
  return "deny";
}

/**
 * An approval request as a chat question: `<request> -- approve? [y]es / [s]ession / [N]o`; the typed line decides
 * (Enter alone denies), shown as `<request> -> <decision>`; declined (no answer in time, withdrawn, the turn ended):
 * denied, with the reason.
 *
 * @example
 * ```ts
 * const decision = await questions.put(approvalQuestion('codex-turn: approval commandExecution: run "ls"'), signal);
 * ```
 */
export function approvalQuestion(request: string): ChatQuestion<CodexApprovalDecision> {
  return {
    prompt: `${request} -- approve? ${APPROVAL_CHOICES}`,
    take: (line) => {
      const decision = parseApprovalAnswer(line);
      return { value: decision, shown: `${request} -> ${decision}` };
    },
    decline: (why) => ({ value: "deny", shown: `${request} -> deny (${why})` }),
  };
}
