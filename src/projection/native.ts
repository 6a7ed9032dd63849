/**
 * Native projection: the engine's view BECOMES the Codex thread's history. Each turn the view is compared with what the
 * thread holds (the binding's {@link NativeThreadRecord}: Codex never shows injected items, so we record them), the
 * thread is cut back (`thread/revert`) to the last turn boundary the view still matches, and the rest of the view is
 * appended as raw Responses items (`thread/inject_items`) before `turn/start` sends the prompt. A per-turn cost rule
 * chooses between carrying stale items, revert + re-inject, and a fresh thread ({@link chooseNativeSync}). See
 * docs/projection.md, "Native mode".
 *
 * Everything here is pure: the same view, history and record give the same plan and byte-identical items.
 */
import type { AgentMessage, MessagePart } from "../context-engine/types.js";
import { messageContentKey } from "./identity.js";
import { canonicalJson, renderMessageBlock, sha256Hex, PROMPT_SAFETY_NOTE } from "./render.js";

/** Where a native unit came from: a transcript message (`m`), engine-made text (`e`), or a tool call/result pair part (`t`). */
export type NativeUnitKind = "m" | "e" | "t";

/**
 * One injected view message as the binding records it: `<kind><hash16>:<bytes>`. The hash is the view message's
 * content key (`identity.ts`), so it names the view entry it came from and matches the same message held by a turn.
 */
export type NativeUnit = string;

/** What the thread holds, as recorded by us (the binding's `native` field). Plain and serializable. */
export interface NativeThreadRecord {
  /** Units injected before the thread's first turn: Codex can never revert these. */
  preamble: NativeUnit[];
  /**
   * The thread's turns in order, each with the units injected after it (before the next turn) and, when the turn
   * carried a developer-instructions copy (an `application` entry), that copy's `<hash>:<tokens>`.
   */
  turns: Array<{ id: string; units: NativeUnit[]; dev?: string | undefined; lead?: NativeUnit[] | undefined }>;
  /**
   * Units that ride with the next turn as its `additionalContext` (a turn's `lead`, before its prompt): the view's
   * engine-made tail when it would otherwise be injected before the thread's first turn, where nothing can ever be
   * reverted. The accepted turn takes them over ({@link recordAcceptedTurn}); until then the thread does not hold them.
   */
  lead?: NativeUnit[] | undefined;
  /** Hash of the developer instructions the thread was started with. */
  startDev?: string | undefined;
  /**
   * The thread's content from this turn on is not known (a sync step was cut short, or a native compaction ran in
   * it): the next sync cuts before it. `null`: not even the preamble is known (the next sync rotates).
   */
  unknownFrom?: string | null | undefined;
  /** A sync step in progress (written before the Codex call, removed with the record of what it did). */
  intent?: { step: "revert"; beforeTurnId: string } | { step: "inject"; afterTurnId: string | null; units: NativeUnit[] } | undefined;
  /** Stale bytes' rent accrued on this thread (cost rule: carry). */
  rentBytes?: number | undefined;
  /**
   * Turns reverted off this thread (newest last, at most {@link MAX_NATIVE_TURNS}): the transcript keeps their
   * messages under this thread's id, and they must never be taken for turns the record lacks.
   */
  cut?: string[] | undefined;
  /**
   * A thread adopted from `delta` or `threadBootstrap` projection (the `auto` of before, issue 64): its turns up to and
   * including `through` also hold the binding's ledger blocks (`additionalContext` entries), in turns the record does
   * not know. Those turns are one segment: kept whole when the view starts with their messages in turn order and
   * every block (each before some turn's messages, as delta sent them), else cut before the first of them (the only
   * boundary whose kept content is known). `dev`: the developer
   * copies those turns carried after the thread's start (`<hash>:<tokens>`); one other than this turn's keeps the
   * segment from being kept, as a turn's `dev` does.
   */
  adopted?: { through: string; dev?: string[] | undefined } | undefined;
}

/** Turns a native record keeps (the oldest fall out; a view that reaches past them rotates). */
export const MAX_NATIVE_TURNS = 2_000;

/**
 * Bytes a fresh thread re-sends uncached besides the view: Codex's default `tools` (~17.5 KB) and its preamble (base
 * and developer instructions, permissions, environment context, ~3.5 KB), measured on codex 0.171.0.
 */
export const ROTATION_OVERHEAD_BYTES = 21_000;

/** The label before engine-made text injected as a user-role item (reference data, never instructions). */
export const NATIVE_REFERENCE_LABEL = PROMPT_SAFETY_NOTE;

/** A Responses API input item as `thread/inject_items` takes it. */
export type ResponsesItem = Record<string, unknown>;

/** One view message converted: its unit and the items that carry it. */
export interface NativeViewUnit {
  /** The view message the unit came from. */
  message: AgentMessage;
  unit: NativeUnit;
  hash: string;
  bytes: number;
  kind: NativeUnitKind;
  items: ResponsesItem[];
}

/** A message's parts, a part that is not an object (bad input from an engine) standing as an unknown part. */
const partsOf = (content: unknown): MessagePart[] =>
  Array.isArray(content) ? content.map((part) => (part !== null && typeof part === "object" ? (part as MessagePart) : ({ type: "unknown" } as unknown as MessagePart))) : [];

