/** `hooks`: the host's `beforePromptBuild` may replace the prompt text and the developer instructions. */
import type { HistoryOutput, HooksOutput, ProjectionOutput } from "../../../machines/turn.contract.js";
import { withDeveloperInstructions } from "../../projection/index.js";
import type { ThreadBinding } from "../../transcript/binding.js";
import type { TurnDeps } from "../deps.js";

/** Run `beforePromptBuild` (bounded; a throw, timeout or malformed result rejects and the machine warns). */
export async function runPromptHooks(
  deps: TurnDeps,
  input: { promptText: string; developerInstructions?: string; history: HistoryOutput; projection?: ProjectionOutput; binding?: unknown },
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
  // New developer instructions reach a resumed thread only as a delivery entry: redo that part of the projection.
  const changed = developerInstructions !== input.developerInstructions && input.projection !== undefined;
  return {
    promptText: out?.prompt ?? input.promptText,
    ...(developerInstructions !== undefined ? { developerInstructions } : {}),
    ...(changed ? { projection: withDeveloperInstructions(input.projection!, input.binding as ThreadBinding | undefined, developerInstructions) } : {}),
  };
}
