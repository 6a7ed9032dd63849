/**
 * Projection: turning the engine's assembled messages into what Codex receives (prompt text, additionalContext
 * entries, developer instructions) and deciding whether the turn resumes the bound thread or starts a fresh one.
 *
 * Codex stores every turn of a thread natively and replays it on each request (openclaw#84662), so re-sending the
 * assembled transcript every turn makes the model input grow without bound. The `delta` and `threadBootstrap` modes
 * send only what the thread does not already hold (recognised by content, `identity.ts`); what the thread holds but
 * the engine no longer shows is stale context, counted per turn and bounded by a rent-or-buy rotation policy
 * (`rotation.ts`). `prompt` reproduces the first port's text format (the anchor). See docs/projection.md.
 */
import type { AgentMessage } from "../context-engine/types.js";
import type { AssembleOutput, HistoryOutput, ProjectionOutput, ThreadPlan } from "../../machines/turn.contract.js";
import type { BindingUpdate, ThreadBinding } from "../transcript/binding.js";
import { DEFAULT_TOTAL_CAP_CHARS, dropTrailingPrompt, estimateTokens, renderPromptProjection, memoizedSha256Hex, sha256Hex, canonicalJson } from "./render.js";
import { ContentSet, cachedContentKey, messageContentKey } from "./identity.js";
import {
  absentUnitTokens,
  blockUnit,
  injectedRuns,
  ledgerUnitsByHash,
  ledgerUnitId,
  ledgerUnitTokens,
  planEntries,
  renderedBlockOf,
  renderingMemo,
  renderUnits,
  splitUnitId,
  tallyAllInjected,
  tallyUnits,
  type EntryPlan,
  type LedgerUnitsByHash,
  type UnitTally,
} from "./entries.js";
import {
  appendDelivery,
  composeDeveloperInstructions,
  planDeveloperInstructionsDelivery,
  staleDeveloperTokens,
  withDeveloperInstructions,
} from "./developer.js";
import { decideRotation } from "./rotation.js";
import { heldMessages } from "./held.js";
import { selectContextImages } from "./context-images.js";
import { planNativeSync, recordInjected, type NativeThreadRecord } from "./native.js";
import { MAX_DEVELOPER_DELIVERIES, MAX_HELD_TURNS, MAX_LEDGER_ENTRIES } from "../transcript/binding.js";
import { developerInstructionsHash } from "./developer.js";

export * from "./render.js";
export * from "./identity.js";
export * from "./entries.js";
export * from "./developer.js";
export * from "./rotation.js";
export * from "./context-images.js";
export * from "./native.js";

export type ProjectionMode = "auto" | "prompt" | "delta" | "threadBootstrap" | "native";

export interface ProjectionFingerprints {
  dynamicTools: string;
  engineId: string;
  policy: string;
  /**
   * A policy fingerprint bindings written by an earlier version carry for the same policy (it included the model):
   * accepted as compatible too, so upgrading does not rotate every session's thread once.
   */
  legacyPolicy?: string | undefined;
}

export interface ProjectAssembledContextParams {
  mode: ProjectionMode;
  prompt: string;
  history: AgentMessage[];
  origins: HistoryOutput["origins"];
  /** Undefined when there is no engine, assemble failed, or it returned nothing. */
  assembled?: AssembleOutput | undefined;
  baseDeveloperInstructions?: string | undefined;
  /**
   * The developer instructions the thread will carry, when a `beforePromptBuild` hook changed them (the hook saw base +
   * `systemPromptAddition` and returned the final text). They replace base + addition, so the resume-or-rotate
   * decision counts the thread's copies against what it will really hold: a hook that adds the same system context
   * every turn leaves nothing stale.
   */
  finalDeveloperInstructions?: string | undefined;
  binding?: ThreadBinding | undefined;
  fingerprints: ProjectionFingerprints;
  tokenBudget?: number | undefined;
  /** Stale tokens the rotation policy tolerates whatever their cost (default 25% of `tokenBudget`, else 8,000). */
  divergenceTokens?: number | undefined;
  partCapChars?: number | undefined;
  totalCapChars?: number | undefined;
  /** Cached/uncached input price ratio of the rotation policy, in (0, 1]; default 0.1. */
  cachedPriceRatio?: number | undefined;
  /**
   * No (non-legacy) engine: a fresh thread gets the newest history as context ({@link projectHistoryContinuity}),
   * as OpenClaw's Codex harness does, so a thread change (tools, policy, a thread Codex cannot resume) does not make
   * the model forget the conversation. With an engine the engine's view decides, even when it is empty or failed.
   */
  historyContinuity?: boolean | undefined;
}

/**
 * Fingerprint of the dynamic tool catalog: each spec without its `description` (and without functions such as a
 * handler), object keys sorted at every level, specs sorted by name, sha256 (16 hex). It decides resume vs a fresh
 * thread, so it never includes context-engine output, or every context change would force a new thread.
 *
 * @example
 * ```ts
 * fingerprintDynamicTools([{ name: "lookup", description: "ignored", inputSchema: { type: "object" } }]);
 * ```
 */
