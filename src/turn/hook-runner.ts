/**
 * Calls the host's hooks so that they can never crash, hang or fail a turn: each call is bounded by the engine-call
 * timeout, a throw or a timeout becomes a warning (and a log line without content), and results are validated with zod.
 */
import type { Logger } from "pino";
import { z } from "zod";
import { GATE_FAILURE_ATTRIBUTION, blockedTurnText } from "../../machines/rules.js";
import type { AdmissionOutput } from "../../machines/turn.contract.js";
import { callEngine } from "../context-engine/lifecycle.js";
import type {
  BeforeAgentRunEvent,
  BeforeMessageWriteEvent,
  BeforeMessageWriteResult,
  BeforeModelResolveContext,
  BeforePromptBuildContext,
  BeforePromptBuildResult,
  BeforeAgentFinalizeEvent,
  BeforeAgentFinalizeResult,
  BeforeToolCallResult,
  CodexTurnHooks,
  ToolCallHookEvent,
} from "../hooks/types.js";
import { errorLabel } from "../log/error-label.js";

/** Why a call is blocked when the turn ended while its `beforeToolCall` was still deciding. */
export const WITHDRAWN_TOOL_CALL_REASON = "Tool call not run: the turn ended before its beforeToolCall hook answered";

/** Why a call is blocked when its `beforeToolCall` failed under `beforeToolCallFailure: "block"` (OpenClaw's words). */
export const BEFORE_TOOL_CALL_FAILURE_REASON = "Tool call blocked because before_tool_call hook failed";

/** Observation hooks: fire and forget from the turn's point of view (their failures are warnings). */
export type ObservationHook = "llmInput" | "llmOutput" | "agentEnd" | "afterToolCall" | "beforeCompaction" | "afterCompaction";

const beforePromptBuildResultSchema = z
  .object({ prompt: z.string().min(1).optional(), developerInstructions: z.string().optional(), warnings: z.array(z.string()).optional() })
  .strict()
  .optional()
  .nullable();

const beforeModelResolveResultSchema = z.object({ model: z.string().trim().min(1).optional() }).strict().optional().nullable();

const beforeAgentRunResultSchema = z
  .union([
    z.object({ block: z.literal(false) }).strict(),
    z
      .object({ block: z.literal(true), message: z.string().optional(), blockedBy: z.string().trim().min(1).optional(), warnings: z.array(z.string()).optional() })
      .strict(),
  ])
  .optional();

const beforeMessageWriteResultSchema = z
  .object({
    block: z.boolean().optional(),
    message: z.looseObject({ role: z.string().min(1) }).optional(),
    warnings: z.array(z.string()).optional(),
  })
  .strict()
  .optional()
  .nullable();

const beforeAgentFinalizeResultSchema = z
  .object({ action: z.literal("revise"), reason: z.string().trim().min(1) })
  .strict()
  .optional()
  .nullable();

const beforeToolCallResultSchema = z
  .object({ block: z.boolean().optional(), blockReason: z.string().optional(), params: z.unknown().optional(), approved: z.boolean().optional() })
  .strict()
  .optional()
  .nullable();

/** A deciding hook's result, validated; throws "malformed result: <field>: <issue>" naming what was wrong. */
function parseHookResult<T>(schema: z.ZodType<T>, raw: unknown): T {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new Error(`malformed result: ${issue?.path.join(".") || "(result)"}: ${issue?.message ?? "invalid"}`);
}

/** The gate's decision as the machine reads it: the block's attribution and its user-facing text, OpenClaw's wording. */
function admissionOf(decision: z.infer<typeof beforeAgentRunResultSchema>): AdmissionOutput {
  if (!decision?.block) return { admitted: true };
  const blockedBy = decision.blockedBy?.trim() || GATE_FAILURE_ATTRIBUTION;
  return { admitted: false, blockedBy, message: blockedTurnText(decision.message, blockedBy) };
}

/** Observation hooks started without waiting, and the wait for them (see `HookRunner.observeInBackground`). */
function backgroundObservations(observe: (name: ObservationHook, event: unknown) => Promise<void>) {
  const running = new Set<Promise<void>>();
  return {
    start(name: ObservationHook, event: unknown): void {
      const observation = observe(name, event);
      running.add(observation);
      void observation.then(() => running.delete(observation));
    },
    async drain(): Promise<void> {
      while (running.size > 0) await Promise.all([...running]);
    },
  };
}

