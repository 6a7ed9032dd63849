/**
 * Running turns of one client: `turn/start` and acceptance, notification routing into each turn's projector, steering,
 * interrupts, the idle and retry watchdogs, and how a turn ends. One turn per thread at a time.
 */
import type { Logger } from "pino";
import type { AdditionalContextEntry } from "../../machines/turn.contract.js";
import { CodexAppServerError, invalidArgument } from "./errors.js";
import { contextImageInputs, promptImagesSchema, toImagePart, toUserInput, type ContextImage, type PromptImage, type PromptImageInput } from "./prompt-images.js";
import type { TurnInterruptParams } from "./protocol/v2/TurnInterruptParams.js";
import type { TurnStartParams } from "./protocol/v2/TurnStartParams.js";
import type { TurnSteerParams } from "./protocol/v2/TurnSteerParams.js";
import { turnStartResultSchema, turnSteerResultSchema, type IncomingNotification } from "./schemas.js";
import { SteerBatcher, type SteerItem, type SteerResult } from "./steering.js";
import { defined } from "./thread-params.js";
import { TurnProjector, type TurnRecordCore, type TurnRecordError } from "./turn-projector.js";
import type { RunOverride, TurnRun } from "./turn-run.js";
import type { CodexTurnWarning } from "./warnings.js";

/** How many levels of sub-agents {@link TurnRunner.runFor} looks through. */
const MAX_SUB_AGENT_DEPTH = 16;
/**
 * Sub-agent links and sub-agent turns kept at most (the least recently noted go first). Closed threads drop theirs at
 * once; this bounds what threads that are never closed leave behind in a long-lived app-server.
 */
export const MAX_SUB_AGENT_LINKS = 10_000;

/** Set `key` as the newest entry of `map`, dropping the oldest beyond {@link MAX_SUB_AGENT_LINKS}. */
function setBounded<K, V>(map: Map<K, V>, key: K, value: V): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > MAX_SUB_AGENT_LINKS) map.delete(map.keys().next().value as K);
}

/** How often an interrupt Codex refused is sent again while its turn runs (see `TurnRunner.requestInterrupt`). */
const INTERRUPT_RETRY_MS = 100;

/** A running turn. */
export interface CodexTurn {
  threadId: string;
  turnId: string;
  /**
   * Steer the running turn (batched, see {@link SteerBatcher}); texts Codex did not take come back as `followUp`, with
   * their `images`. `images` are checked as a prompt's are (a bad one rejects with INVALID_ARGUMENT naming it) and
   * recorded in the transcript's steer message as image parts.
   */
  steer(text: string, options?: { images?: readonly PromptImageInput[] | undefined }): Promise<SteerResult>;
  /** Ask Codex to interrupt; `completion` then resolves ("interrupted", or "timedOut" after `graceMs`). */
  interrupt(options?: { graceMs?: number | undefined }): Promise<void>;
  /** Resolves (never rejects) when the turn ended, however it ended. */
  completion: Promise<TurnRecordCore>;
  readonly done: boolean;
  /** Warnings raised so far (tool timeouts, non-string results, failed callbacks...); see `onWarning`. */
  readonly warnings: readonly CodexTurnWarning[];
}

/** What the runner needs from the client. */
export interface TurnRunnerDeps {
  logger: Logger;
  rpcRequest(method: "turn/start" | "turn/steer" | "turn/interrupt", params: unknown, timeoutMs?: number): Promise<unknown>;
  /** Generation of the live process, `undefined` when none is alive. */
  liveGeneration(): number | undefined;
  requestTimeoutMs: number;
  idleInterruptGraceMs: number;
}

/** Input of one `turn/start`. */
export interface TurnStartInput {
  text: string;
  /** Sent after the text, in order. */
  images?: readonly PromptImage[] | undefined;
  /** Sent before the text, each after its label (images of earlier messages in the context this turn sends). */
  contextImages?: readonly ContextImage[] | undefined;
  additionalContext?: Record<string, AdditionalContextEntry> | undefined;
  model?: string | undefined;
  effort?: string | undefined;
  sandboxPolicy?: TurnStartParams["sandboxPolicy"] | undefined;
  collaborationMode?: TurnStartParams["collaborationMode"] | undefined;
}

