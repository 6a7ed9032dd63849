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

/**
 * What the projection derives from a message the history cache deep-froze, kept by the message's identity: the
 * message can never change, so neither can these. Filled lazily by their users (`src/projection/identity.ts`).
 */
export interface FrozenMessageMemo {
  /** `messageContentKey(message)`. */
  contentKey?: string | undefined;
  /** `contentSignature(message)`. */
  signature?: string | undefined;
  /** The message's rendered block with its hash and token estimate, for the part cap it was rendered with. */
  rendered?: { partCap: number; value: unknown } | undefined;
}

/**
 * Roots the history cache deep-froze itself (see {@link markDeepFrozen}), each with its memo. One map for both, so a
 * caller learns "host-frozen?" and finds what was derived from the message in one lookup.
 */
const deepFrozenRoots = new WeakMap<object, FrozenMessageMemo>();

/**
 * Record that `value` and everything reachable from it is frozen and was built by this host (the history cache's
 * messages: parsed from JSON, then {@link deepFreeze}d, so no other code ever held a mutable reference). Derived data
 * (a rendered block, its hash) may then be cached by the object's identity: it can never change. Returns `value`.
 *
 * @example
 * ```ts
 * const m = markDeepFrozen(deepFreeze(JSON.parse(line).message));
 * isDeepFrozenByHost(m); // true
 * ```
 */
export function markDeepFrozen<T extends object>(value: T): T {
  if (!deepFrozenRoots.has(value)) deepFrozenRoots.set(value, {});
  return value;
}

/**
 * Whether `value` was marked by {@link markDeepFrozen}. `Object.isFrozen` alone is not enough: it is shallow, and an
 * engine may freeze a message whose content array it still changes.
 *
 * @example
 * ```ts
 * isDeepFrozenByHost(Object.freeze({ role: "user", content: [] })); // false: frozen, but not by the history cache
 * ```
 */
export function isDeepFrozenByHost(value: unknown): boolean {
  return typeof value === "object" && value !== null && deepFrozenRoots.has(value);
}

/**
 * The memo of a value marked by {@link markDeepFrozen} (undefined for anything else): where facts derived from a
 * message that can never change are kept.
 *
 * @example
 * ```ts
 * const memo = frozenMessageMemo(message);
 * const key = memo ? (memo.contentKey ??= messageContentKey(message)) : messageContentKey(message);
 * ```
 */
export function frozenMessageMemo(value: unknown): FrozenMessageMemo | undefined {
  return typeof value === "object" && value !== null ? deepFrozenRoots.get(value) : undefined;
}

/**
 * A mutable copy of `array` from `start` on. The history's arrays are frozen, and V8 (measured on Node 20 and 24) copies a frozen
 * array with `slice()` on a slow path, about 60 ns per element: 0.35 ms for a 6,000-message history, on every turn.
 * Spreading takes its fast path (about 2 µs for the same array); the rest is sliced from the plain copy.
 *
 * @example
 * ```ts
 * const messages = copyArray(history.messages); // push onto it freely
 * const tail = copyArray(history.messages, 100);
 * ```
 */
export function copyArray<T>(array: readonly T[], start = 0): T[] {
  const copy = [...array];
  return start === 0 ? copy : copy.slice(start);
}

/** One frozen array's place in a chain of arrays, each the one before with elements appended (see `markAppendedTo`). */
interface AppendChainLink {
  chain: object;
  /** Whether an array was already marked as appended to this one (a chain never branches). */
  continued: boolean;
}

const appendChains = new WeakMap<readonly unknown[], AppendChainLink>();

/**
 * Record that the frozen `array` is the frozen `base` with elements appended (the caller built it so: a copy of `base`
 * and pushes), or, without a base, that it starts a chain of its own. An array joins its base's chain only when no
 * other array was marked as appended to that base, so a chain never branches: of two arrays in one chain, the longer
 * one starts with every element of the shorter one. The history cache marks its histories' arrays this way, so a
 * per-turn check "is this history the kept one extended?" ({@link startsWithArray}) costs nothing instead of a pass over
 * both arrays. An array that is not frozen is not marked (it could change).
 *
 * @example
 * ```ts
 * const next = Object.freeze([...previous, message]);
 * markAppendedTo(next, previous);
 * startsWithArray(next, previous); // true, without comparing elements
 * ```
 */
export function markAppendedTo(array: readonly unknown[], base: readonly unknown[] | undefined): void {
  if (!Object.isFrozen(array)) return;
  const link = base !== undefined && array.length >= base.length ? appendChains.get(base) : undefined;
  if (link !== undefined && !link.continued) {
    link.continued = true;
    appendChains.set(array, { chain: link.chain, continued: false });
  } else appendChains.set(array, { chain: {}, continued: false });
}

/**
 * Whether `array` starts with every element of `prefix`, in order (the same objects): answered by the arrays' chain
 * ({@link markAppendedTo}) when both are marked in one, else by comparing the elements (from the end: a history
 * rebuilt after a rewrite differs near its end first).
 *
 * @example
 * ```ts
 * startsWithArray([a, b, c], [a, b]); // true
 * startsWithArray([a, c], [a, b]);    // false
 * ```
 */
export function startsWithArray(array: readonly unknown[], prefix: readonly unknown[]): boolean {
  if (array.length < prefix.length) return false;
  if (array === prefix || inOneAppendChain(array, prefix)) return true;
  for (let i = prefix.length - 1; i >= 0; i--) if (array[i] !== prefix[i]) return false;
  return true;
}

/**
 * Whether `array` and `prefix` were marked into one chain ({@link markAppendedTo}) and `array` is the longer or as
 * long: then `array` starts with `prefix`, by the markers alone.
 *
 * @example
 * ```ts
 * inOneAppendChain(history.messages, previousHistory.messages); // true after the history cache appended a turn
 * ```
 */
export function inOneAppendChain(array: readonly unknown[], prefix: readonly unknown[]): boolean {
  const link = appendChains.get(array);
  return link !== undefined && array.length >= prefix.length && link.chain === appendChains.get(prefix)?.chain;
}
