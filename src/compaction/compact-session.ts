/**
 * Explicit compaction of a Codex-backed session (`/compact` or a plugin's budget request): binds the real effects
 * to the pure compaction statechart (`machines/compaction.machine.ts`) and runs it.
 *
 * The host depends only on the small interfaces declared here ({@link NativeCompactor}, {@link BindingStore},
 * {@link CompactionMaintenanceRunner}), so the Codex client, the thread-binding sidecar and the engine lifecycle
 * helpers can be wired in by the caller.
 */
import { z } from "zod";
import type { InspectionEvent } from "xstate";
import type { CodexTurnHooks, CompactionHookEvent } from "../hooks/types.js";
import { callEngine } from "../context-engine/lifecycle.js";
import type { Logger } from "pino";
import { createActor, fromPromise, toPromise } from "xstate";
import { compactionMachine, type MarkBindingInput } from "../../machines/compaction.machine.js";
import type {
  BindingFacts,
  BindingUsage,
  CompactionEngineFacts,
  CompactionMachineInput,
  CompactionOutput,
  CompactionTrigger,
  NativeCompactOutput,
} from "../../machines/compaction.rules.js";
import { validateCompactResult } from "../context-engine/contract.js";
import type { AgentMessage, ContextEngine, ContextEngineRuntimeContext } from "../context-engine/types.js";
import { markNativeCompaction, type ThreadBinding } from "../transcript/binding.js";
import { silentLogger } from "../log/logger.js";
import { readSessionHistory } from "../transcript/reader.js";
import { CompactionError, firstIssue } from "./errors.js";

export type { CompactionOutput, CompactionTrigger, NativeCompactOutput, MarkBindingInput };

/** Codex native compaction (`thread/compact/start` until its `contextCompaction` item completes). */
export interface NativeCompactor {
  compactThread(p: { threadId: string; timeoutMs: number }): Promise<NativeCompactOutput>;
}

/** The slice of the Codex thread binding compaction needs. */
export interface BindingStore {
  /** The session's binding, or null/undefined when the session is not bound to a Codex thread. */
  read(sessionFile: string): Promise<BindingFacts | null | undefined>;
  /**
   * Record that Codex compacted the bound thread: it dropped every earlier additionalContext item (P3) and the
   * turns we held, so clear the injection ledger and `heldTurnIds` and the next turn re-sends what was dropped.
   * Developer instructions are re-sent on every resume anyway (P4).
   */
  markNativeCompaction(sessionFile: string, info: MarkBindingInput): Promise<void>;
}

/** Engine maintenance after a compaction (e.g. the lifecycle helper `runHarnessContextEngineMaintenance`). */
export type CompactionMaintenanceRunner = (p: {
  engine: ContextEngine;
  sessionId: string;
  sessionKey?: string | undefined;
  sessionFile: string;
  reason: "compaction";
  runtimeContext: ContextEngineRuntimeContext;
  signal: AbortSignal;
}) => Promise<{ changed: boolean } | void>;

const isFunction = (v: unknown): boolean => typeof v === "function";
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;