/**
 * @example
 * ```ts
 * const runner = new TurnRunner(deps);
 * const turn = await runner.start(run, { text: "hello" });
 * ```
 */
export class TurnRunner {
  private readonly runs = new Map<string, TurnRun>();
  /**
   * Sub-agent thread -> the thread that spawned or addressed it (from `collabAgentToolCall` items). A sub-agent works
   * for the turn that waits on it: its approvals and questions are that turn's, and its progress keeps that turn alive.
   */
  private readonly subAgentParents = new Map<string, string>();
  /**
   * Running turns of threads this client did not start (sub-agents), thread -> turn id, from their `turn/started` and
   * `turn/completed`: an interrupt of the turn they work for interrupts them too.
   */
  private readonly foreignTurns = new Map<string, string>();

  constructor(private readonly deps: TurnRunnerDeps) {}

  /** The turn of `threadId` that has not ended, if any. */
  active(threadId: string): TurnRun | undefined {
    const run = this.runs.get(threadId);
    return run && run.state !== "done" ? run : undefined;
  }

  /** The handle of `turnId` when it is the turn of `threadId` that has not ended (see `CodexAppServer.runningTurn`). */
  running(threadId: string, turnId: string): CodexTurn | undefined {
    const run = this.active(threadId);
    return run?.state === "running" && run.turnId === turnId ? this.handleFor(run, turnId) : undefined;
  }

  /**
   * The turn a server request of `threadId` belongs to: the thread's own running turn, else (for a sub-agent's thread)
   * the running turn of the nearest thread above it that has one. Undefined when none runs: the request then gets the
   * client-level answer (the raw approval handler, else decline).
   */
  runFor(threadId: string): TurnRun | undefined {
    let current: string | undefined = threadId;
    // Bounded: Codex limits sub-agent depth, and a cycle in a malformed stream must not loop.
    for (let depth = 0; current !== undefined && depth < MAX_SUB_AGENT_DEPTH; depth++) {
      const run = this.active(current);
      if (run) return run;
      current = this.subAgentParents.get(current);
    }
    return undefined;
  }

  /**
   * A thread was closed: its link to its parent goes, and so do its sub-agents' links to it (a later turn that
   * addresses them again names them in its own collab items, which links them anew).
   */
  forgetThread(threadId: string): void {
    this.subAgentParents.delete(threadId);
    this.foreignTurns.delete(threadId);
    for (const [child, parent] of this.subAgentParents) if (parent === threadId) this.subAgentParents.delete(child);
  }

  /**
   * The sub-agent threads below `threadId` (its sub-agents, theirs, ...) that run no turn now: released with it, since
   * Codex keeps a sub-agent's thread loaded after its parent is unloaded (observed with 0.169).
   */
  idleSubAgentsOf(threadId: string): string[] {
    const found: string[] = [];
    let level = [threadId];
    for (let depth = 0; level.length > 0 && depth < MAX_SUB_AGENT_DEPTH; depth++) {
      const parents = new Set(level);
      level = [];
      for (const [child, parent] of this.subAgentParents) {
        if (parents.has(parent) && child !== threadId && !found.includes(child)) {
          found.push(child);
          level.push(child);
        }
      }
    }
    return found.filter((t) => !this.foreignTurns.has(t) && !this.active(t));
  }

  /** How many sub-agent links and sub-agent turns are kept (for tests and stats). */
  subAgentCounts(): { links: number; turns: number } {
    return { links: this.subAgentParents.size, turns: this.foreignTurns.size };
  }

  activeCount(): number {
    return [...this.runs.values()].filter((r) => r.state !== "done").length;
  }

