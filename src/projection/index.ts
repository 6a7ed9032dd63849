/**
 * Projection: turning the engine's assembled messages into what Codex receives (prompt text, additionalContext
 * entries, developer instructions) and deciding whether the turn resumes the bound thread or starts a fresh one.
 *
 * Codex stores every turn of a thread natively and replays it on each request (openclaw#84662), so re-sending the
 * assembled transcript every turn makes the model input grow without bound. The `delta` and `threadBootstrap` modes
 * send only what the thread does not already hold; `prompt` reproduces the first port's text format (the anchor).
 */
import type { AgentMessage } from "../context-engine/types.js";
import type {
  AdditionalContextEntry,
  AssembleOutput,
  HistoryOutput,
  ProjectionOutput,
  ThreadPlan,
} from "../../machines/turn.contract.js";
import type { BindingUpdate, ThreadBinding } from "../transcript/binding.js";
import {
  canonicalJson,
  dropTrailingPrompt,
  estimateTokens,
  messageHash,
  renderMessageBlock,
  renderPromptProjection,
  sha256Hex,
} from "./render.js";

export * from "./render.js";

export type ProjectionMode = "auto" | "prompt" | "delta" | "threadBootstrap";

/** Codex truncates each additionalContext value to ~1k tokens; stay safely under it. */
export const MAX_ENTRY_CHARS = 3_500;
/** Key prefix of our additionalContext entries (Codex uses the key verbatim as the XML tag). */
export const CONTEXT_KEY_PREFIX = "openclaw.context";

export interface ProjectionFingerprints {
  dynamicTools: string;
  engineId: string;
  policy: string;
}

export interface ProjectAssembledContextParams {
  mode: ProjectionMode;
  prompt: string;
  history: AgentMessage[];
  origins: HistoryOutput["origins"];
  /** Undefined when there is no engine, assemble failed, or it returned nothing. */
  assembled?: AssembleOutput;
  baseDeveloperInstructions?: string;
  binding?: ThreadBinding;
  fingerprints: ProjectionFingerprints;
  tokenBudget?: number;
  divergenceTokens?: number;
  partCapChars?: number;
  totalCapChars?: number;
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
  return sha256Hex(canonicalJson(normalized), 16);
}

/**
 * Fingerprint of the projection policy (mode, caps, divergence threshold, model...): a change rotates to a fresh
 * thread, because what the thread holds was projected under the old policy. Keys are sorted; undefined values are
 * ignored, so `{ a: 1, b: undefined }` and `{ a: 1 }` agree.
 *
 * @example
 * ```ts
 * fingerprintPolicy({ mode: "delta", partCapChars: 6000 });
 * ```
 */
export function fingerprintPolicy(policy: Record<string, unknown>): string {
  return sha256Hex(canonicalJson(policy), 16);
}

/**
 * Resume is possible only on a binding with a thread id made under the same dynamic tools, engine and policy.
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
    binding.policyFingerprint === fp.policy
  );
}

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
 * Split rendered blocks into additionalContext values under {@link MAX_ENTRY_CHARS} (Codex truncates each value to
 * ~1k tokens), packing consecutive blocks joined by a blank line and keeping order. Only a block longer than the cap
 * is cut, into consecutive pieces.
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
    const pieces: string[] = [];
    for (let i = 0; i < block.length; i += maxChars) pieces.push(block.slice(i, i + maxChars));
    for (const piece of pieces) {
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

/** Key of the entry that carries changed developer instructions into a resumed thread (sorts after context). */
export const DEVELOPER_UPDATE_KEY_PREFIX = "openclaw.developer";

/** Hash of developer instructions as recorded in the binding. */
export function developerInstructionsHash(text: string | undefined): string {
  return sha256Hex(text ?? "", 20);
}

/**
 * Codex applies `developerInstructions` only at thread start (thread/resume does not inject them, P4). When a resumed
 * thread holds older instructions than this turn's (e.g. a new systemPromptAddition), the new ones travel as an
 * `application` context entry, which Codex injects as a developer message.
 */