export function fingerprintDynamicTools(specs: ReadonlyArray<{ name: string; [key: string]: unknown }>): string {
  const normalized = specs
    .map((spec) => {
      const out: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(spec)) {
        if (key === "description" || typeof value === "function" || value === undefined) continue;
        out[key] = value;
      }
      return out;
    })
    .sort((a, b) => {
      const x = canonicalJson(a);
      const y = canonicalJson(b);
      return x < y ? -1 : x > y ? 1 : 0;
    });
  return fingerprintOf(canonicalJson(normalized));
}

/** Fingerprints by canonical JSON (a host computes the same few every turn). */
const fingerprintOf = memoizedSha256Hex(16, 256);

/**
 * Fingerprint of the projection policy (mode, caps, divergence threshold): a change rotates to a fresh thread, because
 * what the thread holds was projected under the old policy. The model is not part of it: a model switch keeps the
 * thread (OpenClaw's runtime contract), and `turn/start` names the new model. Keys are sorted; undefined values are
 * ignored, so `{ a: 1, b: undefined }` and `{ a: 1 }` agree.
 *
 * @example
 * ```ts
 * fingerprintPolicy({ mode: "delta", partCapChars: 6000 });
 * ```
 */
export function fingerprintPolicy(policy: Record<string, unknown>): string {
  return fingerprintOf(canonicalJson(policy));
}

/**
 * Resume is possible only on a binding with a thread id made under the same dynamic tools, engine and policy (or the
 * legacy form of the same policy, see {@link ProjectionFingerprints.legacyPolicy}).
 *
 * @example
 * ```ts
 * isBindingCompatible(binding, { dynamicTools: toolFp, engineId: "window", policy: policyFp });
 * ```
 */
export function isBindingCompatible(binding: ThreadBinding | undefined, fp: ProjectionFingerprints): binding is ThreadBinding {
  return (
    binding !== undefined &&
    binding.threadId.length > 0 &&
    binding.dynamicToolsFingerprint === fp.dynamicTools &&
    binding.engineId === fp.engineId &&
    (binding.policyFingerprint === fp.policy || (fp.legacyPolicy !== undefined && binding.policyFingerprint === fp.legacyPolicy))
  );
}

function resumeOrStart(binding: ThreadBinding | undefined, fp: ProjectionFingerprints, why: string): ThreadPlan {
  if (isBindingCompatible(binding, fp)) return { action: "resume", threadId: binding.threadId, reason: `${why}:compatibleBinding` };
  return { action: "start", reason: binding ? `${why}:incompatibleBinding` : `${why}:noBinding` };
}

/**
 * Default stale-token tolerance of the rotation policy: 25% of the token budget, or 8,000 tokens without a budget.
 *
 * @example
 * ```ts
 * defaultDivergenceTokens(1_000); // 250
 * ```
 */
export function defaultDivergenceTokens(tokenBudget: number | undefined): number {
  return tokenBudget !== undefined ? Math.floor(tokenBudget * 0.25) : 8_000;
}

/**
 * Where `view` starts in `history` when it is exactly a tail of the history's own objects (a pass-through or window
 * engine), else undefined. Checked from the end, so a mismatch is found early.
 */
function historyTailOffset(history: readonly AgentMessage[], view: readonly AgentMessage[]): number | undefined {
  const offset = history.length - view.length;
  if (offset < 0) return undefined;
  for (let j = view.length - 1; j >= 0; j--) if (view[j] !== history[offset + j]) return undefined;
  return offset;
}


/**
 * The epoch of a `threadBootstrap` projection: the engine's `contextProjection.epoch`, else its `fingerprint`, else
 * one derived from the OLDEST context message (`first:<hash>`). Deriving it from the whole view would change it every
 * turn and rotate threads per turn, which breaks prompt caching; while the oldest message stays, everything after
 * it is either in the bootstrap or held natively by the thread, and when the view's start moves (a window step, a
 * new summary) the epoch changes.
 *
 * @example
 * ```ts
 * projectionEpoch({ messages, estimatedTokens: 0, contextProjection: { mode: "thread_bootstrap", epoch: "w12" } }, messages); // "w12"
 * ```
 */
export function projectionEpoch(assembled: AssembleOutput, context: readonly AgentMessage[]): string {
  const request = assembled.contextProjection;
  if (request?.epoch) return request.epoch;
  if (request?.fingerprint) return `fp:${request.fingerprint}`;
  const first = context[0];
  return first ? `first:${sha256Hex(messageContentKey(first), 16)}` : "first:empty";
}


/** What the bound thread lacks of the engine's view, and what it holds that the view no longer shows. */
interface ThreadAssessment {
  plan: EntryPlan;
  /** Tokens of held messages and injected blocks the view no longer contains (developer copies not included). */
  staleContextTokens: number;
  /** Tokens of the whole view as blocks (computed only when something is stale: rendering the view costs). */
  viewTokens: () => number;
}

