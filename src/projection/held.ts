/**
 * What the bound thread holds of the history, kept per session from turn to turn.
 *
 * Every turn the projection asks of each history message whether the bound thread holds it: produced on the thread in
 * a turn the binding still lists (`heldTurnIds`), or, for a message of the engine's view, carrying the content of such
 * a message (`identity.ts`). Over a long session that is a pass over the whole history and a content check of the
 * whole view, every turn. Between two turns of one session the usual change is small: the history gained the last
 * turn's messages and the binding that turn's id, and past `MAX_HELD_TURNS` the oldest held turn id fell out. So the
 * answers are kept per session (under its first history message, one of the history cache's own objects) and brought
 * up to date by what changed: held contents are counted, so a turn that falls out takes its messages' contents with
 * it only when no other held message carries them. Anything else (another thread, a turn id dropped from the middle or
 * reordered, a history that is not the kept one extended, a new turn id naming a turn of the kept messages, a message
 * or origin the history cache did not freeze) is worked out afresh. The answers are exactly those
 * of a pass over the origins and of a `ContentSet` of the held messages.
 */
import type { AgentMessage } from "../context-engine/types.js";
import type { HistoryOutput } from "../../machines/turn.contract.js";
import type { ThreadBinding } from "../transcript/binding.js";
import { copyArray, isDeepFrozenByHost, startsWithArray } from "../transcript/freeze.js";
import { contentSignature } from "./identity.js";

type Origin = HistoryOutput["origins"][number];

/** The bound thread's hold on a history (see the module comment). */
export interface HeldMessages {
  /** One flag per history message: 1 when it was produced on the bound thread in a turn the thread still holds. */
  readonly flags: Uint8Array;
  /**
   * Whether a message the thread holds (flag 1) has the content of `history[index]`: `ContentSet.hasContent` over the
   * held messages.
   */
  heldByContent(index: number): boolean;
}

const UNDECIDED = 0;
const CONTENT_HELD = 1;
const CONTENT_NOT_HELD = 2;

/** The kept answers for one session. */
interface HeldMemo {
  threadId: string;
  /** The binding's held turn ids these answers are for (a copy). */
  heldTurnIds: string[];
  turns: Set<string>;
  /** Every turn id an origin on the thread names among the kept messages. */
  originTurns: Set<string>;
  /** The history and origins these answers are for (the frozen arrays the history cache gave, else copies). */
  history: readonly AgentMessage[];
  origins: readonly Origin[];
  length: number;
  /** Per message: its flag; and whether a held message carries its content (decided when first asked). */
  flags: Uint8Array;
  decided: Uint8Array;
  /** Held messages per content signature and per content key (a content is held while its count is above 0). */
  heldSignatures: Map<string, number>;
  heldKeys: Map<string, number>;
  /** The indexes of the messages each held turn id flagged, for when that turn falls out. */
  heldIndexes: Map<string, number[]>;
  /** Messages decided not held by content, by content signature: a new held content may change their answer. */
  notHeldBySignature: Map<string, number[]>;
  /** Messages decided held by content, by content key: when the last held message with that key falls out, they are not. */
  heldByKey: Map<string, number[]>;
  keyOf: (message: AgentMessage) => string;
  /** Whether every kept message and origin is the history cache's own (frozen): only then may the memo be kept. */
  keepable: boolean;
}

/**
 * Kept per session, under its first history message, for as long as that message lives: the memo holds copies of the
 * history's arrays, so it must not keep a session alive after the history cache (and every engine) let it go.
 */
const keptBySession = new WeakMap<object, HeldMemo>();

/**
 * The bound thread's hold on `history`, extended from what was kept for the session when the history and binding only
 * grew (see the module comment). `keyOf` is the content key (`cachedContentKey()`).
 *
 * @example
 * ```ts
 * const held = heldMessages(history.messages, history.origins, binding, cachedContentKey());
 * held.flags[i] === 1 || held.heldByContent(i); // does the thread hold history.messages[i]?
 * ```
 */
