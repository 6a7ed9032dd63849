/**
 * A lossless-claw-like engine shape: messages rebuilt from its own store (no timestamps, other usage: as
 * {@link rebuildMessage}), older history folded into leaf summaries that stay (a new one every `foldEveryTurns`
 * turns covers what fell out of the fresh tail since the last), the fresh tail verbatim, and a constant recall policy
 * in `systemPromptAddition` (lossless-claw sends ~1,400 tokens of it every turn; shorter here).
 */
import type { AgentMessage, ContextEngine } from "../../src/context-engine/types.js";
import { textOfLength } from "../lib.js";
import { rebuildMessage } from "./rebuilding.js";
import { engineShape, viewTokens } from "./shared.js";

/** The constant recall policy the shape adds to the developer instructions every turn. */
export const LOSSLESS_POLICY = `Memory policy: ${textOfLength(77_000, 1_200)}`;

/**
 * The lossless-claw-like engine (see the file comment).
 *
 * @example
 * ```ts
 * const engine = createLosslessLikeEngine({ freshTail: 8, foldEveryTurns: 8 });
 * ```
 */
export function createLosslessLikeEngine(options: { freshTail?: number; foldEveryTurns?: number; summaryChars?: number } = {}): ContextEngine {
  const tail = options.freshTail ?? 8;
  const step = (options.foldEveryTurns ?? 8) * 2;
  const chars = options.summaryChars ?? 400;
  return engineShape("lossless", (messages) => {
    const folds = Math.floor(messages.length / step);
    const view: AgentMessage[] = [];
    let from = 0;
    for (let i = 1; i <= folds; i++) {
      const end = Math.max(from, i * step - tail);
      if (end > from) view.push({ role: "compactionSummary", summary: `Leaf summary ${i} (messages ${from + 1}-${end}): ${textOfLength(70_000 + i, chars)}`, tokensBefore: (end - from) * 100 });
      from = end;
    }
    view.push(...messages.slice(from).map(rebuildMessage));
    return { messages: view, estimatedTokens: viewTokens(view), systemPromptAddition: LOSSLESS_POLICY };
  });
}
