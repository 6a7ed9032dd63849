import { z } from "zod";
import type { Logger } from "pino";
import type { InspectionEvent } from "xstate";
import type { ContextEngine } from "./context-engine/types.js";
import type { CodexTurnHooks } from "./hooks/types.js";
import type { DynamicToolContext } from "./codex/dynamic-tools.js";
import type { CodexTurnParams as HandWrittenParams, TurnStreamEvent } from "./turn-params.js";
import { workingDirectorySchema } from "./codex/options.js";
import { promptImagesSchema, type PromptImage } from "./codex/prompt-images.js";
import { accordionConfigSchema } from "./compaction/accordion.js";
import type { AgentMessage } from "./context-engine/types.js";
import type { TrajectoryWriter } from "./trajectory/index.js";
import type { SessionStore } from "./store/session-store.js";
import type {
  EngineOutcomes,
  TurnBlock,
  TurnError,
  TurnStatus,
  TurnUsage,
  ModelReroute,
  NativeCompactionRecord,
  GeneratedImage,
  NativeProjectionSummary,
} from "../machines/turn.contract.js";

/** Raised when `runCodexTurn`/`startCodexTurn` parameters are invalid; `field` names the offending parameter. */
export class CodexTurnParamsError extends Error {
  readonly code = "INVALID_TURN_PARAMS";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`invalid codex turn parameter \`${field}\`: ${message}`);
    this.name = "CodexTurnParamsError";
  }
}

const isFunction = (v: unknown): boolean => typeof v === "function";

/** Node timers fire at once for delays above 2^31-1 ms, so every timeout is capped there. */
export const MAX_TIMEOUT_MS = 2_147_483_647;
const timeoutMs = () => z.number().int().positive().max(MAX_TIMEOUT_MS, `must be at most ${MAX_TIMEOUT_MS} ms (Node's timer limit)`);
/** A bound the host may switch off with 0. */
const nonNegativeTimeoutMs = () => z.number().int().nonnegative().max(MAX_TIMEOUT_MS, `must be at most ${MAX_TIMEOUT_MS} ms (Node's timer limit)`);

/** A value whose property reads may throw (a getter): checked without letting the exception escape. */
function safely(check: () => boolean): boolean {
  try {
    return check();
  } catch {
    return false;
  }
}

/** An engine passes when it has the contract's shape (`assertContextEngine` gives the detailed reason later). */
function looksLikeEngine(v: unknown): boolean {
  return safely(() => {
    const e = v as Record<string, unknown>;
    const info = e.info as Record<string, unknown> | undefined;
    return (
      typeof e === "object" && e !== null && typeof info === "object" && info !== null && typeof info.id === "string" &&
      isFunction(e.ingest) && isFunction(e.assemble) && isFunction(e.compact)
    );
  });
}

/** A started `CodexAppServer` (duck-typed: the methods a turn calls). */
function looksLikeAppServer(v: unknown): boolean {
  return safely(() => {
    const a = v as Record<string, unknown>;
    return typeof a === "object" && a !== null && isFunction(a.startThread) && isFunction(a.resumeThread) && isFunction(a.startTurn);
  });
}

/** Projection settings (see docs/projection.md). */
export const projectionConfigSchema = z
  .object({
    mode: z.enum(["auto", "prompt", "delta", "threadBootstrap", "native"]).default("auto"),
    /** Rotate to a fresh thread when the engine dropped more than this many tokens the thread still holds. */
    divergenceTokens: z.number().int().positive().optional(),
    partCapChars: z.number().int().positive().optional(),
    totalCapChars: z.number().int().positive().optional(),
    /** Cached / uncached input price ratio the rotation policy weighs stale tokens with (docs/projection.md). */
    cachedPriceRatio: z.number().positive().max(1).optional(),
  })
  .strict();
export type { ProjectionConfig } from "./turn-params.js";

