/**
 * `hooks.running`: the host's `beforePromptBuild` may replace the prompt text and the developer instructions. When the
 * instructions changed, the machine projects again with them (`hooks.reprojecting`).
 */
import type { HistoryOutput, HooksOutput } from "../../../machines/turn.contract.js";
import { errorLabel } from "../../log/error-label.js";
import type { TurnDeps } from "../deps.js";

/**
 * Run `beforeModelResolve` (its failure is a warning: the turn's model stays), then `beforePromptBuild` (bounded; a
 * throw, timeout or malformed result rejects and the machine warns).
 */
export async function runPromptHooks(
  deps: TurnDeps,
  input: { promptText: string; developerInstructions?: string | undefined; history: HistoryOutput },
  signal: AbortSignal,
): Promise<HooksOutput> {
  const model = deps.hooks.has("beforeModelResolve") ? await resolveTurnModel(deps, input.promptText) : undefined;
  const out = await deps.hooks.beforePromptBuild(
    {
      ...deps.hookIds,
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
    ...(model !== undefined ? { model } : {}),
  };
}

/**
 * The model of a turn whose host routes models (`beforeModelResolve`): the hook's choice, else the turn's `model`,
 * else the model Codex is configured with (`config/read`). Always named, because Codex keeps a turn's model for the
 * thread's later turns: a turn the hook leaves alone must not inherit the previous turn's routed model.
 */
async function resolveTurnModel(deps: TurnDeps, prompt: string): Promise<string | undefined> {
  const p = deps.params;
  const attachments = (p.images ?? []).map((image) => ({ kind: "image" as const, mimeType: image.mimeType }));
  const chosen = await deps.hooks.beforeModelResolve({
    ...deps.hookIds,
    prompt,
    ...(p.model !== undefined ? { model: p.model } : {}),
    ...(attachments.length > 0 ? { attachments } : {}),
  });
  if (chosen !== undefined || p.model !== undefined) return chosen ?? p.model;
  try {
    const read = (await deps.appServer.request("config/read", { ...(p.cwd !== undefined ? { cwd: p.cwd } : {}) })) as { config?: { model?: unknown } | undefined };
    return typeof read.config?.model === "string" && read.config.model !== "" ? read.config.model : undefined;
  } catch (error) {
    deps.logger.warn({ ...deps.ids, event: "configured model unknown", err: errorLabel(error) }, "config/read failed; the turn keeps the thread's model");
    return undefined;
  }
}
