/**
 * `chat --approve ask`: the person at the chat answers Codex's approval requests (and plugins' `requireApproval`). A request is shown as a question;
 * the next line typed answers it (instead of being a steer). Requests that arrive together (a sub-agent's too) are
 * asked one at a time, in order. A question nobody answers within `timeoutMs` is denied, shown as such, before the
 * turn's own bound (`timeouts.approvalMs`) would deny it silently; an aborted turn denies what is still open.
 */
import type { CodexApprovalDecision } from "../../codex/approvals.js";

/** How long a question waits for the person (then denied, shown as such). */
export const QUESTION_TIMEOUT_MS = 300_000;

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

interface OpenQuestion {
  question: string;
  resolve(decision: CodexApprovalDecision): void;
  timer: NodeJS.Timeout | undefined;
}

/** The open approval questions of a chat. */
export class ApprovalQuestions {
  private readonly open: OpenQuestion[] = [];

  /**
   * @param show prints a line: a question (`asking`: input is expected next) or a decision
   * @param timeoutMs how long a question waits for an answer (then denied)
   */
  constructor(
    private readonly show: (line: string, asking: boolean) => void,
    private readonly timeoutMs: number,
  ) {}

  /** Whether a question waits for an answer (the next typed line is its answer). */
  get waiting(): boolean {
    return this.open.length > 0;
  }

  /**
   * Ask `question` (a request's one-line description); resolves with the decision. When `signal` aborts first (the
   * asker stopped waiting), the question is withdrawn, shown as such, and resolves "deny".
   */
  ask(question: string, signal?: AbortSignal): Promise<CodexApprovalDecision> {
    return new Promise((resolve) => {
      const entry: OpenQuestion = { question, resolve, timer: undefined };
      this.open.push(entry);
      signal?.addEventListener("abort", () => this.withdraw(entry), { once: true });
      if (this.open.length === 1) this.present();
    });
  }

  /** The typed line answers the first open question. Returns false when none was open. */
  answer(line: string): boolean {
    if (this.open.length === 0) return false;
    this.settle(parseApprovalAnswer(line), "");
    return true;
  }

  /** Deny every open question (the turn ended or was aborted). */
  denyAll(why: string): void {
    while (this.open.length > 0) this.settle("deny", ` (${why})`, false);
  }

  private present(): void {
    const head = this.open[0];
    if (!head) return;
    this.show(`${head.question} -- approve? ${APPROVAL_CHOICES}`, true);
    head.timer = setTimeout(() => this.settle("deny", ` (no answer within ${Math.round(this.timeoutMs / 1000)} s)`), this.timeoutMs);
    head.timer.unref();
  }

  private withdraw(entry: OpenQuestion): void {
    const at = this.open.indexOf(entry);
    if (at < 0) return;
    if (at === 0) return this.settle("deny", " (no longer asked: the request was withdrawn)");
    this.open.splice(at, 1);
    entry.resolve("deny");
  }

  private settle(decision: CodexApprovalDecision, why: string, askNext = true): void {
    const head = this.open.shift();
    if (!head) return;
    clearTimeout(head.timer);
    this.show(`${head.question} -> ${decision}${why}`, false);
    head.resolve(decision);
    if (askNext) this.present();
  }
}
