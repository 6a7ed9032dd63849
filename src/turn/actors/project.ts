/**
 * `project` (and `hooks.reprojecting`): what Codex receives this turn, and whether the bound thread is resumed (pure;
 * see src/projection).
 */
import type { ProjectInput, ProjectionOutput } from "../../../machines/turn.contract.js";
import { projectAssembledContext } from "../../projection/index.js";
import type { ThreadBinding } from "../../transcript/binding.js";
import type { TurnDeps } from "../deps.js";

/** Project the engine's view for this turn and log the decision (counts only). */
export async function projectContext(deps: TurnDeps, input: ProjectInput): Promise<ProjectionOutput> {
  const p = deps.params;
  const projection = projectAssembledContext({
    mode: p.projection?.mode ?? "auto",
    prompt: input.prompt,
    history: input.history.messages,
    origins: input.history.origins,
    assembled: input.assembled,
    baseDeveloperInstructions: p.developerInstructions,
    ...(input.finalDeveloperInstructions !== undefined ? { finalDeveloperInstructions: input.finalDeveloperInstructions } : {}),
    binding: input.binding as ThreadBinding | undefined,
    fingerprints: deps.fingerprints,
    tokenBudget: p.contextTokenBudget,
    divergenceTokens: p.projection?.divergenceTokens,
    partCapChars: p.projection?.partCapChars,
    totalCapChars: p.projection?.totalCapChars,
    ...(p.projection?.cachedPriceRatio !== undefined ? { cachedPriceRatio: p.projection.cachedPriceRatio } : {}),
    historyContinuity: !deps.facts.active,
  } as Parameters<typeof projectAssembledContext>[0]);
  const result = input.freshThreadReason === "resumeFailed" ? { ...projection, reason: `${projection.reason}:resumeFailed` } : projection;
  deps.logger.info(
    {
      ...deps.ids,
      event: "projection decision",
      mode: result.mode,
      reason: result.reason,
      thread: result.thread.action,
      entriesSent: result.entriesSent,
      bytes: result.bytes,
      contextImages: result.contextImages?.length ?? 0,
      staleTokens: (result as { staleTokens?: number | undefined }).staleTokens,
      ...(result.nativeSync
        ? {
            nativeDecision: result.nativeSync.reason,
            viewUnits: result.nativeSync.counts.viewUnits,
            keptTurns: result.nativeSync.counts.keptTurns,
            revertTurns: result.nativeSync.revertBeforeTurnId !== undefined ? result.nativeSync.counts.revertedTurns : 0,
            injectItems: result.nativeSync.counts.injectedItems,
            injectBytes: result.nativeSync.counts.injectedBytes,
            staleBytes: result.nativeSync.counts.staleBytes,
          }
        : {}),
      afterHooks: input.finalDeveloperInstructions !== undefined,
    },
    "codex context projection decision",
  );
  return result;
}
