/**
 * Boundary validation for context engines: the engine object's shape, and what its methods return. An engine is
 * third-party code, so its outputs are checked with zod before the turn relies on them.
 */
import { z } from "zod";
import type { EngineFacts } from "../../machines/turn.contract.js";
import type { AssembleResult, CompactResult, ContextEngine } from "./types.js";

/** An engine object that does not satisfy the contract; `member` names what is missing or wrong. */
export class ContextEngineContractError extends Error {
  readonly code = "ENGINE_CONTRACT_VIOLATION";
  constructor(
    readonly member: string,
    message: string,
  ) {
    super(`context engine does not satisfy the contract: ${member} ${message}`);
    this.name = "ContextEngineContractError";
  }
}

/** An engine method returned something malformed; the turn treats it as that method failing. */
export class EngineResultInvalidError extends Error {
  readonly code: string = "ENGINE_RESULT_INVALID";
  constructor(
    readonly method: string,
    readonly detail: string,
  ) {
    super(`context engine ${method}() returned an invalid result: ${detail}`);
    this.name = "EngineResultInvalidError";
  }
}

/**
 * `assemble()` returned something malformed (e.g. `messages` not an array of objects with a string `role`, or a
 * negative `estimatedTokens`). The machine treats it as an assemble failure: warn, and send the unassembled prompt.
 */
export class AssembleResultInvalidError extends EngineResultInvalidError {
  override readonly code: string = "ASSEMBLE_RESULT_INVALID";
  constructor(detail: string) {
    super("assemble", detail);
    this.name = "AssembleResultInvalidError";
  }
}

/**
 * `compact()` returned something malformed (e.g. `null`, `ok` not a boolean, or `result.tokensBefore` missing). The
 * compaction paths treat it as the engine's compaction failing: a warning, never a crash or a half-read result.
 */
export class CompactResultInvalidError extends EngineResultInvalidError {
  override readonly code: string = "COMPACT_RESULT_INVALID";
  constructor(detail: string) {
    super("compact", detail);
    this.name = "CompactResultInvalidError";
  }
}

const messageSchema = z.looseObject({ role: z.string().min(1) });

export const assembleResultSchema = z.looseObject({
  messages: z.array(messageSchema),
  estimatedTokens: z.number().finite().nonnegative(),
  systemPromptAddition: z.string().optional(),
  contextProjection: z
    .looseObject({
      mode: z.enum(["per_turn", "thread_bootstrap"]),
      epoch: z.string().optional(),
      fingerprint: z.string().optional(),
    })
    .optional(),
});

export const bootstrapResultSchema = z.looseObject({
  bootstrapped: z.boolean(),
  importedMessages: z.number().optional(),
  reason: z.string().optional(),
});

export const maintainResultSchema = z.looseObject({
  changed: z.boolean(),
  bytesFreed: z.number().optional(),
  rewrittenEntries: z.number().optional(),
  reason: z.string().optional(),
});

export const compactResultSchema = z.looseObject({
  ok: z.boolean(),
  compacted: z.boolean(),
  reason: z.string().optional(),
  result: z
    .looseObject({
      summary: z.string().optional(),
      firstKeptEntryId: z.string().optional(),
      tokensBefore: z.number(),
      tokensAfter: z.number().optional(),
    })
    .optional(),
});

export const ingestBatchResultSchema = z.looseObject({ ingestedCount: z.number() });
/** `commitTurn`'s result: `committed`, or `duplicate` (the key was already committed: success too). */
export const commitTurnResultSchema = z.looseObject({ status: z.enum(["committed", "duplicate"]) });

/**
 * Whether an engine takes durable turns (OpenClaw's `supportsContextEngineDurableTurnAdvancement` plus the fence it
 * requires): `info.transcriptSemantics` declares `currentTurnFence: "before-current-turn-entry-v1"` and
 * `turnAdvancementIdempotency: "atomic-idempotent-v1"`, and it implements `commitTurn`. An engine without all three is
 * finalized the legacy way (`afterTurn` / `ingestBatch` / `ingest`), as OpenClaw downgrades it.
 *
 * @example
 * ```ts
 * declaresDurableTurns({ info: { id: "e", name: "E", transcriptSemantics: { currentTurnFence: "before-current-turn-entry-v1",
 *   turnAdvancementIdempotency: "atomic-idempotent-v1" } }, commitTurn: async () => ({ status: "committed" }) }); // true
 * ```
 */