/** A ledger's unit ids (split, in order, and as a set) and token estimates. */
interface LedgerFacts {
  /** `splitUnitId` of each unit id (undefined for an id no unit can have). */
  split: Array<{ hash: string; occurrence: number } | undefined>;
  tokens: number[];
  ids: ReadonlySet<string>;
  /** `injectedRuns(ids)`, computed on first use. */
  runs?: ReadonlyMap<string, number> | undefined;
  /** `ledgerUnitsByHash(split, tokens)`, computed on first use. */
  units?: LedgerUnitsByHash | undefined;
}

/** Facts of frozen ledgers, by the array: the binding cache keeps an unchanged ledger's array from turn to turn. */
const factsByLedger = new WeakMap<readonly string[], LedgerFacts>();

/**
 * {@link LedgerFacts} of `ledger`; kept by identity when the array is frozen (its strings can then never change), so a
 * long session's ledger is split and hashed once per change, not on every turn.
 */
function ledgerFacts(ledger: readonly string[]): LedgerFacts {
  const known = factsByLedger.get(ledger);
  if (known !== undefined) return known;
  const unitIds = ledger.map(ledgerUnitId);
  const facts: LedgerFacts = { split: unitIds.map(splitUnitId), tokens: ledger.map(ledgerUnitTokens), ids: new Set(unitIds) };
  if (Object.isFrozen(ledger)) factsByLedger.set(ledger, facts);
  return facts;
}

/**
 * Compare the thread (held turns by origin, injected blocks by ledger) with the engine's view, by content: a message
 * the engine rebuilt from its own store (other timestamp, usage or ids) is the same message (`identity.ts`).
 * Object references decide first, so an engine that hands the history's own objects through costs no serialization.
 */
function assessThread(p: ProjectAssembledContextParams, binding: ThreadBinding, context: readonly AgentMessage[]): ThreadAssessment {
  const keyOf = cachedContentKey();
  // Kept per session from turn to turn and extended by what the last turn added (`held.ts`).
  const held = heldMessages(p.history, p.origins, binding, keyOf);
  const heldFlags = held.flags;
  // Engines that hand the history through return a tail of the history's own objects: then references decide for
  // every message in that tail by index, without building sets of 10,000 objects (a Set insert costs ~0.2 us here).
  const offset = historyTailOffset(p.history, context);
  let heldSet: ContentSet | undefined;
  let viewSet: ContentSet | undefined;
  // With the tail aligned, a reference is a member exactly when the index says so; only content is left to check.
  const isHeld = (m: AgentMessage, j: number) => {
    if (offset !== undefined) return heldFlags[offset + j] === 1 || held.heldByContent(offset + j);
    if (heldSet === undefined) {
      const members: AgentMessage[] = [];
      for (let index = 0; index < heldFlags.length; index++) {
        const message = heldFlags[index] ? p.history[index] : undefined;
        if (message) members.push(message);
      }
      heldSet = new ContentSet(members, keyOf);
    }
    return heldSet.has(m);
  };
  const inView = (m: AgentMessage, index: number) => {
    const set = (viewSet ??= new ContentSet(context, keyOf));
    if (offset === undefined) return set.has(m);
    return index >= offset || set.hasContent(m);
  };
  // Held messages the view no longer shows, each distinct content counted once.
  const dropped = new Map<string, AgentMessage>();
  for (let index = 0; index < heldFlags.length; index++) {
    const message = heldFlags[index] ? p.history[index] : undefined;
    if (message && !inView(message, index)) dropped.set(keyOf(message), message);
  }
  const renderings = renderingMemo(p.partCapChars);
  let staleContextTokens = 0;
  for (const message of dropped.values()) staleContextTokens += renderedBlockOf(message, p.partCapChars, renderings)?.tokens ?? 0;
  const missing = context.filter((m, j) => !isHeld(m, j));
  // The view's and the missing messages' units, tallied (kept per session, under its first history message, from turn
  // to turn: a moving window costs the messages it dropped and gained, not a walk of the whole view).
  let view: UnitTally | undefined;
  const tallyView = () => (view ??= tallyUnits(context, p.partCapChars, renderings, p.history[0], "view"));
  const ledger = ledgerFacts(binding.ledger);
  // Injected units the view no longer has (kept with the view's tally: the answer follows the window's moves).
  const units = (ledger.units ??= ledgerUnitsByHash(ledger.split, ledger.tokens));
  staleContextTokens += units.unsplitTokens + (units.byHash.size > 0 ? absentUnitTokens(units, tallyView()) : 0);
  const viewTokens = () => tallyView().tokens;
  // Rendered only when the thread lacks one of their units (nothing is sent otherwise).
  const missingUnits = tallyUnits(missing, p.partCapChars, renderings, p.history[0], "missing");
  const allInjected = tallyAllInjected(missingUnits, (ledger.runs ??= injectedRuns(ledger.ids)));
  return { plan: planEntries(allInjected ? [] : renderUnits(missing, p.partCapChars, renderings), ledger.ids), staleContextTokens, viewTokens };
}