  /**
   * Send `turn/start` for `run` (registered first: notifications may arrive before the response, P11) and return the
   * handle once Codex accepted it. Rejects with TURN_START_REJECTED when Codex refused.
   */
  async start(run: TurnRun, input: TurnStartInput): Promise<CodexTurn> {
    this.runs.set(run.threadId, run);
    const params: TurnStartParams = defined({
      threadId: run.threadId,
      input: [
        ...contextImageInputs(input.contextImages ?? []),
        { type: "text" as const, text: input.text, text_elements: [] },
        ...(input.images ?? []).map(toUserInput),
      ],
      additionalContext: input.additionalContext,
      model: input.model,
      effort: input.effort,
      sandboxPolicy: input.sandboxPolicy,
      collaborationMode: input.collaborationMode,
    });
    let raw: unknown;
    try {
      raw = await this.deps.rpcRequest("turn/start", params);
    } catch (err) {
      this.drop(run);
      throw this.startError(run, err);
    }
    const res = turnStartResultSchema.safeParse(raw);
    if (!res.success) {
      this.drop(run);
      throw new CodexAppServerError("INVALID_RESPONSE", "turn/start returned no turn id", { method: "turn/start" });
    }
    this.accept(run, res.data.turn.id);
    return this.handleFor(run, res.data.turn.id);
  }

  private drop(run: TurnRun): void {
    if (this.runs.get(run.threadId) === run) this.runs.delete(run.threadId);
    run.state = "done";
  }

  private startError(run: TurnRun, err: unknown): unknown {
    if (!(err instanceof CodexAppServerError) || err.code !== "RPC_ERROR") return err;
    this.deps.logger.warn({ event: "codex.turn.rejected", threadId: run.threadId, rpcCode: err.rpcCode }, "turn/start rejected");
    return new CodexAppServerError("TURN_START_REJECTED", `codex rejected turn/start: ${err.rpcMessage ?? err.message}`, {
      method: "turn/start",
      ...(err.rpcCode !== undefined ? { rpcCode: err.rpcCode } : {}),
      ...(err.rpcMessage !== undefined ? { rpcMessage: err.rpcMessage } : {}),
      ...(err.stderrTail !== undefined ? { stderrTail: err.stderrTail } : {}),
      cause: err,
    });
  }

  private accept(run: TurnRun, turnId: string): void {
    run.turnId = turnId;
    run.state = "running";
    run.projector = new TurnProjector(
      defined({
        threadId: run.threadId,
        turnId,
        originalPrompt: run.originalPrompt,
        promptImages: run.options.images?.map(toImagePart),
        sentImageFiles: run.sentImageFiles,
        model: run.model,
        provider: run.provider,
        fallbackTimestamp: run.acceptedAt,
      }),
    );
    run.batcher = new SteerBatcher({
      quietWindowMs: run.options.steerQuietWindowMs,
      logger: this.deps.logger,
      send: (text, items) => this.sendSteer(run, text, items),
    });
    this.deps.logger.info({ event: "codex.turn.started", threadId: run.threadId, turnId }, "turn accepted");
    this.armIdle(run);
    for (const n of run.buffer.splice(0)) this.apply(run, n);
    // The process may have died between the response and now.
    if (this.deps.liveGeneration() !== run.generation) {
      this.finish(run, { codexStatus: "failed", error: { message: "codex app-server exited", code: "PROCESS_EXITED" } });
    }
  }

  private handleFor(run: TurnRun, turnId: string): CodexTurn {
    return {
      threadId: run.threadId,
      turnId,
      steer: (text: string, options?: { images?: readonly PromptImageInput[] | undefined }) => {
        if (typeof text !== "string" || text.length === 0) {
          return Promise.reject(new CodexAppServerError("INVALID_ARGUMENT", "steer text must be a non-empty string", { field: "text" }));
        }
        if (options?.images === undefined || options.images.length === 0) return run.batcher!.steer(text);
        const images = promptImagesSchema.safeParse(options.images);
        if (!images.success) {
          try {
            invalidArgument("steer", images.error.issues.map((i) => ({ ...i, path: ["images", ...i.path] })));
          } catch (error) {
            return Promise.reject(error);
          }
        }
        return run.batcher!.steer(text, images.data);
      },
      interrupt: (options) => this.interrupt(run, options?.graceMs ?? 10_000),
      completion: run.completion.promise,
      get done() {
        return run.state === "done";
      },
      get warnings() {
        return run.warnings;
      },
    };
  }