/** See the module comment. */
export interface HookRunner {
  readonly has: (name: keyof CodexTurnHooks) => boolean;
  /** Fire an observation hook and wait for it (bounded); never throws. */
  observe<K extends ObservationHook>(name: K, event: Parameters<NonNullable<CodexTurnHooks[K]>>[0]): Promise<void>;
  /**
   * Start an observation hook and go on without waiting (`llmInput`, `llmOutput`: OpenClaw's harness fires them the
   * same way, so a slow observer, say one that ships traces over the network, never delays the model call or the
   * mirror). Its failure is still a warning; {@link HookRunner.drain} waits for it before the attempt settles.
   */
  observeInBackground<K extends ObservationHook>(name: K, event: Parameters<NonNullable<CodexTurnHooks[K]>>[0]): void;
  /** Wait for the observation hooks started in the background (each bounded by the hook timeout); never throws. */
  drain(): Promise<void>;
  /** `beforePromptBuild`: throws (bounded, validated) so the machine's `hooks` state can report it. */
  beforePromptBuild(ctx: BeforePromptBuildContext, signal?: AbortSignal): Promise<BeforePromptBuildResult | undefined>;
  /**
   * `beforeAgentRun`: the gate's decision (no gate: admitted). Throws when the gate throws, times out or answers
   * something malformed: the machine's `hooks.admitting` then refuses the turn (fail-closed).
   */
  beforeAgentRun(event: BeforeAgentRunEvent, signal?: AbortSignal): Promise<AdmissionOutput>;
  /** `beforeMessageWrite`: the hook's rewrite or block, else undefined (absent, failed or malformed: stored as is, with a warning). */
  beforeMessageWrite(event: BeforeMessageWriteEvent): Promise<BeforeMessageWriteResult | undefined>;
  /** `beforeModelResolve`: the model it chose, else undefined (absent, failed or malformed: the turn's model, with a warning). */
  beforeModelResolve(ctx: BeforeModelResolveContext): Promise<string | undefined>;
  /** `beforeAgentFinalize`: a revision request, else undefined (absent, failed or malformed: the turn ends). */
  beforeAgentFinalize(event: BeforeAgentFinalizeEvent): Promise<BeforeAgentFinalizeResult | undefined>;
  /**
   * `beforeToolCall`: undefined when absent, failed or malformed (the call then runs unchanged). `signal` (the hook's
   * `context.signal`) aborts when the answer is no longer waited for: the hook may withdraw a question, and the runner
   * stops waiting and blocks the call (no warning: nobody decided it may run).
   */
  beforeToolCall(event: ToolCallHookEvent, signal?: AbortSignal): Promise<BeforeToolCallResult | undefined>;
  /** `onState`: synchronous observer. */
  onState(state: string): void;
}

type HookRunnerOptions = {
  hooks: CodexTurnHooks | undefined;
  timeoutMs: number;
  logger: Logger;
  ids: Record<string, string>;
  warn: (text: string) => void;
};

/** What every hook call shares: the hooks, the bounded call, and how failures become warnings. */
interface HookCallKit {
  hooks: CodexTurnHooks;
  failed(name: string, error: unknown): void;
  /** Problems a hook reported beside its result (a plugin's handler failed): turn warnings, logged without content. */
  partlyFailed(name: string, warnings: readonly string[] | undefined): void;
  call<T>(name: string, fn: () => T | Promise<T>, signal?: AbortSignal): Promise<T>;
}

function hookCallKit(p: HookRunnerOptions): HookCallKit {
  return {
    hooks: p.hooks ?? {},
    failed(name, error) {
      p.warn(`${name} hook failed (${error instanceof Error ? error.message : String(error)}); ignored`);
      p.logger.warn({ ...p.ids, event: "hook failed", hook: name, err: errorLabel(error) }, "hook failed");
    },
    partlyFailed(name, warnings) {
      for (const warning of warnings ?? []) {
        p.warn(`${name} hook: ${warning}`);
        p.logger.warn({ ...p.ids, event: "hook partly failed", hook: name }, "hook partly failed");
      }
    },
    call: async (name, fn, signal) => callEngine(`${name} hook`, async () => fn(), { timeoutMs: p.timeoutMs, ...(signal ? { signal } : {}) }),
  };
}

