/**
 * Deep freezing of the history handed to context engines. The history cache hands the same message objects to every
 * turn; freezing them turns an engine's accidental mutation into a TypeError at the faulty line (ES modules run in
 * strict mode) instead of a silently corrupted cache and a different model input on the next turn.
 */

/**
 * Freeze `value` and everything reachable from it (objects and arrays), iteratively so a deep message cannot overflow
 * the stack. Already-frozen subtrees are skipped, so re-freezing a mostly frozen history costs little.
 *
 * @example
 * ```ts
 * const m = deepFreeze({ role: "user", content: [{ type: "text", text: "hi" }] });
 * (m.content[0] as { text: string }).text = "x"; // TypeError in strict code
 * ```
 */
export function deepFreeze<T>(value: T): T {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === null || typeof v !== "object" || Object.isFrozen(v)) continue;
    Object.freeze(v);
    if (Array.isArray(v)) {
      for (const item of v) if (item !== null && typeof item === "object") stack.push(item);
    } else {
      for (const key of Object.keys(v)) {
        const item = (v as Record<string, unknown>)[key];
        if (item !== null && typeof item === "object") stack.push(item);
      }
    }
  }
  return value;
}
