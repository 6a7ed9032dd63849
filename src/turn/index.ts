/**
 * Runs one turn attempt: validates the parameters, builds the attempt's dependencies, binds the actors to the pure
 * turn statechart (machines/turn.machine.ts), and turns the machine's output into a {@link CodexTurnResult}. Every
 * lifecycle decision is in the statechart; this module only starts it and cleans up after it (the session lock is
 * released and the binding made durable when the machine reaches a final state, before the result is reported).
 */
import { toPromise, type AnyActorRef, type InspectionEvent } from "xstate";
import type { TurnMachineInput, TurnMachineOutput } from "../../machines/turn.contract.js";
import type { AgentMessage } from "../context-engine/types.js";
import { parseCodexTurnParams, parseSteerOptions, type CodexTurnParams, type CodexTurnResult, type TurnStreamEvent } from "../params.js";
import type { PromptImageInput } from "../codex/prompt-images.js";
import { createTurnActor } from "./bind.js";
import { backgroundWorkOf } from "./background.js";
import { createTurnDeps } from "./create-deps.js";
import type { TurnDeps } from "./deps.js";
import { createTurnEventStream, type TurnEventStream } from "./event-stream.js";
import { toTurnResult } from "./result.js";
import { startTurnTrajectory } from "../trajectory/index.js";

export { drainBackgroundWork } from "./background.js";
export type { CodexTurnParams, CodexTurnResult, TurnStreamEvent };