function withDeveloperUpdate(out: ProjectionOutput, binding: ThreadBinding | undefined, update: BindingUpdate): void {
  const hash = developerInstructionsHash(out.developerInstructions);
  update.developerInstructionsHash = hash;
  if (out.thread.action !== "resume" || !binding) return;
  const held = binding.developerInstructionsHash;
  if (held === undefined || held === hash || !out.developerInstructions) return;
  out.additionalContext = {
    ...(out.additionalContext ?? {}),
    [`${DEVELOPER_UPDATE_KEY_PREFIX}.${hash.slice(0, 10)}`]: { kind: "application", value: out.developerInstructions },
  };
  out.entriesSent += 1;
  out.bytes += Buffer.byteLength(out.developerInstructions, "utf8");
}

/**
 * The injection ledger records what this thread received as additionalContext, one unit per rendered message block
 * (not per entry value: chunk boundaries shift when the set of missing blocks changes, and hashing whole values would
 * then re-inject blocks the thread already holds). A unit is `<sha256-20 of the block>[#<n>]:<estimated tokens>`;
 * `#n` counts earlier identical blocks in the same view (two "ok" replies are two units), and the token estimate lets
 * divergence count injected blocks the engine has since dropped.
 *
 * Facts this relies on (notes/codex-app-server.md): after a cold `thread/resume` the next request carries the full
 * persisted history, earlier additionalContext items included (§4.4), so the ledger stays valid across processes;
 * only Codex's in-memory dedupe state and the developer instructions are lost (P3, P4), and the host re-sends the
 * developer instructions on every resume. A native compaction DOES drop every earlier additionalContext item and all
 * assistant output (§5.1, P3): the host then clears `ledger` and `heldTurnIds` (`markNativeCompaction` in
 * `transcript/binding.ts`) and the next projection re-sends what the engine still wants the model to see.
 *
 * @example
 * ```ts
 * ledgerUnit("[user]\nok");    // "<20 hex>:3"
 * ledgerUnit("[user]\nok", 1); // "<20 hex>#1:3" (the second identical block in the same view)
 * ```
 */
export function ledgerUnit(block: string, occurrence = 0): string {
  const id = occurrence === 0 ? sha256Hex(block, 20) : `${sha256Hex(block, 20)}#${occurrence}`;
  return `${id}:${estimateTokens(block)}`;
}

/** The hash part of a ledger unit (before `:`), which is what membership is decided on. */
export function ledgerUnitId(unit: string): string {
  const colon = unit.indexOf(":");
  return colon === -1 ? unit : unit.slice(0, colon);
}