export function declaresDurableTurns(engine: Pick<ContextEngine, "info" | "commitTurn">): boolean {
  const semantics = engine.info.transcriptSemantics;
  return (
    semantics?.currentTurnFence === "before-current-turn-entry-v1" &&
    semantics.turnAdvancementIdempotency === "atomic-idempotent-v1" &&
    typeof engine.commitTurn === "function"
  );
}

/** Validate an engine method's result; throws {@link EngineResultInvalidError} naming the method and field. */
export function validateEngineResult<T>(method: string, schema: z.ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new EngineResultInvalidError(method, describeIssue(parsed.error.issues[0]));
  return parsed.data;
}

/** {@link assembleResultSchema} without the per-message walk (the caller checked the messages). */
const assembleEnvelopeSchema = assembleResultSchema.extend({ messages: z.any() });

/**
 * Whether every element is what `messageSchema` accepts: an object (not null, not an array) whose `role` is a
 * non-empty string. Indexed, so a hole in a sparse array fails it as it fails zod.
 */
function everyMessageHasRole(messages: readonly unknown[]): boolean {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (typeof m !== "object" || m === null || Array.isArray(m)) return false;
    const role = (m as { role?: unknown }).role;
    if (typeof role !== "string" || role.length === 0) return false;
  }
  return true;
}

/**
 * Validate an `assemble()` result; throws {@link AssembleResultInvalidError} naming the offending field.
 *
 * @example
 * ```ts
 * validateAssembleResult({ messages: [], estimatedTokens: 0 }); // ok
 * validateAssembleResult({ messages: "x", estimatedTokens: 0 }); // throws AssembleResultInvalidError ("messages: …")
 * ```
 */
export function validateAssembleResult(value: unknown): AssembleResult {
  // The common case without a zod walk of every message (zod copies each loose object: ~7 ms at 10,000 messages per
  // turn): every message passes the hand check below, which accepts exactly what messageSchema accepts, and the rest
  // of the result passes the schema. Anything else takes the full parse, so every rejection and its reason is zod's.
  const messages = (value as { messages?: unknown } | null | undefined)?.messages;
  if (Array.isArray(messages) && everyMessageHasRole(messages)) {
    const envelope = assembleEnvelopeSchema.safeParse(value);
    if (envelope.success) return { ...(envelope.data as unknown as AssembleResult), messages: messages as AssembleResult["messages"] };
  }
  const parsed = assembleResultSchema.safeParse(value);
  if (!parsed.success) throw new AssembleResultInvalidError(describeIssue(parsed.error.issues[0]));
  // The schema has no defaults or transforms, so the parsed copy equals the input; returning the engine's own
  // message objects keeps their identity, which lets the projection recognize history objects without serializing.
  const result = parsed.data as unknown as AssembleResult;
  return { ...result, messages: (value as AssembleResult).messages };
}

/**
 * Validate a `compact()` result with {@link compactResultSchema}; throws {@link CompactResultInvalidError} naming the
 * offending field.
 *
 * @example
 * ```ts
 * validateCompactResult({ ok: true, compacted: false }); // ok
 * validateCompactResult({ ok: "yes" }); // throws CompactResultInvalidError ("ok: …")
 * ```
 */
export function validateCompactResult(value: unknown): CompactResult {
  const parsed = compactResultSchema.safeParse(value);
  if (!parsed.success) throw new CompactResultInvalidError(describeIssue(parsed.error.issues[0]));
  return parsed.data as unknown as CompactResult;
}

function describeIssue(issue: z.core.$ZodIssue | undefined): string {
  const where = issue && issue.path.length > 0 ? issue.path.map(String).join(".") : "(result)";
  return `${where}: ${issue?.message ?? "invalid"}`;
}

