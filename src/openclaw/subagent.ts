/**
 * `runtime.subagent` for plugins: OpenClaw's delegated agent runs as Codex turns on child sessions of this host.
 *
 * lossless-claw's `lcm_expand_query` tool (and its focus briefs) delegate work this way: `run({ sessionKey, message,
 * extraSystemPrompt, ... })` starts a run on a fresh child session and returns its `runId` at once, `waitForRun` waits
 * for it (`ok` | `error` | `timeout`), `getSessionMessages` reads the child's transcript, and `deleteSession` cancels
 * what still runs and removes the child's files. A run here is one `runCodexTurn` on the child session with the same
 * plugin wiring as any turn (its context engine, its tools built for the child session, its hooks), the message as
 * the prompt and `extraSystemPrompt` as developer instructions. The child's transcript, binding and pending record
 * live in `sessionDir` (default: a temporary directory made at the first run, removed by `close()` or, without it,
 * when the process exits), or in the store `storeFor` gives for the child (every read, run and delete then goes
 * through that store).
 *
 * `complete` is tool-free one-shot inference (`runtime.llm.complete` with the message as the user message). `cwd`,
 * `disableTools` and `assertCurrent` of `run` are honoured. Not modelled: `deliver` and `completionDelivery` (there is
 * no channel to deliver to; the reply is in the child's transcript), `lane` (runs of different child sessions run
 * concurrently, runs of one session one after the other, through its lock), `lightContext`, `promptMode`,
 * `toolsAlsoAllow` (the child has all of the plugin's tools), and OpenClaw's session store (a child exists as its
 * transcript file).
 */
import { createHash } from "node:crypto";
import { promises as fsp } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import type { CodexAppServer } from "../codex/app-server.js";
import type { ContextEngine, ContextEngineLlm } from "../context-engine/types.js";
import type { CodexTurnHooks } from "../hooks/types.js";
import { errorLabel } from "../log/error-label.js";
import { createJsonlSessionStore, type SessionStore } from "../store/session-store.js";
import { removeOnExit } from "../temp-dirs.js";
import { runCodexTurn } from "../turn.js";
import { errorText } from "./errors.js";
import { codexModelFor, CODEX_LLM_PROVIDER, llmPolicyRefusal, type LlmPolicy } from "./llm.js";
import type { PluginDynamicTool } from "./tools.js";

/** `runtime.subagent.run` parameters (OpenClaw's `SubagentRunParams`; the members this host acts on). */
export interface SubagentRunParams {
  sessionKey: string;
  message: string;
  /** Called before the run starts; a throw refuses the run (OpenClaw: revalidate authority at admission). */
  assertCurrent?: (() => void) | undefined;
  /** Run the child with no tools at all. */
  disableTools?: boolean | undefined;
  /** The child turn's working directory (default: the loader's `cwd`). */
  cwd?: string | undefined;
  provider?: string | undefined;
  model?: string | undefined;
  extraSystemPrompt?: string | undefined;
  lane?: string | undefined;
  lightContext?: boolean | undefined;
  deliver?: boolean | undefined;
  idempotencyKey?: string | undefined;
}

/** How a run ended, as `waitForRun` reports it (OpenClaw's `AgentWaitResult`, without its telemetry fields). */
export interface SubagentWaitResult {
  status: "ok" | "error" | "timeout";
  error?: string | undefined;
}

