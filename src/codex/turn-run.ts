/**
 * The state of one running turn in this client: notification buffering until `turn/start` is answered, the projector,
 * the steer batcher, the host callbacks of the turn, the warnings raised, and its two watchdogs:
 * - idle: no notification for `idleTimeoutMs` (off while a dynamic tool call runs; the call has its own bound);
 * - retry without progress: only Codex retry errors (`error` with willRetry) for `retryWithoutProgressMs`. Each retry
 *   notification would re-arm the idle timer, so without this a turn that cannot reach the model never ends.
 */
import type { CodexFileChange } from "./approvals.js";
import type { BeforeToolCallDecision } from "./dynamic-tools.js";
import type { PromptImage } from "./prompt-images.js";
import type { ResolvedStartTurnOptions } from "./options.js";
import type { IncomingNotification } from "./schemas.js";
import type { SteerBatcher } from "./steering.js";
import type { TurnProjector, TurnRecordCore, TurnRecordError } from "./turn-projector.js";
import { validateNotification } from "./rpc.js";
import type { CodexTurnWarning } from "./warnings.js";

/** A promise with its resolver. */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
}

/**
 * @example
 * ```ts
 * const d = deferred<number>(); setTimeout(() => d.resolve(1)); await d.promise;
 * ```
 */
export function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** How a turn ends when this client decides it (timeouts, exit, close). */
export interface RunOverride {
  codexStatus: TurnRecordCore["codexStatus"];
  error?: TurnRecordError | undefined;
}

/** Per-turn settings of a {@link TurnRun}. */
export interface TurnRunSettings {
  threadId: string;
  generation: number;
  originalPrompt: string;
  idleTimeoutMs: number;
  model: string | undefined;
  provider: string | undefined;
  options: ResolvedStartTurnOptions;
}

/**
 * One turn of this client, from `turn/start` to its record.
 *
 * @example
 * ```ts
 * const run = new TurnRun({ threadId, generation, originalPrompt, idleTimeoutMs, model, provider, options });
 * ```
 */
export class TurnRun {
  state: "starting" | "running" | "done" = "starting";
  turnId: string | undefined;
  projector: TurnProjector | undefined;
  readonly buffer: IncomingNotification[] = [];
  readonly completion = deferred<TurnRecordCore>();
  batcher: SteerBatcher | undefined;
  idleTimer: NodeJS.Timeout | undefined;
  retryTimer: NodeJS.Timeout | undefined;
  graceTimer: NodeJS.Timeout | undefined;
  /** The next try of an interrupt Codex refused (see `TurnRunner.retryInterrupt`). */
  interruptRetryTimer: NodeJS.Timeout | undefined;
  toolCallsInFlight = 0;
  /** Extra model passes `beforeFinalize` asked for in this turn (through the relay's Stop hook). */
  finalizeRevisions = 0;
  /** Approvals and user-input questions the host is deciding (the idle watchdog is off meanwhile). */
  hostDecisionsInFlight = 0;
  /**
   * Native commands and MCP tool calls running in this turn or a sub-agent it waits on (`thread:item` ids). Codex
   * sends nothing while it waits on one (observed: a `write_stdin` wait on a running command is silent up to its
   * `yield_time_ms`, which Codex allows up to `background_terminal_max_timeout`, 5 minutes by default), and bounds
   * them itself, so the idle watchdog is off meanwhile, as for a dynamic tool call.
   */
  readonly nativeToolsRunning = new Set<string>();
  /** Set once we decided how this turn ends (idle/retry timeout); turn/completed then only finishes it. */
  pendingOverride: { codexStatus: "timedOut"; error: TurnRecordError } | undefined;
  readonly acceptedAt = Date.now();
  readonly warnings: CodexTurnWarning[] = [];
  /** File changes of `fileChange` items seen in this turn, by item id (their approval requests do not carry them). */
  readonly fileChanges = new Map<string, CodexFileChange[]>();
  /**
   * `beforeToolCall`'s decision on each native call the relay asked about (by thread and call id), with the arguments
   * it was asked with: Codex's approval request for the same call uses it instead of asking again.
   */
  readonly nativeDecisions = new Map<string, Promise<{ decision: BeforeToolCallDecision; asked: unknown }>>();
  /** Host decisions (approvals, user input) waiting for an answer, by server request id: withdrawn when Codex no longer waits. */
  readonly hostDecisions = new Map<string | number, AbortController>();
  /** Image files steered into this turn, by path (the projector records a `localImage` Codex echoes with these bytes). */
  readonly sentImageFiles = new Map<string, PromptImage>();
  readonly threadId: string;
  readonly generation: number;
  readonly originalPrompt: string;
  readonly idleTimeoutMs: number;
  readonly model: string | undefined;
  readonly provider: string | undefined;
  readonly options: ResolvedStartTurnOptions;

  constructor(s: TurnRunSettings) {
    this.threadId = s.threadId;
    this.generation = s.generation;
    this.originalPrompt = s.originalPrompt;
    this.idleTimeoutMs = s.idleTimeoutMs;
    this.model = s.model;
    this.provider = s.provider;
    this.options = s.options;
  }