export function heldMessages(
  history: readonly AgentMessage[],
  origins: HistoryOutput["origins"],
  binding: ThreadBinding | undefined,
  keyOf: (message: AgentMessage) => string,
): HeldMessages {
  if (!binding) return { flags: new Uint8Array(origins.length), heldByContent: () => false };
  const first = history[0];
  const key = first !== undefined && isDeepFrozenByHost(first) ? first : undefined;
  let memo = key !== undefined ? keptBySession.get(key) : undefined;
  if (memo === undefined || !extend(memo, history, origins, binding)) {
    memo = fresh(binding, keyOf);
    append(memo, history, origins, 0);
  }
  if (key !== undefined && memo.keepable) keptBySession.set(key, memo);
  else if (key !== undefined) keptBySession.delete(key);
  const kept = memo;
  return {
    flags: kept.flags.subarray(0, origins.length),
    heldByContent: (index) => heldByContent(kept, history, index),
  };
}

function fresh(binding: ThreadBinding, keyOf: (message: AgentMessage) => string): HeldMemo {
  return {
    threadId: binding.threadId,
    heldTurnIds: copyArray(binding.heldTurnIds),
    turns: new Set(binding.heldTurnIds),
    originTurns: new Set(),
    history: [],
    origins: [],
    length: 0,
    flags: new Uint8Array(0),
    decided: new Uint8Array(0),
    heldSignatures: new Map(),
    heldKeys: new Map(),
    heldIndexes: new Map(),
    notHeldBySignature: new Map(),
    heldByKey: new Map(),
    keyOf,
    keepable: true,
  };
}

/**
 * Bring `memo` to this history and binding when they only grew, except for held turn ids falling out at the front:
 * the same thread, the kept turn ids after the first `dropped` of them first and in order, the kept messages and
 * origins first (the same objects), and no new turn id naming a turn of the kept messages (which would change their
 * flags). Returns false, changing nothing, otherwise.
 */
function extend(memo: HeldMemo, history: readonly AgentMessage[], origins: HistoryOutput["origins"], binding: ThreadBinding): boolean {
  if (binding.threadId !== memo.threadId || origins.length !== history.length || history.length < memo.length) return false;
  const ids = binding.heldTurnIds;
  const keptIds = memo.heldTurnIds;
  // How many kept ids fell out at the front: the new list starts with the rest of the kept one.
  const dropped = ids.length === 0 ? keptIds.length : keptIds.length === 0 ? 0 : keptIds.indexOf(ids[0]!);
  if (dropped < 0) return false;
  const stay = keptIds.length - dropped;
  if (ids.length < stay) return false;
  for (let i = 0; i < stay; i++) if (ids[i] !== keptIds[dropped + i]) return false;
  for (let i = stay; i < ids.length; i++) if (memo.originTurns.has(ids[i]!)) return false;
  // A dropped id still listed (a binding with repeats) is still held: worked out afresh.
  if (dropped > 0) {
    const listed = new Set(ids);
    for (let i = 0; i < dropped; i++) if (listed.has(keptIds[i]!)) return false;
  }
  // The kept history and origins, extended (the history cache's arrays say so without a pass over them). A kept memo
  // has as many messages as origins: one flagged for a missing message (a caller's mistake) is never kept.
  if (!startsWithArray(history, memo.history) || !startsWithArray(origins, memo.origins)) return false;
  for (let i = 0; i < dropped; i++) releaseTurn(memo, keptIds[i]!);
  for (let i = stay; i < ids.length; i++) memo.turns.add(ids[i]!);
  memo.heldTurnIds = copyArray(ids);
  append(memo, history, origins, memo.length);
  return true;
}

/** A held turn id fell out: its messages are no longer held by turn, and their contents only while another carries them. */
function releaseTurn(memo: HeldMemo, turnId: string): void {
  // A repeated id in the kept list: the turn is still held while it is listed.
  if (!memo.turns.delete(turnId)) return;
  const indexes = memo.heldIndexes.get(turnId);
  if (indexes === undefined) return;
  memo.heldIndexes.delete(turnId);
  for (const index of indexes) {
    memo.flags[index] = 0;
    const message = memo.history[index];
    if (message === undefined) continue;
    const signature = contentSignature(message);
    const signatures = memo.heldSignatures.get(signature)! - 1;
    if (signatures > 0) memo.heldSignatures.set(signature, signatures);
    else memo.heldSignatures.delete(signature);
    const key = memo.keyOf(message);
    const keys = memo.heldKeys.get(key)! - 1;
    if (keys > 0) {
      memo.heldKeys.set(key, keys);
      continue;
    }
    memo.heldKeys.delete(key);
    // No held message carries this content any more: the answers "held by content" it gave are asked again.
    for (const answered of memo.heldByKey.get(key) ?? []) memo.decided[answered] = UNDECIDED;
    memo.heldByKey.delete(key);
  }
}

