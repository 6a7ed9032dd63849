/**
 * A Map bounded to `max` entries, least recently used dropped first: what a long-running host keeps per session (one
 * process serves many sessions for days) must not grow with the number of sessions it has served.
 */

/** See the module comment. `get` and `set` mark the key as the most recently used. */
export interface LruMap<K, V> {
  get(key: K): V | undefined;
  set(key: K, value: V): void;
  delete(key: K): boolean;
  clear(): void;
  readonly size: number;
  /** Keys, least recently used first (tests and diagnostics). */
  keys(): K[];
}

/**
 * @example
 * ```ts
 * const views = createLruMap<string, number[]>(64);
 * views.set("session-1", [1, 2]);
 * views.get("session-1"); // [1, 2], now the most recently used
 * ```
 */
export function createLruMap<K, V>(max: number): LruMap<K, V> {
  if (!(Number.isInteger(max) && max > 0)) throw new RangeError(`an LRU map needs a positive whole bound, got ${max}`);
  const map = new Map<K, V>();
  return {
    get(key) {
      const value = map.get(key);
      if (value === undefined) return undefined;
      // A Map iterates in insertion order: re-inserting moves the key to the most recently used end.
      map.delete(key);
      map.set(key, value);
      return value;
    },
    set(key, value) {
      map.delete(key);
      map.set(key, value);
      while (map.size > max) map.delete(map.keys().next().value as K);
    },
    delete: (key) => map.delete(key),
    clear: () => map.clear(),
    get size() {
      return map.size;
    },
    keys: () => [...map.keys()],
  };
}
