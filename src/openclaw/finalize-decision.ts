/**
 * OpenClaw's `before_agent_finalize` decision over every handler's result: `finalize` from any handler overrides
 * revisions; revision reasons are joined; a `retry` instruction is asked for at most `maxAttempts` times per run and
 * idempotency key (default 1), so a hook cannot keep the agent revising forever. Without a retry, a revision needs a
 * reason.
 */

/** What the handlers decided. */
export type FinalizeDecision = { action: "continue" } | { action: "revise"; reason: string } | { action: "finalize"; reason?: string | undefined };

/** Retry attempts per run and key (OpenClaw keeps the same budget); the oldest runs are dropped past 256. */
export type FinalizeRetryBudget = Map<string, Map<string, number>>;

const MAX_RUNS = 256;

interface Retry {
  instruction: string;
  key: string;
  maxAttempts: number;
}

const trimmed = (v: unknown): string | undefined => (typeof v === "string" && v.trim() !== "" ? v.trim() : undefined);

function retryOf(raw: unknown): Retry | undefined {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return undefined;
  const r = raw as { instruction?: unknown; idempotencyKey?: unknown; maxAttempts?: unknown };
  const instruction = trimmed(r.instruction);
  if (!instruction) return undefined;
  const max = typeof r.maxAttempts === "number" && Number.isFinite(r.maxAttempts) ? Math.max(1, Math.floor(r.maxAttempts)) : 1;
  return { instruction, key: trimmed(r.idempotencyKey) ?? `instruction:${instruction}`, maxAttempts: max };
}

/** Counts one attempt of `key` in run `runId`; true while within `max`. */
function spend(budget: FinalizeRetryBudget, runId: string, key: string, max: number): boolean {
  const run = budget.get(runId) ?? new Map<string, number>();
  const count = (run.get(key) ?? 0) + 1;
  run.set(key, count);
  budget.delete(runId);
  budget.set(runId, run);
  while (budget.size > MAX_RUNS) budget.delete(budget.keys().next().value!);
  return count <= max;
}

/**
 * The decision for one final answer of run `runId` (the Codex turn id), from the handlers' results in order.
 *
 * @example
 * ```ts
 * decideFinalize([{ action: "revise", reason: "cite sources" }, { action: "finalize" }], "turn-1", new Map());
 * // => { action: "finalize" }
 * ```
 */
export function decideFinalize(results: readonly unknown[], runId: string, budget: FinalizeRetryBudget): FinalizeDecision {
  let finalize: FinalizeDecision | undefined;
  let revise = false;
  const reasons: string[] = [];
  const retries: Retry[] = [];
  for (const raw of results) {
    if (typeof raw !== "object" || raw === null) continue;
    const r = raw as { action?: unknown; reason?: unknown; retry?: unknown };
    if (r.action === "finalize") {
      const reason = trimmed(r.reason);
      finalize ??= reason ? { action: "finalize", reason } : { action: "finalize" };
    } else if (r.action === "revise") {
      revise = true;
      const reason = trimmed(r.reason);
      if (reason) reasons.push(reason);
      const retry = retryOf(r.retry);
      if (retry) retries.push(retry);
    }
  }
  if (finalize) return finalize;
  if (!revise) return { action: "continue" };
  const reason = reasons.join("\n\n");
  if (retries.length === 0) return reason ? { action: "revise", reason } : { action: "continue" };
  for (const retry of retries) {
    if (!spend(budget, runId, retry.key, retry.maxAttempts)) continue;
    return { action: "revise", reason: reason.includes(retry.instruction) ? reason : [reason, retry.instruction].filter(Boolean).join("\n\n") };
  }
  return { action: "continue" };
}