const REQUIRED_METHODS = ["ingest", "assemble", "compact"] as const;
const OPTIONAL_METHODS = ["bootstrap", "maintain", "ingestBatch", "afterTurn", "commitTurn", "interceptCompaction", "dispose"] as const;

/**
 * Check that a value satisfies the context-engine contract (structurally, as OpenClaw does).
 *
 * @example
 * ```ts
 * const engine = assertContextEngine((await import(modulePath)).default);
 * ```
 */
export function assertContextEngine(value: unknown): ContextEngine {
  if (typeof value !== "object" || value === null) {
    throw new ContextEngineContractError("(engine)", `must be an object, got ${value === null ? "null" : typeof value}`);
  }
  const candidate = value as Record<string, unknown>;
  const info = candidate["info"] as Record<string, unknown> | undefined;
  if (typeof info !== "object" || info === null) throw new ContextEngineContractError("info", "is missing");
  if (typeof info["id"] !== "string" || info["id"].length === 0) {
    throw new ContextEngineContractError("info.id", "must be a non-empty string");
  }
  if (typeof info["name"] !== "string") throw new ContextEngineContractError("info.name", "must be a string");
  const intercepts = info["interceptsCompaction"];
  if (intercepts !== undefined && typeof intercepts !== "boolean") {
    throw new ContextEngineContractError("info.interceptsCompaction", `must be a boolean when present, got ${typeof intercepts}`);
  }
  // OpenClaw types this as a string ("background" | "inline" | string): any string is accepted, only "background"
  // defers maintenance, anything else runs it in the foreground.
  const mode = info["turnMaintenanceMode"];
  if (mode !== undefined && typeof mode !== "string") {
    throw new ContextEngineContractError("info.turnMaintenanceMode", `must be a string when present, got ${typeof mode}`);
  }
  const requirements = info["hostRequirements"];
  if (requirements !== undefined && (typeof requirements !== "object" || requirements === null || Array.isArray(requirements))) {
    throw new ContextEngineContractError("info.hostRequirements", "must be an object when present");
  }
  for (const name of REQUIRED_METHODS) {
    if (typeof candidate[name] !== "function") throw new ContextEngineContractError(name, "must be a function");
  }
  for (const name of OPTIONAL_METHODS) {
    if (candidate[name] !== undefined && typeof candidate[name] !== "function") {
      throw new ContextEngineContractError(name, "must be a function when present");
    }
  }
  return value as ContextEngine;
}

/**
 * No engine, or OpenClaw's `legacy` engine: the turn behaves exactly as without an engine.
 *
 * @example
 * ```ts
 * isLegacyEngine(undefined); // true
 * isLegacyEngine(createWindowEngine()); // false
 * ```
 */
export function isLegacyEngine(engine: ContextEngine | undefined): boolean {
  return !engine || engine.info.id === "legacy";
}

/**
 * The facts about an engine the turn machine's guards read.
 *
 * @example
 * ```ts
 * engineFacts(undefined).active; // false
 * ```
 */
export function engineFacts(engine: ContextEngine | undefined): EngineFacts {
  if (!engine || isLegacyEngine(engine)) {
    return {
      active: false,
      id: engine?.info.id ?? "legacy",
      hasBootstrap: false,
      hasMaintain: false,
      hasAfterTurn: false,
      hasIngestBatch: false,
      ownsCompaction: false,
      turnMaintenanceMode: "foreground",
    };
  }
  return {
    active: true,
    id: engine.info.id,
    hasBootstrap: typeof engine.bootstrap === "function",
    hasMaintain: typeof engine.maintain === "function",
    hasAfterTurn: typeof engine.afterTurn === "function",
    hasIngestBatch: typeof engine.ingestBatch === "function",
    ownsCompaction: engine.info.ownsCompaction === true,
    turnMaintenanceMode: engine.info.turnMaintenanceMode === "background" ? "background" : "foreground",
    durableTurns: declaresDurableTurns(engine),
  };
}