/** Flag the messages from `from` on, and take the held ones' contents in. */
function append(memo: HeldMemo, history: readonly AgentMessage[], origins: HistoryOutput["origins"], from: number): void {
  const length = origins.length;
  if (memo.flags.length < length) {
    // Grown geometrically: a session adds a few messages per turn.
    const capacity = Math.max(length, memo.flags.length * 2, 64);
    const flags = new Uint8Array(capacity);
    flags.set(memo.flags.subarray(0, memo.length));
    const decided = new Uint8Array(capacity);
    decided.set(memo.decided.subarray(0, memo.length));
    memo.flags = flags;
    memo.decided = decided;
  }
  // A turn's messages share one origin object in the history cache: decided once per run of the same object.
  let lastOrigin: Origin | undefined;
  let lastHeld = false;
  let lastIndexes: number[] | undefined;
  for (let index = from; index < length; index++) {
    const origin = origins[index] ?? null;
    // Undefined only for origins longer than the history (a caller's mistake): flagged like the rest, holding nothing.
    const message = history[index];
    if (memo.keepable && (!isDeepFrozenByHost(message) || (origin !== null && !Object.isFrozen(origin)))) memo.keepable = false;
    if (origin !== lastOrigin) {
      lastOrigin = origin;
      const onThread = origin !== null && origin.threadId === memo.threadId;
      if (onThread) memo.originTurns.add(origin.turnId);
      lastHeld = onThread && memo.turns.has(origin.turnId);
      lastIndexes = undefined;
      if (lastHeld && origin !== null) {
        lastIndexes = memo.heldIndexes.get(origin.turnId);
        if (lastIndexes === undefined) memo.heldIndexes.set(origin.turnId, (lastIndexes = []));
      }
    }
    memo.flags[index] = lastHeld ? 1 : 0;
    memo.decided[index] = UNDECIDED;
    if (lastHeld) lastIndexes!.push(index);
    if (lastHeld && message !== undefined) holdContent(memo, history, message);
  }
  // A frozen array (the history cache's) can never change; any other may, after this call.
  memo.history = Object.isFrozen(history) ? history : copyArray(history);
  memo.origins = Object.isFrozen(origins) ? origins : copyArray(origins);
  memo.length = length;
}

/** A held message's content joins the held contents; messages decided not held with that content now are. */
function holdContent(memo: HeldMemo, history: readonly AgentMessage[], message: AgentMessage): void {
  const key = memo.keyOf(message);
  const signature = contentSignature(message);
  memo.heldSignatures.set(signature, (memo.heldSignatures.get(signature) ?? 0) + 1);
  const keys = memo.heldKeys.get(key) ?? 0;
  memo.heldKeys.set(key, keys + 1);
  if (keys > 0) return;
  const candidates = memo.notHeldBySignature.get(signature);
  if (candidates === undefined) return;
  const still = candidates.filter((index) => {
    if (memo.keyOf(history[index]!) !== key) return true;
    memo.decided[index] = CONTENT_HELD;
    answeredHeld(memo, key, index);
    return false;
  });
  if (still.length > 0) memo.notHeldBySignature.set(signature, still);
  else memo.notHeldBySignature.delete(signature);
}

/** `ContentSet.hasContent` over the held messages, decided once per message and kept. */
function heldByContent(memo: HeldMemo, history: readonly AgentMessage[], index: number): boolean {
  const known = memo.decided[index];
  if (known !== UNDECIDED) return known === CONTENT_HELD;
  const message = history[index]!;
  const signature = contentSignature(message);
  // The signature first: no held message with it means none with the same content, without keying this one.
  const key = memo.heldSignatures.has(signature) ? memo.keyOf(message) : undefined;
  const held = key !== undefined && memo.heldKeys.has(key);
  memo.decided[index] = held ? CONTENT_HELD : CONTENT_NOT_HELD;
  if (held) answeredHeld(memo, key, index);
  else {
    const list = memo.notHeldBySignature.get(signature);
    if (list !== undefined) list.push(index);
    else memo.notHeldBySignature.set(signature, [index]);
  }
  return held;
}

function answeredHeld(memo: HeldMemo, key: string, index: number): void {
  const list = memo.heldByKey.get(key);
  if (list !== undefined) list.push(index);
  else memo.heldByKey.set(key, [index]);
}