const textOf = (c: string | MessagePart[] | undefined): string => {
  if (typeof c === "string") return c;
  if (!Array.isArray(c)) return "";
  return partsOf(c)
    .filter((p): p is { type: "text"; text: string } => p.type === "text" && typeof (p as { text?: unknown }).text === "string")
    .map((p) => p.text)
    .join("\n");
};

/**
 * Hashes of messages seen before, by object: the history cache hands out the same frozen message objects from turn to
 * turn, so a long session's turns are hashed once per process, not on every turn's sync plan.
 */
const hashMemo = new WeakMap<object, string>();

/**
 * The content hash of a message (16 hex of its content key): what names a view message in the native record, and
 * what matches it with the same message a thread's turn holds (metadata such as timestamps and usage is ignored).
 *
 * @example
 * ```ts
 * nativeMessageHash({ role: "user", content: "hi", timestamp: 1 }) === nativeMessageHash({ role: "user", content: "hi", timestamp: 2 }); // true
 * ```
 */
export function nativeMessageHash(message: AgentMessage): string {
  const frozen = Object.isFrozen(message);
  const known = frozen ? hashMemo.get(message) : undefined;
  if (known !== undefined) return known;
  const hash = sha256Hex(messageContentKey(message), 16);
  if (frozen) hashMemo.set(message, hash);
  return hash;
}

/** JSON bytes of frozen history messages, by object (see {@link nativeMessageHash}). */
const bytesMemo = new WeakMap<object, number>();

function messageBytes(message: AgentMessage): number {
  const frozen = Object.isFrozen(message);
  const known = frozen ? bytesMemo.get(message) : undefined;
  if (known !== undefined) return known;
  const bytes = Buffer.byteLength(JSON.stringify(message), "utf8");
  if (frozen) bytesMemo.set(message, bytes);
  return bytes;
}

function referenceItem(message: AgentMessage): ResponsesItem | undefined {
  const block = renderMessageBlock(message);
  if (block === undefined) return undefined;
  return { type: "message", role: "user", content: [{ type: "input_text", text: `${NATIVE_REFERENCE_LABEL}\n\n${block}` }] };
}

function userContent(content: string | MessagePart[]): Array<Record<string, unknown>> {
  if (typeof content === "string") return content.length > 0 ? [{ type: "input_text", text: content }] : [];
  const out: Array<Record<string, unknown>> = [];
  for (const part of partsOf(content)) {
    if (part.type === "text" && typeof (part as { text?: unknown }).text === "string") out.push({ type: "input_text", text: (part as { text: string }).text });
    else if (part.type === "image" && typeof (part as { data?: unknown }).data === "string" && typeof (part as { mimeType?: unknown }).mimeType === "string") {
      out.push({ type: "input_image", image_url: `data:${(part as { mimeType: string }).mimeType};base64,${(part as { data: string }).data}` });
    } else out.push({ type: "input_text", text: `[${part.type} content omitted]` });
  }
  return out;
}

/**
 * The Responses items of one view message. Transcript user and assistant messages become native `message` items,
 * assistant tool calls `function_call` items and tool results `function_call_output` items, but only when the view
 * holds both halves of the pair (`pairedCallIds`): Codex answers an orphan call with a synthetic "aborted" output and
 * silently drops an orphan output, so an unpaired half travels as reference text. Thinking is not sent (reasoning
 * items need Codex's encrypted content). Everything else (summaries, custom and unknown roles: engine-made text) is a
 * user-role item that starts with {@link NATIVE_REFERENCE_LABEL}; nothing here is ever developer-role.
 *
 * @example
 * ```ts
 * nativeItemsOf({ role: "user", content: "hi", timestamp: 1 }, new Set());
 * // { kind: "m", items: [{ type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] }] }
 * ```
 */
export function nativeItemsOf(message: AgentMessage, pairedCallIds: ReadonlySet<string>): { kind: NativeUnitKind; items: ResponsesItem[] } {
  const m = message as { role?: unknown; content?: unknown; toolCallId?: unknown };
  if (m.role === "user") {
    const content = userContent((m.content ?? "") as string | MessagePart[]);
    return { kind: "m", items: content.length > 0 ? [{ type: "message", role: "user", content }] : [] };
  }
  if (m.role === "assistant" && Array.isArray(m.content)) {
    const items: ResponsesItem[] = [];
    let text: Array<Record<string, unknown>> = [];
    const flush = () => {
      if (text.length > 0) items.push({ type: "message", role: "assistant", content: text });
      text = [];
    };
    let pairs = false;
    for (const part of partsOf(m.content)) {
      if (part.type === "text" && typeof (part as { text?: unknown }).text === "string") {
        if ((part as { text: string }).text.length > 0) text.push({ type: "output_text", text: (part as { text: string }).text });
      } else if (part.type === "toolCall") {
        const call = part as { id: string; name: string; arguments: unknown };
        if (pairedCallIds.has(call.id)) {
          flush();
          pairs = true;
          items.push({ type: "function_call", call_id: call.id, name: call.name, arguments: canonicalJson(call.arguments ?? {}) });
        } else text.push({ type: "output_text", text: `tool call: ${call.name} [input omitted]` });
      }
    }
    flush();
    return { kind: pairs ? "t" : "m", items };
  }
  if (m.role === "toolResult" && typeof m.toolCallId === "string" && pairedCallIds.has(m.toolCallId)) {
    const output = textOf(m.content as MessagePart[]);
    return { kind: "t", items: [{ type: "function_call_output", call_id: m.toolCallId, output: output.length > 0 ? output : "(no output)" }] };
  }
  const item = referenceItem(message);
  return { kind: "e", items: item ? [item] : [] };
}