/** `runtime.subagent.complete` parameters (OpenClaw's `SubagentCompleteParams`). */
export interface SubagentCompleteParams {
  agentId: string;
  message: string;
  extraSystemPrompt?: string | undefined;
  model?: string | undefined;
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * The `runtime.subagent` surface plugins see (OpenClaw's `PluginRuntime["subagent"]`).
 *
 * @example
 * ```ts
 * const { runId } = await api.runtime.subagent.run({ sessionKey: "agent:main:subagent:1", message: "Find the codename" });
 * if ((await api.runtime.subagent.waitForRun({ runId, timeoutMs: 60_000 })).status === "ok") {
 *   const { messages } = await api.runtime.subagent.getSessionMessages({ sessionKey: "agent:main:subagent:1", limit: 5 });
 * }
 * await api.runtime.subagent.deleteSession({ sessionKey: "agent:main:subagent:1" });
 * ```
 */
export interface HostSubagentRuntime {
  /** Tool-free one-shot inference: `runtime.llm.complete` with `message` as the user message. */
  complete(params: SubagentCompleteParams): Promise<{ text: string }>;
  run(params: SubagentRunParams): Promise<{ runId: string; sessionKey: string }>;
  waitForRun(params: { runId: string; timeoutMs?: number | undefined }): Promise<SubagentWaitResult>;
  getSessionMessages(params: { sessionKey: string; limit?: number | undefined }): Promise<{ messages: unknown[] }>;
  deleteSession(params: { sessionKey: string; deleteTranscript?: boolean | undefined }): Promise<void>;
}

/** What a child turn runs with: the loaded plugin's engine, tools, hooks and runtime context. */
export interface SubagentTurnWiring {
  /** Absent when the loaded plugins registered no context engine. */
  engine?: ContextEngine | undefined;
  dynamicTools: PluginDynamicTool[];
  hooks: CodexTurnHooks;
  runtimeContext: Record<string, unknown>;
}

/** Options of {@link createSubagentHost}. */
export interface SubagentHostOptions {
  appServer: CodexAppServer;
  /** Backs `complete` (the plugin's `runtime.llm`, under the same llm policy). */
  llm: ContextEngineLlm;
  cwd: string;
  /**
   * Where child sessions' files live; default: a temporary directory made at the first run, removed by `close()` (or
   * when the process exits without it).
   */
  sessionDir?: string | undefined;
  /**
   * The store of a child session (its id and key as the runs name them): given, children live there instead of
   * `sessionDir` (a shared store, so a child's transcript outlives the host). Called per run, read and delete.
   */
  storeFor?: ((child: { sessionId: string; sessionKey: string }) => SessionStore) | undefined;
  /** The host's model: a run naming another one is checked against `policy`. */
  model?: string | undefined;
  policy: LlmPolicy;
  pluginId?: string | undefined;
  tokenBudget?: number | undefined;
  logger: Logger;
  /** The loaded plugin's wiring; undefined while the plugin is still loading (a run then fails clearly). */
  wiring: () => SubagentTurnWiring | undefined;
}

/**
 * A `runtime.subagent` call with bad parameters, or one the host refuses (a model its llm policy does not allow). The
 * plugin that made the call receives it; the message names the method and the field.
 *
 * @example
 * ```ts
 * await api.runtime.subagent.run({ sessionKey: "", message: "x" });
 * // SubagentRequestError: runtime.subagent.run: sessionKey: must be a non-empty string
 * ```
 */
export class SubagentRequestError extends Error {
  readonly code = "SUBAGENT_REQUEST_INVALID";
  constructor(method: string, detail: string) {
    super(`runtime.subagent.${method}: ${detail}`);
    this.name = "SubagentRequestError";
  }
}

/** How long `waitForRun` waits without a `timeoutMs` (OpenClaw's `agent.wait` default). */
export const DEFAULT_SUBAGENT_WAIT_MS = 30_000;
/** How long `deleteSession` and `close()` wait for an aborted run to end before removing its files anyway. */
const ABORT_SETTLE_MS = 10_000;
/** Runs whose outcome `waitForRun` can still report; older ended runs are forgotten (see `forgetOldRuns`). */
const MAX_KEPT_RUNS = 256;

const optionalText = z.string().optional();
const isFunction = (v: unknown): v is () => void => typeof v === "function";
const runParamsSchema = z.looseObject({
  sessionKey: z.string().trim().min(1, "must be a non-empty string"),
  message: z.string().trim().min(1, "must be a non-empty string"),
  assertCurrent: z.custom<() => void>(isFunction, "must be a function").optional(),
  disableTools: z.boolean().optional(),
  cwd: z.string().min(1).refine((p) => path.isAbsolute(p), "must be an absolute path").optional(),
  provider: optionalText,
  model: optionalText,
  extraSystemPrompt: optionalText,
  lane: optionalText,
  lightContext: z.boolean().optional(),
  deliver: z.boolean().optional(),
  idempotencyKey: optionalText,
});
const completeParamsSchema = z.looseObject({
  agentId: z.string(),
  message: z.string().trim().min(1, "must be a non-empty string"),
  extraSystemPrompt: optionalText,
  model: optionalText,
  timeoutMs: z.number().positive().finite().optional(),
  signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal, "must be an AbortSignal").optional(),
});
const waitParamsSchema = z.looseObject({ runId: z.string().min(1), timeoutMs: z.number().positive().finite().optional() });
const messagesParamsSchema = z.looseObject({ sessionKey: z.string().trim().min(1), limit: z.number().int().positive().optional() });
const deleteParamsSchema = z.looseObject({ sessionKey: z.string().trim().min(1), deleteTranscript: z.boolean().optional() });

function parseParams<T>(method: string, schema: z.ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new SubagentRequestError(method, `${issue.path.join(".") || "(params)"}: ${issue.message}`);
}

/**
 * The child session's file name: readable (the key with unsafe characters replaced) and unique (a hash of the key).
 *
 * @example
 * ```ts
 * childSessionFileName("agent:main:subagent:7f3c"); // "agent_main_subagent_7f3c-<12 hex>.jsonl"
 * ```
 */
export function childSessionFileName(sessionKey: string): string {
  const slug = sessionKey.replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 80);
  return `${slug}-${keyHash(sessionKey)}.jsonl`;
}

