/**
 * SIGINT/SIGTERM handling for commands that hold a session lock or an app-server: the first signal asks the command
 * to stop (abort the turn), so its `finally` blocks run and the lock is released; a second one stops waiting.
 */

/** The signals the CLI treats as "stop". */
export const TERMINATION_SIGNALS = ["SIGINT", "SIGTERM"] as const;

/** A subscription to termination signals. */
export interface SignalWatch {
  /** The first signal received, if any. */
  readonly received: NodeJS.Signals | undefined;
  /** Resolves at the second signal (a person insisting): stop waiting for a clean settle. */
  readonly insisted: Promise<void>;
  /** Resolves at the first signal. */
  readonly first: Promise<NodeJS.Signals>;
  /** Removes the handlers. */
  dispose(): void;
}

/**
 * Installs SIGINT/SIGTERM handlers that call `onFirst` once (and stop Node's default exit, so cleanup can run).
 *
 * @example
 * ```ts
 * const ac = new AbortController();
 * const watch = watchSignals(() => ac.abort());
 * try { await runCodexTurn({ ...params, signal: ac.signal }); } finally { watch.dispose(); }
 * ```
 */
export function watchSignals(onFirst: (signal: NodeJS.Signals) => void = () => undefined): SignalWatch {
  let received: NodeJS.Signals | undefined;
  let resolveFirst!: (s: NodeJS.Signals) => void;
  let resolveInsisted!: () => void;
  const first = new Promise<NodeJS.Signals>((r) => (resolveFirst = r));
  const insisted = new Promise<void>((r) => (resolveInsisted = r));
  const handler = (signal: NodeJS.Signals) => {
    if (received !== undefined) return resolveInsisted();
    received = signal;
    resolveFirst(signal);
    onFirst(signal);
  };
  for (const s of TERMINATION_SIGNALS) process.on(s, handler);
  return {
    get received() {
      return received;
    },
    first,
    insisted,
    dispose() {
      for (const s of TERMINATION_SIGNALS) process.off(s, handler);
    },
  };
}

/**
 * Waits for `work` to settle, but at most `graceMs` after `watch`'s first signal (or until a second signal).
 * Returns the settled value, or undefined when the wait was cut short.
 *
 * @example
 * ```ts
 * const r = await settleWithin(turnPromise, watch, 15_000);
 * ```
 */
export async function settleWithin<T>(work: Promise<T>, watch: SignalWatch, graceMs: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const cut = watch.first.then(
    () =>
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), graceMs);
        void watch.insisted.then(() => resolve(undefined));
      }),
  );
  try {
    return await Promise.race([work, cut]);
  } finally {
    clearTimeout(timer);
  }
}