/**
 * Tool call ids whose call (an assistant part) and result (a `toolResult`) are both in `view`, in that order.
 *
 * @example
 * ```ts
 * pairedToolCallIds([assistantWithCall("call_1"), toolResultFor("call_1")]); // Set { "call_1" }
 * ```
 */
export function pairedToolCallIds(view: readonly AgentMessage[]): Set<string> {
  const calls = new Set<string>();
  const paired = new Set<string>();
  for (const message of view) {
    const m = message as { role?: unknown; content?: unknown; toolCallId?: unknown };
    if (m.role === "assistant" && Array.isArray(m.content)) {
      for (const part of partsOf(m.content)) if (part.type === "toolCall") calls.add((part as { id: string }).id);
    } else if (m.role === "toolResult" && typeof m.toolCallId === "string" && calls.has(m.toolCallId)) paired.add(m.toolCallId);
  }
  return paired;
}

/**
 * The view as native units, in order (messages with no items, e.g. thinking only, are left out).
 *
 * @example
 * ```ts
 * nativeViewUnits(view).map((u) => u.unit); // ["m3f2c...:118", "e09ab...:402"]
 * ```
 */
export function nativeViewUnits(view: readonly AgentMessage[]): NativeViewUnit[] {
  return viewUnitsAndMessages(view).units;
}

/** {@link nativeViewUnits}, with the message each unit came from (same index). */
function viewUnitsAndMessages(view: readonly AgentMessage[]): { units: NativeViewUnit[]; messages: AgentMessage[] } {
  const paired = pairedToolCallIds(view);
  const units: NativeViewUnit[] = [];
  const messages: AgentMessage[] = [];
  for (const message of view) {
    const unit = viewUnitOf(message, paired);
    if (unit) {
      units.push(unit);
      messages.push(message);
    }
  }
  return { units, messages };
}

/**
 * Units of frozen messages (the history cache's), by object and by which of its tool calls are paired in the view:
 * a long session's view is converted and measured once per process, not on every turn.
 */
const unitMemo = new WeakMap<object, { pairing: string; unit: NativeViewUnit | undefined }>();

/** Which of a message's tool call ids the view pairs (the only input besides the message that changes its items). */
function pairingOf(message: AgentMessage, paired: ReadonlySet<string>): string {
  const m = message as { role?: unknown; content?: unknown; toolCallId?: unknown };
  if (m.role === "toolResult") return typeof m.toolCallId === "string" && paired.has(m.toolCallId) ? "p" : "";
  if (m.role !== "assistant" || !Array.isArray(m.content)) return "";
  let out = "";
  for (const part of partsOf(m.content)) if (part.type === "toolCall") out += paired.has((part as { id: string }).id) ? "p" : "u";
  return out;
}

function viewUnitOf(message: AgentMessage, paired: ReadonlySet<string>): NativeViewUnit | undefined {
  const frozen = Object.isFrozen(message);
  const pairing = pairingOf(message, paired);
  const known = frozen ? unitMemo.get(message) : undefined;
  if (known !== undefined && known.pairing === pairing) return known.unit;
  const { kind, items } = nativeItemsOf(message, paired);
  let unit: NativeViewUnit | undefined;
  if (items.length > 0) {
    const hash = nativeMessageHash(message);
    const bytes = Buffer.byteLength(JSON.stringify(items), "utf8");
    unit = { message, unit: `${kind}${hash}:${bytes}`, hash, bytes, kind, items };
  }
  if (frozen) unitMemo.set(message, { pairing, unit });
  return unit;
}

/**
 * The kind, hash and bytes of a recorded unit.
 *
 * @example
 * ```ts
 * splitNativeUnit("m3f2c0a9d1e4b5c6a:118"); // { kind: "m", hash: "3f2c0a9d1e4b5c6a", bytes: 118 }
 * ```
 */
export function splitNativeUnit(unit: NativeUnit): { kind: string; hash: string; bytes: number } {
  const colon = unit.lastIndexOf(":");
  const bytes = Number(unit.slice(colon + 1));
  return { kind: unit.slice(0, 1), hash: unit.slice(1, colon), bytes: Number.isFinite(bytes) ? bytes : 0 };
}

/** One segment of the thread: what a cut before the NEXT turn keeps after the segment before it. */
interface Segment {
  /** undefined: the preamble. */
  turnId?: string | undefined;
  /** Content hashes in order (the turn's own messages from the transcript, then the units injected after it). */
  hashes: string[];
  bytes: number;
  dev?: string | undefined;
  /** How many of `hashes` (after `lead` of them) are the turn's own messages (the rest were injected after it). */
  own: number;
  /** How many of `hashes` rode with the turn's input, before its own messages. */
  lead: number;
}

