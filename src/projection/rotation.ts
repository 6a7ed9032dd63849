/**
 * When to leave a Codex thread for a fresh one: a rent-or-buy decision on stale context.
 *
 * A thread keeps everything it ever received. Once the engine drops or rewrites part of its view (a window step, a
 * summary, a superseded note), the thread still shows the old copies: stale tokens. Carrying them is "rent": the
 * model re-reads them on every request, served from the prompt cache at `cachedPriceRatio` of the uncached price.
 * Rotating to a fresh thread is "buy": the engine's whole view is sent once, uncached, and the stale copies are gone.
 * The classic rent-or-buy rule (rent until the rent paid equals the purchase price, then buy) costs at most twice what
 * an oracle that knew the future would pay, whatever the engine does next. Independently of cost, a thread whose
 * stale + view tokens would exceed the budget rotates at once: the engine's budget is a
 * promise about what the model sees; so does a thread carrying more stale tokens than the tolerance.
 */

/** Default cached/uncached input price ratio (cached input of current OpenAI models costs a tenth). */
export const DEFAULT_CACHED_PRICE_RATIO = 0.1;

/** Inputs of {@link decideRotation}; all token figures are estimates (characters / 4). */
export interface RotationInput {
  /** Stale tokens the thread would carry in this turn's request if it is resumed. */
  staleTokens: number;
  /** Tokens of the engine's current view (what a fresh thread would receive), developer instructions included. */
  viewTokens: number;
  /** Stale cost accrued on this thread since it started, in uncached-token units (binding `staleCostTokens`). */
  accruedStaleCost: number;
  /** Cached/uncached price ratio, in (0, 1]; default {@link DEFAULT_CACHED_PRICE_RATIO}. */
  cachedPriceRatio?: number | undefined;
  /** The engine's token budget, when known. */
  tokenBudget?: number | undefined;
  /** Stale tokens tolerated whatever their cost (`divergenceTokens`; default 25% of the budget, else 8,000). */
  toleranceTokens: number;
}

/** The decision: resume (with the stale cost accrued after this turn) or rotate, and why. */
export type RotationDecision =
  | { rotate: false; accruedStaleCost: number }
  | { rotate: true; reason: "staleCost" | "divergence"; accruedStaleCost: 0 };

/**
 * Rent-or-buy: rotate when the stale cost accrued on the thread, including this turn's rent, reaches the price of a
 * rotation (the view, uncached); rotate regardless (reason `divergence`) when stale + view exceed the budget, or when
 * the stale tokens exceed the tolerance. No stale tokens never rotate.
 *
 * @example
 * ```ts
 * decideRotation({ staleTokens: 900, viewTokens: 600, accruedStaleCost: 520, toleranceTokens: 8_000 });
 * // { rotate: true, reason: "staleCost", accruedStaleCost: 0 }: 520 + 0.1 x 900 = 610 >= 600
 * ```
 */
export function decideRotation(input: RotationInput): RotationDecision {
  const ratio = input.cachedPriceRatio ?? DEFAULT_CACHED_PRICE_RATIO;
  if (!(ratio > 0 && ratio <= 1)) throw new RangeError(`cachedPriceRatio must be within (0, 1], got ${ratio}`);
  if (input.staleTokens <= 0) return { rotate: false, accruedStaleCost: input.accruedStaleCost };
  const overBudget =
    input.staleTokens > input.toleranceTokens ||
    (input.tokenBudget !== undefined && input.staleTokens + input.viewTokens > input.tokenBudget);
  if (overBudget) return { rotate: true, reason: "divergence", accruedStaleCost: 0 };
  const accrued = input.accruedStaleCost + ratio * input.staleTokens;
  if (accrued >= input.viewTokens) return { rotate: true, reason: "staleCost", accruedStaleCost: 0 };
  return { rotate: false, accruedStaleCost: roundCost(accrued) };
}

/** Stale cost is persisted in the binding: keep it a short decimal so the JSON stays byte-stable and readable. */
function roundCost(x: number): number {
  return Math.round(x * 1000) / 1000;
}