/**
 * Decide what Codex receives for this turn. Pure and deterministic: identical inputs (in any object-key order) give
 * byte-identical output.
 *
 * - no assembled context (no engine, assemble failed, empty view): mode `none`, the raw prompt; resume a compatible
 *   binding, else start. Without an engine (`historyContinuity`), a fresh thread also gets the newest history as
 *   context entries (reason `historyContinuity`), and a resumed one what others wrote to the transcript after its last
 *   turn (reason `newerHistory`).
 * - `prompt`: the first-port text around the prompt, on the compatible bound thread (the anchor).
 * - `delta`: resume and send, as `untrusted` entries, only blocks the thread neither holds (by content) nor received
 *   before; rotate to a fresh thread (the whole view) when the rotation policy says so (`rotation.ts`: rent-or-buy on
 *   stale tokens, reason `staleCost`; stale + view over the budget, or stale over `divergenceTokens`, reason `divergence`).
 * - `threadBootstrap`: same epoch on a compatible binding resumes (normally sending nothing but the prompt; after a
 *   native compaction cleared the ledger it restores the view on the same thread); a new epoch rotates to a fresh
 *   thread bootstrapped with the whole view; the rotation policy applies to a resumed thread too.
 * - `auto`: the native sync (`native`, below) whenever the engine assembled a view with messages (a thread made by
 *   `delta`/`threadBootstrap` is adopted, not rotated); without a view, as `none`.
 * - `native`: the view becomes the Codex thread (`projectNative`, `native.ts`).
 *
 * Developer instructions (base + systemPromptAddition, or `finalDeveloperInstructions` when a beforePromptBuild hook
 * changed them: the turn machine then projects again with the hook's text) are delivered as
 * {@link planDeveloperInstructionsDelivery} decides, and count in the rotation policy's stale tokens.
 * `staleTokens` is set in `delta` and `threadBootstrap` (0 on a fresh thread), and in `none` on a resumed thread.
 *
 * @example
 * ```ts
 * const out = projectAssembledContext({ mode: "auto", prompt, history, origins, assembled, binding,
 *   fingerprints: { dynamicTools: "…", engineId: "window", policy: "…" } });
 * out.thread.action; // "resume" | "start"
 * ```
 */
export function projectAssembledContext(p: ProjectAssembledContextParams): ProjectionOutput {
  if (usesNativeSync(p)) return projectNative(p);
  const out = projectContext(p);
  return withContextImages(withDeveloperInstructions(out, p.binding, out.developerInstructions), p);
}

/**
 * Whether this turn syncs the thread natively: `native` whenever an engine assembled (even an empty view: the thread
 * is cut back to it), and `auto` whenever the engine's view has messages. `auto` without a view (no engine, a failed
 * assemble) projects as `none`; `prompt`, `delta` and `threadBootstrap` never sync natively.
 *
 * @example
 * ```ts
 * usesNativeSync({ ...params, mode: "auto", assembled: { messages: [m], estimatedTokens: 3 } }); // true
 * ```
 */
export function usesNativeSync(p: Pick<ProjectAssembledContextParams, "mode" | "assembled">): boolean {
  if (p.mode === "native") return p.assembled !== undefined;
  return p.mode === "auto" && p.assembled !== undefined && p.assembled.messages.length > 0;
}

/**
 * The native record of a compatible binding. A binding without one (made by `delta`, `threadBootstrap`, the `auto` of
 * before, or turns without an engine) is adopted: its held turns become the record's turns, and when it holds
 * additionalContext blocks (its ledger) those turns are one adopted segment ({@link NativeThreadRecord.adopted}), kept
 * whole or cut before its first turn, so an upgrading session keeps its thread and its prompt cache. Not adopted
 * (undefined: a fresh thread) when what the thread holds is not fully known: after a native compaction, or when the
 * held turns, the ledger or the developer copies reached their caps (the oldest fell out).
 *
 * @example
 * ```ts
 * nativeRecordOf(binding)?.adopted; // { through: "<its last turn>", dev: [] } for a thread made by delta
 * ```
 */
export function nativeRecordOf(binding: ThreadBinding): NativeThreadRecord | undefined {
  if (binding.native) return binding.native as NativeThreadRecord;
  if ((binding.nativeCompactions ?? 0) > 0) return undefined;
  const turns = binding.heldTurnIds.map((id) => ({ id, units: [] as string[] }));
  const deliveries = binding.developerDeliveries ?? [];
  if (binding.ledger.length === 0 && binding.projectionEpoch === undefined && deliveries.length <= 1) {
    return deliveries.length === 1 ? { preamble: [], turns, startDev: deliveries[0] } : { preamble: [], turns };
  }
  if (turns.length === 0 || turns.length >= MAX_HELD_TURNS || binding.ledger.length >= MAX_LEDGER_ENTRIES || deliveries.length >= MAX_DEVELOPER_DELIVERIES) return undefined;
  const record: NativeThreadRecord = { preamble: [], turns, adopted: { through: turns[turns.length - 1]!.id, dev: deliveries.slice(1) } };
  if (deliveries.length > 0) record.startDev = deliveries[0];
  return record;
}

