/**
 * The parameters of `runCodexTurn` / `startCodexTurn`, written out by hand so that an editor shows each one's
 * documentation (and no zod types). `codexTurnParamsSchema` (src/params.ts) validates them at runtime; a type-level
 * test (test/params/turn-params-types.test.ts) fails when the two drift apart. Reference: docs/parameters.md.
 */
import type { Logger } from "pino";
import type { InspectionEvent } from "xstate";
import type { CodexAppServer } from "./codex/app-server.js";
import type { ApprovalCallback } from "./codex/approvals.js";
import type { DynamicToolContext } from "./codex/dynamic-tools.js";
import type { UserInputCallback } from "./codex/options.js";
import type { PromptImageInput } from "./codex/prompt-images.js";
import type { ContextEngine } from "./context-engine/types.js";
import type { CodexTurnHooks } from "./hooks/types.js";
import type { TrajectoryWriter } from "./trajectory/index.js";
import type { SessionStore } from "./store/session-store.js";

/** Streaming events for live displays (deltas are text; a display may show them, the logger never does). */
export type TurnStreamEvent =
  | { type: "state"; state: string }
  | { type: "agentMessageDelta"; delta: string }
  | { type: "reasoningDelta"; delta: string }
  | { type: "toolCall"; tool: string }
  | { type: "compaction"; phase: "started" | "completed"; itemId: string }
  | { type: "usage"; totalTokens: number };

/**
 * What Codex receives and when the thread is resumed (docs/projection.md). A change to any field but
 * `cachedPriceRatio` starts a fresh thread.
 *
 * @example
 * ```ts
 * const projection: ProjectionConfig = { mode: "auto", divergenceTokens: 4_000 };
 * ```
 */
export interface ProjectionConfig {
  /**
   * `"auto"` (default: the native sync whenever the engine assembled a view), `"prompt"`, `"delta"`,
   * `"threadBootstrap"` or `"native"` (the engine's view becomes the Codex thread through `thread/revert` +
   * `thread/inject_items`; docs/projection.md, "Native mode").
   */
  mode?: "auto" | "prompt" | "delta" | "threadBootstrap" | "native" | undefined;
  /**
   * Stale tokens tolerated whatever the cost before a fresh thread; default 25% of `contextTokenBudget`, else 8000 (0
   * under the native sync: `"native"`, and `"auto"` with an engine view).
   */
  divergenceTokens?: number | undefined;
  /** Cap on one rendered part, characters; default 6000. */
  partCapChars?: number | undefined;
  /** Cap on the rendered context, characters; default 24000. */
  totalCapChars?: number | undefined;
  /** Cached / uncached input price, in (0, 1], that the rent-or-buy rotation weighs stale tokens with; default 0.1. */
  cachedPriceRatio?: number | undefined;
}

/**
 * The accordion's cadence (docs/compaction.md): compact in the engine before the turn when the last reported usage
 * reached `contextThreshold` of the context window. A bad value is a `CodexTurnParamsError` naming `compaction.<key>`.
 */
export interface CompactionCadence {
  /** Default: the engine's `info.ownsCompaction`. */
  enabled?: boolean | undefined;
  /** In (0, 1]; default 0.90. */
  contextThreshold?: number | undefined;
  /** The share of the window to compact down to, in [0.05, 1]; default 0.35. */
  compactionTargetFraction?: number | undefined;
}

/** Bounds on the waiting a turn does, milliseconds, each at most 2147483647 (Node's timer limit). */
export interface CodexTurnTimeouts {
  /** Each engine call and each hook (bootstrap, assemble, afterTurn, maintain...); default 60000. */
  engineCallMs?: number | undefined;
  /** Each accordion compaction call (`interceptCompaction`, `compact`); a timeout is a warning; default 300000. */
  compactionMs?: number | undefined;
  /** After an abort or yield during a running turn, how long to wait for Codex to end it; default 10000. */
  interruptGraceMs?: number | undefined;
  /**
   * A running turn with no notification for this long is interrupted and fails with code `idleTimeout` (the clock
   * stops while a tool runs or the host decides a request). Default bound, 0 = none.
   */
  turnIdleMs?: number | undefined;
  /** Each dynamic tool handler call; past it Codex gets a "timed out" tool result and the turn goes on; default 300000. */
  toolCallMs?: number | undefined;
  /** Each host decision (`onApproval`, `onUserInput`); past it the request is denied / declined; default 60000. */
  approvalMs?: number | undefined;
  /** A turn whose only notifications are Codex's retries for this long is interrupted (`retryWithoutProgress`). Default bound, 0 = none. */
  retryWithoutProgressMs?: number | undefined;
}

