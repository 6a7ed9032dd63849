/**
 * Developer instructions on a thread over time.
 *
 * Codex applies `developerInstructions` only when a thread starts; `thread/resume` does not inject new ones (notes
 * P4). When a resumed thread last received different instructions (a new systemPromptAddition, a beforePromptBuild
 * hook that changes them), the new ones travel as one `application` entry (developer role) keyed
 * `openclaw.developer.<hash>`. The thread keeps every copy it received, so each superseded copy is stale context:
 * the binding records every delivery (`developerDeliveries`, `<hash>:<tokens>`) and stale accounting counts all but
 * the current one, which bounds per-turn additions through the rotation policy instead of letting them pile up.
 *
 * Both the delivery and the resume-or-rotate decision must use the FINAL instructions, after the beforePromptBuild
 * hook: when the hook changed them, the turn machine projects again with them (`finalDeveloperInstructions`, the
 * `hooks.reprojecting` step). Counted against the pre-hook text, a hook that prepends the same large system context
 * every turn (lossless-claw's recall policy, ~1,400 tokens) made the thread's copy look stale and rotated every turn.
 */
import type { AdditionalContextEntry, ProjectionOutput } from "../../machines/turn.contract.js";
import type { BindingUpdate, ThreadBinding } from "../transcript/binding.js";
import { ledgerUnitId, ledgerUnitTokens } from "./entries.js";
import { estimateTokens, memoizedSha256Hex } from "./render.js";

/** Key prefix of the entry that carries changed developer instructions into a resumed thread (sorts after context). */
export const DEVELOPER_UPDATE_KEY_PREFIX = "openclaw.developer";

/**
 * Hash of developer instructions as recorded in the binding.
 *
 * @example
 * ```ts
 * developerInstructionsHash("Be brief."); // 20 hex
 * ```
 */
export function developerInstructionsHash(text: string | undefined): string {
  return instructionHashOf(text ?? "");
}

/** A host hashes the same instructions on every turn of a session. */
const instructionHashOf = memoizedSha256Hex(20, 64);

/**
 * Developer instructions: base, then the engine's systemPromptAddition (trimmed) as the last section, joined by one
 * blank line. The addition never goes into the prompt text.
 *
 * @example
 * ```ts
 * composeDeveloperInstructions("Be brief.", " Cite sources. "); // "Be brief.\n\nCite sources."
 * ```
 */
export function composeDeveloperInstructions(base: string | undefined, addition: string | undefined): string | undefined {
  const extra = addition?.trim();
  if (!extra) return base;
  return base && base.length > 0 ? `${base}\n\n${extra}` : extra;
}

/**
 * Tokens of the developer instructions a thread still shows although they were superseded: every recorded delivery
 * except the last one when it matches `currentHash` (all of them when the thread's latest copy is not current).
 *
 * @example
 * ```ts
 * staleDeveloperTokens(["aaa:50", "bbb:60"], "bbb"); // 50
 * ```
 */
export function staleDeveloperTokens(deliveries: readonly string[] | undefined, currentHash: string): number {
  if (!deliveries || deliveries.length === 0) return 0;
  let total = 0;
  for (const unit of deliveries) total += ledgerUnitTokens(unit);
  const last = deliveries[deliveries.length - 1]!;
  return ledgerUnitId(last) === currentHash ? total - ledgerUnitTokens(last) : total;
}

/** Inputs of {@link planDeveloperInstructionsDelivery}. */
export interface DeveloperDeliveryInput {
  /** The binding the turn was projected against (undefined: no binding). */
  binding: ThreadBinding | undefined;
  /** Whether the turn starts a fresh thread or resumes the bound one (`projection.thread.action`). */
  threadAction: "start" | "resume";
  /** The FINAL developer instructions (after the beforePromptBuild hook). */
  developerInstructions: string | undefined;
  /** The projection's entries; any earlier developer update entry in it is replaced. */
  additionalContext?: Record<string, AdditionalContextEntry> | undefined;
  /** The projection's binding update, to merge into (copied, never mutated). */
  bindingUpdate?: BindingUpdate | undefined;
}

/** What {@link planDeveloperInstructionsDelivery} decides. */
export interface DeveloperDelivery {
  /** The entries to send: the projection's context entries plus the developer update, when one is needed. */
  additionalContext?: Record<string, AdditionalContextEntry> | undefined;
  /** The binding update with `developerInstructionsHash` and `developerDelivery` set for these instructions. */
  bindingUpdate: BindingUpdate;
  /** The developer update entry's key when one is sent. */
  updateKey?: string | undefined;
  /** UTF-8 bytes of the update entry's value (0 when none is sent). */
  updateBytes: number;
}

/**
 * Decide how this turn's final developer instructions reach the model: on a fresh thread they go with thread/start
 * (nothing to add); on a resumed thread whose latest instructions differ (hash in the binding), they go as one
 * `application` entry keyed `openclaw.developer.<hash10>`. Pure; calling it again with other instructions replaces
 * the earlier decision (the update entry is recomputed, never added twice).
 *
 * @example
 * ```ts
 * const hooked = await runBeforePromptBuild(...); // the host's hook step
 * const d = planDeveloperInstructionsDelivery({ binding, threadAction: projection.thread.action,
 *   developerInstructions: hooked.developerInstructions, additionalContext: projection.additionalContext,
 *   bindingUpdate: projection.bindingUpdate as BindingUpdate });
 * // send d.additionalContext with turn/start; persist d.bindingUpdate once Codex accepted the turn
 * ```
 */
