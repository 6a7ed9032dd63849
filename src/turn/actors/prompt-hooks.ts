/**
 * `hooks.running`: the host's `beforePromptBuild` may replace the prompt text and the developer instructions. When the
 * instructions changed, the machine projects again with them (`hooks.reprojecting`).
 */
import type { HistoryOutput, HooksOutput } from "../../../machines/turn.contract.js";
import type { TurnDeps } from "../deps.js";

/** Run `beforePromptBuild` (bounded; a throw, timeout or malformed result rejects and the machine warns). */
export async function runPromptHooks(
  deps: TurnDeps,
  input: { promptText: string; developerInstructions?: string; history: HistoryOutput },
  signal: AbortSignal,
): Promise<HooksOutput> {
  const out = await deps.hooks.beforePromptBuild(
    {
      sessionId: deps.params.sessionId,
      prompt: input.promptText,
      ...(input.developerInstructions !== undefined ? { developerInstructions: input.developerInstructions } : {}),
      messages: input.history.messages,
    },
    signal,
  );
  const developerInstructions = out?.developerInstructions ?? input.developerInstructions;
  return {
    promptText: out?.prompt ?? input.promptText,
    ...(developerInstructions !== undefined ? { developerInstructions } : {}),
  };
}
