/**
 * Binds the real effects (mirror, context engine, projection, Codex app-server) to the pure turn statechart and runs
 * one turn attempt. Everything stateful about a session lives in files next to the session transcript, so any
 * process can run the next attempt.
 */
import { existsSync } from "node:fs";
import { createActor, fromCallback, fromPromise, toPromise, type AnyActorRef } from "xstate";
import type { Logger } from "pino";
import { turnMachine } from "../machines/turn.machine.js";
import type {
  AdditionalContextEntry,
  HistoryOutput,
  ProjectionOutput,
  RunTurnEmitted,
  RunTurnReceived,
  TurnMachineInput,
  TurnMachineOutput,
  TurnRecord,
} from "../machines/turn.contract.js";
import type { AgentMessage } from "./context-engine/types.js";
import { engineFacts, isLegacyEngine } from "./context-engine/contract.js";
import {
  callEngine,
  assembleHarnessContextEngine,
  bootstrapHarnessContextEngine,
  buildHarnessContextEngineRuntimeContext,
  finalizeHarnessContextEngineTurn,
  runHarnessContextEngineMaintenance,
} from "./context-engine/lifecycle.js";
import { fingerprintDynamicTools, fingerprintPolicy, projectAssembledContext } from "./projection/index.js";
import {
  applyBindingUpdate,
  markNativeCompaction as bindingAfterNativeCompaction,
  readThreadBinding,
  withLastUsage,
  writeThreadBinding,
  type ThreadBinding,
} from "./transcript/binding.js";
import { historyFromTranscript, openSessionFile, readSessionHistory, readSessionTranscript } from "./transcript/session-file.js";
import { mirrorTurnToTranscript } from "./transcript/mirror.js";
import { withSessionLock } from "./transcript/lock.js";
import { SessionFileError } from "./transcript/errors.js";
import { resolveSessionPath } from "./transcript/resolve.js";
import { completePendingFinalize, recordPendingFinalize } from "./transcript/pending.js";
import { evaluateAccordion, parseAccordionConfig, runAccordionCompaction } from "./compaction/accordion.js";
import type { CodexAppServer, CodexTurn } from "./codex/app-server.js";
import type { CodexTurnEvent } from "./codex/turn-projector.js";
import { silentLogger } from "./log/logger.js";
import { errorCode, errorLabel } from "./log/error-label.js";
import { finalizePendingTurns } from "./recovery.js";
import {
  parseCodexTurnParams,
  type CodexTurnParams,
  type CodexTurnResult,
  type TurnStreamEvent,
} from "./params.js";

export type { CodexTurnParams, CodexTurnResult, TurnStreamEvent };

/** A running turn attempt. */
export interface CodexTurnHandle {
  /** The XState actor (subscribe to it, or inspect it). Undefined until the session lock is held. */
  readonly actor: AnyActorRef | undefined;
  result: Promise<CodexTurnResult>;
  /** Abort the attempt (before the turn: stops at once; during it: interrupts Codex; after it: skips maintenance). */
  abort(reason?: string): void;
  /** The agent hands control back (e.g. a `sessions_yield` tool): like abort, but the outcome is `yieldAborted`. */
  yield(): void;
  /** Steer the running turn; texts Codex does not take come back in `result.followUps`. */
  steer(text: string): void;
}

type ParsedParams = ReturnType<typeof parseCodexTurnParams>;

/** Background maintenance still running, so a host can wait for it before exiting (see {@link drainBackgroundWork}). */
const backgroundWork = new Set<Promise<void>>();

/**
 * Wait for all background maintenance started by earlier turns.
 *
 * @example
 * ```ts
 * await runCodexTurn(params);
 * await drainBackgroundWork();
 * ```
 */
export async function drainBackgroundWork(): Promise<void> {
  while (backgroundWork.size > 0) await Promise.allSettled([...backgroundWork]);
}

function emptyResult(status: CodexTurnResult["status"]): CodexTurnResult {
  return {
    status,
    assistantText: "",
    messagesSnapshot: [],
    trace: [],
    engine: { bootstrap: "pending", assemble: "pending", finalize: "pending", maintenance: "pending" },
    nativeCompactions: [],
    followUps: [],
    warnings: [],
    backgroundMaintenance: Promise.resolve(),
  };
}

