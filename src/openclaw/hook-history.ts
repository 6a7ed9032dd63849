/** The conversation history a plugin hook is handed, bounded and cloned as OpenClaw's agent harness hands it. */

/** OpenClaw's `MAX_AGENT_HOOK_HISTORY_MESSAGES`: hooks see at most this many prior messages. */
export const HOOK_HISTORY_MESSAGES = 100;

/**
 * The last {@link HOOK_HISTORY_MESSAGES} messages, each a deep copy: a handler can neither change the session through
 * them nor trip over the host's frozen history.
 *
 * @example
 * ```ts
 * boundedHookHistory(history).length; // <= 100
 * ```
 */
export function boundedHookHistory(messages: readonly unknown[]): unknown[] {
  return messages.slice(-HOOK_HISTORY_MESSAGES).map((m) => structuredClone(m));
}