/** A running turn attempt. */
export interface CodexTurnHandle {
  /** The XState actor (subscribe to it, or inspect it). */
  readonly actor: AnyActorRef;
  result: Promise<CodexTurnResult>;
  /**
   * The turn's stream events (the ones `onEvent` gets), ending when the turn settles.
   *
   * @example
   * ```ts
   * for await (const event of handle.events) if (event.type === "agentMessageDelta") process.stdout.write(event.delta);
   * ```
   */
  readonly events: AsyncIterable<TurnStreamEvent>;
  /** Abort the attempt (before the turn: stops at once; during it: interrupts Codex; after it: skips maintenance). */
  abort(reason?: string): void;
  /** The agent hands control back (e.g. a `sessions_yield` tool): like abort, but the outcome is `yieldAborted`. */
  yield(): void;
  /**
   * Steer the running turn, optionally with images (checked here, as a turn's `images` are: a bad one throws
   * {@link CodexTurnParamsError} naming it). Texts Codex does not take come back in `result.followUps`, their images in
   * `result.followUpImages`.
   *
   * @example
   * ```ts
   * handle.steer("Also look at this one", { images: [{ path: "/data/second.png" }] });
   * ```
   */
  steer(text: string, options?: { images?: PromptImageInput[] | undefined }): void;
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
  const events = createTurnEventStream();
  const deps = createTurnDeps(parsed, events);
  const inspect = safeInspect(deps, parsed.inspect);
  const actor = createTurnActor(deps, { input: machineInput(deps), ...(inspect ? { inspect } : {}) });
  followTrace(actor, deps);
  // Every later durable write asserts the lock; this also stops the turn itself (its mirror then fails, typed).
  deps.lock.onLost = () => {
    deps.hostWarnings.push("the session lock was lost (another process took the session); the attempt was aborted and writes nothing more");
    deps.logger.warn({ ...deps.ids, event: "session lock lost" }, "session lock lost");
    actor.send({ type: "ABORT", reason: "lockCompromised" });
  };
  const onAbortSignal = () => actor.send({ type: "ABORT", reason: "signal" });
  const stopTrajectory = parsed.trajectory ? startTurnTrajectory(parsed.trajectory, deps.appServer, { sessionFile: parsed.sessionFile, prompt: parsed.prompt, engineId: deps.facts.id }) : undefined;
  const result = settle(actor, deps, events).finally(() => {
    parsed.signal?.removeEventListener("abort", onAbortSignal);
    stopTrajectory?.();
  });
  actor.start();
  if (parsed.signal?.aborted) onAbortSignal();
  else parsed.signal?.addEventListener("abort", onAbortSignal, { once: true });
  return {
    actor,
    result,
    events,
    abort: (reason?: string) => actor.send(reason === undefined ? { type: "ABORT" } : { type: "ABORT", reason }),
    yield: () => actor.send({ type: "YIELD" }),
    steer: (text: string, options?: { images?: PromptImageInput[] | undefined }) => {
      const images = options === undefined ? undefined : parseSteerOptions(options).images;
      actor.send(images && images.length > 0 ? { type: "STEER", text, images } : { type: "STEER", text });
    },
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

function machineInput(deps: TurnDeps): TurnMachineInput {
  const p = deps.params;
  const accordionEnabled = p.compaction?.enabled ?? deps.facts.ownsCompaction;
  return {
    sessionId: p.sessionId,
    sessionFile: p.sessionFile,
    prompt: p.prompt,
    engine: deps.facts,
    hadSessionFile: false,
    hasPromptHooks: deps.hooks.has("beforePromptBuild") || deps.hooks.has("beforeModelResolve"),
    hasAdmissionGate: deps.hooks.has("beforeAgentRun"),
    hasMessageWriteHooks: deps.hooks.has("beforeMessageWrite"),
    accordion: { enabled: accordionEnabled, contextThreshold: p.compaction?.contextThreshold ?? 0.9 },
    ...(p.sessionKey ? { sessionKey: p.sessionKey } : {}),
    ...(p.requestId !== undefined ? { requestId: p.requestId } : {}),
  };
}

/** An inspection observer that can never crash the host or the turn. */
function safeInspect(deps: TurnDeps, inspect: ((event: InspectionEvent) => void) | undefined) {
  if (!inspect) return undefined;
  let warned = false;
  return (event: InspectionEvent) => {
    try {
      inspect(event);
    } catch (error) {
      if (warned) return;
      warned = true;
      deps.hostWarnings.push(`inspect callback threw (${error instanceof Error ? error.message : String(error)}); ignored`);
    }
  };
}

/** Every lifecycle state entered goes to the display stream and the `onState` hook, in order. */
function followTrace(actor: AnyActorRef, deps: TurnDeps): void {
  let seen = 0;
  actor.subscribe({
    next: (snapshot: { context: { trace: string[] } }) => {
      const trace = snapshot.context.trace;
      for (; seen < trace.length; seen++) {
        deps.emit({ type: "state", state: trace[seen]! });
        deps.hooks.onState(trace[seen]!);
      }
    },
    error: () => undefined,
  });
}

/** What the hooks' `takeWarnings` reports (a plugin host's logged warnings); a failing one is a warning itself. */
function takeHookWarnings(deps: TurnDeps): string[] {
  const hooks = deps.params.hooks;
  if (typeof hooks?.takeWarnings !== "function") return [];
  try {
    const taken = hooks.takeWarnings();
    return Array.isArray(taken) ? taken.filter((w): w is string => typeof w === "string") : [];
  } catch (error) {
    return [`takeWarnings hook failed (${error instanceof Error ? error.message : String(error)}); ignored`];
  }
}

/** Wait for the final state, then make the binding durable, release the lock, fire `agentEnd`, end the stream. */
async function settle(actor: AnyActorRef, deps: TurnDeps, events: TurnEventStream): Promise<CodexTurnResult> {
  try {
    const output = (await toPromise(actor)) as TurnMachineOutput;
    // The history the turn was run on, for agentEnd (the machine's context holds it; no copy is made).
    const history = (actor.getSnapshot() as { context?: { history?: { messages?: readonly AgentMessage[] | undefined } | undefined } | undefined }).context?.history?.messages ?? [];
    await deps.binding.settle();
    const res = toTurnResult(output, backgroundWorkOf(deps), deps.hostWarnings, deps.ids.runId);
    // llmInput / llmOutput ran beside the turn; they end before agentEnd (their warnings join the result below).
    await deps.hooks.drain();
    await deps.hooks.observe("agentEnd", {
      ...deps.hookIds,
      ...(res.threadId ? { threadId: res.threadId } : {}),
      ...(res.turnId ? { turnId: res.turnId } : {}),
      status: res.status,
      ...(res.error ? { error: res.error } : {}),
      messages: res.messagesSnapshot,
      historyMessages: history,
      durationMs: Math.round(performance.now() - deps.startedAtMs),
    });
    res.warnings = [...res.warnings, ...deps.hostWarnings.slice(res.hostWarningCount)];
    for (const w of takeHookWarnings(deps)) if (!res.warnings.includes(w)) res.warnings.push(w);
    deps.logger.info(
      { ...deps.ids, event: "turn settled", status: res.status, threadId: res.threadId, turnId: res.turnId, warnings: res.warnings.length, followUps: res.followUps.length },
      "codex turn settled",
    );
    const { hostWarningCount: _, ...result } = res;
    return result;
  } finally {
    await deps.lock.handle?.release().catch((error: unknown) => {
      deps.logger.warn({ ...deps.ids, event: "session lock release failed", err: String((error as { code?: string | undefined })?.code ?? "unknown") }, "session lock release failed");
    });
    events.end();
  }
}
