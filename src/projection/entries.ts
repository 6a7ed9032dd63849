/**
 * How the engine's view travels as Codex `additionalContext` entries, and the injection ledger that remembers what a
 * thread received.
 *
 * Trust split: every message block (earlier user text, assistant text, tool output, summaries, anything an engine
 * recalled from user data) goes as `kind: "untrusted"`, which Codex injects with the user role as
 * `<external_KEY>VALUE</external_KEY>`; each value starts with {@link QUOTED_DATA_LABEL}. Only the host's own
 * developer instructions and the engine's systemPromptAddition go as `application` (developer role), see
 * `developer.ts`. Transcript text must never gain developer authority.
 */
import type { AgentMessage } from "../context-engine/types.js";
import type { AdditionalContextEntry } from "../../machines/turn.contract.js";
import { copyArray, frozenMessageMemo, isDeepFrozenByHost } from "../transcript/freeze.js";
import { DEFAULT_PART_CAP_CHARS, estimateTokens, PROMPT_SAFETY_NOTE, renderMessageBlock, sha256Hex } from "./render.js";

/** Codex truncates each additionalContext value to ~1k tokens; stay safely under it. */
export const MAX_ENTRY_CHARS = 3_500;
/** Key prefix of our additionalContext entries (Codex uses the key verbatim as the XML tag). */
export const CONTEXT_KEY_PREFIX = "openclaw.context";
/** First line of every context entry value: the content below it is quoted data, not instructions. */
export const QUOTED_DATA_LABEL = PROMPT_SAFETY_NOTE;
/** Kind of every context entry (user role in the model input). */
export const CONTEXT_ENTRY_KIND = "untrusted" as const;

/**
 * Split rendered blocks into additionalContext values under `maxChars` (Codex truncates each value to ~1k tokens),
 * packing consecutive blocks joined by a blank line and keeping order. Only a block longer than the cap is cut, into
 * consecutive pieces.
 *
 * @example
 * ```ts
 * chunkBlocks(["[user]\na", "[assistant]\nb"]); // ["[user]\na\n\n[assistant]\nb"]
 * ```
 */
export function chunkBlocks(blocks: readonly string[], maxChars = MAX_ENTRY_CHARS): string[] {
  const chunks: string[] = [];
  let current = "";
  const flush = () => {
    if (current.length > 0) chunks.push(current);
    current = "";
  };
  for (const block of blocks) {
    for (let i = 0; i < block.length; i += maxChars) {
      const piece = block.slice(i, i + maxChars);
      const joined = current.length === 0 ? piece : `${current}\n\n${piece}`;
      if (joined.length <= maxChars) current = joined;
      else {
        flush();
        current = piece;
      }
    }
  }
  flush();
  return chunks;
}

/**
 * The injection ledger records what this thread received as additionalContext, one unit per rendered message block
 * (not per entry value: chunk boundaries shift when the set of missing blocks changes). A unit is
 * `<sha256-20 of the block>[#<n>]:<estimated tokens>`; `#n` counts earlier identical blocks in the same view (two
 * "ok" replies are two units), and the token estimate lets stale accounting count injected blocks the engine has
 * since dropped. A native compaction drops every earlier additionalContext item (notes P3): the host then clears the
 * ledger (`markNativeCompaction` in `transcript/binding.ts`).
 *
 * @example
 * ```ts
 * ledgerUnit("[user]\nok");    // "<20 hex>:3"
 * ledgerUnit("[user]\nok", 1); // "<20 hex>#1:3" (the second identical block in the same view)
 * ```
 */
export function ledgerUnit(block: string, occurrence = 0): string {
  return unitOf(sha256Hex(block, 20), occurrence, estimateTokens(block));
}

/** The unit string from a block's hash, its occurrence in the view and its token estimate. */
function unitOf(hash: string, occurrence: number, tokens: number): string {
  return occurrence === 0 ? `${hash}:${tokens}` : `${hash}#${occurrence}:${tokens}`;
}

/**
 * The hash part of a ledger unit (before `:`), which is what membership is decided on.
 *
 * @example
 * ```ts
 * ledgerUnitId("ab12#1:3"); // "ab12#1"
 * ```
 */
export function ledgerUnitId(unit: string): string {
  const colon = unit.indexOf(":");
  return colon === -1 ? unit : unit.slice(0, colon);
}