/** Bounds on the waiting the harness does (milliseconds). */
export const timeoutsSchema = z
  .object({
    /** Each engine call (bootstrap, assemble, afterTurn, maintain...). */
    engineCallMs: timeoutMs().default(60_000),
    /** Each engine compaction call of the accordion (`interceptCompaction`, `compact`): may summarize with a model. */
    compactionMs: timeoutMs().default(300_000),
    /** After an abort/yield during a running turn, how long to wait for Codex to end it. */
    interruptGraceMs: timeoutMs().default(10_000),
    /**
     * A running turn with no notification for this long (not counting tool calls and host decisions) is interrupted
     * and ends as timed out (`idleTimeout`): e.g. a model stream that stays open sending only keep-alives. Default: the
     * app-server's `turnIdleTimeoutMs` (120 s unless spawned otherwise); 0: no bound.
     */
    turnIdleMs: nonNegativeTimeoutMs().optional(),
    /** Each dynamic tool handler call; past it Codex gets a "timed out" tool result and the turn goes on. */
    toolCallMs: timeoutMs().optional(),
    /** Each host decision (`onApproval`, `onUserInput`); past it the request is denied / declined. */
    approvalMs: timeoutMs().optional(),
    /**
     * A turn whose only notifications are Codex's retries for this long is interrupted (`retryWithoutProgress`): e.g. a
     * provider answering 429 with a long `Retry-After`, or no credentials. Default 90 s; 0: no bound.
     */
    retryWithoutProgressMs: nonNegativeTimeoutMs().optional(),
  })
  .strict();

/** A client-side tool Codex may call during the turn (Codex `dynamicTools`). */
export const dynamicToolSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "tool names are 1-64 chars of [A-Za-z0-9_-]"),
    description: z.string(),
    inputSchema: z.record(z.string(), z.unknown()),
    handler: z.custom<(args: unknown, ctx: DynamicToolContext) => Promise<string> | string>(isFunction, "handler must be a function"),
  })
  .strict();


/** Parameters of one turn attempt. Validated with zod; a bad value rejects with {@link CodexTurnParamsError}. */
export const codexTurnParamsSchema = z
  .object({
    appServer: z.custom<object>(looksLikeAppServer, "appServer must be a started CodexAppServer (CodexAppServer.spawn())"),
    sessionId: z.string().min(1),
    sessionKey: z.string().min(1).optional(),
    /**
     * The run this attempt belongs to (OpenClaw's `runId`): every hook event and context of the attempt carries it, so a
     * plugin can pair `llm_input` with `llm_output`, tool calls and `agent_end`. A host that retries a run passes the
     * same id to each attempt; the default is a fresh UUID per attempt. Never sent to the model.
     */
    runId: z.string().min(1).max(200).optional(),
    /**
     * The host's id of this request (an idempotency key): recorded with the prompt's transcript entry and the in-flight
     * marker; a retry with an id the transcript already holds returns the recorded outcome without running Codex.
     */
    requestId: z
      .string({ error: "requestId must be a string" })
      .min(1, "requestId must not be empty")
      .max(200, "requestId must be at most 200 characters")
      .regex(/^[\x21-\x7e]+$/, "requestId must be printable ASCII without spaces (e.g. a UUID)")
      .optional(),
    /** The transcript; optional with `store` (then `store.sessionFile`, which it must equal when given). */
    sessionFile: z.string().min(1).optional(),
    /** Where the session is stored (default: the JSONL store of `sessionFile`). */
    store: z.custom<SessionStore>(looksLikeStore, "store must be a SessionStore (address, readHistory(), appendTurn(), acquireLock(), ...)").optional(),
    /** Session files must live under this directory when given. */
    sessionRoot: z.string().min(1).optional(),
    prompt: z.string().min(1, "prompt must not be empty"),
    /**
     * Images sent with the prompt, after its text: `{ path }` (an absolute path to a PNG, JPEG, GIF or WebP file; read
     * once, here) or `{ data, mimeType }` (base64, OpenClaw's image part). Checked before anything is written; the
     * transcript records them as image parts of the prompt message. The model must accept images (its catalog entry's
     * `inputModalities`), or Codex replaces each with a note saying it was omitted.
     */
    images: promptImagesSchema.optional(),
    contextEngine: z
      .custom<ContextEngine>(looksLikeEngine, "contextEngine must be a context engine: info.id, ingest(), assemble() and compact()")
      .optional(),
    contextTokenBudget: z.number().int().positive().optional(),
    /** OpenClaw's memory citation mode, handed to the engine's `assemble` as `citationsMode` (absent: not passed). */
    citationsMode: z.enum(["auto", "on", "off"]).optional(),
    model: z.string().min(1).optional(),
    cwd: workingDirectorySchema.optional(),
    developerInstructions: z.string().optional(),
    dynamicTools: z
      .array(dynamicToolSchema)
      .refine((tools) => new Set(tools.map((t) => t.name)).size === tools.length, "dynamic tool names must be unique")
      .optional(),
    hooks: z.custom<CodexTurnHooks>((v) => safely(() => typeof v === "object" && v !== null), "hooks must be an object of functions").optional(),
    /** Extra fields for every engine call's runtime context (e.g. `provider`, `model`, `llm` from a plugin host). */
    runtimeContext: z.record(z.string(), z.unknown()).optional(),
    /** Codex sandbox for the thread (re-sent on every resume). */
    sandbox: z.enum(["read-only", "workspace-write", "danger-full-access"]).optional(),
    /** Extra writable roots for `workspace-write`. */
    writableRoots: z.array(z.string().min(1).refine((p) => p.startsWith("/"), "writable roots must be absolute paths")).optional(),
    /** Network access inside `workspace-write`. */
    networkAccess: z.boolean().optional(),
    /** Codex approval policy: when Codex asks before running commands. */
    approvalPolicy: z.enum(["untrusted", "on-request", "never"]).optional(),
    reasoningEffort: z.enum(["none", "minimal", "low", "medium", "high", "xhigh"]).optional(),
    /**
     * Codex's collaboration mode for this turn: `"plan"` (Codex's Plan mode: its planning instructions and the
     * `request_user_input` tool, answered by `onUserInput`) or `"default"`. Absent: the thread's current mode.
     */
    collaborationMode: z.enum(["plan", "default"]).optional(),
    reasoningSummary: z.enum(["auto", "concise", "detailed", "none"]).optional(),
    serviceTier: z.string().min(1).optional(),
    /** Host decision on Codex approval requests (command, file change, permission); no callback: deny. */
    onApproval: z.custom<(request: unknown) => unknown>(isFunction, "onApproval must be a function").optional(),
    /** Host answers to Codex `request_user_input`; no callback: decline. */
    onUserInput: z.custom<(request: unknown) => unknown>(isFunction, "onUserInput must be a function").optional(),
    projection: projectionConfigSchema.optional(),
    /** Accordion cadence (validated here, so a bad value names `compaction.<key>` before any work starts). */
    compaction: accordionConfigSchema.optional(),
    timeouts: timeoutsSchema.optional(),
    steerQuietWindowMs: z.number().int().nonnegative().optional(),
    signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal, "signal must be an AbortSignal").optional(),
    logger: z.custom<Logger>((v) => typeof v === "object" && v !== null && isFunction((v as Logger).info)).optional(),
    inspect: z.custom<(event: InspectionEvent) => void>(isFunction, "inspect must be a function").optional(),
    /**
     * Record the attempt's app-server traffic as JSONL (Codex's notifications and every JSON-RPC message sent, content
     * redacted unless `full`): `{ file, full? }`, or a writer from `createTrajectoryWriter`. See src/trajectory/.
     */
    trajectory: z
      .union([
        z.object({ file: z.string().min(1), full: z.boolean().optional() }).strict(),
        z.custom<TrajectoryWriter>((v) => safely(() => isFunction((v as TrajectoryWriter).record) && isFunction((v as TrajectoryWriter).attach)), "trajectory must be { file, full? } or a trajectory writer"),
      ])
      .optional(),
    onEvent: z.custom<(event: TurnStreamEvent) => void>(isFunction, "onEvent must be a function").optional(),
  })
  .strict();