/** A client-side tool Codex may call during the turn (Codex `dynamicTools`). */
export interface CodexTurnTool {
  /** 1-64 characters of `[A-Za-z0-9_-]`, unique among the turn's tools. */
  name: string;
  description: string;
  /** JSON Schema of the arguments. Names and input schemas are fingerprinted: a change starts a fresh thread. */
  inputSchema: Record<string, unknown>;
  /** Returns the tool's result text; `ctx` says which call this is (thread, turn, call id, `signal`) and which session made it. */
  handler: (args: unknown, ctx: DynamicToolContext) => Promise<string> | string;
}

/**
 * Parameters of one turn attempt (`runCodexTurn`, `startCodexTurn`). Unknown keys are rejected; a bad value throws
 * `CodexTurnParamsError` whose `field` names it (synchronously from `startCodexTurn`, as a rejection from
 * `runCodexTurn`). Full reference: docs/parameters.md.
 *
 * @example
 * ```ts
 * const params: CodexTurnParams = {
 *   appServer,
 *   sessionId: "s1",
 *   sessionFile: "/data/sessions/s1.jsonl",
 *   prompt: "What changed since yesterday?",
 *   contextEngine: createWindowEngine({ tokenBudget: 16_000 }),
 *   contextTokenBudget: 16_000,
 * };
 * const result = await runCodexTurn(params);
 * ```
 */