/** Parameters of {@link runCodexCompaction}, validated with zod (a bad value throws {@link CompactionError}). */
export const runCodexCompactionParamsSchema = z
  .object({
    appServer: z.custom<NativeCompactor>(
      (v) => isObject(v) && isFunction(v.compactThread),
      "appServer must provide compactThread({ threadId, timeoutMs })",
    ),
    bindingStore: z.custom<BindingStore>(
      (v) => isObject(v) && isFunction(v.read) && isFunction(v.markNativeCompaction),
      "bindingStore must provide read(sessionFile) and markNativeCompaction(sessionFile, info)",
    ),
    sessionId: z.string().min(1),
    sessionKey: z.string().min(1).optional(),
    sessionFile: z.string().min(1),
    contextEngine: z
      .custom<ContextEngine>(
        (v) => isObject(v) && isObject(v.info) && typeof v.info.id === "string" && isFunction(v.compact),
        "contextEngine must be a context engine (info.id and compact())",
      )
      .optional(),
    contextTokenBudget: z.number().int().positive().optional(),
    trigger: z.enum(["manual", "budget"]),
    customInstructions: z.string().optional(),
    /**
     * Host extras merged into the runtime context of the engine's `compact()` and `maintain()`: a plugin host's
     * `provider`, `model` and `llm` (`loadContextEngine`'s `runtimeContext`; lossless-claw resolves its summary model
     * from them) and `rewriteTranscriptEntries`. The budget and token figures win over same-named extras.
     */
    runtimeContext: z.record(z.string(), z.unknown()).optional(),
    signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal, "signal must be an AbortSignal").optional(),
    logger: z.custom<Logger>((v) => isObject(v) && isFunction(v.info) && isFunction(v.warn), "logger must be a pino logger").optional(),
    /** Bound on the native round; Codex runs it as its own model turn, so it gets more time than an RPC. */
    nativeTimeoutMs: z.number().int().positive().default(120_000),
    /** Bound on the engine's `compact()` (an engine summarizing with a model may need minutes). */
    engineTimeoutMs: z.number().int().positive().default(300_000),
    runMaintenance: z.custom<CompactionMaintenanceRunner>(isFunction, "runMaintenance must be a function").optional(),
    /** XState inspection observer for the compaction actor (live inspector, trace recorder); a throw is ignored. */
    inspect: z.custom<(event: InspectionEvent) => void>(isFunction, "inspect must be a function").optional(),
    /** `beforeCompaction` / `afterCompaction` fire around the run (bounded, never failing it). */
    hooks: z.custom<Pick<CodexTurnHooks, "beforeCompaction" | "afterCompaction">>(isObject, "hooks must be an object").optional(),
    /**
     * Writes the engine's result into the transcript as a pi `compaction` entry (summary, first kept entry, tokens
     * before), so the next history read and pi's SessionManager see the compacted session. Called under the lock.
     */
    appendCompactionEntry: z
      .custom<(entry: { summary: string; firstKeptEntryId: string; tokensBefore: number }) => Promise<unknown>>(isFunction, "appendCompactionEntry must be a function")
      .optional(),
    /**
     * Reads the session's messages for the compaction hooks' `messages` / `messageCount` (default: the pi JSONL
     * transcript at `sessionFile`). `compactCodexSession` passes its store's `readHistory`.
     */
    readHistory: z
      .custom<() => Promise<{ messages: readonly AgentMessage[] }>>(isFunction, "readHistory must be a function")
      .optional(),
    /** Runs the whole compaction under the session lock when given (e.g. `fn => withSessionLock(file, fn)`). */
    withLock: z
      .custom<<T>(fn: () => Promise<T>) => Promise<T>>(isFunction, "withLock must be a function")
      .optional(),
  })
  .strict();

/** Parameters of {@link runCodexCompaction}. */
export type RunCodexCompactionParams = z.input<typeof runCodexCompactionParamsSchema>;

/** Parse the parameters; throws {@link CompactionError} (`INVALID_COMPACTION_PARAMS`) naming the first bad field. */
export function parseRunCodexCompactionParams(params: unknown): z.output<typeof runCodexCompactionParamsSchema> {
  const parsed = runCodexCompactionParamsSchema.safeParse(params);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    if (issue?.code === "unrecognized_keys") {
      const key = issue.keys[0] ?? "(unknown)";
      throw new CompactionError("INVALID_COMPACTION_PARAMS", key, `invalid compaction parameter \`${key}\`: unknown option`);
    }
    const { field, message } = firstIssue(parsed.error.issues, "(params)");
    throw new CompactionError("INVALID_COMPACTION_PARAMS", field, `invalid compaction parameter \`${field}\`: ${message}`);
  }
  return parsed.data;
}

/** The engine facts the compaction machine's guards read. */
export function compactionEngineFacts(engine: ContextEngine | undefined): CompactionEngineFacts {
  const active = Boolean(engine) && engine!.info.id !== "legacy";
  return {
    active,
    id: engine?.info.id ?? "none",
    ownsCompaction: active && engine!.info.ownsCompaction === true,
    hasMaintain: active && typeof engine!.maintain === "function",
  };
}

/** Only what the machine reads, so its context stays small and JSON-friendly (the ledger stays in the store). */
function bindingFacts(binding: BindingFacts | null | undefined): BindingFacts | null {
  if (!binding) return null;
  const facts: BindingFacts = {};
  if (typeof binding.threadId === "string" && binding.threadId) facts.threadId = binding.threadId;
  const u = binding.lastUsage;
  if (u && Number.isFinite(u.inputTokens) && Number.isFinite(u.totalTokens)) {
    const usage: BindingUsage = { inputTokens: u.inputTokens, totalTokens: u.totalTokens };
    if (u.modelContextWindow !== undefined) usage.modelContextWindow = u.modelContextWindow;
    facts.lastUsage = usage;
  }
  return facts;
}