/** Inputs of {@link planNativeSync}. */
export interface NativeSyncInput {
  /** The engine's view (the trailing prompt already dropped). */
  view: readonly AgentMessage[];
  history: readonly AgentMessage[];
  origins: ReadonlyArray<{ threadId: string; turnId: string } | null>;
  /** The bound thread and its record, when the binding is compatible and was made in native mode. */
  thread?: { threadId: string; record: NativeThreadRecord } | undefined;
  /** Hash of this turn's developer instructions (a turn carrying another copy is stale). */
  developerHash: string;
  /** Stale bytes tolerated whatever their cost (default 0: the thread always equals the view). */
  toleranceBytes: number;
  /** Cached/uncached input price ratio, in (0, 1]. */
  cachedPriceRatio: number;
  /** Bytes a fresh thread re-sends uncached besides the view (default {@link ROTATION_OVERHEAD_BYTES}). */
  rotationOverheadBytes?: number | undefined;
  /**
   * An adopted record's ledger ({@link NativeThreadRecord.adopted}): the additionalContext blocks its adopted turns
   * hold, by block hash (copies and bytes), and the block hash of a view message as those blocks were rendered
   * (`renderedBlockOf`, the policy's `partCapChars`).
   */
  adoptedLedger?: { blocks: ReadonlyMap<string, { count: number; bytes: number }>; blockHash: (message: AgentMessage) => string | undefined } | undefined;
}

/** Why the sync chose what it chose. */
export type NativeSyncReason =
  /** No usable record: a fresh thread with the whole view before its first turn. */
  | "noRecord"
  /** The thread holds a prefix of the view: the rest is appended. */
  | "match"
  /** The view no longer matches the thread past a turn boundary: cut there, re-inject the rest. */
  | "revert"
  /** The stale part is cheaper to carry than to cut (cost rule, within the tolerance). */
  | "carry"
  /** A fresh thread is cheaper, or no boundary the view matches can be reverted to. */
  | "rotate"
  /** The thread's content past a point is unknown (a cut-short sync, a native compaction): re-synced from before it. */
  | "resync";

/** What {@link planNativeSync} decided. */
export interface NativeSyncPlan {
  action: "resume" | "start";
  reason: NativeSyncReason;
  /** Revert before this turn first (resume only). */
  revertBeforeTurnId?: string | undefined;
  /** Items to inject after the kept part, in order (each unit's items, flattened). */
  items: ResponsesItem[];
  /** The units those items carry (recorded in the binding once injected). */
  units: NativeUnit[];
  /**
   * The view's engine-made tail, when it would land before the thread's first turn: it rides with this turn as
   * `additionalContext` instead (revertable with the turn), never injected. Empty otherwise.
   */
  lead: NativeViewUnit[];
  /** The record after the sync (before this turn is added at accept). */
  record: NativeThreadRecord;
  /** Counts for the log line and `result.projection` (never content). */
  counts: {
    viewUnits: number;
    keptTurns: number;
    revertedTurns: number;
    injectedItems: number;
    injectedBytes: number;
    staleBytes: number;
  };
  /** Hash of the developer instructions the kept thread last received (after the cut). */
  heldDeveloperHash?: string | undefined;
  /** The developer copies the kept thread carries (`<hash>:<tokens>`, oldest first, thread start first). */
  heldDeveloperDeliveries: string[];
}

/**
 * Whether a message becomes at least one item (the view's units leave out those that do not: an assistant message
 * with only thinking, an empty user message, a block with an empty body), so a turn's messages are compared alike.
 */
function hasNativeContent(message: AgentMessage): boolean {
  const m = message as { role?: unknown; content?: unknown };
  if (m.role === "user") return typeof m.content === "string" ? m.content.length > 0 : Array.isArray(m.content) && m.content.length > 0;
  if (m.role === "assistant" && Array.isArray(m.content)) {
    return partsOf(m.content).some((p) => p.type === "toolCall" || (p.type === "text" && typeof (p as { text?: unknown }).text === "string" && (p as { text: string }).text.length > 0));
  }
  if (m.role === "toolResult") return true;
  return renderMessageBlock(message) !== undefined;
}

/** What the comparison needs of a history message: its hash, JSON bytes and whether it becomes any item. */
interface HistoryFacts {
  hash: string;
  bytes: number;
  content: boolean;
}

/** {@link HistoryFacts} of frozen history messages, by object (one lookup per message and turn). */
const factsMemo = new WeakMap<object, HistoryFacts>();

function historyFacts(message: AgentMessage): HistoryFacts {
  const frozen = Object.isFrozen(message);
  const known = frozen ? factsMemo.get(message) : undefined;
  if (known !== undefined) return known;
  const facts = { hash: nativeMessageHash(message), bytes: messageBytes(message), content: hasNativeContent(message) };
  if (frozen) factsMemo.set(message, facts);
  return facts;
}

