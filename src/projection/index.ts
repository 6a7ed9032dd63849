/**
 * Projection: turning the engine's assembled messages into what Codex receives (prompt text, additionalContext
 * entries, developer instructions) and deciding whether the turn resumes the bound thread or starts a fresh one.
 *
 * Codex stores every turn of a thread natively and replays it on each request (openclaw#84662), so re-sending the
 * assembled transcript every turn makes the model input grow without bound. The `delta` and `threadBootstrap` modes
 * send only what the thread does not already hold; `prompt` reproduces the first port byte for byte (the anchor).
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
 * Fingerprint of the dynamic tool catalog: specs without descriptions, keys sorted. Never includes context-engine
 * output, or every context change would force a new thread.
 *
 * @example
 * ```ts
 * fingerprintDynamicTools([{ name: "lookup", inputSchema: { type: "object" } }]);
 * ```
 */
export function fingerprintDynamicTools(specs: ReadonlyArray<{ name: string; inputSchema?: unknown }>): string {
  const normalized = [...specs]
    .map((s) => ({ name: s.name, inputSchema: s.inputSchema ?? null }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return sha256Hex(canonicalJson(normalized), 16);
}

/** Fingerprint of the projection policy (mode and caps): a change rotates to a fresh thread. */
export function fingerprintPolicy(policy: Record<string, unknown>): string {
  return sha256Hex(canonicalJson(policy), 16);
}

/** Resume is possible only on a binding made under the same tools, engine and policy. */
export function isBindingCompatible(binding: ThreadBinding | undefined, fp: ProjectionFingerprints): binding is ThreadBinding {
  return (
    binding !== undefined &&
    binding.threadId.length > 0 &&
    binding.dynamicToolsFingerprint === fp.dynamicTools &&
    binding.engineId === fp.engineId &&
    binding.policyFingerprint === fp.policy
  );
}

/** Developer instructions: base, then the engine's systemPromptAddition (trimmed) as the last section. */
export function composeDeveloperInstructions(base: string | undefined, addition: string | undefined): string | undefined {
  const extra = addition?.trim();
  if (!extra) return base;
  return base && base.length > 0 ? `${base}\n\n${extra}` : extra;
}

/**
 * Split rendered blocks into additionalContext values under {@link MAX_ENTRY_CHARS}, keeping order. A block longer
 * than the cap is cut into consecutive pieces.
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

/** Hash of an entry value, as recorded in the binding's injection ledger. */
export function ledgerHash(value: string): string {
  return sha256Hex(value, 20);
}

/**
 * Content-addressed, order-preserving keys: Codex injects entries sorted by key, so the zero-padded position comes
 * first and the content hash second (`openclaw.context.007.3fa2c1d9e0`). Same content at the same position, same key.
 */
export function contextEntryKey(index: number, value: string): string {
  return `${CONTEXT_KEY_PREFIX}.${String(index).padStart(3, "0")}.${sha256Hex(value, 10)}`;
}

interface EntryPlan {
  additionalContext?: Record<string, AdditionalContextEntry>;
  ledgerAdd: string[];
  entriesSent: number;
  bytes: number;
}

function planEntries(messages: readonly AgentMessage[], ledger: ReadonlySet<string>, partCap?: number): EntryPlan {
  const blocks = messages.map((m) => renderMessageBlock(m, partCap)).filter((b): b is string => b !== undefined);
  const values = chunkBlocks(blocks);
  const additionalContext: Record<string, AdditionalContextEntry> = {};
  const ledgerAdd: string[] = [];
  let bytes = 0;
  values.forEach((value, index) => {
    const hash = ledgerHash(value);
    if (ledger.has(hash)) return;
    additionalContext[contextEntryKey(index, value)] = { kind: "application", value };
    ledgerAdd.push(hash);
    bytes += Buffer.byteLength(value, "utf8");
  });
  const entriesSent = ledgerAdd.length;
  return entriesSent > 0 ? { additionalContext, ledgerAdd, entriesSent, bytes } : { ledgerAdd, entriesSent: 0, bytes: 0 };
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

/**
 * Decide what Codex receives for this turn. Pure and deterministic.
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

  const assembled = p.assembled && p.assembled.messages.length > 0 ? p.assembled : undefined;
  if (!assembled) {
    const out = base("none", "nothingAssembled", resumeOrStart(p.binding, fp, "none"));
    out.bindingUpdate = { reset: out.thread.action === "start", ledgerAdd: [] } satisfies BindingUpdate;
    return out;
  }

  const wantsBootstrap = assembled.contextProjection?.mode === "thread_bootstrap";
  const mode = p.mode === "auto" ? (wantsBootstrap ? "threadBootstrap" : "delta") : p.mode;
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
    const plan = planEntries(context, new Set(), p.partCapChars);
    const out = base(modeName, reason, { action: "start", reason });
    if (plan.additionalContext) out.additionalContext = plan.additionalContext;
    out.entriesSent = plan.entriesSent;
    out.bytes += plan.bytes;
    const update: BindingUpdate = { reset: true, ledgerAdd: plan.ledgerAdd };
    if (epoch !== undefined) update.projectionEpoch = epoch;
    out.bindingUpdate = update;
    return out;
  };

  if (mode === "threadBootstrap") {
    const epoch = assembled.contextProjection?.epoch ?? sha256Hex(canonicalJson(context), 16);
    if (isBindingCompatible(p.binding, fp) && p.binding.projectionEpoch === epoch) {
      const out = base("threadBootstrap", "sameEpoch", { action: "resume", threadId: p.binding.threadId, reason: "sameEpoch" });
      out.bindingUpdate = { reset: false, ledgerAdd: [], projectionEpoch: epoch } satisfies BindingUpdate;
      return out;
    }
    const why = !p.binding ? "noBinding" : !isBindingCompatible(p.binding, fp) ? "incompatibleBinding" : "epochChanged";
    return freshThread("threadBootstrap", why, epoch);
  }

  // delta
  if (!isBindingCompatible(p.binding, fp)) return freshThread("delta", p.binding ? "incompatibleBinding" : "noBinding");
  const binding = p.binding;
  const heldIndexes = heldMessageIndexes(p.origins, binding);
  const heldHashes = new Map<string, number>();
  for (const index of heldIndexes) {
    const message = p.history[index];
    if (message) heldHashes.set(messageHash(message), index);
  }
  const assembledHashes = new Set(context.map(messageHash));
  // Divergence: the engine dropped messages the thread still holds (the model would still see them).
  let droppedTokens = 0;
  for (const [hash, index] of heldHashes) {
    if (!assembledHashes.has(hash)) droppedTokens += estimateTokens(renderMessageBlock(p.history[index]!) ?? "");
  }
  const threshold = p.divergenceTokens ?? (p.tokenBudget !== undefined ? Math.floor(p.tokenBudget * 0.25) : 8_000);
  if (droppedTokens > threshold) return freshThread("delta", "divergence");

  const missing = context.filter((m) => !heldHashes.has(messageHash(m)));
  const plan = planEntries(missing, new Set(binding.ledger), p.partCapChars);
  const out = base("delta", plan.entriesSent > 0 ? "newContext" : "threadHoldsContext", {
    action: "resume",
    threadId: binding.threadId,
    reason: "compatibleBinding",
  });
  if (plan.additionalContext) out.additionalContext = plan.additionalContext;
  out.entriesSent = plan.entriesSent;
  out.bytes += plan.bytes;
  out.bindingUpdate = { reset: false, ledgerAdd: plan.ledgerAdd } satisfies BindingUpdate;
  return out;
}
