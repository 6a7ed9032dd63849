/**
 * A user message whose content getter counts reads (each render or key of it reads the content once); `mark` makes it
 * one of the history cache's own deep-frozen messages (`markDeepFrozen`), whose derived facts may be kept by identity.
 */
import type { AgentMessage } from "../../src/context-engine/types.js";
import { markDeepFrozen } from "../../src/transcript/freeze.js";

export function watchedMessage(text: string, mark: boolean): { message: AgentMessage; reads: () => number } {
  let reads = 0;
  const m = Object.freeze(
    Object.defineProperties({ role: "user", timestamp: 1 } as unknown as AgentMessage, {
      content: { enumerable: true, get: () => (reads++, text) },
    }),
  );
  return { message: mark ? markDeepFrozen(m) : m, reads: () => reads };
}