/** The ledger blocks an adopted record's turns hold, by block hash (copies, bytes at 4 a token). */
function adoptedLedgerOf(binding: ThreadBinding, partCapChars: number | undefined): NonNullable<Parameters<typeof planNativeSync>[0]["adoptedLedger"]> {
  const blocks = new Map<string, { count: number; bytes: number }>();
  for (const unit of binding.ledger) {
    const split = splitUnitId(ledgerUnitId(unit));
    if (split === undefined) continue;
    const known = blocks.get(split.hash);
    const bytes = ledgerUnitTokens(unit) * 4;
    if (known) {
      known.count++;
      known.bytes += bytes;
    } else blocks.set(split.hash, { count: 1, bytes });
  }
  const renderings = renderingMemo(partCapChars);
  return { blocks, blockHash: (message) => renderedBlockOf(message, partCapChars, renderings)?.hash };
}

/**
 * `native`: the view becomes the thread's history (`native.ts`): resume the bound thread, cut it back to the last turn
 * boundary the view matches and inject the rest as Responses items, or start a fresh thread with the whole view
 * injected before its first turn. The prompt goes as the turn input; no additionalContext carries the view. Developer
 * instructions are delivered as in the other modes, against the copies the kept thread still carries.
 */
function projectNative(p: ProjectAssembledContextParams): ProjectionOutput {
  const developerInstructions = p.finalDeveloperInstructions ?? composeDeveloperInstructions(p.baseDeveloperInstructions, p.assembled?.systemPromptAddition);
  const view = dropTrailingPrompt(p.assembled?.messages ?? [], p.prompt);
  const compatible = isBindingCompatible(p.binding, p.fingerprints);
  const record = compatible ? nativeRecordOf(p.binding!) : undefined;
  const devHash = developerInstructionsHash(developerInstructions);
  const plan = planNativeSync({
    view,
    history: p.history,
    origins: p.origins,
    thread: compatible && record ? { threadId: p.binding!.threadId, record } : undefined,
    ...(compatible && record?.adopted !== undefined ? { adoptedLedger: adoptedLedgerOf(p.binding!, p.partCapChars) } : {}),
    developerHash: devHash,
    toleranceBytes: (p.divergenceTokens ?? 0) * 4,
    cachedPriceRatio: p.cachedPriceRatio ?? 0.1,
  });
  const reason = plan.reason === "noRecord" ? (p.binding ? (compatible ? "noRecord" : "incompatibleBinding") : "noBinding") : plan.reason;
  const thread: ThreadPlan = plan.action === "resume" ? { action: "resume", threadId: p.binding!.threadId, reason } : { action: "start", reason };
  const staleContextTokens = Math.ceil(plan.counts.staleBytes / 4);
  // The engine-made tail that would land before the thread's first turn rides with the turn instead (revertable).
  const lead = plan.lead.length > 0 ? planEntries(renderUnits(plan.lead.map((u) => u.message), p.partCapChars), new Set()) : undefined;
  const out: ProjectionOutput = {
    mode: "native",
    reason,
    promptText: p.prompt,
    thread,
    entriesSent: lead?.entriesSent ?? 0,
    bytes: Buffer.byteLength(p.prompt, "utf8") + plan.counts.injectedBytes + (lead?.bytes ?? 0),
    staleTokens: staleContextTokens,
    nativeSync: {
      reason: plan.reason,
      items: plan.items,
      units: plan.units,
      record: plan.record,
      ...(plan.revertBeforeTurnId !== undefined ? { revertBeforeTurnId: plan.revertBeforeTurnId } : {}),
      counts: plan.counts,
    },
  };
  if (developerInstructions !== undefined) out.developerInstructions = developerInstructions;
  if (lead?.additionalContext) out.additionalContext = lead.additionalContext;
  const held = recordInjected(plan.record, plan.units);
  const update: BindingUpdate = {
    reset: plan.action === "start",
    ledgerAdd: [],
    native: plan.lead.length > 0 ? { ...held, lead: plan.lead.map((u) => u.unit) } : held,
    staleContextTokens,
    staleTokens: staleContextTokens,
  };
  if (plan.action === "resume") update.developerDeliveriesHeld = plan.heldDeveloperDeliveries;
  out.bindingUpdate = update;
  // Delivered against what the kept thread holds: a revert past a turn that carried a copy takes that copy away.
  const kept = p.binding && plan.action === "resume" ? heldDeveloperBinding(p.binding, plan.heldDeveloperHash, plan.heldDeveloperDeliveries) : p.binding;
  return withDeveloperInstructions(out, kept, developerInstructions);
}

function heldDeveloperBinding(binding: ThreadBinding, hash: string | undefined, deliveries: string[]): ThreadBinding {
  const next: ThreadBinding = { ...binding, developerDeliveries: deliveries };
  if (hash !== undefined) next.developerInstructionsHash = hash;
  else delete next.developerInstructionsHash;
  return next;
}

/**
 * The images of the user messages whose blocks this turn sends (their labels are in the prompt text or an entry),
 * from the engine's view, or from the history for a continuity projection (`context-images.ts`).
 */