  private async sendSteer(run: TurnRun, text: string, items: readonly SteerItem[]): Promise<{ accepted: true } | { accepted: false; reason: string }> {
    if (run.state !== "running" || run.generation !== this.deps.liveGeneration()) return { accepted: false, reason: "turn ended" };
    // Text only: one text, the batch joined. With images: each steer's text followed by its images (OpenClaw's order);
    // files go as `localImage` (the model sees the path) and the projector records their bytes from here.
    const withImages = items.some((item) => item.images.length > 0);
    for (const item of items) for (const image of item.images) if (image.path !== undefined) run.sentImageFiles.set(image.path, image);
    const input: TurnSteerParams["input"] = withImages
      ? items.flatMap((item) => [{ type: "text" as const, text: item.text, text_elements: [] }, ...item.images.map(toUserInput)])
      : [{ type: "text", text, text_elements: [] }];
    const params: TurnSteerParams = { threadId: run.threadId, expectedTurnId: run.turnId!, input };
    try {
      const res = turnSteerResultSchema.safeParse(await this.deps.rpcRequest("turn/steer", params));
      if (res.success && res.data.turnId === run.turnId) {
        this.deps.logger.info({ event: "codex.turn.steered", threadId: run.threadId, turnId: run.turnId }, "steer accepted");
        return { accepted: true };
      }
      return { accepted: false, reason: "turn/steer answered for a different turn" };
    } catch (err) {
      const reason = err instanceof CodexAppServerError ? (err.rpcMessage ?? err.code) : String(err);
      this.deps.logger.info({ event: "codex.turn.steerRejected", threadId: run.threadId, turnId: run.turnId }, "steer not taken");
      return { accepted: false, reason };
    }
  }

  private async interrupt(run: TurnRun, graceMs: number): Promise<void> {
    if (run.state !== "running") return;
    this.interruptSubAgents(run);
    const taken = await this.requestInterrupt(run, "warn");
    if (run.state === "running" && !run.graceTimer) {
      run.graceTimer = setTimeout(() => {
        this.finish(run, { codexStatus: "timedOut", error: { message: `turn did not end within ${graceMs} ms of the interrupt`, code: "interruptTimeout" } });
      }, graceMs);
    }
    if (!taken) this.retryInterrupt(run);
  }

  /**
   * Send `turn/interrupt` for `run`; false when it failed. Codex (0.171.0) refuses it with "no active turn to interrupt"
   * for a moment after accepting a turn that starts right after the thread's previous one ended (39 runs of 40 in a
   * probe; the try 100 ms later was taken in all 40). Not sent again, that interrupt would be lost and the turn would run
   * to its end.
   */
  private async requestInterrupt(run: TurnRun, level: "warn" | "debug", timeoutMs?: number): Promise<boolean> {
    const params: TurnInterruptParams = { threadId: run.threadId, turnId: run.turnId! };
    try {
      await this.deps.rpcRequest("turn/interrupt", params, timeoutMs);
      return true;
    } catch (err) {
      const code = (err as CodexAppServerError).code;
      this.deps.logger[level]({ event: "codex.turn.interruptFailed", threadId: run.threadId, turnId: run.turnId, code }, "turn/interrupt failed");
      return false;
    }
  }

  /** Send a failed interrupt again every {@link INTERRUPT_RETRY_MS} until Codex takes it or the turn ends (the grace bounds it). */
  private retryInterrupt(run: TurnRun): void {
    if (run.state !== "running" || run.interruptRetryTimer) return;
    run.interruptRetryTimer = setTimeout(() => {
      run.interruptRetryTimer = undefined;
      if (run.state !== "running") return;
      void this.requestInterrupt(run, "debug").then((taken) => {
        if (!taken) this.retryInterrupt(run);
      });
    }, INTERRUPT_RETRY_MS);
  }

