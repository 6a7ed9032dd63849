/**
 * A summarizing engine: it keeps the newest messages verbatim and folds everything older into one summary, in steps
 * (every `foldEveryTurns` turns it folds all but the last `keepMessages`). Between steps the view grows by each turn;
 * at a step the folded messages (which the Codex thread holds natively) leave the view and a new summary enters it.
 * Stateless: the view is a function of the history length, so every process computes the same one.
 */
import type { AgentMessage, ContextEngine } from "../../src/context-engine/types.js";
import { textOfLength } from "../lib.js";
import { engineShape, viewTokens } from "./shared.js";

/** Options of {@link createSummarizingEngine}. */
export interface SummarizingEngineOptions {
  /** Messages kept verbatim after a fold (default 6). */
  keepMessages?: number;
  /** Turns between folds (default 8; a turn adds a user and an assistant message). */
  foldEveryTurns?: number;
  /** Characters of the summary text (default 480). */
  summaryChars?: number;
}

/**
 * Index of the first message kept verbatim for a history of `length` messages (0: nothing folded yet).
 *
 * @example
 * ```ts
 * foldedUpTo(15, 6, 8); // 0
 * foldedUpTo(16, 6, 8); // 10
 * ```
 */
export function foldedUpTo(length: number, keepMessages: number, foldEveryTurns: number): number {
  const step = foldEveryTurns * 2;
  const lastFold = Math.floor(length / step) * step;
  return lastFold === 0 ? 0 : Math.max(0, lastFold - keepMessages);
}

/**
 * @example
 * ```ts
 * await runCodexTurn({ ...params, contextEngine: createSummarizingEngine({ keepMessages: 6, foldEveryTurns: 8 }) });
 * ```
 */
export function createSummarizingEngine(options: SummarizingEngineOptions = {}): ContextEngine {
  const keep = options.keepMessages ?? 6;
  const every = options.foldEveryTurns ?? 8;
  const chars = options.summaryChars ?? 480;
  return engineShape("summarizing", (messages) => {
    const from = foldedUpTo(messages.length, keep, every);
    const view: AgentMessage[] =
      from === 0
        ? messages
        : [
            { role: "compactionSummary", summary: `Summary of the first ${from} messages: ${textOfLength(90_000 + from, chars)}`, tokensBefore: from * 100 },
            ...messages.slice(from),
          ];
    return { messages: view, estimatedTokens: viewTokens(view) };
  });
}