function withContextImages(out: ProjectionOutput, p: ProjectAssembledContextParams): ProjectionOutput {
  if (out.entriesSent === 0) return out;
  const values = Object.values(out.additionalContext ?? {}).map((e) => e.value);
  const sent = out.promptText === p.prompt ? values.join("\n") : [out.promptText, ...values].join("\n");
  const source = p.assembled && p.assembled.messages.length > 0 ? p.assembled.messages : p.history;
  const images = selectContextImages(source, sent);
  return images.length > 0 ? { ...out, contextImages: images } : out;
}

/** The projection before developer delivery (its binding update carries the stale figures). */
function projectContext(p: ProjectAssembledContextParams): ProjectionOutput {
  // systemPromptAddition goes only into developer instructions, never into the prompt text.
  const developerInstructions = p.finalDeveloperInstructions ?? composeDeveloperInstructions(p.baseDeveloperInstructions, p.assembled?.systemPromptAddition);
  const assembled = p.assembled && p.assembled.messages.length > 0 ? p.assembled : undefined;
  if (!assembled) {
    const b = projectionBuilder(p, developerInstructions, []);
    const out = b.base("none", "nothingAssembled", resumeOrStart(p.binding, p.fingerprints, "none"));
    if (out.thread.action === "resume" && p.binding) {
      const newer = p.historyContinuity === true ? projectNewerHistory(p, b, p.binding, out.thread.reason) : undefined;
      return newer ?? b.resumed("none", "nothingAssembled", p.binding, undefined, { reset: false, ledgerAdd: [] }, 0, out.thread.reason);
    }
    if (p.historyContinuity === true) {
      const continuity = projectHistoryContinuity(p, b, out.thread);
      if (continuity) return continuity;
    }
    out.bindingUpdate = { reset: out.thread.action === "start", ledgerAdd: [] } satisfies BindingUpdate;
    return out;
  }

  const wantsBootstrap = assembled.contextProjection?.mode === "thread_bootstrap";
  const mode = p.mode === "auto" ? (wantsBootstrap ? "threadBootstrap" : "delta") : p.mode;
  // The current prompt is sent as the turn input: a trailing copy in the view would make the model see it twice.
  const context = dropTrailingPrompt(assembled.messages, p.prompt);
  const b = projectionBuilder(p, developerInstructions, context);

  if (mode === "prompt") {
    const rendered = renderPromptProjection(assembled.messages, p.prompt, p);
    const out = b.base("prompt", rendered.renderedMessages > 0 ? "perTurnText" : "nothingToRender", resumeOrStart(p.binding, p.fingerprints, "prompt"));
    out.promptText = rendered.text;
    out.bytes = Buffer.byteLength(rendered.text, "utf8");
    out.entriesSent = rendered.renderedMessages;
    out.bindingUpdate = { reset: out.thread.action === "start", ledgerAdd: [] } satisfies BindingUpdate;
    return out;
  }
  if (mode === "threadBootstrap") return projectThreadBootstrap(p, b, assembled, context);
  return projectDelta(p, b, context);
}

/** The output shapes every mode builds from (one turn's parameters, instructions and view). */
interface ProjectionBuilder {
  base(mode: ProjectionOutput["mode"], reason: string, thread: ThreadPlan, plan?: EntryPlan): ProjectionOutput;
  /** Resume `binding`'s thread with `plan`; the stale figures include the developer copies it would carry. */
  resumed(
    mode: ProjectionOutput["mode"],
    reason: string,
    binding: ThreadBinding,
    plan: EntryPlan | undefined,
    update: BindingUpdate,
    staleContextTokens: number,
    threadReason?: string,
  ): ProjectionOutput;
  /** A fresh thread bootstrapped with the whole view. */
  freshThread(mode: ProjectionOutput["mode"], reason: string, epoch?: string): ProjectionOutput;
  /** The rotation policy on a thread that would be resumed with `assessment`. */
  rotation(binding: ThreadBinding, assessment: ThreadAssessment): ReturnType<typeof decideRotation>;
}

