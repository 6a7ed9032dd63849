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
import { frozenMessageMemo } from "../transcript/freeze.js";
import { canonicalJson } from "./render.js";

/** Message fields that carry content the model sees (everything else is metadata and never part of the identity). */
const CONTENT_FIELDS = ["toolCallId", "toolName", "isError", "customType", "summary"] as const;
/** Part fields that are metadata even on part types we do not know. */
const PART_METADATA = new Set(["timestamp", "usage", "signature", "textSignature"]);

/**
 * Appends length-prefixed fields: `<length>:<text>` cannot be confused across field boundaries, and building it is
 * much cheaper than canonical JSON (the identity of every message of a long session is computed per turn when an
 * engine rebuilds its view; 10,000 messages must stay within a few ms).
 */
class KeyBuilder {
  private out = "";
  add(tag: string, value: unknown): void {
    const text = typeof value === "string" ? value : value === undefined ? "\u0000undefined" : canonicalJson(value);
    this.out += `${tag}${text.length}:${text}`;
  }
  toString(): string {
    return this.out;
  }
}

function addPart(key: KeyBuilder, part: unknown): void {
  if (typeof part === "string") return key.add("t", part);
  if (!part || typeof part !== "object") return key.add("v", part ?? null);
  const p = part as Record<string, unknown>;
  switch (p["type"]) {
    case "text":
      return key.add("t", p["text"]);
    case "thinking":
      return key.add("k", p["thinking"]);
    case "image":
      key.add("m", p["mimeType"]);
      return key.add("i", p["data"]);
    case "toolCall":
      key.add("c", p["id"]);
      key.add("n", p["name"]);
      return key.add("a", p["arguments"] ?? null);
    default: {
      const out: Record<string, unknown> = {};
      for (const [field, value] of Object.entries(p)) if (!PART_METADATA.has(field)) out[field] = value;
      return key.add("o", out);
    }
  }
}

/**
 * The content identity of a message as a string built from its role, content parts (text, thinking, image, tool call
 * id/name/arguments; other part types whole but for metadata), and tool result / custom / summary fields. Two
 * messages with the same identity show the model the same thing. String content and a single text part are the same
 * content; object key order never matters.
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
  const key = new KeyBuilder();
  key.add("r", String(m["role"]));
  for (const field of CONTENT_FIELDS) {
    if (m[field] !== undefined) key.add(field, m[field]);
  }
  const content = m["content"];
  if (typeof content === "string") {
    key.add("p", 1);
    addPart(key, content);
  } else if (Array.isArray(content)) {
    key.add("p", content.length);
    for (const part of content) addPart(key, part);
  } else if (content !== undefined && content !== null) key.add("x", content);
  return key.toString();
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
  private objects: Set<AgentMessage> | undefined;
  private signatures: Set<string> | undefined;
  private keys: Set<string> | undefined;
  private readonly members: readonly AgentMessage[];

  constructor(
    messages: Iterable<AgentMessage>,
    private readonly keyOf: (message: AgentMessage) => string = cachedContentKey(),
  ) {
    this.members = Array.isArray(messages) ? (messages as AgentMessage[]) : [...messages];
  }

  has(message: AgentMessage): boolean {
    if ((this.objects ??= new Set(this.members)).has(message)) return true;
    return this.hasContent(message);
  }

  /** Membership by content alone (for a caller that already knows the reference is not a member). */
  hasContent(message: AgentMessage): boolean {
    // A cheap signature first: no member with the same signature means no member with the same content, without
    // building every member's full key (a long session's held messages the view dropped would otherwise key the view).
    this.signatures ??= new Set(this.members.map(contentSignature));
    if (!this.signatures.has(contentSignature(message))) return false;
    this.keys ??= new Set(this.members.map(this.keyOf));
    return this.keys.has(this.keyOf(message));
  }
}

/**
 * A necessary condition for equal {@link messageContentKey}s, cheap to compute: role, part count, and the first part's
 * kind and main text length (the key starts with exactly these).
 */
export function contentSignature(message: AgentMessage): string {
  // A message the history cache froze keeps its signature (a long session's view is compared every turn).
  const memo = frozenMessageMemo(message);
  if (memo === undefined) return computeContentSignature(message);
  return (memo.signature ??= computeContentSignature(message));
}

function computeContentSignature(message: AgentMessage): string {
  const m = message as Record<string, unknown>;
  const content = m["content"];
  const parts = typeof content === "string" ? [content] : Array.isArray(content) ? content : undefined;
  const first = parts?.[0];
  let head = "";
  if (typeof first === "string") head = `t${first.length}`;
  else if (first && typeof first === "object") {
    const p = first as Record<string, unknown>;
    const text = p["type"] === "text" ? p["text"] : p["type"] === "thinking" ? p["thinking"] : undefined;
    head = p["type"] === "text" ? `t${typeof text === "string" ? text.length : -1}` : p["type"] === "thinking" ? `k${typeof text === "string" ? text.length : -1}` : "o";
  }
  return `${String(m["role"])}|${parts ? parts.length : content === undefined || content === null ? "-" : "x"}|${head}`;
}

/**
 * A {@link messageContentKey} that remembers each object's key, so a message compared against several sets is keyed
 * once. Scope it to one computation (a plain Map: a WeakMap over thousands of messages costs far more in GC). A
 * message the history cache deep-froze keeps its key in its own memo instead, from turn to turn: it can never change.
 *
 * @example
 * ```ts
 * const keyOf = cachedContentKey();
 * keyOf(message) === keyOf(message); // computed once
 * ```
 */
export function cachedContentKey(): (message: AgentMessage) => string {
  const cache = new Map<object, string>();
  return (message) => {
    const memo = frozenMessageMemo(message);
    if (memo !== undefined) return (memo.contentKey ??= messageContentKey(message));
    let key = cache.get(message);
    if (key === undefined) {
      key = messageContentKey(message);
      cache.set(message, key);
    }
    return key;
  };
}
