/** A plugin hook handler's bound, as OpenClaw words its failure. */

/**
 * A handler's result, or a rejection "timed out after N ms" (OpenClaw's words) when it takes longer.
 *
 * @example
 * ```ts
 * await withinHandlerTimeout(Promise.resolve(handler(event, ctx)), 15_000);
 * ```
 */
export async function withinHandlerTimeout<T>(call: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs}ms`)), timeoutMs)));
  try {
    return await Promise.race([call, late]);
  } finally {
    clearTimeout(timer);
  }
}