function errorLabel(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") return code;
  return error instanceof Error ? error.name : "unknown";
}

/**
 * Compact a Codex-backed session explicitly. With an engine that owns compaction, the engine's `compact()` is the
 * primary result, followed by engine maintenance and a best-effort, bounded Codex `thread/compact/start` reported
 * in `result.details.codexNativeCompaction` (its failure never fails the compaction). Without one, Codex native
 * compaction is the result, followed by engine maintenance. An abort stops at once with `reason: "aborted"`.
 * Compaction errors are reported, never retried as prompts. Invalid parameters throw {@link CompactionError}.
 *
 * @example
 * ```ts
 * const out = await runCodexCompaction({
 *   appServer,                                   // anything with compactThread({ threadId, timeoutMs })
 *   bindingStore,                                // read + markNativeCompaction
 *   sessionId: "s1",
 *   sessionFile: "/data/s1.jsonl",
 *   contextEngine: engine,
 *   contextTokenBudget: 200_000,
 *   trigger: "manual",
 * });
 * if (!out.ok) console.warn(out.reason, out.result?.details);
 * ```
 */
export async function runCodexCompaction(params: RunCodexCompactionParams): Promise<CompactionOutput> {
  const p = parseRunCodexCompactionParams(params);
  const run = () => runCompaction(p);
  return p.withLock ? p.withLock(run) : run();
}

/** The compaction machine with this run's effects bound (the engine, the binding store, Codex's native round). */
function bindCompactionMachine(p: z.output<typeof runCodexCompactionParamsSchema>, logger: Logger, ids: Record<string, unknown>) {
  const engine = p.contextEngine;
  const runtimeContext = (currentTokenCount?: number): ContextEngineRuntimeContext => ({
    ...(p.runtimeContext ?? {}),
    ...(p.contextTokenBudget !== undefined ? { tokenBudget: p.contextTokenBudget } : {}),
    ...(currentTokenCount !== undefined ? { currentTokenCount } : {}),
  });
  // The bound thread's last input tokens, read by readBinding, for maintenance's runtime context.
  let lastInputTokens: number | undefined;
  return compactionMachine.provide({
    actions: {
      logStep: (_, params) => {
        const { event, level, ...counts } = params as { event: string; level?: "info" | "warn" | undefined; [k: string]: unknown };
        const fields = { ...ids, event, ...counts };
        if (level === "warn") logger.warn(fields, `codex compaction: ${event}`);
        else logger.info(fields, `codex compaction: ${event}`);
      },
    },
    actors: {
      readBinding: fromPromise(async ({ input }) => {
        const facts = bindingFacts(await p.bindingStore.read(input.sessionFile));
        lastInputTokens = facts?.lastUsage?.inputTokens;
        return facts;
      }),
      compactEngine: fromPromise(async ({ input, signal }) => {
        const { request } = input;
        const raw: unknown = await callEngine("compact", () => engine!.compact({
          sessionId: p.sessionId,
          ...(p.sessionKey !== undefined ? { sessionKey: p.sessionKey } : {}),
          sessionFile: p.sessionFile,
          ...(p.contextTokenBudget !== undefined ? { tokenBudget: p.contextTokenBudget } : {}),
          ...(request.force !== undefined ? { force: request.force } : {}),
          ...(request.currentTokenCount !== undefined ? { currentTokenCount: request.currentTokenCount } : {}),
          compactionTarget: request.compactionTarget,
          ...(p.customInstructions !== undefined ? { customInstructions: p.customInstructions } : {}),
          runtimeContext: runtimeContext(request.currentTokenCount),
          abortSignal: signal,
        }), { timeoutMs: p.engineTimeoutMs, signal });
        // Third-party output: a malformed result (e.g. `null`, `{ ok: "yes" }`) throws CompactResultInvalidError
        // (code COMPACT_RESULT_INVALID, naming the field), which the machine records as the engine's compaction failing
        // (`outcomes.engineCompact: "failed"`, a warning, `reason: "engineCompactionFailed: ..."`).
        return validateCompactResult(raw);
      }),
      maintainEngine: fromPromise(async ({ signal }) => {
        if (p.runMaintenance) {
          const out = await p.runMaintenance({
            engine: engine!,
            sessionId: p.sessionId,
            ...(p.sessionKey !== undefined ? { sessionKey: p.sessionKey } : {}),
            sessionFile: p.sessionFile,
            reason: "compaction",
            runtimeContext: runtimeContext(lastInputTokens),
            signal,
          });
          return { changed: Boolean(out && out.changed) };
        }
        const out = await engine!.maintain!({
          sessionId: p.sessionId,
          ...(p.sessionKey !== undefined ? { sessionKey: p.sessionKey } : {}),
          sessionFile: p.sessionFile,
          runtimeContext: runtimeContext(lastInputTokens),
        });
        return { changed: Boolean(out?.changed) };
      }),
      compactNative: fromPromise(async ({ input }) => {
        const out = await p.appServer.compactThread({ threadId: input.threadId, timeoutMs: input.timeoutMs });
        if (!isObject(out) || typeof out.ok !== "boolean") throw new Error("compactThread returned no result");
        return out;
      }),
      markBindingCompacted: fromPromise(async ({ input }) => {
        await p.bindingStore.markNativeCompaction(p.sessionFile, input);
      }),
    },
  });
}