function segmentsOf(input: NativeSyncInput, record: NativeThreadRecord, threadId: string): Segment[] {
  const byTurn = new Map<string, { hashes: string[]; bytes: number }>();
  let last: { id: string; entry: { hashes: string[]; bytes: number } } | undefined;
  for (let i = 0; i < input.history.length; i++) {
    const origin = input.origins[i];
    if (!origin || origin.threadId !== threadId) continue;
    // A turn's messages are consecutive: the map is asked once per turn, not once per message.
    let entry = last?.id === origin.turnId ? last.entry : byTurn.get(origin.turnId);
    if (!entry) byTurn.set(origin.turnId, (entry = { hashes: [], bytes: 0 }));
    last = { id: origin.turnId, entry };
    const facts = historyFacts(input.history[i]!);
    entry.bytes += facts.bytes;
    if (facts.content) entry.hashes.push(facts.hash);
  }
  const bytesOf = (units: readonly string[]) => units.reduce((sum, u) => sum + splitNativeUnit(u).bytes, 0);
  const segments: Segment[] = [{ hashes: record.preamble.map((u) => splitNativeUnit(u).hash), bytes: bytesOf(record.preamble), own: 0, lead: 0 }];
  for (const turn of record.turns) {
    const own = byTurn.get(turn.id);
    const lead = turn.lead ?? [];
    const hashes =
      turn.units.length === 0 && lead.length === 0
        ? (own?.hashes ?? [])
        : [...lead.map((u) => splitNativeUnit(u).hash), ...(own?.hashes ?? []), ...turn.units.map((u) => splitNativeUnit(u).hash)];
    segments.push({ turnId: turn.id, hashes, bytes: (own?.bytes ?? 0) + bytesOf(turn.units) + bytesOf(lead), dev: turn.dev, own: own?.hashes.length ?? 0, lead: lead.length });
  }
  return segments;
}

function matchesAt(hashes: readonly string[], view: readonly NativeViewUnit[], pos: number): boolean {
  if (pos + hashes.length > view.length) return false;
  for (let i = 0; i < hashes.length; i++) if (view[pos + i]!.hash !== hashes[i]) return false;
  return true;
}

/**
 * The cost rule with three options, in bytes (docs/projection.md, "Native mode: the cost rule"). `staleBytes` S is
 * what carrying keeps in front of the model that the view no longer shows; its rent is `ratio` x S per request, and
 * `accruedRent` what this thread already paid. Buying is a revert (price: the bytes the cut removes that the view
 * keeps, re-sent uncached instead of read from the cache: (1 - ratio) x `revertRebytes`) or a fresh thread (price: the
 * same for every byte of the view the thread holds, plus the fixed overhead). Carry while S is within the tolerance
 * and the rent paid plus this turn's stays below the cheaper buy price (ski rental); otherwise buy the cheaper one
 * (a revert only when a cut exists).
 *
 * @example
 * ```ts
 * chooseNativeSync({ staleBytes: 0, toleranceBytes: 0, accruedRent: 0, ratio: 0.1, revertRebytes: 400, rotateRebytes: 900, overheadBytes: 21_000, canRevert: true });
 * // { option: "revert", rent: 0, revertPrice: 360, rotatePrice: 19710 }
 * ```
 */
export function chooseNativeSync(p: {
  staleBytes: number;
  toleranceBytes: number;
  accruedRent: number;
  ratio: number;
  revertRebytes: number;
  rotateRebytes: number;
  overheadBytes: number;
  canRevert: boolean;
}): { option: "carry" | "revert" | "rotate"; rent: number; revertPrice: number; rotatePrice: number } {
  const rent = p.ratio * p.staleBytes;
  const revertPrice = (1 - p.ratio) * p.revertRebytes;
  const rotatePrice = (1 - p.ratio) * (p.rotateRebytes + p.overheadBytes);
  const buy = p.canRevert ? Math.min(revertPrice, rotatePrice) : rotatePrice;
  if (p.staleBytes > 0 && p.staleBytes <= p.toleranceBytes && p.accruedRent + rent < buy) return { option: "carry", rent, revertPrice, rotatePrice };
  const option = p.canRevert && revertPrice <= rotatePrice ? "revert" : "rotate";
  return { option, rent, revertPrice, rotatePrice };
}

/**
 * Decide how this turn's thread comes to hold the view: which turn to revert before (if any), what to inject, or a
 * fresh thread. Pure.
 *
 * The thread is a sequence of segments: the preamble (units injected before its first turn, never revertable), then
 * each turn's own messages (the transcript's, by origin) followed by the units injected after it. A revert before
 * turn k keeps the segments before turn k. The longest run of whole segments that is a prefix of the view is kept;
 * a turn carrying a developer copy other than this turn's is never kept (it would be stale). When every segment
 * matches, the rest of the view is appended (`match`). Otherwise the cost rule ({@link chooseNativeSync}) picks
 * carrying (within the tolerance only), the revert, or a fresh thread (`rotate`; also when the preamble itself no
 * longer matches). A record whose content is unknown past a turn (`unknownFrom`, an unfinished `intent`) is cut
 * before that turn (`resync`), or rotated when even the preamble is unknown.
 *
 * @example
 * ```ts
 * const plan = planNativeSync({ view, history, origins, thread: { threadId, record }, developerHash, toleranceBytes: 0, cachedPriceRatio: 0.1 });
 * plan.revertBeforeTurnId; // the first turn the view no longer matches
 * ```
 */
