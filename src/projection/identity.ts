/**
 * Content identity of a message: what decides "does the thread already hold this message?".
 *
 * An engine that rebuilds messages from its own store (lossless-claw does) hands back objects that carry the same
 * conversation content as the mirrored history but different metadata: no `timestamp`, another `usage`, an engine's
 * own ids. Matching by object reference or whole canonical JSON then treats every rebuilt message as new and re-sends
 * the previous turn as context although the thread holds it. The identity here is built only from what the model
 * sees: the role, text parts, tool call ids/names/arguments, tool result ids/names and text, summaries. Timestamps,
 * usage, model/provider/api, stop reasons, ids the model never sees and any other metadata are ignored.
 */
import type { AgentMessage } from "../context-engine/types.js";
import { canonicalJson } from "./render.js";

/** Message fields that carry content the model sees (everything else is metadata and never part of the identity). */
const CONTENT_FIELDS = ["role", "toolCallId", "toolName", "isError", "customType", "summary"] as const;

/** One part reduced to what the model sees; unknown part types keep every field except obvious metadata. */
function partIdentity(part: unknown): unknown {
  if (typeof part === "string") return { type: "text", text: part };
  if (!part || typeof part !== "object") return part;
  const p = part as Record<string, unknown>;
  switch (p["type"]) {
    case "text":
      return { type: "text", text: p["text"] };
    case "thinking":
      return { type: "thinking", thinking: p["thinking"] };
    case "image":
      return { type: "image", mimeType: p["mimeType"], data: p["data"] };
    case "toolCall":
      return { type: "toolCall", id: p["id"], name: p["name"], arguments: p["arguments"] };
    default: {
      const out: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(p)) {
        if (key === "timestamp" || key === "usage" || key === "signature" || key === "textSignature") continue;
        out[key] = value;
      }
      return out;
    }
  }
}

/**
 * The content identity of a message as a string (canonical JSON of its content fields). Two messages with the same
 * identity show the model the same thing. String content and a single text part are the same content.
 *
 * @example
 * ```ts
 * const a = messageContentKey({ role: "user", content: "hi", timestamp: 1 });
 * const b = messageContentKey({ role: "user", content: [{ type: "text", text: "hi" }] } as never);
 * a === b; // true: timestamps and the string/part form do not matter
 * ```
 */
export function messageContentKey(message: AgentMessage): string {
  const m = message as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const field of CONTENT_FIELDS) {
    if (m[field] !== undefined) out[field] = m[field];
  }
  const content = m["content"];
  if (typeof content === "string") out["content"] = [partIdentity(content)];
  else if (Array.isArray(content)) out["content"] = content.map(partIdentity);
  else if (content !== undefined && content !== null) out["content"] = content;
  return canonicalJson(out);
}

/**
 * Membership by content with object references first: a caller that passes the same message objects (the usual
 * case for engines that hand the history through) costs no serialization at all; a content key is computed once per
 * object, and only where a reference cannot decide.
 *
 * @example
 * ```ts
 * const held = new ContentSet(heldMessages);
 * held.has(rebuiltMessage); // true when the content matches a held message
 * ```
 */
export class ContentSet {
  private readonly objects: Set<AgentMessage>;
  private keys: Set<string> | undefined;

  constructor(
    messages: Iterable<AgentMessage>,
    private readonly keyOf: (message: AgentMessage) => string = cachedContentKey(),
  ) {
    this.objects = new Set(messages);
  }

  has(message: AgentMessage): boolean {
    if (this.objects.has(message)) return true;
    this.keys ??= new Set([...this.objects].map(this.keyOf));
    return this.keys.has(this.keyOf(message));
  }
}

/**
 * A {@link messageContentKey} that remembers each object's key (weakly), so a message compared against several sets
 * is serialized once.
 *
 * @example
 * ```ts
 * const keyOf = cachedContentKey();
 * keyOf(message) === keyOf(message); // computed once
 * ```
 */
export function cachedContentKey(): (message: AgentMessage) => string {
  const cache = new WeakMap<object, string>();
  return (message) => {
    let key = cache.get(message);
    if (key === undefined) {
      key = messageContentKey(message);
      cache.set(message, key);
    }
    return key;
  };
}
