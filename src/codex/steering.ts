/**
 * Queue steering (spec "Queue steering"): steer texts that arrive within a quiet window are batched into ONE
 * `turn/steer`, joined by a blank line in arrival order (a batch with images sends each steer's text followed by its
 * images instead, as OpenClaw's harness does). Texts Codex does not take (no active turn, wrong turn,
 * review/compaction turn, transport failure) come back as follow-ups; nothing is lost.
 */
import type { Logger } from "pino";
import type { PromptImage } from "./prompt-images.js";

/**
 * Outcome of one `steer(text)` call. `followUp` holds this call's text when Codex did not take it, and `images` its
 * images (when it had any): run them as a follow-up turn.
 */
export type SteerResult = { accepted: true } | { accepted: false; followUp: string[]; images?: PromptImage[] | undefined; reason: string };

/** One steer of a batch: its text and its images (checked already). */
export interface SteerItem {
  text: string;
  images: readonly PromptImage[];
}

export interface SteerBatcherOptions {
  /** Debounce window: a batch is sent when no new text arrived for this long (default 50 ms). */
  quietWindowMs?: number | undefined;
  /** Upper bound on how long the first text of a batch waits (default max(1000, 10 × quietWindowMs)). */
  maxBatchDelayMs?: number | undefined;
  /**
   * Send one batch: `text` is the batch's texts joined by a blank line, `items` the steers themselves (with their
   * images). Resolve `true` when Codex accepted it, `false` or a rejection otherwise.
   */
  send: (text: string, items: readonly SteerItem[]) => Promise<{ accepted: true } | { accepted: false; reason: string }>;
  logger?: Logger | undefined;
}

interface Waiter extends SteerItem {
  resolve: (r: SteerResult) => void;
}

/** The rejected outcome of one steer: its text, and its images when it had any. */
function notTaken(w: SteerItem, reason: string): SteerResult {
  return { accepted: false, followUp: [w.text], ...(w.images.length > 0 ? { images: [...w.images] } : {}), reason };
}

export const STEER_SEPARATOR = "\n\n";

/**
 * Batches steer texts for one running turn.
 *
 * @example
 * ```ts
 * const batcher = new SteerBatcher({ quietWindowMs: 50, send: async (text) => ({ accepted: true }) });
 * const [a, b] = await Promise.all([batcher.steer("one"), batcher.steer("two")]); // one turn/steer: "one\n\ntwo"
 * batcher.close(); // the turn ended: later steer() calls return follow-ups at once
 * ```
 */
export class SteerBatcher {
  private readonly quietWindowMs: number;
  private readonly maxBatchDelayMs: number;
  private readonly opts: SteerBatcherOptions;
  private batch: Waiter[] = [];
  private timer: NodeJS.Timeout | undefined;
  private batchStartedAt = 0;
  private chain: Promise<void> = Promise.resolve();
  private isClosed = false;
  private closeReason = "turn ended";
  /** Number of `turn/steer` requests sent (for tests and logs). */
  sentBatches = 0;

  constructor(opts: SteerBatcherOptions) {
    this.opts = opts;
    this.quietWindowMs = Math.max(0, opts.quietWindowMs ?? 50);
    this.maxBatchDelayMs = opts.maxBatchDelayMs ?? Math.max(1000, this.quietWindowMs * 10);
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Queue `text` (and its images) for the running turn. Resolves once its batch was accepted or rejected. */
  steer(text: string, images: readonly PromptImage[] = []): Promise<SteerResult> {
    if (this.isClosed) return Promise.resolve(notTaken({ text, images }, this.closeReason));
    return new Promise<SteerResult>((resolve) => {
      if (this.batch.length === 0) this.batchStartedAt = Date.now();
      this.batch.push({ text, images, resolve });
      if (this.timer) clearTimeout(this.timer);
      const waited = Date.now() - this.batchStartedAt;
      const delay = Math.max(0, Math.min(this.quietWindowMs, this.maxBatchDelayMs - waited));
      this.timer = setTimeout(() => this.flush(), delay);
    });
  }

  /** Send the current batch now (normally the quiet-window timer does this). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.batch;
    this.batch = [];
    if (batch.length === 0) return;
    // Batches go out strictly one after another so arrival order is kept across batches.
    this.chain = this.chain.then(() => this.sendBatch(batch));
  }

  /** The turn ended: unsent texts come back as follow-ups, and so will every later `steer()`. */
  close(reason = "turn ended"): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.closeReason = reason;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.batch;
    this.batch = [];
    for (const w of batch) w.resolve(notTaken(w, reason));
  }

  private async sendBatch(batch: Waiter[]): Promise<void> {
    if (this.isClosed) {
      for (const w of batch) w.resolve(notTaken(w, this.closeReason));
      return;
    }
    const joined = batch.map((w) => w.text).join(STEER_SEPARATOR);
    const items = batch.map(({ text, images }) => ({ text, images }));
    let outcome: { accepted: true } | { accepted: false; reason: string };
    try {
      this.sentBatches++;
      outcome = await this.opts.send(joined, items);
    } catch (err) {
      outcome = { accepted: false, reason: err instanceof Error ? err.message : String(err) };
    }
    this.opts.logger?.debug(
      { event: "codex.steer.batch", texts: batch.length, accepted: outcome.accepted },
      "steer batch settled",
    );
    for (const w of batch) {
      w.resolve(outcome.accepted ? { accepted: true } : notTaken(w, outcome.reason));
    }
  }
}