async function runCompaction(p: z.output<typeof runCodexCompactionParamsSchema>): Promise<CompactionOutput> {
  const logger = p.logger ?? silentLogger;
  const facts = compactionEngineFacts(p.contextEngine);
  const ids = {
    sessionId: p.sessionId,
    ...(p.sessionKey !== undefined ? { sessionKey: p.sessionKey } : {}),
    engineId: facts.id,
    trigger: p.trigger,
  };
  const machine = bindCompactionMachine(p, logger, ids);

  const input: CompactionMachineInput = {
    sessionId: p.sessionId,
    ...(p.sessionKey !== undefined ? { sessionKey: p.sessionKey } : {}),
    sessionFile: p.sessionFile,
    trigger: p.trigger,
    engine: facts,
    nativeTimeoutMs: p.nativeTimeoutMs,
  };

  logger.info(
    { ...ids, event: "compaction started", ownsCompaction: facts.ownsCompaction, hasMaintain: facts.hasMaintain },
    "codex compaction: compaction started",
  );
  const { hookEvent, session } = await compactionHookEvent(p, facts);
  await observeCompactionHook(p, "beforeCompaction", { ...hookEvent, ...(session ? { messages: session.messages } : {}) }, logger);
  const actor = createActor(machine, { input, ...(p.inspect ? { inspect: guardedObserver(p.inspect) } : {}) });
  // Attach the result before start so an actor error rejects this promise instead of crashing the process.
  const done = toPromise(actor);
  const onAbort = () => actor.send({ type: "ABORT" });
  p.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    actor.start();
    if (p.signal?.aborted) onAbort();
    const output = await done;
    await writeCompactionEntry(p, output, logger);
    await observeCompactionHook(p, "afterCompaction", { ...hookEvent, compacted: output.compacted }, logger);
    logger.info(
      {
        ...ids,
        event: "compaction finished",
        ok: output.ok,
        compacted: output.compacted,
        primary: output.primary,
        nativeOk: output.native.ok,
        tokensBefore: output.result?.tokensBefore,
        tokensAfter: output.result?.tokensAfter,
        states: output.trace.length,
      },
      "codex compaction: compaction finished",
    );
    return output;
  } catch (error) {
    logger.warn({ ...ids, event: "compaction crashed", err: errorLabel(error) }, "codex compaction: compaction crashed");
    throw error;
  } finally {
    p.signal?.removeEventListener("abort", onAbort);
    actor.stop();
  }
}

/** The compaction hooks' event; the session is read for its messages only when a hook listens. */
async function compactionHookEvent(p: z.output<typeof runCodexCompactionParamsSchema>, facts: ReturnType<typeof compactionEngineFacts>) {
  const hooked = typeof p.hooks?.beforeCompaction === "function" || typeof p.hooks?.afterCompaction === "function";
  const read = p.readHistory ?? (() => readSessionHistory(p.sessionFile, { sessionId: p.sessionId }));
  const session = hooked ? await read().catch(() => undefined) : undefined;
  const hookEvent = {
    sessionId: p.sessionId,
    ...(p.sessionKey !== undefined ? { sessionKey: p.sessionKey } : {}),
    backend: facts.ownsCompaction ? ("context-engine" as const) : ("codex-app-server" as const),
    trigger: p.trigger,
    ownsCompaction: facts.ownsCompaction,
    sessionFile: p.sessionFile,
    ...(session ? { messageCount: session.messages.length } : {}),
  };
  return { hookEvent, session };
}