  /**
   * Record a tool call Codex asked this host to answer through a server request rather than an item (Codex 0.169
   * emits no item for `request_user_input`): the model saw the call and its output, so the turn's record holds them,
   * as a dynamic tool call would be. `output` undefined: the call started; else it ended with that output.
   */
  recordHostAnsweredTool(call: { itemId: string; tool: string; arguments: unknown }, output?: { text: string; success: boolean; durationMs: number }): void {
    if (this.state !== "running" || !this.projector || this.turnId === undefined) return;
    const item = {
      type: "dynamicToolCall",
      id: call.itemId,
      tool: call.tool,
      namespace: null,
      arguments: call.arguments,
      status: output ? (output.success ? "completed" : "failed") : "inProgress",
      contentItems: output ? [{ type: "inputText", text: output.text }] : null,
      success: output ? output.success : null,
      durationMs: output ? output.durationMs : null,
    };
    const check = validateNotification({ method: output ? "item/completed" : "item/started", params: { threadId: this.threadId, turnId: this.turnId, item } });
    if (check.kind === "ok") this.projector.apply(check.notification);
  }

  /** Codex no longer waits for these answers (it resolved the requests, or the turn ended): tell the deciders. */
  withdrawHostDecisions(requestId?: string | number): void {
    for (const [id, controller] of this.hostDecisions) {
      if (requestId !== undefined && id !== requestId) continue;
      this.hostDecisions.delete(id);
      controller.abort();
    }
  }

  /** Record a warning and tell the host (a throwing `onWarning` is ignored). */
  warn(w: Omit<CodexTurnWarning, "threadId" | "turnId">): void {
    const warning: CodexTurnWarning = { ...w, threadId: this.threadId, ...(this.turnId !== undefined ? { turnId: this.turnId } : {}) };
    this.warnings.push(warning);
    try {
      this.options.onWarning?.(warning);
    } catch {
      /* an observer never breaks the turn */
    }
  }

  clearTimers(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.graceTimer) clearTimeout(this.graceTimer);
    if (this.interruptRetryTimer) clearTimeout(this.interruptRetryTimer);
    this.idleTimer = this.retryTimer = this.graceTimer = this.interruptRetryTimer = undefined;
  }

  /** (Re)arm the idle watchdog; off while a tool call runs or the host decides a request, or once the end is decided. */
  armIdle(onIdle: () => void): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    // 0: the host asked for no bound.
    if (this.idleTimeoutMs === 0) return;
    if (this.state !== "running" || this.pendingOverride || this.toolCallsInFlight > 0 || this.hostDecisionsInFlight > 0 || this.nativeToolsRunning.size > 0) return;
    this.idleTimer = setTimeout(onIdle, this.idleTimeoutMs);
  }

  /** Follow the native commands and MCP tool calls of `threadId` (this turn's thread or a sub-agent's) as they start and end. */
  noteNativeTool(threadId: string, n: IncomingNotification): void {
    if (!n.consumed || (n.method !== "item/started" && n.method !== "item/completed")) return;
    const item = n.params.item as { type?: string | undefined; id?: string | undefined };
    if ((item.type !== "commandExecution" && item.type !== "mcpToolCall") || typeof item.id !== "string") return;
    const key = `${threadId}:${item.id}`;
    if (n.method === "item/started") this.nativeToolsRunning.add(key);
    else this.nativeToolsRunning.delete(key);
  }

  /**
   * Track retry-without-progress: a retry notification starts the watchdog (if not running); only real progress stops
   * it (see {@link isProgressNotification}). Partial output that is streamed again after each reconnect is not progress.
   */
  noteActivity(n: IncomingNotification, onStall: () => void): void {
    if (isRetryNotification(n)) {
      if (!this.retryTimer && !this.pendingOverride && this.state === "running" && this.options.retryWithoutProgressMs > 0) {
        this.retryTimer = setTimeout(onStall, this.options.retryWithoutProgressMs);
      }
      return;
    }
    if (!isProgressNotification(n)) return;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  /** Remember the changes of a `fileChange` item for its approval request. */
  noteFileChanges(n: IncomingNotification): void {
    if (!n.consumed || (n.method !== "item/started" && n.method !== "item/completed")) return;
    const item = n.params.item as { type?: string | undefined; id?: string | undefined; changes?: unknown };
    if (item.type !== "fileChange" || typeof item.id !== "string" || !Array.isArray(item.changes)) return;
    this.fileChanges.set(item.id, item.changes.map(toFileChange));
  }
}

function toFileChange(raw: unknown): CodexFileChange {
  const c = (raw ?? {}) as { path?: unknown; kind?: { type?: unknown; move_path?: unknown } | undefined; diff?: unknown };
  return {
    path: typeof c.path === "string" ? c.path : "",
    kind: typeof c.kind?.type === "string" ? c.kind.type : "update",
    ...(typeof c.diff === "string" ? { diff: c.diff } : {}),
    ...(typeof c.kind?.move_path === "string" ? { movePath: c.kind.move_path } : {}),
  };
}

/**
 * An `error` notification Codex sends while it retries (reconnecting to the model).
 *
 * @example
 * ```ts
 * if (isRetryNotification(n)) console.log("codex is retrying");
 * ```
 */
export function isRetryNotification(n: IncomingNotification): boolean {
  return n.method === "error" && (n.params as { willRetry?: boolean | undefined }).willRetry === true;
}

/**
 * Evidence that the model answered after a retry: a completed response (token usage is reported once per response)
 * or a completed item that is work, not streamed text (tool calls, commands, file changes).
 *
 * @example
 * ```ts
 * isProgressNotification(tokenUsageNotification); // true
 * ```
 */
export function isProgressNotification(n: IncomingNotification): boolean {
  if (n.method === "thread/tokenUsage/updated") return true;
  if (n.method !== "item/completed" || !n.consumed) return false;
  const type = (n.params.item as { type?: string | undefined }).type;
  return type !== "agentMessage" && type !== "reasoning" && type !== "userMessage";
}