function projectionBuilder(p: ProjectAssembledContextParams, developerInstructions: string | undefined, context: readonly AgentMessage[]): ProjectionBuilder {
  const base: ProjectionBuilder["base"] = (mode, reason, thread, plan) => {
    const out: ProjectionOutput = { mode, reason, promptText: p.prompt, thread, entriesSent: 0, bytes: Buffer.byteLength(p.prompt, "utf8") };
    if (developerInstructions !== undefined) out.developerInstructions = developerInstructions;
    if (plan?.additionalContext) out.additionalContext = plan.additionalContext;
    if (plan) {
      out.entriesSent = plan.entriesSent;
      out.bytes += plan.bytes;
    }
    return out;
  };
  /** Stale developer copies the resumed thread would carry with this turn's (pre-hook) instructions. */
  const developerStale = (binding: ThreadBinding): number => {
    const d = planDeveloperInstructionsDelivery({ binding, threadAction: "resume", developerInstructions });
    return staleDeveloperTokens(appendDelivery(binding.developerDeliveries, d.bindingUpdate.developerDelivery), d.bindingUpdate.developerInstructionsHash!);
  };
  return {
    base,
    resumed(mode, reason, binding, plan, update, staleContextTokens, threadReason = reason) {
      const out = base(mode, reason, { action: "resume", threadId: binding.threadId, reason: threadReason }, plan);
      out.staleTokens = staleContextTokens + developerStale(binding);
      out.bindingUpdate = { ...update, staleContextTokens, staleTokens: out.staleTokens } satisfies BindingUpdate;
      return out;
    },
    freshThread(mode, reason, epoch) {
      const plan = planEntries(renderUnits(context, p.partCapChars), new Set());
      const out = base(mode, reason, { action: "start", reason }, plan);
      out.staleTokens = 0;
      const update: BindingUpdate = { reset: true, ledgerAdd: plan.ledgerAdd, staleContextTokens: 0, staleCostTokens: 0, staleTokens: 0 };
      if (epoch !== undefined) update.projectionEpoch = epoch;
      out.bindingUpdate = update;
      return out;
    },
    rotation(binding, assessment) {
      const staleTokens = assessment.staleContextTokens + developerStale(binding);
      return decideRotation({
        staleTokens,
        viewTokens: staleTokens > 0 ? assessment.viewTokens() + estimateTokens(developerInstructions ?? "") : 0,
        accruedStaleCost: binding.staleCostTokens ?? 0,
        cachedPriceRatio: p.cachedPriceRatio,
        tokenBudget: p.tokenBudget,
        toleranceTokens: p.divergenceTokens ?? defaultDivergenceTokens(p.tokenBudget),
      });
    },
  };
}

/** `threadBootstrap`: resume the thread bootstrapped with this epoch, else rotate to a fresh one with the whole view. */
function projectThreadBootstrap(
  p: ProjectAssembledContextParams,
  b: ProjectionBuilder,
  assembled: NonNullable<ProjectAssembledContextParams["assembled"]>,
  context: readonly AgentMessage[],
): ProjectionOutput {
  const epoch = projectionEpoch(assembled, context);
  if (!isBindingCompatible(p.binding, p.fingerprints)) return b.freshThread("threadBootstrap", p.binding ? "incompatibleBinding" : "noBinding", epoch);
  const binding = p.binding;
  let reason: string | undefined;
  if (binding.projectionEpoch === undefined) {
    // The bound thread was never bootstrapped (earlier turns had nothing assembled): it holds its own turns. When the
    // engine dropped none of them, adopt the epoch on this thread (sending what it lacks) instead of rotating.
    if (assessThread(p, binding, context).staleContextTokens === 0) reason = "epochAdopted";
  } else if (binding.projectionEpoch === epoch) reason = "sameEpoch";
  if (reason === undefined) return b.freshThread("threadBootstrap", "epochChanged", epoch);
  // Same (or adopted) epoch: the thread holds the bootstrap (ledger) and every later turn (held). The delta is empty
  // unless a native compaction cleared both, in which case the view is restored on the same thread.
  const assessment = assessThread(p, binding, context);
  const decision = b.rotation(binding, assessment);
  if (decision.rotate) return b.freshThread("threadBootstrap", decision.reason, epoch);
  if (reason === "sameEpoch" && assessment.plan.entriesSent > 0) reason = "sameEpochRestore";
  const update: BindingUpdate = { reset: false, ledgerAdd: assessment.plan.ledgerAdd, projectionEpoch: epoch, staleCostTokens: decision.accruedStaleCost };
  return b.resumed("threadBootstrap", reason, binding, assessment.plan, update, assessment.staleContextTokens);
}

/** `delta`: resume and send only what the thread lacks, unless the rotation policy says a fresh thread is cheaper. */
function projectDelta(p: ProjectAssembledContextParams, b: ProjectionBuilder, context: readonly AgentMessage[]): ProjectionOutput {
  if (!isBindingCompatible(p.binding, p.fingerprints)) return b.freshThread("delta", p.binding ? "incompatibleBinding" : "noBinding");
  const binding = p.binding;
  const assessment = assessThread(p, binding, context);
  const decision = b.rotation(binding, assessment);
  if (decision.rotate) return b.freshThread("delta", decision.reason);
  const update: BindingUpdate = { reset: false, ledgerAdd: assessment.plan.ledgerAdd, staleCostTokens: decision.accruedStaleCost };
  const reason = assessment.plan.entriesSent > 0 ? "newContext" : "threadHoldsContext";
  return b.resumed("delta", reason, binding, assessment.plan, update, assessment.staleContextTokens, "compatibleBinding");
}

/** Characters of rendered context per token OpenClaw's continuity projection assumes (its uncalibrated figure). */
const CONTINUITY_CHARS_PER_TOKEN = 3;
/** Upper bound of the continuity context, characters (OpenClaw's `MAX_RENDERED_CONTEXT_CHARS`). */
const MAX_CONTINUITY_CHARS = 1_000_000;