/** Parameters of `recoverCodexSession`: the session and the engine, no turn. */
export const recoverCodexSessionParamsSchema = codexTurnParamsSchema
  .pick({
    sessionId: true,
    sessionKey: true,
    sessionFile: true,
    store: true,
    sessionRoot: true,
    contextEngine: true,
    contextTokenBudget: true,
    cwd: true,
    timeouts: true,
    logger: true,
    runtimeContext: true,
  })
  .extend({
    // Optional here: with it, a turn an attempt left in flight is rebuilt from Codex's thread too.
    appServer: z.custom<object>(looksLikeAppServer, "appServer must be a started CodexAppServer (CodexAppServer.spawn())").optional(),
  })
  .strict();

/**
 * Parameters of `recoverCodexSession`: those of a turn for the session and the engine, and optionally `appServer`
 * (a turn an attempt left in flight is then rebuilt from Codex's thread; without it that turn is left for the next
 * turn, which has one).
 */
export type RecoverCodexSessionParams = Omit<z.input<typeof recoverCodexSessionParamsSchema>, "appServer"> & {
  appServer?: import("./codex/app-server.js").CodexAppServer | undefined;
};

/**
 * Parse recovery parameters; throws {@link CodexTurnParamsError} naming the first bad field.
 */
export function parseRecoverCodexSessionParams(params: unknown): WithSessionFile<z.output<typeof recoverCodexSessionParamsSchema>> {
  return withSessionFile(parseOrThrow(recoverCodexSessionParamsSchema, params));
}

