/**
 * Images of earlier user messages in the context a turn sends. OpenClaw's Codex harness sends a user message's images
 * with its rendered text when the message is projected into a Codex turn (a fresh thread's view, a continuity
 * projection); rendering them `[image omitted]` made the model lose, say, a screenshot the user sent before the
 * thread changed.
 *
 * A sendable image (a user message's `{ type: "image", data, mimeType }` part that passes the prompt-image checks)
 * renders as a label naming its content hash, `[image 3f2a9c1b0d4e (image/png)]`; the turn then sends the image right
 * after the same label as a text item, before the prompt. The label depends only on the bytes, so a block's text (and
 * its ledger unit) is the same whether or not the image is attached, and a thread that received it never gets it again.
 * Anything else (tool-result images, bad bytes, other types) still renders `[image omitted]`.
 */
import { createHash } from "node:crypto";
import type { AgentMessage } from "../context-engine/types.js";
import { checkImageBytes, MAX_PROMPT_IMAGE_BYTES, type ContextImage } from "../codex/prompt-images.js";
import { isDeepFrozenByHost } from "../transcript/freeze.js";

/** At most this many context images go with one turn (the newest). */
export const MAX_CONTEXT_IMAGES = 8;
/** At most this many decoded bytes of context images go with one turn (the newest first). */
export const MAX_CONTEXT_IMAGE_BYTES = MAX_PROMPT_IMAGE_BYTES;
/** Every label starts with this (a cheap test for "could this text name an image"). */
export const CONTEXT_IMAGE_LABEL_PREFIX = "[image ";

/** Image parts of host-frozen messages, checked once (they can never change). */
const checked = new WeakMap<object, ContextImage | null>();

/**
 * The context image of a user message's image part, or undefined when the part cannot be sent (it then renders
 * `[image omitted]`).
 *
 * @example
 * ```ts
 * contextImageOfPart({ type: "image", data: pngBase64, mimeType: "image/png" }, true)?.label; // "[image 3f2a9c1b0d4e (image/png)]"
 * ```
 */
export function contextImageOfPart(part: unknown, frozen = false): ContextImage | undefined {
  if (!part || typeof part !== "object") return undefined;
  if (frozen) {
    const hit = checked.get(part);
    if (hit !== undefined) return hit ?? undefined;
  }
  const p = part as { type?: unknown; data?: unknown; mimeType?: unknown };
  let image: ContextImage | undefined;
  if (p.type === "image" && typeof p.data === "string" && typeof p.mimeType === "string") {
    const ok = checkImageBytes({ data: p.data, mimeType: p.mimeType });
    if (!("message" in ok)) image = { label: `${CONTEXT_IMAGE_LABEL_PREFIX}${createHash("sha256").update(ok.data, "utf8").digest("hex").slice(0, 12)} (${ok.mimeType})]`, data: ok.data, mimeType: ok.mimeType };
  }
  if (frozen) checked.set(part, image ?? null);
  return image;
}

/** The sendable images of a user message, in part order (none for other roles). */
function imagesOfMessage(message: AgentMessage): ContextImage[] {
  const m = message as { role?: unknown; content?: unknown };
  if (m.role !== "user" || !Array.isArray(m.content)) return [];
  const frozen = isDeepFrozenByHost(message);
  const out: ContextImage[] = [];
  for (const part of m.content) {
    const image = contextImageOfPart(part, frozen);
    if (image) out.push(image);
  }
  return out;
}

/**
 * The images of `messages` whose labels appear in `sentText` (what the turn sends: prompt text and context entries),
 * once each, in the order they appear there; when more than {@link MAX_CONTEXT_IMAGES} or
 * {@link MAX_CONTEXT_IMAGE_BYTES}, the newest (last appearing) are kept.
 *
 * @example
 * ```ts
 * selectContextImages(view, promptText + entryValues.join("\n")); // [{ label, data, mimeType }, ...]
 * ```
 */
export function selectContextImages(messages: readonly AgentMessage[], sentText: string): ContextImage[] {
  if (!sentText.includes(CONTEXT_IMAGE_LABEL_PREFIX)) return [];
  const found = new Map<string, { image: ContextImage; at: number }>();
  for (const message of messages) {
    for (const image of imagesOfMessage(message)) {
      if (found.has(image.label)) continue;
      const at = sentText.indexOf(image.label);
      if (at >= 0) found.set(image.label, { image, at });
    }
  }
  const ordered = [...found.values()].sort((a, b) => a.at - b.at).map((f) => f.image);
  const kept: ContextImage[] = [];
  let bytes = 0;
  for (let i = ordered.length - 1; i >= 0 && kept.length < MAX_CONTEXT_IMAGES; i--) {
    const image = ordered[i]!;
    const size = Math.floor((image.data.length * 3) / 4);
    if (bytes + size > MAX_CONTEXT_IMAGE_BYTES) continue;
    bytes += size;
    kept.push(image);
  }
  return kept.reverse();
}