function keyHash(sessionKey: string): string {
  return createHash("sha256").update(sessionKey, "utf8").digest("hex").slice(0, 12);
}

function childSessionId(sessionKey: string): string {
  return `subagent-${keyHash(sessionKey)}`;
}

interface SubagentRun {
  sessionKey: string;
  outcome: Promise<SubagentWaitResult>;
  controller: AbortController;
  settled: boolean;
}

/** Where child sessions' files live: the caller's directory, or a temporary one made at the first run. */
interface ChildSessionDir {
  /** The child's transcript path, making the directory when needed (a run is about to write). */
  fileFor(sessionKey: string): Promise<string>;
  /** The child's transcript path, or undefined when no directory exists yet (nothing was ever written). */
  existingFileFor(sessionKey: string): Promise<string | undefined>;
  /** Remove the directory if this host made it. */
  removeIfOwned(): Promise<void>;
}

function childSessionDir(configured: string | undefined): ChildSessionDir {
  let made: Promise<string> | undefined;
  let untrack = () => {};
  const makeTemp = async () => {
    const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), "codex-turn-subagents-"));
    untrack = removeOnExit(tmp); // a host ending without close() leaves no child sessions behind
    return tmp;
  };
  const dir = () => (made ??= configured ? fsp.mkdir(configured, { recursive: true }).then(() => configured) : makeTemp());
  return {
    fileFor: async (sessionKey) => path.join(await dir(), childSessionFileName(sessionKey)),
    existingFileFor: async (sessionKey) => {
      const base = configured ?? (made ? await made.catch(() => undefined) : undefined);
      return base === undefined ? undefined : path.join(base, childSessionFileName(sessionKey));
    },
    removeIfOwned: async () => {
      if (configured || !made) return;
      const tmp = await made.catch(() => undefined);
      untrack();
      if (tmp) await fsp.rm(tmp, { recursive: true, force: true });
    },
  };
}

/** What the runtime's methods share for one loaded plugin. */
interface SubagentHostState {
  opts: SubagentHostOptions;
  dir: ChildSessionDir;
  runs: Map<string, SubagentRun>;
  byIdempotencyKey: Map<string, string>;
  /** Runs started so far (run ids count up). */
  started: number;
}

/**
 * Build `runtime.subagent` for one loaded plugin, and `close()` (abort what runs, remove the temporary directory).
 *
 * @example
 * ```ts
 * const host = createSubagentHost({ appServer, llm, cwd, policy: DEFAULT_LLM_POLICY, logger, wiring: () => loaded });
 * const { runId } = await host.runtime.run({ sessionKey: "agent:main:subagent:1", message: "Find X" });
 * await host.runtime.waitForRun({ runId }); // { status: "ok" }
 * ```
 */
export function createSubagentHost(opts: SubagentHostOptions): { runtime: HostSubagentRuntime; close(): Promise<void> } {
  const state: SubagentHostState = { opts, dir: childSessionDir(opts.sessionDir), runs: new Map(), byIdempotencyKey: new Map(), started: 0 };
  return {
    runtime: {
      complete: (params) => completeOnce(opts.llm, params),
      run: (params) => requestRun(state, params),
      waitForRun: (params) => waitForRun(state, params),
      getSessionMessages: (params) => readChildMessages(state, params),
      deleteSession: (params) => deleteChildSession(state, params),
    },
    async close() {
      await abortRuns([...state.runs.values()], "plugin host closed");
      await state.dir.removeIfOwned().catch((error: unknown) => opts.logger.warn({ event: "openclaw.subagent.cleanupFailed", err: errorLabel(error) }, "subagent directory not removed"));
    },
  };
}

