/**
 * What the bound thread holds of the history, kept per session from turn to turn.
 *
 * Every turn the projection asks of each history message whether the bound thread holds it: produced on the thread in
 * a turn the binding still lists (`heldTurnIds`), or, for a message of the engine's view, carrying the content of such
 * a message (`identity.ts`). Over a long session that is a pass over the whole history and a content check of the
 * whole view, every turn. Between two turns of one session the usual change is small: the history gained the last
 * turn's messages and the binding that turn's id. So the answers are kept per session (under its first history
 * message, one of the history cache's own objects) and extended by what changed. Anything else (another thread, a
 * turn id dropped or reordered, a history that is not the kept one extended, a new turn id naming a turn of the kept
 * messages, a message or origin the history cache did not freeze) is worked out afresh. The answers are exactly those
 * of a pass over the origins and of a `ContentSet` of the held messages.
 */
import type { AgentMessage } from "../context-engine/types.js";
import type { HistoryOutput } from "../../machines/turn.contract.js";
import type { ThreadBinding } from "../transcript/binding.js";
import { copyArray, isDeepFrozenByHost } from "../transcript/freeze.js";
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
  heldSignatures: Set<string>;
  heldKeys: Set<string>;
  /** Messages decided not held by content, by content signature: a new held content may change their answer. */
  notHeldBySignature: Map<string, number[]>;
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
    heldSignatures: new Set(),
    heldKeys: new Set(),
    notHeldBySignature: new Map(),
    keyOf,
    keepable: true,
  };
}

/**
 * Bring `memo` to this history and binding when they only grew: the same thread, the kept turn ids first and in
 * order, the kept messages and origins first (the same objects), and no new turn id naming a turn of the kept
 * messages (which would change their flags). Returns false, changing nothing, otherwise.
 */
function extend(memo: HeldMemo, history: readonly AgentMessage[], origins: HistoryOutput["origins"], binding: ThreadBinding): boolean {
  if (binding.threadId !== memo.threadId || origins.length !== history.length || history.length < memo.length) return false;
  const ids = binding.heldTurnIds;
  const keptIds = memo.heldTurnIds;
  if (ids.length < keptIds.length) return false;
  for (let i = 0; i < keptIds.length; i++) if (ids[i] !== keptIds[i]) return false;
  for (let i = keptIds.length; i < ids.length; i++) if (memo.originTurns.has(ids[i]!)) return false;
  // From the end: a history rebuilt after a rewrite differs near its end first.
  for (let i = memo.length - 1; i >= 0; i--) if (history[i] !== memo.history[i] || origins[i] !== memo.origins[i]) return false;
  for (let i = keptIds.length; i < ids.length; i++) memo.turns.add(ids[i]!);
  memo.heldTurnIds = copyArray(ids);
  append(memo, history, origins, memo.length);
  return true;
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
    }
    memo.flags[index] = lastHeld ? 1 : 0;
    memo.decided[index] = UNDECIDED;
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
  if (memo.heldKeys.has(key)) return;
  memo.heldKeys.add(key);
  const signature = contentSignature(message);
  memo.heldSignatures.add(signature);
  const candidates = memo.notHeldBySignature.get(signature);
  if (candidates === undefined) return;
  const still = candidates.filter((index) => {
    if (memo.keyOf(history[index]!) !== key) return true;
    memo.decided[index] = CONTENT_HELD;
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
  const held = memo.heldSignatures.has(signature) && memo.heldKeys.has(memo.keyOf(message));
  memo.decided[index] = held ? CONTENT_HELD : CONTENT_NOT_HELD;
  if (!held) {
    const list = memo.notHeldBySignature.get(signature);
    if (list !== undefined) list.push(index);
    else memo.notHeldBySignature.set(signature, [index]);
  }
  return held;
}
