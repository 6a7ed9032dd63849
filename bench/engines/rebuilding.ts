/**
 * A rebuilding engine, shaped like lossless-claw: every turn it returns the whole conversation, but as messages
 * rebuilt from its own store: no `timestamp`, its own `usage` figures, its own key order. The content is the
 * history's; only metadata differs, so the projection must recognise every message as held.
 */
import type { AgentMessage, ContextEngine } from "../../src/context-engine/types.js";
import { engineShape, viewTokens } from "./shared.js";

/**
 * A message as the engine's store gives it back: content fields only, usage zeroed on assistant messages.
 *
 * @example
 * ```ts
 * rebuildMessage({ role: "user", content: "hi", timestamp: 1 }); // { content: "hi", role: "user" }
 * ```
 */
export function rebuildMessage(message: AgentMessage): AgentMessage {
  const { timestamp: _timestamp, usage: _usage, ...rest } = message as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(rest).reverse()) out[key] = rest[key];
  if (message.role === "assistant") out["usage"] = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0 };
  return out as AgentMessage;
}

/**
 * @example
 * ```ts
 * await runCodexTurn({ ...params, contextEngine: createRebuildingEngine() });
 * ```
 */
export function createRebuildingEngine(): ContextEngine {
  return engineShape("rebuilding", (messages) => {
    const view = messages.map(rebuildMessage);
    return { messages: view, estimatedTokens: viewTokens(view) };
  });
}
