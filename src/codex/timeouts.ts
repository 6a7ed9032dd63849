import { z } from "zod";

/**
 * The largest delay Node's timers honour: a larger value (>= 2^31 ms) is clamped to 1 ms with a warning, so a
 * "never time out" setting would fire at once. Every timeout option of the client is checked against it.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * A positive integer number of milliseconds that a Node timer can wait for.
 *
 * @example
 * ```ts
 * z.object({ requestTimeoutMs: timeoutMsSchema.default(30_000) }).parse({ requestTimeoutMs: 2 ** 31 }); // throws
 * ```
 */
export const timeoutMsSchema = z
  .number()
  .int()
  .positive()
  .max(MAX_TIMER_MS, `must be at most ${MAX_TIMER_MS} ms (Node timers fire at once above it)`);

/**
 * Like {@link timeoutMsSchema} but 0 is allowed (grace periods that may be skipped).
 *
 * @example
 * ```ts
 * z.object({ graceMs: nonNegativeTimeoutMsSchema.default(2_000) }).parse({ graceMs: 0 });
 * ```
 */
export const nonNegativeTimeoutMsSchema = z
  .number()
  .int()
  .nonnegative()
  .max(MAX_TIMER_MS, `must be at most ${MAX_TIMER_MS} ms (Node timers fire at once above it)`);

/**
 * Race `work` against a timer. Resolves `{ ok: true, value }`, `{ ok: false, reason: "timeout" }` or
 * `{ ok: false, reason: "error", error }`; never rejects, and always clears its timer.
 *
 * @example
 * ```ts
 * const r = await withTimeout(() => handler(args), 5_000);
 * if (!r.ok && r.reason === "timeout") console.warn("handler did not answer");
 * ```
 */
export async function withTimeout<T>(
  work: () => T | Promise<T>,
  timeoutMs: number,
): Promise<{ ok: true; value: T } | { ok: false; reason: "timeout" } | { ok: false; reason: "error"; error: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ ok: false; reason: "timeout" }>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, reason: "timeout" }), timeoutMs);
  });
  const run = (async () => {
    try {
      return { ok: true as const, value: await work() };
    } catch (error) {
      return { ok: false as const, reason: "error" as const, error };
    }
  })();
  try {
    return await Promise.race([run, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