export function planDeveloperInstructionsDelivery(input: DeveloperDeliveryInput): DeveloperDelivery {
  const context = withoutDeveloperUpdates(input.additionalContext);
  const text = input.developerInstructions;
  const hash = developerInstructionsHash(text);
  const unit = `${hash}:${estimateTokens(text ?? "")}`;
  const base: BindingUpdate = input.bindingUpdate
    ? { ...input.bindingUpdate, ledgerAdd: [...input.bindingUpdate.ledgerAdd] }
    : { reset: input.threadAction === "start", ledgerAdd: [] };
  delete base.developerDelivery;
  const bindingUpdate: BindingUpdate = { ...base, developerInstructionsHash: hash };
  const done = (out: Omit<DeveloperDelivery, "bindingUpdate">): DeveloperDelivery => {
    const result: DeveloperDelivery = { ...out, bindingUpdate };
    if (result.additionalContext === undefined) delete result.additionalContext;
    return result;
  };
  if (input.threadAction === "start") {
    // thread/start carries them (an empty text is recorded too: it supersedes nothing).
    if (text) bindingUpdate.developerDelivery = unit;
    return done({ additionalContext: context, updateBytes: 0 });
  }
  const held = input.binding?.developerInstructionsHash;
  if (held === undefined || held === hash || !text) return done({ additionalContext: context, updateBytes: 0 });
  const updateKey = `${DEVELOPER_UPDATE_KEY_PREFIX}.${hash.slice(0, 10)}`;
  bindingUpdate.developerDelivery = unit;
  return done({
    additionalContext: { ...(context ?? {}), [updateKey]: { kind: "application", value: text } },
    updateKey,
    updateBytes: Buffer.byteLength(text, "utf8"),
  });
}

/**
 * The projection with its developer-instructions delivery recomputed for `developerInstructions` (the final ones,
 * after the beforePromptBuild hook): entries, binding update, `developerInstructions`, `entriesSent`, `bytes` and
 * `staleTokens` all follow. The host calls it after the hook step and uses the returned projection from then on.
 *
 * @example
 * ```ts
 * projection = withDeveloperInstructions(projection, binding, hooksOutput.developerInstructions);
 * ```
 */
export function withDeveloperInstructions(
  projection: ProjectionOutput,
  binding: ThreadBinding | undefined,
  developerInstructions: string | undefined,
): ProjectionOutput {
  const previous = (projection.bindingUpdate as BindingUpdate | undefined) ?? undefined;
  const input: DeveloperDeliveryInput = { binding, threadAction: projection.thread.action, developerInstructions };
  if (projection.additionalContext) input.additionalContext = projection.additionalContext;
  if (previous) input.bindingUpdate = previous;
  const delivery = planDeveloperInstructionsDelivery(input);
  const out: ProjectionOutput = { ...projection, bindingUpdate: delivery.bindingUpdate };
  if (delivery.additionalContext) out.additionalContext = delivery.additionalContext;
  else delete out.additionalContext;
  if (developerInstructions !== undefined) out.developerInstructions = developerInstructions;
  else delete out.developerInstructions;
  // Take out the earlier update entry's counts, add the new one's.
  for (const [key, entry] of Object.entries(projection.additionalContext ?? {})) {
    if (!key.startsWith(`${DEVELOPER_UPDATE_KEY_PREFIX}.`)) continue;
    out.entriesSent -= 1;
    out.bytes -= Buffer.byteLength(entry.value, "utf8");
  }
  if (delivery.updateKey) out.entriesSent += 1;
  out.bytes += delivery.updateBytes;
  if (projection.thread.action === "resume" && previous?.staleContextTokens !== undefined) {
    const deliveries = appendDelivery(binding?.developerDeliveries, delivery.bindingUpdate.developerDelivery);
    out.staleTokens = previous.staleContextTokens + staleDeveloperTokens(deliveries, delivery.bindingUpdate.developerInstructionsHash!);
  }
  return out;
}

/**
 * Deliveries after this turn: the binding's list plus this turn's delivery, if any.
 *
 * @example
 * ```ts
 * appendDelivery(["a:1"], "b:2"); // ["a:1", "b:2"]
 * ```
 */
export function appendDelivery(deliveries: readonly string[] | undefined, delivery: string | undefined): string[] {
  const list = [...(deliveries ?? [])];
  if (delivery !== undefined) list.push(delivery);
  return list;
}

function withoutDeveloperUpdates(
  entries: Record<string, AdditionalContextEntry> | undefined,
): Record<string, AdditionalContextEntry> | undefined {
  if (!entries) return undefined;
  const out: Record<string, AdditionalContextEntry> = {};
  let any = false;
  for (const [key, entry] of Object.entries(entries)) {
    if (key.startsWith(`${DEVELOPER_UPDATE_KEY_PREFIX}.`)) continue;
    out[key] = entry;
    any = true;
  }
  return any ? out : undefined;
}