/** Parse with `schema`; the first issue becomes a {@link CodexTurnParamsError} naming its field. */
function parseOrThrow<S extends z.ZodType>(schema: S, params: unknown): z.output<S> {
  if (typeof params !== "object" || params === null) throw new CodexTurnParamsError("(params)", "parameters must be an object");
  let parsed: z.ZodSafeParseResult<z.output<S>>;
  try {
    parsed = schema.safeParse(params) as z.ZodSafeParseResult<z.output<S>>;
  } catch (error) {
    // A getter that throws while zod reads it: name the field when we can find it.
    throw new CodexTurnParamsError(throwingField(params) ?? "(params)", `reading it threw: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue && issue.path.length > 0 ? issue.path.map(String).join(".") : "(params)";
    throw new CodexTurnParamsError(field, issue?.message ?? "invalid");
  }
  return parsed.data;
}

/** The first own property whose read throws (a throwing getter), if any. */
function throwingField(params: object): string | undefined {
  for (const key of Object.keys(params)) {
    try {
      void (params as Record<string, unknown>)[key];
    } catch {
      return key;
    }
  }
  return undefined;
}

export type { TurnStreamEvent } from "./turn-params.js";

/**
 * Parameters of `runCodexTurn` / `startCodexTurn`: the hand-written, documented interface (src/turn-params.ts),
 * which test/params/turn-params-types.test.ts keeps equal to what {@link codexTurnParamsSchema} accepts.
 */
export type CodexTurnParams = HandWrittenParams;

/** What {@link codexTurnParamsSchema} accepts, with the callbacks typed as the interface types them (for that test). */
export type SchemaTurnParams = Omit<z.input<typeof codexTurnParamsSchema>, "appServer" | "dynamicTools" | "onApproval" | "onUserInput"> & {
  appServer: import("./codex/app-server.js").CodexAppServer;
  onApproval?: import("./codex/approvals.js").ApprovalCallback | undefined;
  onUserInput?: import("./codex/options.js").UserInputCallback | undefined;
  dynamicTools?: Array<{
    name: string;
    description: string;
    inputSchema: Record<string, unknown>;
    handler: (args: unknown, ctx: DynamicToolContext) => Promise<string> | string;
  }> | undefined;
};

/** What one turn attempt produced. */
export interface CodexTurnResult {
  status: TurnStatus;
  /** The attempt's run id (`CodexTurnParams.runId`, or the UUID generated for it): what its hooks and log lines carry. */
  runId: string;
  threadId?: string | undefined;
  turnId?: string | undefined;
  assistantText: string;
  /**
   * This turn's messages (original user prompt first). Empty when the turn never started; for a `blocked` turn, the
   * redacted user message the transcript records instead of the prompt.
   */
  messagesSnapshot: AgentMessage[];
  usage?: TurnUsage | undefined;
  /**
   * Codex answered with another model than the turn asked for (`model/rerouted`, e.g. a fallback for high-risk cyber
   * activity): the assistant messages then carry `responseModel`, and a warning says so.
   */
  modelRerouted?: ModelReroute | undefined;
  /**
   * Images Codex generated and saved in this turn (`path` of each image-generation item, in order): deliver these
   * files as the reply's media, as OpenClaw does, even when `assistantText` is empty. Absent when there were none.
   */
  generatedImages?: GeneratedImage[] | undefined;
  /**
   * The plan Codex proposed in Plan mode (`collaborationMode: "plan"`): the model writes it in a `<proposed_plan>` block,
   * which Codex takes out of the reply, so it is not in `assistantText`. The transcript holds it as a `codex.plan`
   * custom message. Absent when the turn proposed none.
   */
  proposedPlan?: string | undefined;
  /** Lifecycle states in the order they were entered. */
  trace: string[];
  engine: EngineOutcomes;
  /** Native Codex compactions seen during the turn (never engine compactions). */
  nativeCompactions: NativeCompactionRecord[];
  /** Steer texts Codex did not take: run them as follow-up prompts. */
  followUps: string[];
  /**
   * The images of each follow-up: `followUpImages[i]` belongs to `followUps[i]` (empty when that steer had none). Pass
   * them as the follow-up turn's `images`.
   */
  followUpImages: PromptImage[][];
  warnings: string[];
  /**
   * What projection sent (counts, never content); `staleTokens`: what the thread holds that the engine dropped;
   * `native`: native mode's sync (decision, turns kept and reverted, items and bytes injected, whether it rotated).
   */
  projection?:
    | { mode: string; reason: string; entriesSent: number; bytes: number; staleTokens?: number | undefined; native?: NativeProjectionSummary | undefined }
    | undefined;
  error?: TurnError | undefined;
  /**
   * Status `blocked`: the `beforeAgentRun` gate refused the turn before any Codex work. `blockedBy` names who refused
   * (the gate's attribution; `beforeAgentRun` when the gate itself failed), `message` is the user-facing text.
   */
  blocked?: TurnBlock | undefined;
  /** Settles when background maintenance (turnMaintenanceMode "background") finished; resolved at once otherwise. */
  backgroundMaintenance: Promise<void>;
  /**
   * An earlier attempt died while Codex ran its turn, and this attempt first recovered that turn from Codex's thread:
   * it is in the transcript before this turn's prompt, and the engine finalized it. `codexStatus` is Codex's
   * (`interrupted` when the crash stopped the turn: the model may not have finished that work, and a host may want to
   * say so in the next prompt). Only present when a turn was recovered.
   */
  cutTurnRecovered?: { turnId: string; codexStatus: string; messages: number } | undefined;
  /**
   * With `requestId`: the id, and whether this result is the recorded outcome of an earlier attempt of the same request
   * (`replayed`: Codex did not run; `assistantText`, `messagesSnapshot` and `status` are what the transcript recorded).
   * `cut`: that attempt died while Codex ran the turn, which was recovered from Codex's thread (status `failed` with
   * error code `REQUEST_TURN_CUT` unless Codex had finished it).
   */
  request?: { id: string; replayed: boolean; cut?: boolean | undefined } | undefined;
}

/**
 * Parse turn parameters; throws {@link CodexTurnParamsError} naming the first bad field.
 */
export function parseCodexTurnParams(params: unknown): ParsedTurnParams {
  return withSessionFile(parseOrThrow(codexTurnParamsSchema, params));
}

/** Parsed parameters whose `sessionFile` is known: the one given, or the store's address. */
export type WithSessionFile<T extends { sessionFile?: string | undefined }> = Omit<T, "sessionFile"> & { sessionFile: string };

/**
 * `sessionFile` from `store` when only the store is given; both given must name the same session; neither is an
 * error naming `sessionFile`.
 */
function withSessionFile<T extends { sessionFile?: string | undefined; store?: SessionStore | undefined }>(parsed: T): WithSessionFile<T> {
  const { store, sessionFile } = parsed;
  if (store === undefined) {
    if (sessionFile === undefined) throw new CodexTurnParamsError("sessionFile", "sessionFile is required (or a store)");
    return parsed as WithSessionFile<T>;
  }
  if (sessionFile !== undefined && sessionFile !== store.sessionFile) {
    throw new CodexTurnParamsError("sessionFile", `sessionFile ${JSON.stringify(sessionFile)} names another session than the store (${JSON.stringify(store.sessionFile)}); give one of them, or the store's own`);
  }
  return { ...parsed, sessionFile: store.sessionFile };
}

/** A session store as the turn uses it (the methods the seam declares; checked at the boundary). */
function looksLikeStore(v: unknown): boolean {
  if (typeof v !== "object" || v === null) return false;
  const s = v as Record<string, unknown>;
  const methods = ["readHistory", "readVisibleEntries", "appendTurn", "appendMessage", "appendCompaction", "rewriteEntries", "readBinding", "writeBinding", "setAsideBinding", "recordPending", "markPendingIngested", "completePending", "listPending", "hasPending", "setAsidePending", "reset", "deleteSession", "acquireLock"];
  return typeof s.address === "string" && s.address.length > 0 && s.sessionFile === s.address && typeof s.sessionId === "string" && methods.every((m) => isFunction(s[m]));
}

const steerOptionsSchema = z.object({ images: promptImagesSchema.optional() }).strict();

/**
 * Check a steer's options (`images` as a turn's are: type by the first bytes, size, base64, readable absolute path);
 * a bad one throws {@link CodexTurnParamsError} naming it (`images.0.path`).
 *
 * @example
 * ```ts
 * parseSteerOptions({ images: [{ path: "/data/shot.png" }] }); // { images: [{ data, mimeType: "image/png", path }] }
 * ```
 */
export function parseSteerOptions(options: unknown): { images?: PromptImage[] | undefined } {
  return parseOrThrow(steerOptionsSchema, options);
}

/** Turn parameters after validation (defaults applied). */
export type ParsedTurnParams = WithSessionFile<z.output<typeof codexTurnParamsSchema>>;
