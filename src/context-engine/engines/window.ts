import { createLruMap } from "../../lru-map.js";
import type { AgentMessage, AssembleResult, ContextEngine } from "../types.js";
import { renderedBlockOf } from "../../projection/entries.js";
import { copyArray, isDeepFrozenByHost } from "../../transcript/freeze.js";

/** Options of {@link createWindowEngine}. */
export interface WindowEngineOptions {
  /** Token budget of the engine's view (default: the turn's `tokenBudget`, else 16,000). */
  tokenBudget?: number | undefined;
  /** When the window overflows, drop the oldest messages down to this fraction of the budget (default 0.6). */
  lowWaterFraction?: number | undefined;
  /** Return a `thread_bootstrap` projection whose epoch changes at each window step. */
  threadBootstrap?: boolean | undefined;
  /** Declare `info.ownsCompaction` (then `compact()` moves the window down to the target). */
  ownsCompaction?: boolean | undefined;
  id?: string | undefined;
}

/**
 * Rough tokens of one message as the projection renders it (the projection's own rendering: a history message is
 * rendered once for both).
 */
export function messageTokens(message: AgentMessage): number {
  return (renderedBlockOf(message)?.tokens ?? 0) + 4;
}

/**
 * Sessions whose last view (the messages of its last assemble, and their token counts) the engine keeps, least recently
 * used dropped first. One engine serves every session of a host: unbounded, it kept each session's whole history for as
 * long as the process ran, whatever the host's history cache had let go. A dropped view costs that session one count
 * of its history at its next assemble, and `compact()` applies its target at that assemble instead of at once.
 */
export const MAX_VIEWED_SESSIONS = 64;

/**
 * Sessions whose window start the engine keeps (a number each). A session dropped from it starts its window afresh at
 * its next assemble: the whole history when it fits the budget, else the low-water mark (a new epoch).
 */
export const MAX_WINDOWED_SESSIONS = 10_000;

/**
 * Suffix token sums per session: `sums[i]` = tokens of `messages[i..]` (`sums[messages.length]` = 0). A message that is
 * the very same object at the same index as last time, and one the host's history cache deep-froze (it keeps their
 * identity from turn to turn), is not rendered again, so a turn costs the new messages, not the whole session. Any
 * other message is counted again: `Object.isFrozen` alone would trust a shallowly frozen message whose content array
 * its owner still changes.
 */
function createSuffixTokenCounter(): (sessionId: string, messages: readonly AgentMessage[]) => number[] {
  // `trusted[i]`: message i was the history cache's own (deep-frozen) when counted. That never stops being true, so the
  // next turn reuses its count on identity alone, without asking the freeze registry again for every message.
  const counted = createLruMap<string, { messages: readonly AgentMessage[]; tokens: number[]; trusted: Uint8Array }>(MAX_VIEWED_SESSIONS);
  return (sessionId, messages) => {
    const prev = counted.get(sessionId);
    const known = prev?.messages ?? [];
    const knownTokens = prev?.tokens ?? [];
    const knownTrusted = prev?.trusted;
    const n = messages.length;
    // A plain loop: this runs over the whole history every turn (10,000 messages in a long session).
    const tokens = new Array<number>(n);
    const trusted = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      const m = messages[i]!;
      if (i < known.length && known[i] === m && knownTrusted![i] === 1) {
        tokens[i] = knownTokens[i]!;
        trusted[i] = 1;
      } else {
        tokens[i] = messageTokens(m);
        trusted[i] = isDeepFrozenByHost(m) ? 1 : 0;
      }
    }
    // A copy: the caller may keep appending to (or rewriting) the array it passed.
    counted.set(sessionId, { messages: copyArray(messages), tokens, trusted });
    const sums = new Array<number>(n + 1);
    sums[n] = 0;
    for (let i = n - 1; i >= 0; i--) sums[i] = sums[i + 1]! + tokens[i]!;
    return sums;
  };
}