  /**
   * Interrupt the running turns of the sub-agents working for `run` (best effort, not awaited). Codex does not: an
   * interrupted parent leaves its sub-agents running, spending model calls and acting in the workspace after the host
   * stopped the turn.
   */
  private interruptSubAgents(run: TurnRun): void {
    for (const [threadId, turnId] of this.foreignTurns) {
      if (this.runFor(threadId) !== run) continue;
      const params: TurnInterruptParams = { threadId, turnId };
      this.deps.logger.info({ event: "codex.subAgent.interrupt", threadId, turnId, parentThreadId: run.threadId }, "interrupting a sub-agent of the turn");
      this.deps.rpcRequest("turn/interrupt", params).catch((err: unknown) => {
        const code = (err as CodexAppServerError).code;
        this.deps.logger.warn({ event: "codex.subAgent.interruptFailed", threadId, turnId, code }, "sub-agent turn/interrupt failed");
      });
    }
  }

  /** Re-arm the idle watchdog of `run` (called on every notification and around tool calls). */
  armIdle(run: TurnRun): void {
    run.armIdle(() => void this.endByWatchdog(run, { message: `no notification for ${run.idleTimeoutMs} ms; the turn was interrupted`, code: "idleTimeout" }));
  }

  /** A watchdog fired: interrupt (bounded), then end the turn as timedOut with `error` if Codex does not end it. */
  private async endByWatchdog(run: TurnRun, error: TurnRecordError): Promise<void> {
    if (run.state !== "running" || run.pendingOverride) return;
    run.pendingOverride = { codexStatus: "timedOut", error };
    const { threadId, turnId } = run;
    this.deps.logger.warn({ event: `codex.turn.${error.code}`, threadId, turnId }, "turn stalled; interrupting");
    this.interruptSubAgents(run);
    // Best effort, and not sent again: minutes into a turn, a refusal is not the moment after its start.
    await this.requestInterrupt(run, "debug", Math.min(5_000, this.deps.requestTimeoutMs));
    if (run.state !== "running") return;
    // Wait briefly for Codex to end the turn so the next turn/start does not land in it.
    run.graceTimer = setTimeout(() => this.finish(run, run.pendingOverride!), this.deps.idleInterruptGraceMs);
  }

  /**
   * Route a notification of `generation`'s process to the turn of its thread. A sub-agent's notification never enters
   * the parent's record (the parent's record holds its own sub-agent calls and their results); it counts as activity of
   * the parent turn waiting on it, and its file changes are kept for the approval requests the parent's host answers.
   */
  onNotification(threadId: string, generation: number, n: IncomingNotification): void {
    if (n.method === "serverRequest/resolved") return this.withdrawResolved(threadId, n.params);
    this.noteSubAgents(threadId, n);
    const run = this.runs.get(threadId);
    if (!run) {
      this.noteForeignTurn(threadId, n);
      return this.onSubAgentNotification(threadId, generation, n);
    }
    if (run.generation !== generation) return;
    if (run.state === "starting") run.buffer.push(n);
    else if (run.state === "running") this.apply(run, n);
  }

  /** Codex resolved a request it had sent (`serverRequest/resolved`): the host's pending decision on it is withdrawn. */
  private withdrawResolved(threadId: string, params: unknown): void {
    const requestId = (params as { requestId?: unknown } | null | undefined)?.requestId;
    if (typeof requestId !== "string" && typeof requestId !== "number") return;
    this.runFor(threadId)?.withdrawHostDecisions(requestId);
  }

  private onSubAgentNotification(threadId: string, generation: number, n: IncomingNotification): void {
    const parentRun = this.subAgentParents.has(threadId) ? this.runFor(threadId) : undefined;
    if (!parentRun || parentRun.generation !== generation || parentRun.state !== "running") return;
    parentRun.noteFileChanges(n);
    parentRun.noteNativeTool(threadId, n);
    this.armIdle(parentRun);
  }