export function planNativeSync(input: NativeSyncInput): NativeSyncPlan {
  const { units: view, messages: viewMessages } = viewUnitsAndMessages(input.view);
  const thread = input.thread;
  if (!thread) return freshPlan(view, "noRecord");
  const record = withUnrecordedTurns(thread.record, input, thread.threadId);
  const repair = repairLimit(record);
  if (repair === "rotate") return freshPlan(view, "rotate");
  const resync = repair !== undefined;
  const segments = segmentsOf(input, record, thread.threadId);
  if (!matchesAt(segments[0]!.hashes, view, 0)) return freshPlan(view, "rotate");
  const adopted = adoptedMatch(record, input, view, viewMessages);
  const { kept, pos } = keptPrefix(segments, view, repair ?? record.turns.length, input.developerHash, adopted);
  const rest = view.slice(pos);
  if (kept === record.turns.length && !resync) return resumePlan(view, record, "match", kept, rest, 0);
  // Carrying: keep every turn, append what the thread lacks; stale = what it holds that the view does not show.
  const inView = new Set(view.map((u) => u.hash));
  const held = new Set<string>();
  let staleBytes = 0;
  for (let j = 0; j < segments.length; j++) {
    const s = segments[j]!;
    for (const h of s.hashes) held.add(h);
    if (j > kept && s.hashes.some((h) => !inView.has(h))) staleBytes += s.bytes;
  }
  if (adopted !== undefined && kept < adopted.segments) {
    // The adopted turns' blocks: a view message rendered to one of them is held; a block the view lacks is stale.
    const viewBlocks = new Set<string>();
    for (let i = 0; i < view.length; i++) {
      const block = adopted.blockHashes[i];
      if (block === undefined) continue;
      viewBlocks.add(block);
      if (adopted.blocks.has(block)) held.add(view[i]!.hash);
    }
    for (const [block, b] of adopted.blocks) if (!viewBlocks.has(block)) staleBytes += b.bytes;
  }
  const reheld = (from: number) => view.slice(from).reduce((sum, u) => sum + (held.has(u.hash) ? u.bytes : 0), 0);
  const choice = chooseNativeSync({
    staleBytes: resync ? Number.POSITIVE_INFINITY : staleBytes,
    toleranceBytes: input.toleranceBytes,
    accruedRent: record.rentBytes ?? 0,
    ratio: input.cachedPriceRatio,
    revertRebytes: reheld(pos),
    rotateRebytes: reheld(0),
    overheadBytes: input.rotationOverheadBytes ?? ROTATION_OVERHEAD_BYTES,
    canRevert: record.turns.length > 0,
  });
  if (choice.option === "carry") {
    const lacking = view.filter((u) => !held.has(u.hash));
    return resumePlan(view, record, "carry", record.turns.length, lacking, staleBytes, (record.rentBytes ?? 0) + choice.rent);
  }
  if (choice.option === "rotate") return freshPlan(view, "rotate", staleBytes);
  return resumePlan(view, record, resync ? "resync" : "revert", kept, rest, 0);
}

/**
 * The record with the thread's turns the transcript has and the record lacks appended (a binding one write behind its
 * thread, after an OS crash: the turn ran, its binding update was lost). Nothing was injected after such a turn (the
 * sync's records are durable), so it is a turn like any other.
 */
function withUnrecordedTurns(record: NativeThreadRecord, input: NativeSyncInput, threadId: string): NativeThreadRecord {
  // Such turns come after the last recorded one: walk the thread's origins back from the end until a recorded turn.
  const lastRecorded = record.turns[record.turns.length - 1]?.id;
  const known = new Set<string>(record.cut ?? []);
  const extra: string[] = [];
  for (let i = input.origins.length - 1; i >= 0; i--) {
    const origin = input.origins[i];
    if (origin?.threadId !== threadId) continue;
    if (origin.turnId === lastRecorded) break;
    if (known.has(origin.turnId)) continue;
    known.add(origin.turnId);
    extra.unshift(origin.turnId);
  }
  if (extra.length === 0) return record;
  // A turn id the record already lists further back is not new (its messages were rewritten in the transcript).
  const recorded = new Set([...record.turns.map((t) => t.id), ...(record.cut ?? [])]);
  const fresh = extra.filter((id) => !recorded.has(id));
  if (fresh.length === 0) return record;
  // The first of them ran with the lead the record was holding for the next turn.
  const { lead, ...rest } = record;
  const added = fresh.map((id, i) => (i === 0 && lead !== undefined && lead.length > 0 ? { id, units: [], lead } : { id, units: [] }));
  return { ...rest, turns: [...record.turns, ...added] };
}

/**
 * How far a record can be trusted: a revert intent cuts before that turn whether or not Codex made it; an inject
 * intent after turn k leaves what landed after k unknown, so k goes too; `unknownFrom` (a compaction in turn k) cuts
 * before k. `"rotate"` when even the preamble is unknown; undefined when the record is whole.
 */