/** `complete`: one tool-free completion through the plugin's `runtime.llm` (same llm policy). */
async function completeOnce(llm: ContextEngineLlm, params: SubagentCompleteParams): Promise<{ text: string }> {
  const p = parseParams("complete", completeParamsSchema, params);
  const signals = [p.signal, p.timeoutMs !== undefined ? AbortSignal.timeout(p.timeoutMs) : undefined].filter((x): x is AbortSignal => x !== undefined);
  const { text } = await llm.complete({
    messages: [{ role: "user", content: p.message }],
    ...(p.extraSystemPrompt ? { systemPrompt: p.extraSystemPrompt } : {}),
    ...(p.model ? { model: p.model } : {}),
    ...(signals.length > 0 ? { signal: AbortSignal.any(signals) } : {}),
    purpose: "runtime.subagent.complete",
  });
  return { text };
}

/** `run`: admit the request (idempotency, assertCurrent, llm policy, loaded wiring), then start the child turn. */
async function requestRun(state: SubagentHostState, params: SubagentRunParams): Promise<{ runId: string; sessionKey: string }> {
  const { opts } = state;
  const p = parseParams("run", runParamsSchema, params);
  const existing = p.idempotencyKey !== undefined ? state.byIdempotencyKey.get(p.idempotencyKey) : undefined;
  if (existing !== undefined) return { runId: existing, sessionKey: p.sessionKey };
  try {
    p.assertCurrent?.();
  } catch (error) {
    throw new SubagentRequestError("run", `assertCurrent refused the run: ${errorText(error)}`);
  }
  const ref = p.model ? (p.provider && p.provider !== CODEX_LLM_PROVIDER ? `${p.provider}/${p.model}` : p.model) : undefined;
  const refusal = llmPolicyRefusal(opts.policy, ref, opts.model);
  if (refusal) throw new SubagentRequestError("run", `${refusal} (the host's plugins.entries.${opts.pluginId ?? "<plugin>"}.llm policy)`);
  const wiring = opts.wiring();
  if (!wiring) throw new SubagentRequestError("run", "the plugin is still loading; subagent runs start once loadContextEngine returned");
  // Counted, not random: a run id may reach the model through a tool's output, and that must not vary between runs.
  const runId = `subagent-run-${++state.started}`;
  forgetOldRuns(state);
  state.runs.set(runId, startChildRun(state, runId, p, wiring, codexModelFor(ref, opts.model)));
  if (p.idempotencyKey !== undefined) state.byIdempotencyKey.set(p.idempotencyKey, runId);
  opts.logger.info({ event: "openclaw.subagent.run", ...runIds(opts, runId, p.sessionKey), ...(p.lane ? { lane: p.lane } : {}), tools: !p.disableTools }, "subagent run started");
  return { runId, sessionKey: p.sessionKey };
}

/** A long-lived host keeps the outcomes of its latest ended runs only (and their idempotency keys). */
function forgetOldRuns(state: SubagentHostState): void {
  for (const [runId, run] of state.runs) {
    if (state.runs.size < MAX_KEPT_RUNS) break;
    if (run.settled) state.runs.delete(runId);
  }
  for (const [key, runId] of state.byIdempotencyKey) if (!state.runs.has(runId)) state.byIdempotencyKey.delete(key);
}

function runIds(opts: SubagentHostOptions, runId: string, sessionKey: string) {
  return { pluginId: opts.pluginId, runId, sessionKeyHash: keyHash(sessionKey) };
}

/** One `runCodexTurn` on the child session with the plugin's wiring; its outcome as `waitForRun` reports it. */
function startChildRun(state: SubagentHostState, runId: string, p: SubagentRunParams, wiring: SubagentTurnWiring, model: string | undefined): SubagentRun {
  const { opts } = state;
  const controller = new AbortController();
  const run: SubagentRun = { sessionKey: p.sessionKey, controller, settled: false, outcome: Promise.resolve({ status: "error" }) };
  const turn = async (): Promise<SubagentWaitResult> => {
    const result = await runCodexTurn({
      appServer: opts.appServer,
      sessionId: childSessionId(p.sessionKey),
      sessionKey: p.sessionKey,
      // The child's hooks see the run id `run` returned (what the plugin waits on).
      runId,
      // The host's store for the child, else its file (the turn's own JSONL store then reports what it set aside).
      ...(opts.storeFor ? { store: opts.storeFor({ sessionId: childSessionId(p.sessionKey), sessionKey: p.sessionKey }) } : { sessionFile: await state.dir.fileFor(p.sessionKey) }),
      prompt: p.message,
      cwd: p.cwd ?? opts.cwd,
      ...(wiring.engine ? { contextEngine: wiring.engine } : {}),
      dynamicTools: p.disableTools ? [] : wiring.dynamicTools,
      hooks: wiring.hooks,
      runtimeContext: wiring.runtimeContext,
      ...(p.extraSystemPrompt?.trim() ? { developerInstructions: p.extraSystemPrompt } : {}),
      ...(model ? { model } : {}),
      ...(opts.tokenBudget !== undefined ? { contextTokenBudget: opts.tokenBudget } : {}),
      signal: controller.signal,
      logger: opts.logger,
    });
    if (result.status === "completed") return { status: "ok" };
    return { status: "error", error: result.error?.message ?? `the child turn ended ${result.status}` };
  };
  run.outcome = turn()
    .catch((error: unknown): SubagentWaitResult => ({ status: "error", error: errorText(error) }))
    .then((outcome) => {
      run.settled = true;
      opts.logger.info({ event: "openclaw.subagent.ended", ...runIds(opts, runId, p.sessionKey), status: outcome.status }, "subagent run ended");
      return outcome;
    });
  return run;
}