  /** Track the running turn of a thread this client did not start (it may start before its spawn item arrives). */
  private noteForeignTurn(threadId: string, n: IncomingNotification): void {
    if (!n.consumed) return;
    if (n.method === "turn/started") setBounded(this.foreignTurns, threadId, n.params.turn.id);
    else if (n.method === "turn/completed" && this.foreignTurns.get(threadId) === n.params.turn.id) this.foreignTurns.delete(threadId);
  }

  /** Remember which threads a `collabAgentToolCall` item of `threadId` addressed (its sub-agents). */
  private noteSubAgents(threadId: string, n: IncomingNotification): void {
    if (!n.consumed || (n.method !== "item/started" && n.method !== "item/completed")) return;
    const item = n.params.item as { type?: string | undefined; receiverThreadIds?: unknown };
    if (item.type !== "collabAgentToolCall" || !Array.isArray(item.receiverThreadIds)) return;
    for (const child of item.receiverThreadIds) {
      if (typeof child === "string" && child !== threadId) setBounded(this.subAgentParents, child, threadId);
    }
  }

  private apply(run: TurnRun, n: IncomingNotification): void {
    const projector = run.projector!;
    if (!projector.matches(n)) return;
    run.noteFileChanges(n);
    run.noteNativeTool(run.threadId, n);
    run.noteActivity(n, () => {
      const error = { message: `codex retried for ${run.options.retryWithoutProgressMs} ms without progress; the turn was interrupted`, code: "retryWithoutProgress" };
      void this.endByWatchdog(run, error);
    });
    for (const e of projector.apply(n)) {
      if (e.type === "modelRerouted") {
        const { fromModel, toModel, reason } = e.reroute;
        run.warn({ code: "modelRerouted", message: `codex answered with ${toModel} instead of ${fromModel} (${reason})` });
        this.deps.logger.warn({ event: "codex.model.rerouted", threadId: run.threadId, turnId: run.turnId, fromModel, toModel, reason }, "codex rerouted the turn's model");
      } else if (e.type === "warning") {
        run.warn({ code: "codexWarning", message: e.message });
      }
      try {
        run.options.onEvent?.(e);
      } catch (err) {
        this.deps.logger.error({ event: "codex.onEventError", type: e.type, errName: err instanceof Error ? err.name : typeof err }, "onEvent callback threw");
      }
    }
    if (projector.completed) this.finish(run);
    else this.armIdle(run);
  }

  /** End `run` (idempotent): stop its timers and steering, resolve its completion with the projected record. */
  finish(run: TurnRun, override?: RunOverride): void {
    if (run.state === "done") return;
    const wasStarting = run.state === "starting";
    run.state = "done";
    run.clearTimers();
    // Codex resolves what it still asked of the host when a turn ends; nobody waits for those answers any more.
    run.withdrawHostDecisions();
    run.batcher?.close(override ? `turn ${override.codexStatus}` : "turn completed");
    if (this.runs.get(run.threadId) === run) this.runs.delete(run.threadId);
    if (wasStarting || !run.projector) return;
    const record = run.projector.finish(run.pendingOverride ?? override);
    this.deps.logger.info(
      {
        event: "codex.turn.completed",
        threadId: record.threadId,
        turnId: record.turnId,
        codexStatus: record.codexStatus,
        itemCount: record.items.length,
        messageCount: record.messagesSnapshot.length,
        compactions: record.compactions.length,
        warnings: run.warnings.length,
        errorCode: record.error?.code ?? record.error?.codexErrorInfo,
        durationMs: Date.now() - run.acceptedAt,
      },
      "turn ended",
    );
    run.completion.resolve(record);
  }

  /** End every running turn (of `generation`, or all) with `override`. */
  finishAll(override: RunOverride, generation?: number): void {
    for (const run of [...this.runs.values()]) {
      if (generation !== undefined && (run.generation !== generation || run.state !== "running")) continue;
      this.finish(run, override);
    }
  }
}
