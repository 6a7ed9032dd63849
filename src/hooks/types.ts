import type { AgentMessage } from "../context-engine/types.js";
import type { NativeCompactionRecord } from "../../machines/turn.contract.js";

/** What a `beforePromptBuild` hook sees: exactly what Codex will receive (after engine projection). */
export interface BeforePromptBuildContext {
  sessionId: string;
  prompt: string;
  developerInstructions?: string;
  /** The mirrored history (read-only). */
  messages: readonly AgentMessage[];
}

/** A hook may replace the prompt and/or developer instructions; returning nothing keeps them. */
export interface BeforePromptBuildResult {
  prompt?: string;
  developerInstructions?: string;
}

/** Details of a native Codex compaction observed during a turn (never an engine compaction). */
export interface CompactionHookEvent extends NativeCompactionRecord {
  ownsCompaction: boolean;
}

/**
 * Harness hooks (OpenClaw's adapter-level observations). All optional; a hook that throws is logged and ignored,
 * except `beforePromptBuild`, whose failure keeps the unmodified prompt.
 *
 * @example
 * ```ts
 * const hooks: CodexTurnHooks = {
 *   beforePromptBuild: ({ prompt }) => ({ prompt: prompt + "\n\nAnswer in French." }),
 *   afterCompaction: (e) => console.log("codex compacted", e.itemId),
 * };
 * ```
 */
export interface CodexTurnHooks {
  beforePromptBuild?(ctx: BeforePromptBuildContext): BeforePromptBuildResult | void | Promise<BeforePromptBuildResult | void>;
  beforeCompaction?(event: CompactionHookEvent): void | Promise<void>;
  afterCompaction?(event: CompactionHookEvent): void | Promise<void>;
  /** Every lifecycle state the machine enters, in order. */
  onState?(state: string): void;
}
