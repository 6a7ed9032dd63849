/**
 * A memory (recall) engine: the view is the whole conversation, and each turn it adds a note recalled for the current
 * prompt as `systemPromptAddition`. The note changes every turn, so each turn's copy supersedes the last one.
 */
import type { ContextEngine } from "../../src/context-engine/types.js";
import { textOfLength } from "../lib.js";
import { engineShape, viewTokens } from "./shared.js";

/** Characters of each recalled note (default). */
export const DEFAULT_NOTE_CHARS = 160;

/**
 * The note recalled for a prompt (deterministic: seeded by the prompt's length and first characters).
 *
 * @example
 * ```ts
 * recalledNote("Turn 3: ..."); // "Recalled from memory: ..."
 * ```
 */
export function recalledNote(prompt: string, chars = DEFAULT_NOTE_CHARS): string {
  let seed = prompt.length;
  for (let i = 0; i < Math.min(prompt.length, 24); i++) seed = (seed * 31 + prompt.charCodeAt(i)) >>> 0;
  return `Recalled from memory: ${textOfLength(seed, chars)}`;
}

/**
 * @example
 * ```ts
 * await runCodexTurn({ ...params, contextEngine: createRecallEngine() });
 * ```
 */
export function createRecallEngine(options: { noteChars?: number } = {}): ContextEngine {
  return engineShape("recall", (messages, prompt) => ({
    messages,
    estimatedTokens: viewTokens(messages),
    systemPromptAddition: recalledNote(prompt ?? "", options.noteChars),
  }));
}

/**
 * The recall shape with its note placed in the view instead of `systemPromptAddition`: a `custom` message after the
 * history (engine-made text, so native projection injects it as a user-role reference item after the kept prefix,
 * never developer). Same note text as {@link createRecallEngine}.
 *
 * @example
 * ```ts
 * const engine = createRecallItemEngine(); // view: [...history, { role: "custom", customType: "recall", content: note }]
 * ```
 */
export function createRecallItemEngine(options: { noteChars?: number } = {}): ContextEngine {
  return engineShape("recallItem", (messages, prompt) => {
    const view = [...messages, { role: "custom" as const, customType: "recall", content: recalledNote(prompt ?? "", options.noteChars), display: false, timestamp: 0 }];
    return { messages: view, estimatedTokens: viewTokens(view) };
  });
}
