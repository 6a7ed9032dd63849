/**
 * The questions a chat puts to the person at it: Codex's approval requests (`--approve ask`) and its
 * `request_user_input` questions (Plan mode). One queue for both, so whatever arrives together (a sub-agent's too) is
 * asked one at a time, in order, and the next line typed answers the question being asked (instead of being a steer or
 * the next prompt). A question nobody answers within `timeoutMs` is declined, shown as such; one whose asker stopped
 * waiting (`signal`) is withdrawn; an ended turn or the end of input declines what is open.
 */

/** How long a question (each step of one) waits for the person, then declined, shown as such. */
export const QUESTION_TIMEOUT_MS = 300_000;

/**
 * The turn's own bound on a host decision (`timeouts.approvalMs`) while the person is asked: only a backstop, well
 * past what the queue's visible timeouts allow (a request of several questions, waiting behind others).
 */
export const PERSON_BACKSTOP_MS = 3_600_000;

/** What a typed line made of a question: its outcome (`value`, and the line shown), or `next`: show this, keep asking. */
export type QuestionStep<T> = { value: T; shown: string } | { next: string };

/** One question in the queue: what to show, how a typed line answers it, and what declining it gives. */
export interface ChatQuestion<T> {
  /** Shown when the question comes up (may span lines; input is expected after it). */
  readonly prompt: string;
  /** A typed line (possibly empty): the outcome, or the next thing to ask (a follow-up question or a hint). */
  take(line: string): QuestionStep<T>;
  /** Declined for `why` (no answer in time, withdrawn, the turn ended, end of input): the value and the line shown. */
  decline(why: string): { value: T; shown: string };
}

interface OpenQuestion {
  question: ChatQuestion<unknown>;
  resolve(value: unknown): void;
  timer: NodeJS.Timeout | undefined;
}

/** The open questions of a chat. */
export class ChatQuestions {
  private readonly open: OpenQuestion[] = [];
  private closedWhy: string | undefined;

  /**
   * @param show prints a question or an outcome (`asking`: input is expected next)
   * @param timeoutMs how long each question (each step of one) waits for an answer, then declined
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
   * Queue `question`; resolves with its outcome. When `signal` aborts first (the asker stopped waiting), the question
   * is withdrawn: shown as such when it was being asked, silently when still queued. After {@link close}, declined at once.
   */
  put<T>(question: ChatQuestion<T>, signal?: AbortSignal): Promise<T> {
    if (this.closedWhy !== undefined || signal?.aborted) {
      const declined = question.decline(this.closedWhy ?? "no longer asked: the request was withdrawn");
      if (this.closedWhy !== undefined) this.show(declined.shown, false);
      return Promise.resolve(declined.value);
    }
    return new Promise<T>((resolve) => {
      const entry: OpenQuestion = { question, resolve: resolve as (value: unknown) => void, timer: undefined };
      this.open.push(entry);
      signal?.addEventListener("abort", () => this.withdraw(entry), { once: true });
      if (this.open.length === 1) this.present(question.prompt);
    });
  }

  /** The typed line (empty too) answers the question being asked. Returns false when none was open. */
  answer(line: string): boolean {
    const head = this.open[0];
    if (!head) return false;
    const step = head.question.take(line);
    if ("next" in step) this.present(step.next);
    else this.settle(step);
    return true;
  }

  /** Decline every open question (the turn ended or was aborted). */
  declineAll(why: string): void {
    while (this.open.length > 0) this.settle(this.open[0]!.question.decline(why), false);
  }

  /** No more answers can come (end of input): decline what is open and every later question, at once. */
  close(why: string): void {
    this.closedWhy = why;
    this.declineAll(why);
  }

  /** Show `text` for the question being asked and (re)start its timer. */
  private present(text: string): void {
    const head = this.open[0];
    if (!head) return;
    clearTimeout(head.timer);
    this.show(text, true);
    const why = `no answer within ${Math.round(this.timeoutMs / 1000)} s`;
    head.timer = setTimeout(() => this.settle(head.question.decline(why)), this.timeoutMs);
    head.timer.unref();
  }

  private withdraw(entry: OpenQuestion): void {
    const at = this.open.indexOf(entry);
    if (at < 0) return;
    const declined = entry.question.decline("no longer asked: the request was withdrawn");
    if (at === 0) return this.settle(declined);
    this.open.splice(at, 1);
    entry.resolve(declined.value);
  }

  /** The question being asked ends with `outcome`; the next one comes up unless `askNext` is false. */
  private settle(outcome: { value: unknown; shown: string }, askNext = true): void {
    const head = this.open.shift();
    if (!head) return;
    clearTimeout(head.timer);
    this.show(outcome.shown, false);
    head.resolve(outcome.value);
    if (askNext && this.open[0]) this.present(this.open[0].question.prompt);
  }
}