/**
 * The token estimate of a ledger (or developer delivery) unit; 0 when absent or malformed.
 *
 * @example
 * ```ts
 * ledgerUnitTokens("ab12:40"); // 40
 * ```
 */
export function ledgerUnitTokens(unit: string): number {
  const colon = unit.indexOf(":");
  const n = colon === -1 ? 0 : Number(unit.slice(colon + 1));
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/**
 * Hash of an entry value (kept for callers that address whole values).
 *
 * @example
 * ```ts
 * ledgerHash("[user]\nhi"); // 20 hex
 * ```
 */
export function ledgerHash(value: string): string {
  return sha256Hex(value, 20);
}

/**
 * Content-addressed, order-preserving keys: Codex injects a turn's entries sorted by key, so the zero-padded position
 * comes first and the content hash second (`openclaw.context.007.3fa2c1d9e0`). Same content at the same position
 * gives the same key.
 *
 * @example
 * ```ts
 * contextEntryKey(7, "[user]\nhi"); // "openclaw.context.007.<10 hex>"
 * ```
 */
export function contextEntryKey(index: number, value: string): string {
  return `${CONTEXT_KEY_PREFIX}.${String(index).padStart(3, "0")}.${sha256Hex(value, 10)}`;
}

/** One rendered message block and its ledger unit. */
export interface RenderedUnit {
  block: string;
  unit: string;
  /** `ledgerUnitId(unit)`: what membership in a ledger is decided on. */
  id: string;
}

/**
 * One block as a {@link RenderedUnit} of its own (its first occurrence): for a block the host writes, not a message.
 *
 * @example
 * ```ts
 * blockUnit("[note]\nolder turns omitted"); // { block, unit: "<hash>:<tokens>", id: "<hash>" }
 * ```
 */
export function blockUnit(block: string): RenderedUnit {
  const unit = ledgerUnit(block);
  return { block, unit, id: ledgerUnitId(unit) };
}

/**
 * Render messages to blocks (empty bodies skipped) with their ledger units.
 *
 * @example
 * ```ts
 * renderUnits([{ role: "user", content: "hi", timestamp: 1 }]); // [{ block: "[user]\nhi", unit: "<hash>:3", id: "<hash>" }]
 * ```
 */
export function renderUnits(messages: readonly AgentMessage[], partCap?: number, renderings?: RenderingMemo): RenderedUnit[] {
  const seen = new Map<string, number>();
  const units: RenderedUnit[] = [];
  for (const message of messages) {
    const rendered = renderedBlockOf(message, partCap, renderings);
    if (rendered === undefined) continue;
    // Counted by the block's hash, which is what a unit is identified by: a short key instead of the whole block.
    const { block, hash } = rendered;
    const occurrence = seen.get(hash) ?? 0;
    seen.set(hash, occurrence + 1);
    // What ledgerUnit(block, occurrence) gives, from the cached hash and estimate.
    if (occurrence === 0) units.push({ block, unit: rendered.firstUnit, id: hash });
    else units.push({ block, unit: unitOf(hash, occurrence, rendered.tokens), id: `${hash}#${occurrence}` });
  }
  return units;
}

/**
 * What the thread check needs of a list's units without the units themselves. Occurrences are numbered per block hash
 * in list order, so the ids of the units carrying hash `h` are exactly `h`, `h#1`, ..., `h#(count - 1)`: the counts
 * decide membership of any unit id ({@link tallyHas}), and the list's token estimate is their sum.
 */
export interface UnitTally {
  /** Block hash -> how many of the list's units carry it. */
  counts: ReadonlyMap<string, number>;
  /** The sum of the units' token estimates (`estimateTokens` of each block). */
  tokens: number;
}

/**
 * A tally kept from turn to turn: the messages it covers (a copy), and the counts and tokens it holds. Answers worked
 * out from it ({@link absentUnitTokens}, {@link tallyAllInjected}) are kept with it too, by the generation they were
 * worked out at: each update bumps the generation and records which counts it changed, so an answer one update old is
 * brought up to date by those counts alone (a long view's ledger check then costs what the window moved, not a lookup
 * per ledger unit every turn).
 */
interface KeptTally {
  partCap: number;
  messages: AgentMessage[];
  counts: Map<string, number>;
  tokens: number;
  /** How many times this tally has been brought up to date since it was made. */
  generation: number;
  /** The counts the last update changed: block hash -> its count before that update. */
  changed: Map<string, number>;
  /** Answers by what they were asked against (a ledger's grouping, a ledger's runs), with their generation. */
  answers: WeakMap<object, { generation: number; value: number }>;
}

/** A tally worked out for one call only: nothing is kept with it. */
type FreshTally = Pick<KeptTally, "partCap" | "messages" | "counts" | "tokens">;

/**
 * The tallies kept per session and list (`"view"`: the engine's view; `"missing"`: what of it the thread does not
 * hold): keyed by the session's first history message (the history cache's own object, the same for the whole life
 * of its session), for as long as that message lives. A tally holds a copy of its list, which for an engine that
 * passes the history through is the whole history: it must not keep a session alive after the history cache (and
 * every engine) let it go.
 */
const keptTallies = new WeakMap<object, Map<string, KeptTally>>();

/**
 * {@link UnitTally} of `messages`: the same counts and tokens a walk of `renderUnits(messages)` gives. With `keptUnder`
 * (the session's first history message, one of the history cache's own) and a list of the history cache's own
 * messages (deep-frozen: they can never change), the tally of the list kept under `slot` is carried over: a list that
 * is the kept one with messages dropped from its front and appended at its back (a window that moved) costs only those
 * messages, not a walk of the whole list every turn. Anything else (an engine's own objects, a list that is not such a
 * slide, no key) is tallied afresh (and kept, when it can be). The counts may be the kept tally's own: read them
 * before the next call for the same slot.
 *
 * @example
 * ```ts
 * const view = tallyUnits(context, partCap, renderingMemo(partCap), history[0], "view");
 * const unit = splitUnitId(ledgerUnitId(ledgerEntry));
 * unit !== undefined && tallyHas(view, unit.hash, unit.occurrence); // is that ledger unit still in the view?
 * ```
 */
export function tallyUnits(
  messages: readonly AgentMessage[],
  partCap: number = DEFAULT_PART_CAP_CHARS,
  renderings?: RenderingMemo,
  keptUnder?: AgentMessage,
  slot = "view",
): UnitTally {
  const key = keptUnder !== undefined && isDeepFrozenByHost(keptUnder) ? keptUnder : undefined;
  const slots = key !== undefined ? keptTallies.get(key) : undefined;
  const kept = slots?.get(slot);
  const dropped = kept !== undefined && kept.partCap === partCap ? slideOffset(kept.messages, messages) : undefined;
  // The messages this call adds to the tally: after the kept ones that stay, or all of them.
  const from = dropped === undefined ? 0 : kept!.messages.length - dropped;
  let keepable = key !== undefined;
  for (let i = from; i < messages.length && keepable; i++) keepable = isDeepFrozenByHost(messages[i]);
  if (!keepable) {
    const fresh: FreshTally = { partCap, messages: [], counts: new Map(), tokens: 0 };
    for (const message of messages) tallyMessage(fresh, message, 1, partCap, renderings);
    return fresh;
  }
  let tally: KeptTally;
  // Changes are recorded only on an update: a new tally has no answers to bring up to date.
  let changed: Map<string, number> | undefined;
  if (dropped === undefined) tally = { partCap, messages: [], counts: new Map(), tokens: 0, generation: 0, changed: new Map(), answers: new WeakMap() };
  else {
    tally = kept!;
    tally.generation++;
    changed = tally.changed;
    changed.clear();
    for (let i = 0; i < dropped; i++) tallyMessage(tally, tally.messages[i]!, -1, partCap, renderings, changed);
  }
  for (let i = from; i < messages.length; i++) tallyMessage(tally, messages[i]!, 1, partCap, renderings, changed);
  // A copy: the caller's array may change after this call.
  tally.messages = copyArray(messages);
  if (slots !== undefined) slots.set(slot, tally);
  else keptTallies.set(key!, new Map([[slot, tally]]));
  return tally;
}

/**
 * Add (`sign` 1) or remove (`sign` -1) one message's unit; a message that renders to nothing has none. With `changed`,
 * the count's value before its first change is recorded there.
 */
function tallyMessage(
  tally: FreshTally,
  message: AgentMessage,
  sign: 1 | -1,
  partCap: number,
  renderings: RenderingMemo | undefined,
  changed?: Map<string, number>,
): void {
  const rendered = renderedBlockOf(message, partCap, renderings);
  if (rendered === undefined) return;
  const before = tally.counts.get(rendered.hash) ?? 0;
  if (changed !== undefined && !changed.has(rendered.hash)) changed.set(rendered.hash, before);
  const count = before + sign;
  if (count === 0) tally.counts.delete(rendered.hash);
  else tally.counts.set(rendered.hash, count);
  tally.tokens += sign * rendered.tokens;
}

/**
 * How many messages `list` dropped from the front of `kept` when `list` is `kept` without its first messages, followed
 * by any new ones (the same objects, in order); undefined otherwise (a list that lost messages at its back, or is not
 * a slide of the kept one).
 */
function slideOffset(kept: readonly AgentMessage[], list: readonly AgentMessage[]): number | undefined {
  if (list.length === 0) return kept.length === 0 ? 0 : undefined;
  let dropped = 0;
  while (dropped < kept.length && kept[dropped] !== list[0]) dropped++;
  // All of `kept` dropped: the list shares nothing with it (a tally afresh is no dearer).
  if (dropped === kept.length) return kept.length === 0 ? 0 : undefined;
  const stays = kept.length - dropped;
  if (list.length < stays) return undefined;
  for (let i = stays - 1; i >= 0; i--) if (list[i] !== kept[dropped + i]) return undefined;
  return dropped;
}

/**
 * A unit id (`ledgerUnitId` of a unit: `hash` or `hash#n`) split into its block hash and occurrence; undefined for a
 * string no unit can have as its id (a `#0`, `#01` or `#x` suffix).
 *
 * @example
 * ```ts
 * splitUnitId("ab12#1"); // { hash: "ab12", occurrence: 1 }
 * splitUnitId("ab12");   // { hash: "ab12", occurrence: 0 }
 * ```
 */
export function splitUnitId(id: string): { hash: string; occurrence: number } | undefined {
  const mark = id.indexOf("#");
  if (mark === -1) return { hash: id, occurrence: 0 };
  const suffix = id.slice(mark + 1);
  // As unitOf writes it: a positive integer in plain decimal.
  const n = Number(suffix);
  return Number.isSafeInteger(n) && n > 0 && String(n) === suffix ? { hash: id.slice(0, mark), occurrence: n } : undefined;
}

/**
 * Whether the tallied list has the unit of `hash` at `occurrence` (a {@link splitUnitId} of a ledger unit id): exactly
 * `new Set(renderUnits(list).map((u) => u.id)).has(id)`.
 *
 * @example
 * ```ts
 * tallyHas(tallyUnits([ok, ok]), hash, 1); // true: the second "ok" is occurrence #1
 * ```
 */
export function tallyHas(tally: UnitTally, hash: string, occurrence: number): boolean {
  return (tally.counts.get(hash) ?? 0) > occurrence;
}

/**
 * Whether every unit of the tallied list is in `injected` (a set of ledger unit ids), i.e. whether `planEntries` of its
 * units sends nothing. `runs` is {@link injectedRuns} of the same ledger.
 *
 * @example
 * ```ts
 * tallyAllInjected(tallyUnits(missing), injectedRuns(ledgerIds)); // true: nothing to send
 * ```
 */
export function tallyAllInjected(tally: UnitTally, runs: ReadonlyMap<string, number>): boolean {
  // How many hashes the tally carries more often than the ledger holds them without a gap.
  const lacking = keptAnswer(
    tally,
    runs,
    () => {
      let n = 0;
      for (const [hash, count] of tally.counts) if ((runs.get(hash) ?? 0) < count) n++;
      return n;
    },
    (n, hash, before, now) => {
      const run = runs.get(hash) ?? 0;
      return n - (run < before ? 1 : 0) + (run < now ? 1 : 0);
    },
  );
  return lacking === 0;
}

/** A ledger's units by block hash, for {@link absentUnitTokens}. */
export interface LedgerUnitsByHash {
  /** Block hash -> the occurrence and token estimate of each ledger unit carrying it (a unit listed twice, twice). */
  byHash: ReadonlyMap<string, ReadonlyArray<{ occurrence: number; tokens: number }>>;
  /** The tokens of the ledger units whose id no unit can have: no view ever has them. */
  unsplitTokens: number;
}

/**
 * Group a ledger's units (`splitUnitId` of each unit id, and `ledgerUnitTokens` of each unit, in ledger order) by
 * block hash.
 *
 * @example
 * ```ts
 * ledgerUnitsByHash([{ hash: "ab", occurrence: 0 }, undefined], [40, 7]); // byHash: ab -> [{ occurrence: 0, tokens: 40 }], unsplitTokens: 7
 * ```
 */
export function ledgerUnitsByHash(
  split: ReadonlyArray<{ hash: string; occurrence: number } | undefined>,
  tokens: readonly number[],
): LedgerUnitsByHash {
  const byHash = new Map<string, Array<{ occurrence: number; tokens: number }>>();
  let unsplitTokens = 0;
  split.forEach((unit, i) => {
    if (unit === undefined) unsplitTokens += tokens[i]!;
    else {
      const list = byHash.get(unit.hash);
      if (list === undefined) byHash.set(unit.hash, [{ occurrence: unit.occurrence, tokens: tokens[i]! }]);
      else list.push({ occurrence: unit.occurrence, tokens: tokens[i]! });
    }
  });
  return { byHash, unsplitTokens };
}

/**
 * The tokens of the grouped ledger units (not counting `unsplitTokens`) the tallied list lacks: exactly the sum of each
 * unit's tokens for which `tallyHas(tally, hash, occurrence)` is false. Against a kept tally the answer is kept too and
 * brought up to date by the counts the tally's last update changed.
 *
 * @example
 * ```ts
 * absentUnitTokens(ledgerUnitsByHash(split, tokens), tallyUnits(view)); // tokens the thread received that the view dropped
 * ```
 */
export function absentUnitTokens(units: LedgerUnitsByHash, tally: UnitTally): number {
  // The tokens of the units of `hash` a list carrying it `count` times lacks: occurrences `count` and up.
  const lackedOf = (hash: string, count: number): number => {
    let sum = 0;
    for (const unit of units.byHash.get(hash) ?? []) if (unit.occurrence >= count) sum += unit.tokens;
    return sum;
  };
  return keptAnswer(
    tally,
    units,
    () => {
      let sum = 0;
      for (const [hash, list] of units.byHash) for (const unit of list) if (!tallyHas(tally, hash, unit.occurrence)) sum += unit.tokens;
      return sum;
    },
    (sum, hash, before, now) => sum - lackedOf(hash, before) + lackedOf(hash, now),
  );
}

/**
 * An answer worked out from `tally` against `owner`: kept with a kept tally, and brought up to date by `step` over each
 * count the tally's last update changed (hash, count before, count now) when it was worked out one update ago; else
 * worked out in `full`. A tally made for one call keeps nothing.
 */
function keptAnswer(
  tally: UnitTally,
  owner: object,
  full: () => number,
  step: (value: number, hash: string, before: number, now: number) => number,
): number {
  const kept = tally as Partial<KeptTally>;
  if (kept.answers === undefined) return full();
  const { generation, changed, counts, answers } = kept as KeptTally;
  const memo = answers.get(owner);
  if (memo === undefined) {
    const value = full();
    answers.set(owner, { generation, value });
    return value;
  }
  if (memo.generation === generation - 1) {
    for (const [hash, before] of changed) memo.value = step(memo.value, hash, before, counts.get(hash) ?? 0);
  } else if (memo.generation !== generation) memo.value = full();
  memo.generation = generation;
  return memo.value;
}

/**
 * Per block hash, how many of its occurrences a set of ledger unit ids holds without a gap: `k` when `hash`, `hash#1`,
 * ..., `hash#(k - 1)` are all in it. A list whose units carry `hash` at most `k` times is then wholly injected.
 *
 * @example
 * ```ts
 * injectedRuns(new Set(["ab", "ab#1", "cd#1"])); // Map { "ab" => 2 } ("cd" has no first occurrence)
 * ```
 */
export function injectedRuns(ids: ReadonlySet<string>): Map<string, number> {
  const runs = new Map<string, number>();
  for (const id of ids) {
    if (id.includes("#") || runs.has(id)) continue;
    let k = 1;
    while (ids.has(`${id}#${k}`)) k++;
    runs.set(id, k);
  }
  return runs;
}

/** One message's block with what the ledger derives from it. */
export interface RenderedBlock {
  block: string;
  /** `sha256Hex(block, 20)`. */
  hash: string;
  /** `estimateTokens(block)`. */
  tokens: number;
  /** `ledgerUnit(block)`: the unit of the block's first occurrence in a view. */
  firstUnit: string;
}

/**
 * {@link renderMessageBlock} with its hash and token estimate; undefined when the message renders to nothing. A
 * message the history cache deep-froze (`isDeepFrozenByHost`) can never change, so its rendering is kept by
 * identity: a long session's view is then rendered and hashed once, not on every turn (at 10,000 messages that was
 * most of the projection's time). Any other message is rendered afresh each time: an engine may change its own
 * objects between turns.
 *
 * @example
 * ```ts
 * renderedBlockOf({ role: "user", content: "hi", timestamp: 1 }); // { block: "[user]\nhi", hash: "<20 hex>", tokens: 3, firstUnit: "<20 hex>:3" }
 * ```
 */
export function renderedBlockOf(message: AgentMessage, partCap: number = DEFAULT_PART_CAP_CHARS, renderings?: RenderingMemo): RenderedBlock | undefined {
  // Kept in the message's memo, for one part cap (one cap per message is the common case).
  const memo = frozenMessageMemo(message);
  if (memo !== undefined) {
    const hit = memo.rendered;
    if (hit !== undefined && hit.partCap === partCap) return hit.value as RenderedBlock | undefined;
  } else if (renderings !== undefined && renderings.partCap === partCap && renderings.byMessage.has(message)) {
    return renderings.byMessage.get(message);
  }
  const block = renderMessageBlock(message, partCap);
  let rendered: RenderedBlock | undefined;
  if (block !== undefined) {
    const hash = sha256Hex(block, 20);
    const tokens = estimateTokens(block);
    rendered = { block, hash, tokens, firstUnit: unitOf(hash, 0, tokens) };
  }
  if (memo !== undefined) memo.rendered = { partCap, value: rendered };
  else if (renderings !== undefined && renderings.partCap === partCap) renderings.byMessage.set(message, rendered);
  return rendered;
}

/**
 * Renderings of any message for the length of ONE synchronous projection, where nothing can change a message between
 * two looks at it (the projection renders the view, then the part of it the thread lacks: an engine that rebuilds its
 * messages every turn would otherwise pay for rendering and hashing each of them twice).
 */
export interface RenderingMemo {
  partCap: number;
  byMessage: Map<object, RenderedBlock | undefined>;
}

/**
 * A fresh {@link RenderingMemo}; drop it when the projection returns.
 *
 * @example
 * ```ts
 * const memo = renderingMemo(partCap);
 * renderUnits(view, partCap, memo); renderUnits(missing, partCap, memo); // each message rendered once
 * ```
 */
export function renderingMemo(partCap: number = DEFAULT_PART_CAP_CHARS): RenderingMemo {
  return { partCap, byMessage: new Map() };
}

/** The entries a turn sends and the ledger units they add. */
export interface EntryPlan {
  additionalContext?: Record<string, AdditionalContextEntry> | undefined;
  ledgerAdd: string[];
  entriesSent: number;
  bytes: number;
}

/**
 * The untrusted entries carrying the units the thread has not received yet (`injected` holds ledger unit ids).
 * Each value is {@link QUOTED_DATA_LABEL}, a blank line, then whole blocks; values stay under
 * {@link MAX_ENTRY_CHARS} including the label.
 *
 * @example
 * ```ts
 * planEntries(renderUnits(messages), new Set()); // every block, as untrusted entries
 * ```
 */
export function planEntries(units: readonly RenderedUnit[], injected: ReadonlySet<string>): EntryPlan {
  const fresh = units.filter((u) => !injected.has(u.id));
  const values = chunkBlocks(
    fresh.map((u) => u.block),
    MAX_ENTRY_CHARS - QUOTED_DATA_LABEL.length - 2,
  );
  if (values.length === 0) return { ledgerAdd: [], entriesSent: 0, bytes: 0 };
  const additionalContext: Record<string, AdditionalContextEntry> = {};
  let bytes = 0;
  values.forEach((blocks, index) => {
    const value = `${QUOTED_DATA_LABEL}\n\n${blocks}`;
    additionalContext[contextEntryKey(index, value)] = { kind: CONTEXT_ENTRY_KIND, value };
    bytes += Buffer.byteLength(value, "utf8");
  });
  return { additionalContext, ledgerAdd: fresh.map((u) => u.unit), entriesSent: values.length, bytes };
}
