import type { ContextEngine } from "../types.js";

/**
 * OpenClaw's `legacy` engine: the turn behaves exactly as without an engine (no assemble, no finalize, no maintain).
 *
 * @example
 * ```ts
 * await runCodexTurn({ ...params, contextEngine: legacyEngine });
 * ```
 */
export const legacyEngine: ContextEngine = {
  info: { id: "legacy", name: "Legacy (no context engine)" },
  async ingest() {
    return { ingested: false };
  },
  async assemble({ messages }) {
    return { messages, estimatedTokens: 0 };
  },
  async compact() {
    return { ok: true, compacted: false, reason: "legacy engine does not compact" };
  },
};