function ledgerUnitTokens(unit: string): number {
  const colon = unit.indexOf(":");
  const n = colon === -1 ? 0 : Number(unit.slice(colon + 1));
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/** Hash of an entry value (kept for callers that address whole values). */
export function ledgerHash(value: string): string {
  return sha256Hex(value, 20);
}

/**
 * Content-addressed, order-preserving keys: Codex injects a turn's entries sorted by key, so the zero-padded position
 * comes first and the content hash second (`openclaw.context.007.3fa2c1d9e0`). The key is used verbatim as the XML
 * tag around the value. Same content at the same position gives the same key; a position only orders entries within
 * one turn (entries of later turns land after earlier turns' items anyway).
 *
 * @example
 * ```ts
 * contextEntryKey(7, "[user]\nhi"); // "openclaw.context.007.<10 hex>"
 * ```
 */
export function contextEntryKey(index: number, value: string): string {
  return `${CONTEXT_KEY_PREFIX}.${String(index).padStart(3, "0")}.${sha256Hex(value, 10)}`;
}

interface RenderedUnit {
  block: string;
  unit: string;
}

/** Render messages to blocks (empty bodies skipped) with their ledger units. */
function renderUnits(messages: readonly AgentMessage[], partCap?: number): RenderedUnit[] {
  const seen = new Map<string, number>();
  const units: RenderedUnit[] = [];
  for (const message of messages) {
    const block = renderMessageBlock(message, partCap);
    if (block === undefined) continue;
    const occurrence = seen.get(block) ?? 0;
    seen.set(block, occurrence + 1);
    units.push({ block, unit: ledgerUnit(block, occurrence) });
  }
  return units;
}

interface EntryPlan {
  additionalContext?: Record<string, AdditionalContextEntry>;
  ledgerAdd: string[];
  entriesSent: number;
  bytes: number;
}

function planEntries(units: readonly RenderedUnit[], injected: ReadonlySet<string>): EntryPlan {
  const fresh = units.filter((u) => !injected.has(ledgerUnitId(u.unit)));
  const values = chunkBlocks(fresh.map((u) => u.block));
  if (values.length === 0) return { ledgerAdd: [], entriesSent: 0, bytes: 0 };
  const additionalContext: Record<string, AdditionalContextEntry> = {};
  let bytes = 0;
  values.forEach((value, index) => {
    additionalContext[contextEntryKey(index, value)] = { kind: "application", value };
    bytes += Buffer.byteLength(value, "utf8");
  });
  return { additionalContext, ledgerAdd: fresh.map((u) => u.unit), entriesSent: values.length, bytes };
}

function resumeOrStart(binding: ThreadBinding | undefined, fp: ProjectionFingerprints, why: string): ThreadPlan {
  if (isBindingCompatible(binding, fp)) return { action: "resume", threadId: binding.threadId, reason: `${why}:compatibleBinding` };
  return { action: "start", reason: binding ? `${why}:incompatibleBinding` : `${why}:noBinding` };
}

/** Messages the bound thread holds natively: produced on it, in a turn not dropped by a native compaction since. */
export function heldMessageIndexes(origins: HistoryOutput["origins"], binding: ThreadBinding | undefined): Set<number> {
  const held = new Set<number>();
  if (!binding) return held;
  const turns = new Set(binding.heldTurnIds);
  origins.forEach((origin, index) => {
    if (origin && origin.threadId === binding.threadId && turns.has(origin.turnId)) held.add(index);
  });
  return held;
}

/** Default divergence threshold: 25% of the token budget, or 8,000 tokens without a budget. */
export function defaultDivergenceTokens(tokenBudget: number | undefined): number {
  return tokenBudget !== undefined ? Math.floor(tokenBudget * 0.25) : 8_000;
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
  return first ? `first:${messageHash(first).slice(0, 16)}` : "first:empty";
}

/**
 * What the bound thread lacks of the engine's view, and how far the thread has drifted from it.
 * `droppedTokens` estimates what the thread still shows the model although the engine dropped it: held messages no
 * longer in the view plus injected blocks no longer in the view.
 */
function deltaAgainstThread(
  p: ProjectAssembledContextParams,
  binding: ThreadBinding,
  context: readonly AgentMessage[],
): { plan: EntryPlan; droppedTokens: number } {
  // Message identity is its canonical JSON (what messageHash hashes; compared whole here, so nothing is hashed).
  // Serializing is most of a projection's cost and grows with the session, so object references decide first: an
  // engine that passes the history's own message objects through (the usual case, and what a long session's steady
  // state looks like: everything held, nothing to send) costs no serialization at all. Identities are computed, once
  // per object, only where references cannot decide.
  const identities = new Map<AgentMessage, string>();
  const identityOf = (message: AgentMessage): string => {
    let identity = identities.get(message);
    if (identity === undefined) {
      identity = canonicalJson(message);
      identities.set(message, identity);
    }
    return identity;
  };
  const heldObjects = new Set<AgentMessage>();
  for (const index of heldMessageIndexes(p.origins, binding)) {
    const message = p.history[index];
    if (message) heldObjects.add(message);
  }
  const viewObjects = new Set(context);
  let heldIdentities: Set<string> | undefined;
  let viewIdentities: Set<string> | undefined;
  const isHeld = (m: AgentMessage) => heldObjects.has(m) || (heldIdentities ??= new Set([...heldObjects].map(identityOf))).has(identityOf(m));
  const isInView = (m: AgentMessage) => viewObjects.has(m) || (viewIdentities ??= new Set(context.map(identityOf))).has(identityOf(m));
  // Held messages the view no longer shows, each distinct message counted once.
  const dropped = new Map<string, AgentMessage>();
  for (const message of heldObjects) {
    if (!isInView(message)) dropped.set(identityOf(message), message);
  }
  let droppedTokens = 0;
  for (const message of dropped.values()) droppedTokens += estimateTokens(renderMessageBlock(message, p.partCapChars) ?? "");
  const missing = context.filter((m) => !isHeld(m));
  const units = renderUnits(missing, p.partCapChars);
  // The view's ledger units matter only against a ledger (rendering the whole view is the other large cost).
  const viewUnitIds =
    binding.ledger.length === 0 ? new Set<string>() : new Set(renderUnits(context, p.partCapChars).map((u) => ledgerUnitId(u.unit)));
  const injected = new Set<string>();
  for (const unit of binding.ledger) {
    const id = ledgerUnitId(unit);
    injected.add(id);
    if (!viewUnitIds.has(id)) droppedTokens += ledgerUnitTokens(unit);
  }
  return { plan: planEntries(units, injected), droppedTokens };
}

/**
 * Decide what Codex receives for this turn. Pure and deterministic: identical inputs (in any object-key order) give
 * byte-identical output.
 *
 * - no assembled context (no engine, assemble failed, empty view): mode `none`, the raw prompt; resume a compatible
 *   binding, else start.
 * - `prompt`: the first-port text around the prompt, on the compatible bound thread (the anchor).
 * - `delta`: resume and send, as `application` entries, only blocks the thread neither holds natively nor received
 *   before; rotate to a fresh thread (everything as entries) when the engine dropped more than `divergenceTokens` of
 *   what the thread shows.
 * - `threadBootstrap`: same epoch on a compatible binding resumes (normally sending nothing but the prompt; after a
 *   native compaction cleared the ledger it restores the view on the same thread); a new epoch rotates to a fresh
 *   thread bootstrapped with the whole view.
 * - `auto`: `threadBootstrap` when the engine asks for it, else `delta`.
 *
 * @example
 * ```ts
 * const out = projectAssembledContext({ mode: "auto", prompt, history, origins, assembled, binding,
 *   fingerprints: { dynamicTools: "…", engineId: "window", policy: "…" } });
 * out.thread.action; // "resume" | "start"
 * ```
 */
export function projectAssembledContext(p: ProjectAssembledContextParams): ProjectionOutput {
  const out = projectWithoutDeveloperUpdate(p);
  const update = (out.bindingUpdate as BindingUpdate | undefined) ?? { reset: out.thread.action === "start", ledgerAdd: [] };
  withDeveloperUpdate(out, p.binding, update);
  out.bindingUpdate = update;
  return out;
}

function projectWithoutDeveloperUpdate(p: ProjectAssembledContextParams): ProjectionOutput {
  const fp = p.fingerprints;
  // systemPromptAddition goes only into developer instructions, never into the prompt text.
  const developerInstructions = composeDeveloperInstructions(p.baseDeveloperInstructions, p.assembled?.systemPromptAddition);
  const base = (mode: ProjectionOutput["mode"], reason: string, thread: ThreadPlan): ProjectionOutput => {
    const out: ProjectionOutput = {
      mode,
      reason,
      promptText: p.prompt,
      thread,
      entriesSent: 0,
      bytes: Buffer.byteLength(p.prompt, "utf8"),
    };
    if (developerInstructions !== undefined) out.developerInstructions = developerInstructions;
    return out;
  };
  const withPlan = (out: ProjectionOutput, plan: EntryPlan): ProjectionOutput => {
    if (plan.additionalContext) out.additionalContext = plan.additionalContext;
    out.entriesSent = plan.entriesSent;
    out.bytes += plan.bytes;
    return out;
  };

  const assembled = p.assembled && p.assembled.messages.length > 0 ? p.assembled : undefined;
  if (!assembled) {
    const out = base("none", "nothingAssembled", resumeOrStart(p.binding, fp, "none"));
    out.bindingUpdate = { reset: out.thread.action === "start", ledgerAdd: [] } satisfies BindingUpdate;
    return out;
  }

  const wantsBootstrap = assembled.contextProjection?.mode === "thread_bootstrap";
  const mode = p.mode === "auto" ? (wantsBootstrap ? "threadBootstrap" : "delta") : p.mode;
  // The current prompt is sent as the turn input: a trailing copy in the view would make the model see it twice.
  const context = dropTrailingPrompt(assembled.messages, p.prompt);

  if (mode === "prompt") {
    const rendered = renderPromptProjection(assembled.messages, p.prompt, p);
    const out = base("prompt", rendered.renderedMessages > 0 ? "perTurnText" : "nothingToRender", resumeOrStart(p.binding, fp, "prompt"));
    out.promptText = rendered.text;
    out.bytes = Buffer.byteLength(rendered.text, "utf8");
    out.entriesSent = rendered.renderedMessages;
    out.bindingUpdate = { reset: out.thread.action === "start", ledgerAdd: [] } satisfies BindingUpdate;
    return out;
  }

  const freshThread = (modeName: ProjectionOutput["mode"], reason: string, epoch?: string): ProjectionOutput => {
    const plan = planEntries(renderUnits(context, p.partCapChars), new Set());
    const out = withPlan(base(modeName, reason, { action: "start", reason }), plan);
    const update: BindingUpdate = { reset: true, ledgerAdd: plan.ledgerAdd };
    if (epoch !== undefined) update.projectionEpoch = epoch;
    out.bindingUpdate = update;
    return out;
  };

  if (mode === "threadBootstrap") {
    const epoch = projectionEpoch(assembled, context);
    if (!isBindingCompatible(p.binding, fp)) return freshThread("threadBootstrap", p.binding ? "incompatibleBinding" : "noBinding", epoch);
    if (p.binding.projectionEpoch === undefined) {
      // The bound thread was never bootstrapped (earlier turns had nothing assembled): it holds its own turns. When the
      // engine dropped none of them, adopt the epoch on this thread (sending what it lacks) instead of rotating.
      const { plan, droppedTokens } = deltaAgainstThread(p, p.binding, context);
      if (droppedTokens === 0) {
        const out = withPlan(base("threadBootstrap", "epochAdopted", { action: "resume", threadId: p.binding.threadId, reason: "epochAdopted" }), plan);
        out.bindingUpdate = { reset: false, ledgerAdd: plan.ledgerAdd, projectionEpoch: epoch } satisfies BindingUpdate;
        return out;
      }
    }
    if (p.binding.projectionEpoch !== epoch) return freshThread("threadBootstrap", "epochChanged", epoch);
    // Same epoch: the thread holds the bootstrap (ledger) and every later turn (held). The delta is empty unless a
    // native compaction cleared both, in which case the view is restored on the same thread.
    const { plan } = deltaAgainstThread(p, p.binding, context);
    const reason = plan.entriesSent > 0 ? "sameEpochRestore" : "sameEpoch";
    const out = withPlan(base("threadBootstrap", reason, { action: "resume", threadId: p.binding.threadId, reason }), plan);
    out.bindingUpdate = { reset: false, ledgerAdd: plan.ledgerAdd, projectionEpoch: epoch } satisfies BindingUpdate;
    return out;
  }

  // delta
  if (!isBindingCompatible(p.binding, fp)) return freshThread("delta", p.binding ? "incompatibleBinding" : "noBinding");
  const binding = p.binding;
  const { plan, droppedTokens } = deltaAgainstThread(p, binding, context);
  const threshold = p.divergenceTokens ?? defaultDivergenceTokens(p.tokenBudget);
  if (droppedTokens > threshold) return freshThread("delta", "divergence");
  const out = withPlan(
    base("delta", plan.entriesSent > 0 ? "newContext" : "threadHoldsContext", {
      action: "resume",
      threadId: binding.threadId,
      reason: "compatibleBinding",
    }),
    plan,
  );
  out.bindingUpdate = { reset: false, ledgerAdd: plan.ledgerAdd } satisfies BindingUpdate;
  return out;
}