/**
 * How much history (rendered characters) a fresh thread without an engine gets. Without a token budget: the
 * projection's `totalCapChars` (default 24,000, OpenClaw's default). With one (B tokens), OpenClaw's continuity rule:
 * keep a reserve of max(20,000, B/2) tokens, but never leave the prompt less than min(8,000, B/2), at 3 characters a
 * token, at most 1,000,000 characters.
 *
 * @example
 * ```ts
 * continuityBudgetChars(undefined); // 24000
 * continuityBudgetChars(200_000);   // 300000 (100,000 tokens kept for the prompt x 3)
 * ```
 */
export function continuityBudgetChars(tokenBudget: number | undefined, totalCapChars: number = DEFAULT_TOTAL_CAP_CHARS): number {
  if (tokenBudget === undefined || !Number.isFinite(tokenBudget) || tokenBudget <= 0) return totalCapChars;
  const budget = Math.floor(tokenBudget);
  const half = Math.floor(budget * 0.5);
  const reserve = Math.max(20_000, half);
  const minPrompt = Math.min(8_000, Math.max(1, half));
  const promptTokens = Math.max(1, budget - Math.min(reserve, Math.max(0, budget - minPrompt)));
  return Math.min(MAX_CONTINUITY_CHARS, promptTokens * CONTINUITY_CHARS_PER_TOKEN);
}

/** The note before a continuity context that had to leave older history out. */
export function continuityOmittedNote(omitted: number): string {
  return `[${omitted} earlier transcript ${omitted === 1 ? "entry" : "entries"} not shown]`;
}

/**
 * A fresh thread without an engine: the newest history messages whose blocks fit {@link continuityBudgetChars}
 * (whole blocks, newest kept, joined by blank lines; older ones counted in {@link continuityOmittedNote}), sent as
 * untrusted context entries like an engine's view, and recorded in the ledger. Undefined when nothing renders.
 */
function projectHistoryContinuity(p: ProjectAssembledContextParams, b: ProjectionBuilder, thread: ThreadPlan): ProjectionOutput | undefined {
  if (thread.action !== "start" || p.history.length === 0) return undefined;
  const plan = continuityPlan(p, p.history);
  if (!plan) return undefined;
  const out = b.base("none", "historyContinuity", thread, plan);
  out.bindingUpdate = { reset: true, ledgerAdd: plan.ledgerAdd } satisfies BindingUpdate;
  return out;
}

/**
 * A resumed thread without an engine: the conversation messages written to the transcript after the thread's last
 * turn by anyone but this thread (another runtime sharing the session file, as OpenClaw's pi runner does, or a turn
 * that ran on another thread while the binding lagged behind it) are sent as context, as OpenClaw's Codex harness
 * sends "newer visible history" to a resumed thread. Only user, assistant and custom messages; never a refused turn's
 * record (its prompt did not reach the model). Undefined when there is nothing newer.
 */
function projectNewerHistory(p: ProjectAssembledContextParams, b: ProjectionBuilder, binding: ThreadBinding, threadReason: string): ProjectionOutput | undefined {
  let lastOwn = -1;
  for (let index = p.origins.length - 1; index >= 0; index--) {
    if (p.origins[index]?.threadId === binding.threadId) {
      lastOwn = index;
      break;
    }
  }
  if (lastOwn < 0 || lastOwn >= p.history.length - 1) return undefined;
  const newer = p.history.slice(lastOwn + 1).filter(isNewerConversationMessage);
  const plan = newer.length > 0 ? continuityPlan(p, newer) : undefined;
  if (!plan) return undefined;
  return b.resumed("none", "newerHistory", binding, plan, { reset: false, ledgerAdd: plan.ledgerAdd }, 0, threadReason);
}

/** A message another writer added that the model should see: user, assistant or custom, not a refused turn's record. */
function isNewerConversationMessage(message: AgentMessage): boolean {
  const m = message as { role?: unknown; __openclaw?: { beforeAgentRunBlocked?: unknown } | undefined };
  if (m.role !== "user" && m.role !== "assistant" && m.role !== "custom") return false;
  return m.__openclaw?.beforeAgentRunBlocked === undefined;
}

/**
 * The newest of `messages` whose blocks fit {@link continuityBudgetChars} (whole blocks, newest kept, joined by blank
 * lines; older ones counted in {@link continuityOmittedNote}), as untrusted context entries. Undefined when nothing
 * renders.
 */
function continuityPlan(p: ProjectAssembledContextParams, messages: readonly AgentMessage[]): EntryPlan | undefined {
  const budget = continuityBudgetChars(p.tokenBudget, p.totalCapChars);
  const renderings = renderingMemo(p.partCapChars);
  let used = 0;
  let first = messages.length;
  for (let index = messages.length - 1; index >= 0; index--) {
    const rendered = renderedBlockOf(messages[index]!, p.partCapChars, renderings);
    if (rendered === undefined) {
      first = index;
      continue;
    }
    const next = used === 0 ? rendered.block.length : used + 2 + rendered.block.length;
    if (next > budget) break;
    used = next;
    first = index;
  }
  const units = renderUnits(messages.slice(first), p.partCapChars, renderings);
  if (units.length === 0) return undefined;
  const note = first > 0 ? [blockUnit(continuityOmittedNote(first))] : [];
  return planEntries([...note, ...units], new Set());
}