export interface CodexTurnParams {
  /** A started `CodexAppServer` (`CodexAppServer.spawn()`, or `startOfflineCodex()`'s), shared by turns and sessions. */
  appServer: CodexAppServer;
  /** The session's id, passed to the engine. */
  sessionId: string;
  /** An extra session key passed to the engine (OpenClaw's `sessionKey`). */
  sessionKey?: string | undefined;
  /**
   * The run this attempt belongs to (OpenClaw's `runId`), on every hook event, log line and `result.runId`; pass the
   * same id to the retries of one run. Default: a fresh UUID. Never sent to the model.
   */
  runId?: string | undefined;
  /**
   * The host's id of this request (an idempotency key, 1-200 printable ASCII characters without spaces, e.g. a UUID):
   * recorded with the prompt's transcript entry and the in-flight marker. A retry with an id the transcript already
   * holds returns the recorded outcome (`assistantText`, `status`, `result.request.replayed: true`) without running
   * Codex; one whose turn a crash cut short says so (`result.request.cut`, error code `REQUEST_TURN_CUT` unless Codex
   * had finished it). Never sent to the model.
   */
  requestId?: string | undefined;
  /**
   * The pi session JSONL (v3) transcript, created on the first turn. Sidecars beside it: `<file>.codex-binding.json`,
   * `<file>.codex-pending.json`, `<file>.lock` (docs/storage.md). Optional with `store` (it is then the store's
   * `sessionFile`, which it must equal when given); required without.
   */
  sessionFile?: string | undefined;
  /**
   * Where the session is stored: any `SessionStore` (docs/storage.md). Everything the turn persists (history, mirror,
   * binding, pending record, lock, recovery) goes through it, and engines and hooks get its `sessionFile` (its
   * address). Default: the JSONL store of `sessionFile` (`createJsonlSessionStore`).
   */
  store?: SessionStore | undefined;
  /** When given, the transcript must resolve (symlinks and `..` included) under this directory (`SESSION_OUTSIDE_ROOT`). */
  sessionRoot?: string | undefined;
  /** The user's request, mirrored as typed (never the projected text). */
  prompt: string;
  /**
   * Images sent after the prompt text: `{ path }` (an absolute path to a PNG, JPEG, GIF or WebP file, read once) or
   * `{ data, mimeType }` (base64). The model must accept images, or Codex replaces each with a note.
   */
  images?: PromptImageInput[] | undefined;
  /** The context engine; none: a plain Codex turn. */
  contextEngine?: ContextEngine | undefined;
  /** `tokenBudget` for the engine's calls; also sets the default `projection.divergenceTokens`. */
  contextTokenBudget?: number | undefined;
  /** The model for the thread and the turn; default Codex's configured model (a resumed thread keeps its last one). */
  model?: string | undefined;
  /** The thread's working directory: an absolute path of an existing directory. Default: the app-server's. */
  cwd?: string | undefined;
  /** Base developer instructions; the engine's `systemPromptAddition` is appended after a blank line. */
  developerInstructions?: string | undefined;
  /** Client-side tools Codex may call. */
  dynamicTools?: CodexTurnTool[] | undefined;
  /** The turn's hooks (OpenClaw's plugin hooks: gates, prompt rewrites, tool guards, observers); each is bounded. */
  hooks?: CodexTurnHooks | undefined;
  /** Extra fields for every engine call's runtime context (e.g. `provider`, `model`, `llm` from `loadContextEngine`). */
  runtimeContext?: Record<string, unknown> | undefined;
  /** OpenClaw's memory citation mode, handed to the engine's `assemble` as `citationsMode`; absent: not passed. */
  citationsMode?: "auto" | "on" | "off" | undefined;
  /** Codex's sandbox for the thread, re-sent on every resume; default `"read-only"` (docs/codex-work.md). */
  sandbox?: "read-only" | "workspace-write" | "danger-full-access" | undefined;
  /** Extra writable roots (absolute paths) for `"workspace-write"`. */
  writableRoots?: string[] | undefined;
  /** Network access inside `"workspace-write"`; default off. */
  networkAccess?: boolean | undefined;
  /** When Codex asks before running commands (requests go to `onApproval`); default `"never"`. */
  approvalPolicy?: "untrusted" | "on-request" | "never" | undefined;
  /** Reasoning effort; default Codex's configured. */
  reasoningEffort?: "none" | "minimal" | "low" | "medium" | "high" | "xhigh" | undefined;
  /** Codex's collaboration mode for this turn: `"plan"` (Plan mode, questions to `onUserInput`) or `"default"`. */
  collaborationMode?: "plan" | "default" | undefined;
  /** Reasoning summaries; default Codex's configured. */
  reasoningSummary?: "auto" | "concise" | "detailed" | "none" | undefined;
  /** Service tier; default Codex's configured. */
  serviceTier?: string | undefined;
  /** Decides Codex's command, file-change and permission requests (the turn's and its sub-agents'); none: deny. */
  onApproval?: ApprovalCallback | undefined;
  /** Answers Codex's `request_user_input` (Plan mode); none: decline. */
  onUserInput?: UserInputCallback | undefined;
  /** What Codex receives and when the thread is resumed. */
  projection?: ProjectionConfig | undefined;
  /** The accordion's cadence. */
  compaction?: CompactionCadence | undefined;
  /** Bounds on the waiting the turn does. */
  timeouts?: CodexTurnTimeouts | undefined;
  /** Steer texts arriving within this window (ms) are batched into one `turn/steer`; default 50. */
  steerQuietWindowMs?: number | undefined;
  /** Aborting it aborts the turn (as `handle.abort()`). */
  signal?: AbortSignal | undefined;
  /** A pino logger: structured logs without content (`createLogger()` adds redaction); default silent. */
  logger?: Logger | undefined;
  /**
   * Record the attempt's app-server traffic as JSONL: Codex's notifications and every JSON-RPC message sent, content
   * redacted unless `full`. `{ file, full? }`, or a writer from `createTrajectoryWriter`.
   */
  trajectory?: { file: string; full?: boolean | undefined } | TrajectoryWriter | undefined;
  /** An XState inspection observer of the turn actor; one that throws is ignored with a warning. */
  inspect?: ((event: InspectionEvent) => void) | undefined;
  /** The display stream (the same events `handle.events` yields); a throwing callback is ignored. */
  onEvent?: ((event: TurnStreamEvent) => void) | undefined;
}