/** An inspection observer that never breaks the compaction. */
function guardedObserver(inspect: (event: InspectionEvent) => void): (event: InspectionEvent) => void {
  return (event) => {
    try {
      inspect(event);
    } catch {
      // An observer never breaks the compaction.
    }
  };
}

/** Fire a compaction hook, bounded by the engine timeout; a failure is logged, never the compaction's. */
async function observeCompactionHook(
  p: z.output<typeof runCodexCompactionParamsSchema>,
  name: "beforeCompaction" | "afterCompaction",
  event: CompactionHookEvent,
  logger: Logger,
): Promise<void> {
  const hook = p.hooks?.[name];
  if (typeof hook !== "function") return;
  try {
    await callEngine(`${name} hook`, async () => hook.call(p.hooks, event), { timeoutMs: p.engineTimeoutMs });
  } catch (error) {
    logger.warn({ sessionId: p.sessionId, event: "hook failed", hook: name, err: errorLabel(error) }, "compaction hook failed");
  }
}

/** The engine's compaction, as a pi `compaction` entry in the transcript (when it reported a summary and a kept entry). */
async function writeCompactionEntry(p: z.output<typeof runCodexCompactionParamsSchema>, output: CompactionOutput, logger: Logger): Promise<void> {
  const r = output.result;
  if (!p.appendCompactionEntry || !output.compacted || output.primary !== "engine" || !r?.summary || !r.firstKeptEntryId) return;
  try {
    await p.appendCompactionEntry({ summary: r.summary, firstKeptEntryId: r.firstKeptEntryId, tokensBefore: r.tokensBefore });
    logger.info({ sessionId: p.sessionId, event: "compaction entry written", tokensBefore: r.tokensBefore }, "codex compaction: compaction entry written");
  } catch (error) {
    output.warnings.push(`compaction entry not written to the transcript (${error instanceof Error ? error.message : String(error)})`);
    logger.warn({ sessionId: p.sessionId, event: "compaction entry failed", err: errorLabel(error) }, "codex compaction: compaction entry not written");
  }
}

/**
 * Adapt the thread-binding sidecar functions (`readThreadBinding` / `writeThreadBinding`) to a {@link BindingStore}.
 * Marking applies the binding helper `markNativeCompaction` (clears the injection ledger and `heldTurnIds`, counts
 * `nativeCompactions`, `updatedBy: "compaction"`) only when the binding still names the compacted thread (a binding
 * that already rotated to a new thread has nothing Codex dropped, and is not written).
 *
 * @example
 * ```ts
 * const bindingStore = createBindingStore({ read: readThreadBinding, write: writeThreadBinding, logger });
 * ```
 */
export function createBindingStore<
  B extends {
    threadId: string;
    ledger?: unknown;
    heldTurnIds?: unknown;
    lastUsage?: BindingUsage | undefined;
    nativeCompactions?: number | undefined;
    updatedBy?: string | undefined;
  } = ThreadBinding,
>(io: {
  read(sessionFile: string, logger?: Logger): Promise<B | null | undefined>;
  write(sessionFile: string, binding: B): Promise<void>;
  logger?: Logger | undefined;
}): BindingStore {
  return {
    read: async (sessionFile) => {
      const binding = await io.read(sessionFile, io.logger);
      if (!binding) return null;
      return binding.lastUsage ? { threadId: binding.threadId, lastUsage: binding.lastUsage } : { threadId: binding.threadId };
    },
    markNativeCompaction: async (sessionFile, info) => {
      const binding = await io.read(sessionFile, io.logger);
      if (!binding || binding.threadId !== info.threadId) return;
      // The shared helper (also used by the turn), so both paths mark a native compaction identically. It only
      // spreads the binding and sets ledger, heldTurnIds, nativeCompactions and updatedBy, so any B fits.
      const next = markNativeCompaction(binding as unknown as ThreadBinding, info.threadId, "compaction");
      await io.write(sessionFile, next as unknown as B);
    },
  };
}