/**
 * Start one turn attempt and return a handle to steer, abort or yield it.
 *
 * @example
 * ```ts
 * const handle = startCodexTurn({ appServer, sessionId: "s1", sessionFile: "/data/s1.jsonl", prompt: "Hello" });
 * handle.steer("Be brief.");
 * const result = await handle.result;
 * ```
 */
export function startCodexTurn(params: CodexTurnParams): CodexTurnHandle {
  const parsed = parseCodexTurnParams(params);
  const logger = parsed.logger ?? silentLogger;
  const pending: Array<{ type: "ABORT"; reason?: string } | { type: "YIELD" } | { type: "STEER"; text: string }> = [];
  let actor: AnyActorRef | undefined;
  // An abort or yield that arrives while another attempt holds the session lock ends this attempt without waiting.
  const lockWait = new AbortController();
  let endedBeforeStart: "aborted" | "yieldAborted" | undefined;
  const send = (event: (typeof pending)[number]) => {
    if (actor) {
      actor.send(event);
      return;
    }
    pending.push(event);
    if (event.type !== "STEER") {
      endedBeforeStart ??= event.type === "YIELD" ? "yieldAborted" : "aborted";
      lockWait.abort();
    }
  };
  const onAbortSignal = () => send({ type: "ABORT", reason: "signal" });
  if (parsed.signal?.aborted) pending.push({ type: "ABORT", reason: "signal" });
  else parsed.signal?.addEventListener("abort", onAbortSignal, { once: true });

  const attempt = async (): Promise<CodexTurnResult> => {
    const startMachine = () => {
      const run = runTurnMachine(parsed, logger);
      actor = run.actor;
      for (const event of pending.splice(0)) actor.send(event);
      return run.result;
    };
    if (parsed.sessionRoot !== undefined) {
      try {
        await resolveSessionPath(parsed.sessionFile, parsed.sessionRoot);
      } catch (error) {
        // A path outside the session root: no lock (it would create directories there) and no recovery; the machine
        // fails at loadHistory with the typed code, writing nothing.
        if (error instanceof SessionFileError) return startMachine();
        throw error;
      }
    }
    try {
      return await withSessionLock(
        parsed.sessionFile,
        async () => {
          await finalizePendingTurns(parsed, logger);
          return startMachine();
        },
        { signal: lockWait.signal, logger },
      );
    } catch (error) {
      if (error instanceof SessionFileError && error.code === "SESSION_LOCK_ABORTED" && endedBeforeStart) {
        logger.info(
          { event: "turn settled", sessionId: parsed.sessionId, status: endedBeforeStart, waitingForLock: true },
          "codex turn ended while waiting for the session lock",
        );
        const res = emptyResult(endedBeforeStart);
        res.warnings = ["ended while waiting for the session lock; nothing ran"];
        return res;
      }
      throw error;
    }
  };
  const result = attempt().finally(() => parsed.signal?.removeEventListener("abort", onAbortSignal));

  return {
    get actor() {
      return actor;
    },
    result,
    abort: (reason?: string) => send(reason === undefined ? { type: "ABORT" } : { type: "ABORT", reason }),
    yield: () => send({ type: "YIELD" }),
    steer: (text: string) => send({ type: "STEER", text }),
  };
}

/**
 * Run one Codex turn through the full context-engine lifecycle and resolve with its result.
 *
 * @example
 * ```ts
 * const appServer = await CodexAppServer.spawn();
 * const result = await runCodexTurn({
 *   appServer, sessionId: "s1", sessionFile: "/data/s1.jsonl", prompt: "Summarize the plan",
 *   contextEngine: createWindowEngine({ tokenBudget: 8000 }), contextTokenBudget: 8000,
 * });
 * console.log(result.status, result.assistantText, result.trace);
 * ```
 */
export async function runCodexTurn(params: CodexTurnParams): Promise<CodexTurnResult> {
  return startCodexTurn(params).result;
}

interface TurnRun {
  actor: AnyActorRef;
  result: Promise<CodexTurnResult>;
}