/** A deciding hook: its validated result, else `onFailure` (absent: undefined; failed or malformed: a warning too). */
async function decideByHook<T>(
  kit: HookCallKit,
  name: "beforeAgentFinalize" | "beforeToolCall" | "beforeModelResolve" | "beforeMessageWrite",
  schema: z.ZodType<T | null | undefined>,
  event: unknown,
  o: { onFailure?: T | undefined; timeoutMs?: number | undefined; signal?: AbortSignal | undefined; onWithdrawn?: T | undefined } = {},
): Promise<T | undefined> {
  const hooks = kit.hooks;
  const hook = hooks[name] as ((e: unknown, context?: unknown) => unknown) | undefined;
  if (typeof hook !== "function") return undefined;
  try {
    const run = () => (o.signal ? hook.call(hooks, event, { signal: o.signal }) : hook.call(hooks, event));
    const raw =
      o.timeoutMs !== undefined
        ? await callEngine(`${name} hook`, async () => run(), { timeoutMs: o.timeoutMs, ...(o.signal ? { signal: o.signal } : {}) })
        : await kit.call(name, run, o.signal);
    const parsed = schema.safeParse(raw);
    if (!parsed.success) throw new Error(`malformed result: ${parsed.error.issues[0]?.message ?? "invalid"}`);
    return parsed.data ?? undefined;
  } catch (error) {
    // Nobody waits for the answer any more (the turn ended): not a failure of the hook.
    if (o.signal?.aborted) return o.onWithdrawn;
    kit.failed(name, error);
    return o.onFailure;
  }
}

/** Build the runner for one attempt; `warn` collects the warnings for the result. */
export function createHookRunner(p: HookRunnerOptions): HookRunner {
  const kit = hookCallKit(p);
  const { hooks, failed, partlyFailed, call } = kit;
  const decide = <T>(name: Parameters<typeof decideByHook>[1], schema: z.ZodType<T | null | undefined>, event: unknown, o?: Parameters<typeof decideByHook<T>>[4]) =>
    decideByHook(kit, name, schema, event, o);
  // Fail-closed hosts (the OpenClaw plugin host) block a call whose hook failed instead of letting it run.
  const toolCallFailure: BeforeToolCallResult | undefined = hooks.beforeToolCallFailure === "block" ? { block: true, blockReason: BEFORE_TOOL_CALL_FAILURE_REASON } : undefined;
  const observe = async (name: ObservationHook, event: unknown): Promise<void> => {
    const hook = hooks[name] as ((e: unknown) => unknown) | undefined;
    if (typeof hook !== "function") return;
    try {
      await call(name, () => hook.call(hooks, event));
    } catch (error) {
      failed(name, error);
    }
  };
  const background = backgroundObservations(observe);
  return {
    has: (name) => typeof hooks[name] === "function",
    observe,
    observeInBackground: background.start,
    drain: background.drain,
    async beforePromptBuild(ctx, signal) {
      const hook = hooks.beforePromptBuild;
      if (typeof hook !== "function") return undefined;
      const result = parseHookResult(beforePromptBuildResultSchema, await call("beforePromptBuild", () => hook.call(hooks, ctx), signal));
      partlyFailed("beforePromptBuild", result?.warnings);
      return result ?? undefined;
    },
    async beforeAgentRun(event, signal) {
      const hook = hooks.beforeAgentRun;
      if (typeof hook !== "function") return { admitted: true };
      const decision = parseHookResult(beforeAgentRunResultSchema, await call("beforeAgentRun", () => hook.call(hooks, event), signal));
      if (decision?.block) partlyFailed("beforeAgentRun", decision.warnings);
      return admissionOf(decision);
    },
    async beforeMessageWrite(event) {
      const out = await decide("beforeMessageWrite", beforeMessageWriteResultSchema as z.ZodType<BeforeMessageWriteResult | null | undefined>, event);
      partlyFailed("beforeMessageWrite", out?.warnings);
      return out;
    },
    beforeModelResolve: async (ctx) => (await decide("beforeModelResolve", beforeModelResolveResultSchema, ctx))?.model,
    beforeAgentFinalize: (event) => decide("beforeAgentFinalize", beforeAgentFinalizeResultSchema, event),
    beforeToolCall: (event, signal) =>
      decide("beforeToolCall", beforeToolCallResultSchema, event, {
        ...(toolCallFailure ? { onFailure: toolCallFailure } : {}),
        ...(hooks.beforeToolCallTimeoutMs !== undefined ? { timeoutMs: hooks.beforeToolCallTimeoutMs } : {}),
        // A call whose hook was withdrawn never runs: no one decided it may.
        ...(signal ? { signal, onWithdrawn: { block: true, blockReason: WITHDRAWN_TOOL_CALL_REASON } } : {}),
      }),
    onState(state) {
      try {
        hooks.onState?.(state);
      } catch (error) {
        failed("onState", error);
      }
    },
  };
}