/**
 * The child session's store: the host's `storeFor`, else the JSONL store of its file in the session directory
 * (`create`: make the directory, a run is about to write; otherwise undefined while no directory exists).
 */
async function childStore(state: SubagentHostState, sessionKey: string, o: { create: boolean }): Promise<SessionStore | undefined> {
  const sessionId = childSessionId(sessionKey);
  if (state.opts.storeFor) return state.opts.storeFor({ sessionId, sessionKey });
  const sessionFile = o.create ? await state.dir.fileFor(sessionKey) : await state.dir.existingFileFor(sessionKey);
  return sessionFile === undefined ? undefined : createJsonlSessionStore({ sessionFile, sessionId, logger: state.opts.logger });
}

/** `waitForRun`: the run's outcome, or `timeout` after `timeoutMs`. */
async function waitForRun(state: SubagentHostState, params: { runId: string; timeoutMs?: number | undefined }): Promise<SubagentWaitResult> {
  const p = parseParams("waitForRun", waitParamsSchema, params);
  const run = state.runs.get(p.runId);
  if (!run) return { status: "error", error: `unknown runId ${p.runId}` };
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<SubagentWaitResult>((resolve) => {
    timer = setTimeout(() => resolve({ status: "timeout" }), p.timeoutMs ?? DEFAULT_SUBAGENT_WAIT_MS);
  });
  try {
    return await Promise.race([run.outcome, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** `getSessionMessages`: copies of the child transcript's messages (the last `limit`). */
async function readChildMessages(state: SubagentHostState, params: { sessionKey: string; limit?: number | undefined }): Promise<{ messages: unknown[] }> {
  const p = parseParams("getSessionMessages", messagesParamsSchema, params);
  const store = await childStore(state, p.sessionKey, { create: false });
  const history = store ? await store.readHistory() : undefined;
  if (!history?.exists) return { messages: [] };
  const messages = p.limit !== undefined ? history.messages.slice(-p.limit) : history.messages;
  // The store's messages are frozen and shared with later turns; the plugin gets its own copies, as from OpenClaw.
  return { messages: structuredClone([...messages]) };
}

/** `deleteSession`: abort the child's running turns, then remove its transcript and sidecars. */
async function deleteChildSession(state: SubagentHostState, params: { sessionKey: string; deleteTranscript?: boolean | undefined }): Promise<void> {
  const p = parseParams("deleteSession", deleteParamsSchema, params);
  const aborted = await abortRuns([...state.runs.values()].filter((r) => r.sessionKey === p.sessionKey), "runtime.subagent.deleteSession");
  if (p.deleteTranscript === false) return;
  const store = await childStore(state, p.sessionKey, { create: false });
  if (store === undefined) return;
  // Its runs were aborted above; nothing else writes a child session. The store removes what a last turn discarded too.
  await store.deleteSession();
  state.opts.logger.info({ event: "openclaw.subagent.sessionDeleted", pluginId: state.opts.pluginId, sessionKeyHash: keyHash(p.sessionKey), abortedRuns: aborted }, "subagent session deleted");
}

/** Abort the runs of `runs` still going and wait for them to end (at most {@link ABORT_SETTLE_MS}); how many were going. */
async function abortRuns(runs: readonly SubagentRun[], reason: string): Promise<number> {
  const active = runs.filter((r) => !r.settled);
  for (const r of active) r.controller.abort(new Error(reason));
  await settleWithin(active, ABORT_SETTLE_MS);
  return active.length;
}

/** Wait for `runs` to end, at most `ms`. */
async function settleWithin(runs: readonly SubagentRun[], ms: number): Promise<void> {
  if (runs.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(runs.map((r) => r.outcome)), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
