/**
 * What the benchmark engine shapes share: a plain engine skeleton (ingest accepted, compaction a no-op) around an
 * `assemble` that decides the view. The shapes model real engines' behaviour towards the projection, not their
 * storage: a view rebuilt from the engine's own store, a summarizing view, a per-turn recalled note.
 */
import type { AgentMessage, AssembleResult, ContextEngine } from "../../src/context-engine/types.js";
import { estimateTokens, renderMessageBlock } from "../../src/projection/render.js";

/** The engine's token estimate of its view (the projection's own rendering, characters / 4). */
export function viewTokens(messages: readonly AgentMessage[]): number {
  return messages.reduce((sum, m) => sum + estimateTokens(renderMessageBlock(m) ?? "") + 4, 0);
}

/**
 * An engine whose view is `assembleView(messages, prompt)`.
 *
 * @example
 * ```ts
 * const engine = engineShape("passthrough", (messages) => ({ messages, estimatedTokens: viewTokens(messages) }));
 * ```
 */
export function engineShape(id: string, assembleView: (messages: AgentMessage[], prompt: string | undefined) => AssembleResult): ContextEngine {
  return {
    info: { id, name: `bench ${id} engine`, version: "1" },
    async ingest() {
      return { ingested: true };
    },
    async ingestBatch({ messages }) {
      return { ingestedCount: messages.length };
    },
    async assemble({ messages, prompt }) {
      return assembleView(messages, prompt);
    },
    async compact() {
      return { ok: true, compacted: false, reason: "bench engine: nothing to compact" };
    },
  };
}