function runTurnMachine(p: ParsedParams, logger: Logger): TurnRun {
  const appServer = p.appServer as CodexAppServer;
  const engine = p.contextEngine && !isLegacyEngine(p.contextEngine) ? p.contextEngine : undefined;
  const facts = engineFacts(p.contextEngine);
  const hadSessionFile = existsSync(p.sessionFile);
  const engineCallMs = p.timeouts?.engineCallMs ?? 60_000;
  const projectionMode = p.projection?.mode ?? "auto";
  const dynamicToolNames = new Set((p.dynamicTools ?? []).map((t) => t.name));
  const toolFingerprint = fingerprintDynamicTools(
    (p.dynamicTools ?? []).map(({ name, inputSchema }) => ({ name, inputSchema })),
  );
  const policyFingerprint = fingerprintPolicy({
    mode: projectionMode,
    divergenceTokens: p.projection?.divergenceTokens,
    partCapChars: p.projection?.partCapChars,
    totalCapChars: p.projection?.totalCapChars,
    model: p.model,
  });
  const accordion = parseAccordionConfig(p.compaction ?? {});
  const ids = { sessionId: p.sessionId, engineId: facts.id };
  const emit = (event: TurnStreamEvent) => {
    try {
      p.onEvent?.(event);
    } catch {
      // A display callback must never break the turn.
    }
  };

  // Host-side state the actors share (the machine context carries the serializable decisions).
  let binding: ThreadBinding | undefined;
  let projection: ProjectionOutput | undefined;
  let rotateRequested = false;
  let lastProjectionInput: { history: HistoryOutput; assembled: Parameters<typeof projectAssembledContext>[0]["assembled"] } | undefined;
  /** Set when the thread could not be resumed: the fresh thread needs the context projected for a fresh thread. */
  let reprojected: ProjectionOutput | undefined;
  let activeTurn: CodexTurn | undefined;
  let background: Promise<void> = Promise.resolve();
  /** Warnings from host-side work the machine does not model (the accordion runs inside `assemble`). */
  const hostWarnings: string[] = [];

  /** Entries in the file when the machine's history was last read (loadHistory, or bootstrap's re-read). */
  let historyEntryCount: number | undefined;
  /** Read the history the machine works from, noting how many entries the file held then. */
  const readHistory = async () => {
    const transcript = await readSessionTranscript(p.sessionFile, { sessionId: p.sessionId, sessionRoot: p.sessionRoot, logger });
    historyEntryCount = transcript.entries.length;
    return historyFromTranscript(transcript);
  };
  const rereadHistory = () => readSessionHistory(p.sessionFile, { sessionId: p.sessionId, sessionRoot: p.sessionRoot, logger });

  const project = (history: HistoryOutput, assembled: Parameters<typeof projectAssembledContext>[0]["assembled"]) =>
    projectAssembledContext({
      mode: projectionMode,
      prompt: p.prompt,
      history: history.messages,
      origins: history.origins,
      assembled,
      baseDeveloperInstructions: p.developerInstructions,
      binding: rotateRequested ? undefined : binding,
      fingerprints: { dynamicTools: toolFingerprint, engineId: facts.id, policy: policyFingerprint },
      tokenBudget: p.contextTokenBudget,
      divergenceTokens: p.projection?.divergenceTokens,
      partCapChars: p.projection?.partCapChars,
      totalCapChars: p.projection?.totalCapChars,
    });

  const machine = turnMachine.provide({
    delays: { interruptGrace: p.timeouts?.interruptGraceMs ?? 10_000 },
    actions: {
      logLifecycle: ({ context }, params) => {
        const { event, ...counts } = params as { event: string; [k: string]: unknown };
        logger.info(
          { ...ids, threadId: context.threadId, turnId: context.turnId, event, ...counts },
          `codex context engine ${event}`,
        );
      },
      scheduleBackgroundMaintenance: ({ context }) => {
        if (!engine) return;
        const work = runHarnessContextEngineMaintenance({
          engine,
          sessionId: p.sessionId,
          sessionKey: p.sessionKey,
          sessionFile: p.sessionFile,
          reason: "turn",
          background: true,
          runtimeContext: buildHarnessContextEngineRuntimeContext({ tokenBudget: p.contextTokenBudget, usage: context.record?.usage }),
          timeoutMs: engineCallMs,
        })
          .then(() => logger.info({ ...ids, event: "background maintenance completed" }, "background maintenance completed"))
          .catch((error: unknown) =>
            logger.warn({ ...ids, event: "background maintenance failed", err: errorLabel(error) }, "background maintenance failed"),
          );
        background = work;
        backgroundWork.add(work);
        void work.finally(() => backgroundWork.delete(work));
      },
    },
    actors: {
      readHistory: fromPromise(async () => {
        const [history, bound] = await Promise.all([readHistory(), readThreadBinding(p.sessionFile, logger)]);
        binding = bound;
        logger.info({ ...ids, event: "history loaded", messageCount: history.messages.length, hasBinding: Boolean(binding) }, "history loaded");
        return history;
      }),
      bootstrapEngine: fromPromise(async ({ signal }) => {
        const out = await bootstrapHarnessContextEngine({
          engine: engine!,
          sessionId: p.sessionId,
          sessionKey: p.sessionKey,
          sessionFile: p.sessionFile,
          readHistory,
          signal,
          timeoutMs: engineCallMs,
          runtimeContext: buildHarnessContextEngineRuntimeContext({ tokenBudget: p.contextTokenBudget, usage: undefined }),
        });
        return out;
      }),
      assembleContext: fromPromise(async ({ input, signal }) => {
        // Accordion cadence: compact in the engine before Codex's own lossy compaction point, then rotate threads.
        const decision = evaluateAccordion({
          lastUsage: binding?.lastUsage,
          config: accordion,
          engineOwnsCompaction: facts.ownsCompaction,
        });
        let messages = input.history.messages;
        if (decision.compact && engine) {
          const compacted = await runAccordionCompaction({
            engine,
            sessionId: p.sessionId,
            sessionKey: p.sessionKey,
            sessionFile: p.sessionFile,
            tokenBudget: p.contextTokenBudget,
            currentTokenCount: binding?.lastUsage?.inputTokens,
            config: accordion,
            timeoutMs: p.timeouts?.compactionMs,
            signal,
            logger,
          });
          if (compacted.compacted) {
            rotateRequested = true;
            messages = (await rereadHistory()).messages;
          } else if (compacted.reason === "compactFailed" || compacted.reason === "compactResultInvalid") {
            hostWarnings.push(`accordion compaction failed (${compacted.reason}); the turn runs on the uncompacted thread`);
          }
        }
        return assembleHarnessContextEngine({
          engine: engine!,
          sessionId: p.sessionId,
          sessionKey: p.sessionKey,
          messages,
          tokenBudget: p.contextTokenBudget,
          availableTools: dynamicToolNames,
          model: p.model,
          prompt: input.prompt,
          signal,
          timeoutMs: engineCallMs,
        });
      }),
      projectContext: fromPromise(async ({ input }) => {
        lastProjectionInput = { history: input.history, assembled: input.assembled };
        projection = project(input.history, input.assembled);
        logger.info(
          {
            ...ids,
            event: "projection decision",
            mode: projection.mode,
            reason: projection.reason,
            thread: projection.thread.action,
            entriesSent: projection.entriesSent,
            bytes: projection.bytes,
          },
          "codex context projection decision",
        );
        return projection;
      }),
      runPromptHooks: fromPromise(async ({ input, signal }) => {
        const hook = p.hooks?.beforePromptBuild;
        if (!hook) return { promptText: input.promptText, developerInstructions: input.developerInstructions };
        const out = await callEngine(
          "beforePromptBuild hook",
          async () =>
            hook({
              sessionId: p.sessionId,
              prompt: input.promptText,
              developerInstructions: input.developerInstructions,
              messages: input.history.messages,
            }),
          { timeoutMs: engineCallMs, signal },
        );
        return {
          promptText: out?.prompt ?? input.promptText,
          developerInstructions: out?.developerInstructions ?? input.developerInstructions,
        };
      }),
      startThread: fromPromise(async ({ input }) => {
        const common = {
          cwd: p.cwd,
          developerInstructions: input.developerInstructions,
          model: p.model,
          dynamicTools: p.dynamicTools?.map((t) => ({ ...t, handler: async (args: unknown) => String(await t.handler(args)) })),
        };
        if (input.plan.action === "resume" && input.plan.threadId) {
          try {
            // Developer instructions travel on every real resume (P4); a thread this process already holds with the
            // same settings needs no resume RPC.
            const resumed = await appServer.resumeThread({ threadId: input.plan.threadId, ...common, reuseLoaded: true });
            logger.info({ ...ids, event: "thread resumed", threadId: resumed.threadId, reusedLoaded: resumed.reused === true }, "codex thread resumed");
            return { threadId: resumed.threadId, resumed: true };
          } catch (error) {
            // A binding Codex no longer knows (new CODEX_HOME, deleted rollout): start fresh, re-projected for a new thread.
            logger.warn({ ...ids, event: "thread resume failed", err: errorLabel(error) }, "codex thread resume failed; starting fresh");
            binding = undefined;
            if (lastProjectionInput) {
              reprojected = project(lastProjectionInput.history, lastProjectionInput.assembled);
              projection = reprojected;
              logger.info(
                { ...ids, event: "projection decision", mode: reprojected.mode, reason: `${reprojected.reason}:resumeFailed`, thread: "start", entriesSent: reprojected.entriesSent, bytes: reprojected.bytes },
                "codex context projection decision",
              );
            }
          }
        }
        const started = await appServer.startThread(common);
        logger.info({ ...ids, event: "thread started", threadId: started.threadId }, "codex thread started");
        return { threadId: started.threadId, resumed: false };
      }),
      runTurn: fromCallback<RunTurnReceived, { threadId: string; promptText: string; originalPrompt: string; additionalContext?: Record<string, AdditionalContextEntry> }, RunTurnEmitted>(
        ({ input, sendBack, receive }) => {
          let stopped = false;
          const pendingSteers: string[] = [];
          let interruptRequested = false;
          receive((event) => {
            if (event.type === "TURN.STEER") {
              if (activeTurn) void steer(activeTurn, [event.text]);
              else pendingSteers.push(event.text);
            } else if (event.type === "TURN.INTERRUPT") {
              interruptRequested = true;
              if (activeTurn) void activeTurn.interrupt().catch(() => undefined);
            }
          });
          const steer = async (turn: CodexTurn, texts: string[]) => {
            for (const text of texts) {
              const outcome = await turn.steer(text);
              if (!outcome.accepted && !stopped) sendBack({ type: "TURN.STEER_REJECTED", texts: outcome.followUp });
            }
          };
          void (async () => {
            let turn: CodexTurn;
            try {
              turn = await appServer.startTurn({
                threadId: input.threadId,
                text: input.promptText,
                originalPrompt: input.originalPrompt,
                additionalContext: reprojected ? reprojected.additionalContext : input.additionalContext,
                model: p.model,
                steerQuietWindowMs: p.steerQuietWindowMs,
                idleTimeoutMs: p.timeouts?.turnIdleMs,
                onEvent: (event) => handleStreamEvent(event),
              });
            } catch (error) {
              if (!stopped) {
                sendBack({
                  type: "TURN.START_FAILED",
                  error: { phase: "turnRunning", message: errorName(error), code: errorCode(error) ?? "turnStartRejected" },
                });
              }
              return;
            }
            activeTurn = turn;
            persistAcceptedBinding(input.threadId, turn.turnId);
            if (!stopped) sendBack({ type: "TURN.ACCEPTED", turnId: turn.turnId });
            if (interruptRequested) void turn.interrupt().catch(() => undefined);
            if (pendingSteers.length > 0) void steer(turn, pendingSteers.splice(0));
            const record = await turn.completion;
            activeTurn = undefined;
            persistUsage(record);
            if (!stopped) sendBack({ type: "TURN.ENDED", record });
          })();

          let userMessageStarted = false;
          const handleStreamEvent = (event: CodexTurnEvent) => {
            switch (event.type) {
              case "agentMessageDelta":
                emit({ type: "agentMessageDelta", delta: event.delta });
                break;
              case "reasoningDelta":
                emit({ type: "reasoningDelta", delta: event.delta });
                break;
              case "itemStarted":
                if (event.item.kind === "userMessage") userMessageStarted = true;
                if (event.item.kind === "dynamicToolCall") emit({ type: "toolCall", tool: event.item.tool });
                break;
              case "compactionStarted":
              case "compactionCompleted": {
                const completed = event.type === "compactionCompleted";
                const compaction = { ...event.compaction, completed };
                emit({ type: "compaction", phase: completed ? "completed" : "started", itemId: compaction.itemId });
                const hookEvent = { ...compaction, sessionId: p.sessionId, backend: "codex-app-server" as const, trigger: "native" as const, ownsCompaction: facts.ownsCompaction };
                const hook = completed ? p.hooks?.afterCompaction : p.hooks?.beforeCompaction;
                void Promise.resolve()
                  .then(() => hook?.(hookEvent))
                  .catch(() => logger.warn({ ...ids, event: "compaction hook failed" }, "compaction hook failed"));
                // Native compaction is Codex's, never the engine's: logged and reported as its own backend.
                logger.info(
                  {
                    ...ids,
                    event: completed ? "codex native compaction completed" : "codex native compaction started",
                    backend: "codex-app-server",
                    ownsCompaction: facts.ownsCompaction,
                    threadId: compaction.threadId,
                    turnId: compaction.turnId,
                    itemId: compaction.itemId,
                  },
                  "codex native compaction",
                );
                if (completed) markNativeCompaction(compaction.threadId, userMessageStarted ? undefined : compaction.turnId);
                if (!stopped) sendBack({ type: "TURN.COMPACTION", compaction });
                break;
              }
              case "tokenUsage":
                emit({ type: "usage", totalTokens: event.usage.totalTokens });
                break;
              default:
                break;
            }
          };
          return () => {
            stopped = true;
          };
        },
      ),
      mirrorTranscript: fromPromise(async ({ input }) => {
        // The pending record goes first: a crash after the mirror write then still leaves a record, and recovery
        // finalizes only turns the mirror actually holds.
        await recordPendingFinalize(p.sessionFile, {
          threadId: input.record.threadId,
          turnId: input.record.turnId,
          prePromptMessageCount: projectionHistoryLength(),
          messageCount: input.record.messagesSnapshot.length,
          status: input.record.codexStatus,
          messages: input.record.messagesSnapshot,
        });
        const out = await mirrorTurnToTranscript({
          sessionFile: p.sessionFile,
          sessionId: p.sessionId,
          cwd: p.cwd,
          threadId: input.record.threadId,
          turnId: input.record.turnId,
          messages: input.record.messagesSnapshot,
          sessionRoot: p.sessionRoot,
          logger,
          locked: true,
        });
        logger.info(
          { ...ids, event: "mirror written", threadId: input.record.threadId, turnId: input.record.turnId, appended: out.appended, skipped: out.skipped },
          "transcript mirrored",
        );
        lastMirror = { turnId: input.record.turnId, appended: out.appended, lastEntryId: out.entryIds.at(-1) };
        return { appended: out.appended };
      }),
      finalizeEngine: fromPromise(async ({ input }) => {
        const { record } = input;
        // Prefer the re-read mirror (afterTurn expects the session snapshot); fall back to history + this turn.
        let messages: AgentMessage[] | undefined;
        let usedFallback = false;
        let source: "mirrorTail" | "reread" | "fallback" = "fallback";
        try {
          if (await mirrorIsTailOfHistory(record)) {
            // The file is exactly the history this turn was assembled from plus this turn (written as stored).
            messages = [...input.history.messages, ...(JSON.parse(JSON.stringify(record.messagesSnapshot)) as AgentMessage[])];
            source = "mirrorTail";
          } else {
            const reread = await rereadHistory();
            if (reread.origins.some((o) => o?.turnId === record.turnId)) {
              messages = reread.messages;
              source = "reread";
            }
          }
        } catch {
          messages = undefined;
        }
        logger.info({ ...ids, event: "finalize snapshot", turnId: record.turnId, source, messageCount: messages?.length }, "finalize snapshot");
        if (!messages) {
          usedFallback = true;
          messages = [...input.history.messages, ...record.messagesSnapshot];
          logger.warn({ ...ids, event: "finalize fallback", turnId: record.turnId }, "finalizing from history + this turn's snapshot");
        }
        if (!engine) {
          await completePendingFinalize(p.sessionFile, record.turnId).catch(() => undefined);
          return { mode: "skipped:noEngine" as const, usedFallback };
        }
        const mode = await finalizeHarnessContextEngineTurn({
          engine,
          sessionId: p.sessionId,
          sessionKey: p.sessionKey,
          sessionFile: p.sessionFile,
          messages,
          prePromptMessageCount: input.prePromptMessageCount,
          tokenBudget: p.contextTokenBudget,
          runtimeContext: buildHarnessContextEngineRuntimeContext({ tokenBudget: p.contextTokenBudget, usage: record.usage }),
          turnId: record.turnId,
          timeoutMs: engineCallMs,
        });
        await completePendingFinalize(p.sessionFile, record.turnId);
        return { mode, usedFallback };
      }),
      maintainEngine: fromPromise(async ({ input, signal }) => {
        const out = await runHarnessContextEngineMaintenance({
          engine: engine!,
          sessionId: p.sessionId,
          sessionKey: p.sessionKey,
          sessionFile: p.sessionFile,
          reason: "turn",
          background: false,
          runtimeContext: buildHarnessContextEngineRuntimeContext({ tokenBudget: p.contextTokenBudget, usage: input.record?.usage }),
          signal,
          timeoutMs: engineCallMs,
        });
        return { changed: Boolean(out?.changed) };
      }),
    },
  });

  let historyLength = 0;
  const projectionHistoryLength = () => historyLength;

  /** What the mirror actor wrote for the current turn. */
  let lastMirror: { turnId: string; appended: number; lastEntryId: string | undefined } | undefined;
  /**
   * Re-check the mirror against the file without re-parsing the whole transcript (which grows with the session): the
   * writer index reads only what was appended since it last looked. True when this attempt appended every message of
   * the turn in one write and that write is still the end of the file, so the session is the loaded history plus
   * this turn. Anything else (messages skipped as already present, a failed write, another writer) takes the full
   * re-read.
   */
  async function mirrorIsTailOfHistory(record: TurnRecord): Promise<boolean> {
    const m = lastMirror;
    if (!m || m.turnId !== record.turnId || m.lastEntryId === undefined || m.appended !== record.messagesSnapshot.length) return false;
    if (historyEntryCount === undefined) return false;
    const writer = await openSessionFile(p.sessionFile, { sessionId: p.sessionId, sessionRoot: p.sessionRoot, logger });
    return writer.lastEntryId === m.lastEntryId && writer.entryCount === historyEntryCount + m.appended;
  }

  /**
   * Binding writes run one after another, each writing the latest in-memory binding, so a slower earlier write can
   * never land after (and undo) a later one. They overlap with the Codex turn, the mirror and finalize; the result
   * is reported only after the queue drained and the binding on disk is durable.
   */
  let bindingWrites: Promise<void> = Promise.resolve();
  /** Whether the last binding write that succeeded was fsynced. */
  let bindingDurable = true;
  function persistBinding(durable = true): Promise<void> {
    bindingWrites = bindingWrites.then(async () => {
      if (!binding) return;
      try {
        await writeThreadBinding(p.sessionFile, binding, { durable });
        bindingDurable = durable;
      } catch (error) {
        logger.warn({ ...ids, event: "binding write failed", err: errorLabel(error) }, "thread binding write failed");
      }
    });
    return bindingWrites;
  }

  /**
   * Once Codex accepted the turn, the thread holds what we injected: persist the binding and ledger. Without fsync:
   * it runs during the Codex turn, where two fsyncs (journal commits) compete with Codex's own disk writes; the
   * measured effect is small (docs/benchmarks.md §3). It survives a crash of this process; the usage write at the
   * turn's end (or the settle step) makes it durable.
   */
  function persistAcceptedBinding(threadId: string, turnId: string): void {
    binding = applyBindingUpdate(binding, {
      threadId,
      turnId,
      update: projection?.bindingUpdate,
      dynamicToolsFingerprint: toolFingerprint,
      engineId: facts.id,
      policyFingerprint,
      projectionMode: projection?.mode ?? "none",
    });
    void persistBinding(false);
  }

  /**
   * Native compaction dropped injected context and earlier items: the next turn must re-send them (P3). A compaction
   * that completed before this turn's user message started is Codex's pre-turn compaction: everything this turn
   * brings (its messages and the context entries sent with it, injected after the compaction) is still held.
   */
  function markNativeCompaction(threadId: string, preTurnOf?: string): void {
    if (!binding || binding.threadId !== threadId) return;
    binding = bindingAfterNativeCompaction(binding, threadId);
    if (preTurnOf !== undefined) {
      const update = projection?.bindingUpdate as { ledgerAdd?: string[] } | undefined;
      binding = { ...binding, heldTurnIds: [preTurnOf], ledger: [...(update?.ledgerAdd ?? [])] };
    }
    void persistBinding();
  }

  function persistUsage(record: TurnRecord): void {
    if (!binding || !record.usage || binding.threadId !== record.threadId) return;
    binding = withLastUsage(binding, record.threadId, {
      inputTokens: record.usage.lastCallInputTokens ?? record.usage.inputTokens,
      totalTokens: record.usage.lastCallTotalTokens ?? record.usage.totalTokens,
      ...(record.usage.modelContextWindow ? { modelContextWindow: record.usage.modelContextWindow } : {}),
    });
    void persistBinding();
  }

  const input: TurnMachineInput = {
    sessionId: p.sessionId,
    sessionFile: p.sessionFile,
    prompt: p.prompt,
    engine: facts,
    hadSessionFile,
    hasPromptHooks: Boolean(p.hooks?.beforePromptBuild),
    ...(p.sessionKey ? { sessionKey: p.sessionKey } : {}),
  };
  const actor = createActor(machine, {
    input,
    inspect: p.inspect,
  });
  actor.subscribe({
    next: (snapshot) => {
      historyLength = snapshot.context.prePromptMessageCount;
    },
    error: () => undefined,
  });
  let lastTraceLength = 0;
  actor.subscribe((snapshot) => {
    const trace = snapshot.context.trace;
    for (; lastTraceLength < trace.length; lastTraceLength++) {
      const state = trace[lastTraceLength]!;
      emit({ type: "state", state });
      try {
        p.hooks?.onState?.(state);
      } catch {
        // observers never break the turn
      }
    }
  });
  const result = toPromise(actor).then(async (output) => {
    await bindingWrites;
    // The turn ended without a durable write after the accept-time one (no usage reported, or it failed early).
    if (!bindingDurable) await persistBinding(true);
    const res = toResult(output as TurnMachineOutput, background);
    if (hostWarnings.length > 0) res.warnings = [...hostWarnings, ...res.warnings];
    // The thread could not be resumed: what Codex received is the re-projection for the fresh thread.
    if (reprojected && res.projection) {
      res.projection = {
        mode: reprojected.mode,
        reason: `${reprojected.reason}:resumeFailed`,
        entriesSent: reprojected.entriesSent,
        bytes: reprojected.bytes,
      };
    }
    logger.info(
      { ...ids, event: "turn settled", status: res.status, threadId: res.threadId, turnId: res.turnId, warnings: res.warnings.length, followUps: res.followUps.length },
      "codex turn settled",
    );
    return res;
  });
  actor.start();
  return { actor, result };
}

function toResult(output: TurnMachineOutput, background: Promise<void>): CodexTurnResult {
  const res = emptyResult(output.status);
  res.trace = output.trace;
  res.engine = output.engine;
  res.warnings = output.warnings;
  res.followUps = output.followUps;
  res.backgroundMaintenance = background;
  if (output.threadId) res.threadId = output.threadId;
  if (output.turnId) res.turnId = output.turnId;
  if (output.error) res.error = output.error;
  if (output.projection) res.projection = output.projection;
  if (output.record) {
    res.assistantText = output.record.assistantText;
    res.messagesSnapshot = output.record.messagesSnapshot;
    res.nativeCompactions = output.record.compactions;
    if (output.record.usage) res.usage = output.record.usage;
    if (output.record.error && !res.error) {
      res.error = {
        phase: "turnRunning",
        message: output.record.error.message,
        ...((output.record.error.codexErrorInfo ?? output.record.error.code)
          ? { code: (output.record.error.codexErrorInfo ?? output.record.error.code)! }
          : {}),
      };
    }
  }
  return res;
}


function errorName(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