function repairLimit(record: NativeThreadRecord): number | "rotate" | undefined {
  if (record.intent === undefined && record.unknownFrom === undefined) return undefined;
  const turn = record.intent?.step === "revert" ? record.intent.beforeTurnId : record.intent?.step === "inject" ? record.intent.afterTurnId : record.unknownFrom;
  if (turn === null || turn === undefined) return "rotate";
  const at = record.turns.findIndex((t) => t.id === turn);
  return at >= 0 ? at : undefined;
}

/** An adopted record's segment, ready to match: how many turn segments it spans, its blocks and the view's. */
interface AdoptedMatch {
  segments: number;
  dev: readonly string[];
  blocks: ReadonlyMap<string, { count: number; bytes: number }>;
  /** The block hash of each view unit's message (same index as the view's units). */
  blockHashes: Array<string | undefined>;
}

function adoptedMatch(record: NativeThreadRecord, input: NativeSyncInput, view: readonly NativeViewUnit[], viewMessages: readonly AgentMessage[]): AdoptedMatch | undefined {
  if (record.adopted === undefined) return undefined;
  const at = record.turns.findIndex((t) => t.id === record.adopted!.through);
  const ledger = input.adoptedLedger;
  // The adopted turns fell out of the record (or no ledger came with it): nothing of them can be kept.
  if (at < 0 || ledger === undefined) return { segments: record.turns.length + 1, dev: [], blocks: new Map(), blockHashes: [] };
  return { segments: at + 1, dev: record.adopted.dev ?? [], blocks: ledger.blocks, blockHashes: view.map((_, i) => ledger.blockHash(viewMessages[i]!)) };
}

/**
 * Where the view goes on after the adopted turns (`segments`, 1-based), or undefined when it does not start with them.
 * Delta sent a turn's blocks with the turn, before its prompt: so each adopted turn's own messages, in turn order, each
 * after some of the ledger's blocks, every copy of every block once, then what was injected after the last of them,
 * in order. Which turn carried which block is not recorded: the view's placement of the blocks is taken for the
 * thread's.
 */
function matchAdopted(segments: readonly Segment[], view: readonly NativeViewUnit[], from: number, adopted: AdoptedMatch): number | undefined {
  const blocks = new Map<string, number>();
  let left = 0;
  for (const [block, b] of adopted.blocks) {
    blocks.set(block, b.count);
    left += b.count;
  }
  let pos = from;
  const takeBlock = (): boolean => {
    const block = adopted.blockHashes[pos];
    const copies = block !== undefined ? (blocks.get(block) ?? 0) : 0;
    if (copies === 0) return false;
    blocks.set(block!, copies - 1);
    left--;
    pos++;
    return true;
  };
  for (let j = 1; j <= adopted.segments; j++) {
    const s = segments[j]!;
    const own = s.hashes.slice(s.lead, s.lead + s.own);
    while (!matchesAt(own, view, pos)) if (!takeBlock()) return undefined;
    pos += own.length;
  }
  if (left > 0) return undefined;
  for (let j = 1; j <= adopted.segments; j++) {
    const s = segments[j]!;
    const tail = s.hashes.slice(s.lead + s.own);
    if (!matchesAt(tail, view, pos)) return undefined;
    pos += tail.length;
  }
  return pos;
}

/** The whole segments (after the preamble, at most `limit`) that are a prefix of the view, and where the view goes on. */
function keptPrefix(
  segments: readonly Segment[],
  view: readonly NativeViewUnit[],
  limit: number,
  developerHash: string,
  adopted?: AdoptedMatch,
): { kept: number; pos: number } {
  let pos = segments[0]!.hashes.length;
  let kept = 0;
  if (adopted !== undefined) {
    // The adopted turns are kept whole or not at all: a cut inside them would leave blocks the record cannot place.
    const devOk = adopted.dev.every((d) => d.split(":")[0] === developerHash);
    const at = devOk && limit >= adopted.segments && adopted.segments < segments.length ? matchAdopted(segments, view, pos, adopted) : undefined;
    if (at === undefined) return { kept: 0, pos };
    pos = at;
    kept = adopted.segments;
  }
  for (let j = kept + 1; j <= limit; j++) {
    const s = segments[j]!;
    // A turn that carried other developer instructions than this turn's would keep a stale copy in front of the model.
    if (s.dev !== undefined && s.dev.split(":")[0] !== developerHash) break;
    if (!matchesAt(s.hashes, view, pos)) break;
    pos += s.hashes.length;
    kept = j;
  }
  return { kept, pos };
}

function countsOf(view: readonly NativeViewUnit[], units: readonly NativeViewUnit[], keptTurns: number, revertedTurns: number, staleBytes: number): NativeSyncPlan["counts"] {
  return {
    viewUnits: view.length,
    keptTurns,
    revertedTurns,
    injectedItems: units.reduce((s, u) => s + u.items.length, 0),
    injectedBytes: units.reduce((s, u) => s + u.bytes, 0),
    staleBytes,
  };
}