// Long (about 90 lines) on purpose: an engine factory whose methods share one engine's per-session state (the window
// starts, forced targets, last views); each method is short.
/**
 * A budgeted sliding-window engine: it shows the newest messages that fit its budget. When the budget overflows it
 * drops down to a low-water mark, so its view changes in steps rather than every turn (each step is a new epoch).
 * State (the window start per session) lives in memory; the transcript mirror is the source of messages.
 *
 * @example
 * ```ts
 * const engine = createWindowEngine({ tokenBudget: 8_000, threadBootstrap: true });
 * await runCodexTurn({ ...params, contextEngine: engine, contextTokenBudget: 8_000 });
 * ```
 */
export function createWindowEngine(options: WindowEngineOptions = {}): ContextEngine & {
  windowStart(sessionId: string): number;
} {
  const lowWater = options.lowWaterFraction ?? 0.6;
  if (!(lowWater > 0 && lowWater < 1)) throw new RangeError(`lowWaterFraction must be within (0, 1), got ${lowWater}`);
  const starts = createLruMap<string, number>(MAX_WINDOWED_SESSIONS);
  const forcedTargets = createLruMap<string, number>(MAX_WINDOWED_SESSIONS);
  /** The messages the last assemble saw, so compact() can report real before/after figures. */
  const lastSeen = createLruMap<string, AgentMessage[]>(MAX_VIEWED_SESSIONS);
  const suffixTokens = createSuffixTokenCounter();
  const budgetOf = (tokenBudget: number | undefined) => options.tokenBudget ?? tokenBudget ?? 16_000;

  function windowFor(sessionId: string, sums: readonly number[], budget: number): number {
    const count = sums.length - 1;
    let start = Math.min(starts.get(sessionId) ?? 0, count);
    const forced = forcedTargets.get(sessionId);
    if (forced !== undefined) {
      forcedTargets.delete(sessionId);
      while (start < count - 1 && sums[start]! > forced) start++;
    }
    if (sums[start]! > budget) {
      const target = Math.floor(budget * lowWater);
      while (start < count - 1 && sums[start]! > target) start++;
    }
    starts.set(sessionId, start);
    return start;
  }

  return {
    info: {
      id: options.id ?? "window",
      name: "Budgeted window engine",
      version: "1",
      ...(options.ownsCompaction ? { ownsCompaction: true } : {}),
    },
    windowStart: (sessionId: string) => starts.get(sessionId) ?? 0,
    async ingest() {
      return { ingested: true };
    },
    async ingestBatch({ messages }) {
      return { ingestedCount: messages.length };
    },
    async assemble({ sessionId, messages, tokenBudget }): Promise<AssembleResult> {
      const budget = budgetOf(tokenBudget);
      const sums = suffixTokens(sessionId, messages);
      const start = windowFor(sessionId, sums, budget);
      lastSeen.set(sessionId, messages);
      const result: AssembleResult = { messages: copyArray(messages, start), estimatedTokens: sums[start]! };
      if (options.threadBootstrap) result.contextProjection = { mode: "thread_bootstrap", epoch: `w${start}` };
      return result;
    },
    async compact({ sessionId, tokenBudget, compactionTargetFraction, currentTokenCount }) {
      const budget = budgetOf(tokenBudget);
      const fraction = compactionTargetFraction ?? lowWater;
      const target = Math.floor(budget * fraction);
      const messages = lastSeen.get(sessionId);
      if (!messages) {
        // Nothing seen yet in this process: apply the target at the next assemble.
        forcedTargets.set(sessionId, target);
        return {
          ok: true,
          compacted: true,
          result: { tokensBefore: currentTokenCount ?? 0, tokensAfter: target, details: { targetFraction: fraction } },
        };
      }
      const sums = suffixTokens(sessionId, messages);
      const total = (from: number) => sums[from]!;
      const before = Math.min(starts.get(sessionId) ?? 0, messages.length);
      let start = before;
      while (start < messages.length - 1 && total(start) > target) start++;
      starts.set(sessionId, start);
      // "compacted" stays true even when the view already fit: the engine re-based its view on the target, which is
      // what the accordion cadence asks for (it then rotates the Codex thread, whose own history is what overflowed).
      return {
        ok: true,
        compacted: true,
        result: {
          tokensBefore: total(before),
          tokensAfter: total(start),
          details: { targetFraction: fraction, droppedMessages: start - before },
        },
      };
    },
    async maintain() {
      return { changed: false, bytesFreed: 0, rewrittenEntries: 0 };
    },
  };
}