/**
 * What goes before a thread's first turn, split: the view's engine-made tail (units of kind `e` after the last
 * transcript message: a recalled note, a summary at the end) rides with the turn as its lead, so the next turn can cut
 * it with the turn instead of rotating; the rest is injected.
 */
function splitLead(units: readonly NativeViewUnit[]): { inject: NativeViewUnit[]; lead: NativeViewUnit[] } {
  let end = units.length;
  while (end > 0 && units[end - 1]!.kind === "e") end--;
  return { inject: units.slice(0, end), lead: units.slice(end) };
}

/** A fresh thread with the whole view before its first turn (injected, the engine-made tail as the turn's lead). */
function freshPlan(view: readonly NativeViewUnit[], reason: NativeSyncReason, staleBytes = 0): NativeSyncPlan {
  const { inject, lead } = splitLead(view);
  return {
    action: "start",
    reason,
    items: inject.flatMap((u) => u.items),
    units: inject.map((u) => u.unit),
    lead,
    record: { preamble: [], turns: [] },
    counts: countsOf(view, inject, 0, 0, staleBytes),
    heldDeveloperDeliveries: [],
  };
}

/** Resume the thread keeping its first `keptTurns` turns, then inject `units`. */
function resumePlan(
  view: readonly NativeViewUnit[],
  record: NativeThreadRecord,
  reason: NativeSyncReason,
  keptTurns: number,
  units: readonly NativeViewUnit[],
  staleBytes: number,
  rentBytes?: number,
): NativeSyncPlan {
  // Turn entries are never changed in place (recordInjected and recordAcceptedTurn copy what they change).
  const next: NativeThreadRecord = { preamble: record.preamble, turns: record.turns.slice(0, keptTurns) };
  const cut = [...(record.cut ?? []), ...record.turns.slice(keptTurns).map((t) => t.id)].slice(-MAX_NATIVE_TURNS);
  if (cut.length > 0) next.cut = cut;
  if (record.startDev !== undefined) next.startDev = record.startDev;
  if (rentBytes !== undefined && rentBytes > 0) next.rentBytes = rentBytes;
  const deliveries = record.startDev !== undefined ? [record.startDev] : [];
  // The adopted turns stay only when all of them are kept (a cut among them is never planned).
  const adoptedKept = record.adopted !== undefined && next.turns.some((t) => t.id === record.adopted!.through);
  if (adoptedKept) {
    next.adopted = record.adopted;
    deliveries.push(...(record.adopted!.dev ?? []));
  }
  for (const t of next.turns) if (t.dev !== undefined) deliveries.push(t.dev);
  const last = deliveries[deliveries.length - 1];
  // Nothing kept after the preamble: what is sent lands before the thread's first turn, so its engine-made tail rides
  // with the turn.
  const { inject, lead } = next.turns.length === 0 ? splitLead(units) : { inject: units, lead: [] };
  const out: NativeSyncPlan = {
    action: "resume",
    reason,
    items: inject.flatMap((u) => u.items),
    units: inject.map((u) => u.unit),
    lead,
    record: next,
    counts: countsOf(view, inject, keptTurns, record.turns.length - keptTurns, staleBytes),
    heldDeveloperDeliveries: deliveries,
  };
  if (keptTurns < record.turns.length) out.revertBeforeTurnId = record.turns[keptTurns]!.id;
  if (last !== undefined) out.heldDeveloperHash = last.split(":")[0];
  return out;
}

/**
 * The record once the plan's items are injected: the units go to the segment after the last kept turn (the preamble
 * on a thread without turns).
 *
 * @example
 * ```ts
 * const held = recordInjected(plan.record, plan.units);
 * ```
 */
export function recordInjected(record: NativeThreadRecord, units: readonly NativeUnit[]): NativeThreadRecord {
  const { intent: _intent, unknownFrom: _unknown, ...rest } = record;
  if (units.length === 0) return rest;
  if (rest.turns.length === 0) return { ...rest, preamble: [...rest.preamble, ...units] };
  const turns = rest.turns.map((t, i) => (i === rest.turns.length - 1 ? { ...t, units: [...t.units, ...units] } : t));
  return { ...rest, turns };
}

/**
 * The record once Codex accepted turn `turnId` (with the developer copy the turn carried, if any); the oldest turns
 * past {@link MAX_NATIVE_TURNS} fall out with the preamble (their content then counts as unrevertable).
 *
 * @example
 * ```ts
 * const next = recordAcceptedTurn(record, "turn-7", undefined);
 * ```
 */
export function recordAcceptedTurn(record: NativeThreadRecord, turnId: string, dev: string | undefined): NativeThreadRecord {
  const lead = record.lead !== undefined && record.lead.length > 0 ? { lead: record.lead } : {};
  const turns = [...record.turns.filter((t) => t.id !== turnId), { id: turnId, units: [], ...(dev !== undefined ? { dev } : {}), ...lead }];
  const { intent: _intent, unknownFrom: _unknown, lead: _lead, ...rest } = record;
  if (turns.length <= MAX_NATIVE_TURNS) return { ...rest, turns };
  return { ...rest, turns: turns.slice(-MAX_NATIVE_TURNS), unknownFrom: null };
}
