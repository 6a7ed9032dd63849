/**
 * A typed client for one `codex app-server` process (newline-delimited JSON-RPC over stdio): `CodexAppServer`, the one
 * public class. It composes the concepts that live in their own modules:
 * - the process (process.ts), its CODEX_HOME (codex-home.ts), environment (child-env.ts) and version (codex-version.ts);
 * - the JSON-RPC session (rpc.ts, json-safe.ts);
 * - thread operations (threads.ts, thread-params.ts) and native compaction (compaction.ts);
 * - Codex's warnings about its own setup (config-warnings.ts) and MCP servers that failed to start (mcp-startup.ts);
 * - the turn run (turn-runner.ts, turn-run.ts): steering, watchdogs, and server requests (server-requests.ts:
 *   dynamic tools, approvals, user input).
 *
 * Verified behaviour it relies on: the team notes' codex-app-server.md (P-numbers refer to its pitfalls).
 */
import { mkdir, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { pino, type Logger } from "pino";
import type { AdditionalContextEntry } from "../../machines/turn.contract.js";
import { accountMissing, apiKeyInChildEnv, authRequiredError, parseAccountRead, type CodexAccountState } from "./account.js";
import { resolveCodexCommand, type CodexCommand } from "./binary.js";
import { attachTempCodexHomeProcess, createTempCodexHome, removeTempCodexHome, resolveCodexHome } from "./codex-home.js";
import { CompactionRunner, type CompactThreadResult } from "./compaction.js";
import { OFFLINE_KEY_ENV, OFFLINE_PROVIDER_ID } from "./config.js";
import { ConfigWarnings, configWarningOf, type CodexConfigWarning } from "./config-warnings.js";
import { McpStartupFailures, mcpStartupOf, type McpStartupUpdate } from "./mcp-startup.js";
import type { CodexTurnWarning } from "./warnings.js";
import { CodexAppServerError, invalidArgument } from "./errors.js";
import {
  findRelayHooks,
  computeRelayTrust,
  HOOK_RELAY_ENV,
  hookRelayCommand,
  learnedRelayTrust,
  rememberRelayTrust,
  startHookRelay,
  withRelayHook,
  type HookRelay,
} from "./native-hooks.js";
import {
  spawnOptionsSchema,
  startTurnSchema,
  type CodexAppServerOptions,
  type ResolvedSpawnOptions,
  type ResumeThreadOptions,
  type StartThreadOptions,
  type StartTurnOptions,
} from "./options.js";
import type { AppServerProcess } from "./process.js";
import type { ClientRequest } from "./protocol/ClientRequest.js";
import type { ReasoningEffort } from "./protocol/ReasoningEffort.js";
import type { OutgoingRpcMessage, RpcStats } from "./rpc.js";
import type { IncomingNotification } from "./schemas.js";
import { answerServerRequest, decideRelayedHook } from "./server-requests.js";
import { ProcessSupervisor, type ProcessEnd } from "./supervisor.js";
import { turnSandboxPolicy } from "./thread-params.js";
import { ThreadRegistry, type ThreadInfo } from "./threads.js";
import { releaseGraceMs, type ThreadReleasePolicy } from "./thread-release.js";
import { TurnRun } from "./turn-run.js";
import { TurnRunner, type CodexTurn } from "./turn-runner.js";

export type { CodexAccountState } from "./account.js";
export type { ApprovalCallback, CodexApprovalDecision, CodexApprovalRequest, CodexFileChange, HostDecisionContext } from "./approvals.js";
export { codexHomeTempBase, resolveCodexHome } from "./codex-home.js";
export type { CompactThreadResult } from "./compaction.js";
export type {
  AfterToolCall,
  BeforeToolCall,
  BeforeToolCallDecision,
  DynamicToolContext,
  DynamicToolSpec,
  ToolCallInfo,
} from "./dynamic-tools.js";
export type {
  ApprovalHandler,
  CodexAppServerOptions,
  CodexUserInputRequest,
  ResumeThreadOptions,
  StartThreadOptions,
  StartTurnOptions,
  UserInputAnswers,
  UserInputCallback,
} from "./options.js";
export type { ThreadInfo } from "./threads.js";
export type { CodexTurn } from "./turn-runner.js";
export type { CodexTurnWarning, CodexTurnWarningCode } from "./warnings.js";

export interface CodexAppServerStats extends RpcStats {
  /** Processes started (1 + restarts). */
  processes: number;
  restarts: number;
  activeTurns: number;
  stderrBytes: number;
  toolCalls: number;
  approvalsDeclined: number;
  unsupportedServerRequests: number;
}

type ClientMethod = ClientRequest["method"];
type ParamsOf<M extends ClientMethod> = Extract<ClientRequest, { method: M }>["params"];

/** Offline / test settings (the fake provider, a generated catalog): these run in a temporary CODEX_HOME by default. */
function looksOffline(o: ResolvedSpawnOptions): boolean {
  return o.modelCatalog !== undefined || o.config?.model_provider === OFFLINE_PROVIDER_ID || o.env?.[OFFLINE_KEY_ENV] !== undefined;
}

/** Decide and prepare CODEX_HOME: explicit, temporary (created here), or the user's (`resolveCodexHome`). */
async function prepareCodexHome(o: ResolvedSpawnOptions): Promise<{ home: string; owned: boolean }> {
  if (o.codexHome !== undefined) return { home: o.codexHome, owned: false };
  if (o.temporaryHome ?? looksOffline(o)) return { home: await createTempCodexHome(), owned: true };
  const { home, source } = resolveCodexHome();
  try {
    // Codex refuses a CODEX_HOME that does not exist; its default ~/.codex it would create itself.
    if (source === "default") await mkdir(home, { recursive: true });
    else if (!(await stat(home)).isDirectory()) throw new Error("not a directory");
  } catch (err) {
    const origin = source === "default" ? "the default ~/.codex" : "from $CODEX_HOME";
    throw new CodexAppServerError("SPAWN_FAILED", `CODEX_HOME ${home} (${origin}) is not usable: ${(err as Error).message}`);
  }
  return { home, owned: false };
}

/** The turn warning for an MCP server that failed to start on the turn's thread: Codex's own error text. */
function mcpServerFailedWarning(f: { server: string; error: string }): Omit<CodexTurnWarning, "threadId" | "turnId"> {
  return { code: "mcpServerFailed", message: f.error, mcpServer: f.server };
}

/**
 * One `codex app-server` process and the threads/turns running in it.
 *
 * @example
 * ```ts
 * const fake = await startFakeResponsesServer();
 * const server = await CodexAppServer.spawn({ ...offlineCodexConfig({ baseUrl: fake.baseUrl }) });
 * const { threadId } = await server.startThread({ developerInstructions: "Be brief." });
 * const turn = await server.startTurn({ threadId, text: "hello" });
 * const record = await turn.completion; // record.assistantText, record.messagesSnapshot, record.usage
 * await server.close();
 * ```
 */
export class CodexAppServer {
  private readonly opts: ResolvedSpawnOptions;
  private readonly logger: Logger;
  private readonly ownsHome: boolean;
  /** CODEX_HOME of the process (kept across restarts so threads can be resumed). */
  readonly codexHome: string;
  private readonly supervisor: ProcessSupervisor;
  private closedPromise: Promise<void> | undefined;
  private readonly threads: ThreadRegistry;
  private readonly turns: TurnRunner;
  private readonly compactions: CompactionRunner;
  private readonly listeners = new Set<(n: { method: string; params: unknown; emittedAtMs?: number | undefined }) => void>();
  private readonly outgoingListeners = new Set<(message: OutgoingRpcMessage) => void>();
  private readonly counters = { toolCalls: 0, approvalsDeclined: 0, unsupportedServerRequests: 0 };
  private readonly setupWarnings = new ConfigWarnings();
  private readonly mcpFailures = new McpStartupFailures();
  /** The native tool hook relay (`nativeToolHooks`), while this client is open. */
  private hookRelay: HookRelay | undefined;
  /** Releases idle threads (`releaseIdleThreads`) while this client is open; unref'd, so it never keeps a host alive. */
  private readonly releaseTimer: NodeJS.Timeout | undefined;
  /** The live preflight passed (or is being asked): once per client; a failed one is asked again next time. */
  private accountChecked: Promise<void> | undefined;

  private constructor(opts: ResolvedSpawnOptions, command: CodexCommand, codexHome: string, ownsHome: boolean) {
    this.opts = opts;
    this.logger = opts.logger ?? pino({ level: "silent" });
    this.codexHome = codexHome;
    this.ownsHome = ownsHome;
    this.supervisor = new ProcessSupervisor(opts, command, codexHome, this.logger, {
      notification: (proc, n) => this.route(proc, n),
      serverRequest: (proc, r) => void answerServerRequest(this.serverRequestDeps(), proc.rpc, r),
      unknownNotification: (method, params) => this.emitRaw({ method, params }),
      outgoing: (message) => {
        for (const listener of this.outgoingListeners) listener(message);
      },
      exited: (proc, end) => this.onExit(proc, end),
    });
    const rpcRequest = (method: ClientMethod, params: unknown, timeoutMs?: number) => this.supervisor.rpcRequest(method, params, timeoutMs);
    const defaultCwd = () => this.opts.cwd ?? process.cwd();
    const generation = () => this.supervisor.generation;
    this.threads = new ThreadRegistry({ logger: this.logger, rpcRequest, ensureAlive: () => this.ensureAlive(), generation, defaultCwd });
    this.turns = new TurnRunner({
      logger: this.logger,
      rpcRequest,
      liveGeneration: () => this.supervisor.liveGeneration(),
      requestTimeoutMs: opts.requestTimeoutMs,
      idleInterruptGraceMs: opts.idleInterruptGraceMs,
    });
    this.compactions = new CompactionRunner({
      logger: this.logger,
      rpcRequest,
      ensureAlive: () => this.ensureAlive(),
      turnRunning: (threadId) => this.turns.active(threadId) !== undefined,
      loadForCompaction: (threadId) => this.threads.loadForCompaction(threadId),
      releaseUnrecorded: (threadId) => this.threads.releaseUnrecorded(threadId),
    });
    const policy = this.releasePolicy();
    if (policy.idleMs > 0 || policy.maxLoaded > 0 || opts.maxRememberedThreads > 0) {
      const every = Math.min(15_000, Math.max(50, Math.floor((policy.idleMs > 0 ? Math.min(policy.idleMs, policy.graceMs) : policy.graceMs) / 2)));
      this.releaseTimer = setInterval(() => this.releaseIdleThreads(), every);
      this.releaseTimer.unref();
    }
  }

  private releasePolicy(): ThreadReleasePolicy {
    const idleMs = this.opts.releaseIdleThreadsAfterMs;
    return { idleMs, maxLoaded: this.opts.maxLoadedThreads, graceMs: releaseGraceMs(idleMs) };
  }

  /**
   * Release the threads `releaseIdleThreadsAfterMs` and `maxLoadedThreads` pick (never one with a running turn or
   * compaction), with the sub-agent threads below them that run no turn, and forget the least recently used threads
   * Codex no longer holds beyond `maxRememberedThreads`; runs on a timer, and may be called at any time. Returns the
   * released threads' ids (not their sub-agents').
   *
   * @example
   * ```ts
   * const released = server.releaseIdleThreads(); // e.g. before a host goes quiet for the night
   * ```
   */
  releaseIdleThreads(): string[] {
    if (this.closedPromise) return [];
    // Threads Codex no longer holds stay remembered (for a re-attach) up to maxRememberedThreads.
    this.threads.forgetUnloaded(this.opts.maxRememberedThreads);
    if (!this.supervisor.proc?.alive) return [];
    const released = this.threads.releaseIdle(this.releasePolicy(), (threadId) => this.turns.active(threadId) !== undefined || this.compactions.running(threadId));
    // Codex keeps a sub-agent's thread loaded after its parent goes: the idle ones go with it.
    for (const threadId of released) for (const child of this.turns.idleSubAgentsOf(threadId)) this.threads.releaseUnrecorded(child);
    return released;
  }

  /**
   * Start `codex app-server` and complete the `initialize` handshake. CODEX_HOME: `codexHome` when given; a fresh
   * temporary one for offline settings or `temporaryHome: true` (removed by close() and on process exit); else the
   * user's, `resolveCodexHome()` (`$CODEX_HOME`, else `~/.codex`, created if missing). A binary whose version differs
   * from the one the protocol types were generated for is logged as a warning (`codex.versionMismatch`).
   *
   * @example
   * ```ts
   * const server = await CodexAppServer.spawn({ config: { model: "gpt-5.5" }, passEnv: ["OPENAI_API_KEY"] });
   * ```
   */
  static async spawn(options: CodexAppServerOptions = {}): Promise<CodexAppServer> {
    const parsed = spawnOptionsSchema.safeParse(options);
    if (!parsed.success) invalidArgument("CodexAppServer.spawn options", parsed.error.issues);
    const opts = parsed.data;
    // Resolve the binary before any temp dir exists: a missing binary must not leak one.
    const command = resolveCodexCommand(opts.codexBin);
    const { home, owned } = await prepareCodexHome(opts);
    const server = new CodexAppServer(opts, command, home, owned);
    // A host that ends without close() must stop Codex before its temporary home goes (see codex-home.ts).
    if (owned) attachTempCodexHomeProcess(home, () => (server.supervisor.proc?.alive ? server.supervisor.proc.pid : undefined));
    try {
      if (opts.modelCatalog) {
        const catalogPath = path.join(home, "model-catalog.json");
        await writeFile(catalogPath, `${JSON.stringify(opts.modelCatalog, null, 2)}\n`);
        server.opts.config = { ...(opts.config ?? {}), model_catalog_json: catalogPath };
      }
      if (opts.nativeToolHooks) await server.startWithHookRelay();
      else await server.supervisor.start();
    } catch (err) {
      await server.hookRelay?.close();
      if (owned) await removeTempCodexHome(home);
      throw err;
    }
    return server;
  }

  /**
   * Start with the native tool hook relay (see src/codex/native-hooks.ts): the relay socket, Codex's `PreToolUse` and
   * `Stop` hooks pointing at it, and their trust, computed as Codex hashes hooks and checked with `hooks/list`. Should
   * Codex disagree (another version's hashing), the hash it reports is learned for this process and the app-server
   * restarted once with it; hooks that still are not trusted fail the spawn (a relay Codex never calls guards nothing).
   */
  private async startWithHookRelay(): Promise<void> {
    this.hookRelay = await startHookRelay((call) => decideRelayedHook(this.serverRequestDeps(), call));
    this.opts.env = { ...(this.opts.env ?? {}), [HOOK_RELAY_ENV]: this.hookRelay.socketPath };
    const command = hookRelayCommand();
    const base = this.opts.config ?? {};
    const definition = withRelayHook(base, command).hooks;
    // Computed as Codex hashes hooks; a trust learned from hooks/list (another Codex's hashing) takes precedence.
    this.opts.config = withRelayHook(base, command, learnedRelayTrust(definition) ?? computeRelayTrust(base, command));
    await this.supervisor.start();
    const found = findRelayHooks(await this.supervisor.rpcRequest("hooks/list", { cwds: [this.opts.cwd ?? process.cwd()] }), command);
    if (!found) throw new CodexAppServerError("SPAWN_FAILED", "codex app-server did not load the native tool hooks (nativeToolHooks); is hooks support disabled in its config?");
    if (found.every((h) => h.trusted)) return;
    const trust = found.map((h) => ({ key: h.key, hash: h.hash }));
    rememberRelayTrust(definition, trust);
    this.opts.config = withRelayHook(base, command, trust);
    this.logger.warn({ event: "codex.hooks.trusted", hooks: trust.length }, "codex hashed the native tool hooks differently; restarting with the trust it reported");
    await this.supervisor.close();
    await this.supervisor.start();
    const again = findRelayHooks(await this.supervisor.rpcRequest("hooks/list", { cwds: [this.opts.cwd ?? process.cwd()] }), command);
    if (!again?.every((h) => h.trusted)) throw new CodexAppServerError("SPAWN_FAILED", "codex app-server does not trust the native tool hooks (nativeToolHooks)");
  }

  /** PID of the current process (undefined when none is running). */
  get pid(): number | undefined {
    const proc = this.supervisor.proc;
    return proc?.alive ? proc.pid : undefined;
  }

  /** A live process is running. */
  get alive(): boolean {
    return this.supervisor.proc?.alive === true;
  }

  get closed(): boolean {
    return this.closedPromise !== undefined;
  }

  /** Last part of the current (or last) process's stderr. */
  get stderrTail(): string {
    return this.supervisor.proc?.stderrTail ?? "";
  }

  /** Milliseconds from spawn to the `initialize` response of the current process. */
  get startupMs(): number {
    return this.supervisor.startupMs;
  }

  /** Version of the running codex binary (from its `initialize` answer), when it could be read. */
  get codexVersion(): string | undefined {
    return this.supervisor.codexVersion;
  }

  /**
   * Codex's warnings about its own setup so far, each once, first seen first: a config or rules file it could not use
   * ("Error parsing rules; custom rules not applied."), a missing sandbox helper, a deprecated setting. They arrive at
   * startup and when a thread's configuration loads; `onConfigWarning` hears each as it arrives.
   *
   * @example
   * ```ts
   * for (const w of server.configWarnings) console.error(`codex: ${w.summary}${w.path ? ` (${w.path})` : ""}`);
   * ```
   */
  get configWarnings(): readonly CodexConfigWarning[] {
    return this.setupWarnings.list();
  }

  /** Counters (never content). */
  stats(): CodexAppServerStats {
    return {
      ...this.supervisor.rpcStats(),
      processes: this.supervisor.generation,
      restarts: this.supervisor.restarts,
      activeTurns: this.turns.activeCount(),
      stderrBytes: this.supervisor.stderrBytes(),
      toolCalls: this.counters.toolCalls,
      approvalsDeclined: this.counters.approvalsDeclined,
      unsupportedServerRequests: this.counters.unsupportedServerRequests,
    };
  }

  /**
   * Listen to every JSON-RPC message this client writes to Codex (requests, notifications, replies to Codex's requests),
   * as sent: what a trajectory records beside the notifications. Returns an unsubscribe function.
   *
   * @example
   * ```ts
   * const off = server.onOutgoing((m) => console.log(m.method ?? `reply ${m.id}`));
   * ```
   */
  onOutgoing(listener: (message: OutgoingRpcMessage) => void): () => void {
    this.outgoingListeners.add(listener);
    return () => this.outgoingListeners.delete(listener);
  }

  /** Listen to every notification (validated ones and unknown methods). Returns an unsubscribe function. */
  onNotification(listener: (n: { method: string; params: unknown; emittedAtMs?: number | undefined }) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  // -- process lifecycle -----------------------------------------------------------------------------------------

  /**
   * The process ended: its running turns and waiting compactions end with the same code as its pending requests
   * (`PROCESS_EXITED`, or `CLOSED` after close()), on the turn record's `error.code` too.
   */
  private onExit(proc: AppServerProcess, end: ProcessEnd): void {
    this.turns.finishAll({ codexStatus: "failed", error: { message: end.message, code: end.code } }, proc.generation);
    this.compactions.failAll(end.message);
  }

  /**
   * Make sure a live process is running: respawns after a crash (same CODEX_HOME) unless closed, autoRestart is off,
   * or the crash-loop guard tripped (CRASH_LOOP).
   *
   * @example
   * ```ts
   * await server.ensureAlive();
   * ```
   */
  async ensureAlive(): Promise<void> {
    if (this.closedPromise) throw new CodexAppServerError("CLOSED", "codex app-server client is closed");
    await this.supervisor.ensureAlive();
  }

  /**
   * Replace the process with a fresh one (same CODEX_HOME). Subject to the crash-loop guard.
   *
   * @example
   * ```ts
   * await server.restart();
   * ```
   */
  async restart(): Promise<void> {
    if (this.closedPromise) throw new CodexAppServerError("CLOSED", "codex app-server client is closed");
    await this.supervisor.restart();
  }

  /**
   * Close stdin, wait for exit (kill after a bound), and remove the temp CODEX_HOME if we created it. Idempotent.
   *
   * @example
   * ```ts
   * await server.close();
   * ```
   */
  close(): Promise<void> {
    this.closedPromise ??= (async () => {
      clearInterval(this.releaseTimer);
      await this.supervisor.close();
      await this.hookRelay?.close();
      this.turns.finishAll({ codexStatus: "failed", error: { message: "codex app-server was closed", code: "CLOSED" } });
      if (this.ownsHome) await removeTempCodexHome(this.codexHome);
    })();
    return this.closedPromise;
  }

  // -- requests ----------------------------------------------------------------------------------------------------

  /**
   * Send any client request of the pinned protocol (escape hatch; params are typed from the generated protocol).
   *
   * @example
   * ```ts
   * const res = await server.request("thread/read", { threadId, includeTurns: true });
   * ```
   */
  async request<M extends ClientMethod>(method: M, params: ParamsOf<M>, options: { timeoutMs?: number | undefined } = {}): Promise<unknown> {
    await this.ensureAlive();
    return this.supervisor.rpcRequest(method, params, options.timeoutMs);
  }

  // -- account -----------------------------------------------------------------------------------------------------

  /**
   * Codex's account state (`account/read`, no token refresh: answered from CODEX_HOME, no network), and whether an
   * API key is in the app-server's environment. Not cached.
   *
   * @example
   * ```ts
   * const state = await server.readAccount(); // { accountType: "chatgpt", requiresOpenaiAuth: true, apiKeyInEnv: false }
   * ```
   */
  async readAccount(): Promise<CodexAccountState> {
    await this.ensureAlive();
    const raw = await this.supervisor.rpcRequest("account/read", { refreshToken: false }, Math.min(this.opts.requestTimeoutMs, 10_000));
    return parseAccountRead(raw, apiKeyInChildEnv({ env: this.opts.env, passEnv: this.opts.passEnv, parent: process.env }));
  }

  /**
   * The live preflight: throws {@link CodexAppServerError} `AUTH_REQUIRED` (naming `npx codex login` and
   * `OPENAI_API_KEY`) when the provider needs OpenAI credentials and Codex has no account and no API key. Asked once
   * per client (a pass is kept); `startThread`, `startTurn` and `compactThread` call it first unless
   * `accountPreflight` is off (the offline settings turn it off). A Codex that does not know `account/read` passes.
   *
   * @example
   * ```ts
   * const server = await CodexAppServer.spawn({ passEnv: ["OPENAI_API_KEY"] });
   * await server.requireAccount(); // fails at once, before any turn, on a machine with no `codex login`
   * ```
   */
  requireAccount(): Promise<void> {
    this.accountChecked ??= (async () => {
      let state: CodexAccountState;
      try {
        state = await this.readAccount();
      } catch (err) {
        // An older Codex without account/read: nothing to tell, so the turn decides.
        if (err instanceof CodexAppServerError && err.code === "RPC_ERROR") {
          this.logger.warn({ event: "codex.accountPreflight.skipped", rpcCode: err.rpcCode }, "codex did not answer account/read; preflight skipped");
          return;
        }
        throw err;
      }
      this.logger.info({ event: "codex.accountPreflight", accountType: state.accountType, requiresOpenaiAuth: state.requiresOpenaiAuth, apiKeyInEnv: state.apiKeyInEnv }, "codex account read");
      if (accountMissing(state)) throw authRequiredError(this.codexHome);
    })();
    const checked = this.accountChecked;
    checked.catch(() => {
      if (this.accountChecked === checked) this.accountChecked = undefined;
    });
    return checked;
  }

  /** The preflight, when this client runs it (live settings, or `accountPreflight: true`). */
  private async preflight(): Promise<void> {
    if (this.opts.accountPreflight ?? !looksOffline(this.opts)) await this.requireAccount();
  }

  // -- threads -----------------------------------------------------------------------------------------------------

  /**
   * Start a thread. Defaults: approval policy "never", sandbox "read-only"; Codex's built-in personality is disabled.
   * `sandbox: "workspace-write"` with `writableRoots` / `networkAccess` also sends the matching sandbox policy with
   * each turn/start; `reasoningEffort` / `reasoningSummary` go into the thread config.
   *
   * @example
   * ```ts
   * const { threadId } = await server.startThread({ sandbox: "workspace-write", approvalPolicy: "on-request", cwd: workspace });
   * ```
   */
  async startThread(options: StartThreadOptions = {}): Promise<ThreadInfo> {
    await this.preflight();
    return this.threads.start(options);
  }

  /**
   * Resume a persisted thread (e.g. in a fresh process on the same CODEX_HOME). Always `excludeTurns: true` (P11).
   * Pass the same settings every time: Codex does not restore developer instructions, sandbox or approvals (P4); they
   * are re-sent on every real resume.
   *
   * @example
   * ```ts
   * await server.resumeThread({ threadId, developerInstructions: "Be brief.", sandbox: "workspace-write" });
   * ```
   */
  resumeThread(options: ResumeThreadOptions): Promise<ThreadInfo> {
    return this.threads.resume(options);
  }

  /**
   * Replace the dynamic tool handlers of a thread (declarations stay as given at thread/start).
   *
   * @example
   * ```ts
   * server.setThreadTools(threadId, [lookupTool]);
   * ```
   */
  setThreadTools(threadId: string, tools: Parameters<ThreadRegistry["setTools"]>[1]): void {
    this.threads.setTools(threadId, tools);
  }

  // -- turns -------------------------------------------------------------------------------------------------------

  /**
   * Start a turn. Resolves once Codex accepted `turn/start` (rejects with TURN_START_REJECTED otherwise); the
   * returned handle's `completion` resolves with the projected record when the turn ends. Host callbacks of the turn:
   * `onApproval`, `onUserInput`, `beforeToolCall` / `afterToolCall`, `onEvent`, `onWarning`; each is bounded.
   *
   * @example
   * ```ts
   * const turn = await server.startTurn({ threadId, text: "fix the test", onApproval: () => "approve" });
   * setTimeout(() => void turn.steer("be brief"), 100);
   * const record = await turn.completion;
   * ```
   */
  async startTurn(options: StartTurnOptions): Promise<CodexTurn> {
    const parsed = startTurnSchema.safeParse(options);
    if (!parsed.success) invalidArgument("startTurn options", parsed.error.issues);
    const o = parsed.data;
    await this.ensureAlive();
    await this.preflight();
    await this.compactions.idle(o.threadId);
    if (this.turns.active(o.threadId)) {
      throw new CodexAppServerError("TURN_ALREADY_ACTIVE", `thread ${o.threadId} already has a running turn`);
    }
    await this.threads.reattach(o.threadId);
    const thread = this.threads.get(o.threadId);
    const run = new TurnRun({
      threadId: o.threadId,
      generation: this.supervisor.generation,
      originalPrompt: o.originalPrompt ?? o.text,
      idleTimeoutMs: o.idleTimeoutMs ?? this.opts.turnIdleTimeoutMs,
      model: o.model ?? thread?.model,
      provider: thread?.modelProvider,
      options: o,
    });
    this.threads.touch(o.threadId);
    // The thread's MCP servers that failed to start: this turn runs without their tools (later failures: route()).
    for (const failed of this.mcpFailures.of(o.threadId)) run.warn(mcpServerFailedWarning(failed));
    const turn = await this.turns.start(run, {
      text: o.text,
      images: o.images,
      contextImages: o.contextImages,
      additionalContext: o.additionalContext as Record<string, AdditionalContextEntry> | undefined,
      model: o.model,
      effort: o.effort,
      sandboxPolicy: thread ? turnSandboxPolicy(thread.settings) : undefined,
      collaborationMode: o.collaborationMode ? collaborationModeFor(o.collaborationMode, run.model, o.effort) : undefined,
    });
    // Used until its turn ends: the idle time of a thread counts from there.
    const touch = () => this.threads.touch(o.threadId);
    turn.completion.then(touch, touch);
    return turn;
  }

  /**
   * The turn `turnId` when this client runs it on `threadId` and it has not ended: its handle (`interrupt`,
   * `completion`), else undefined. For code that finds a turn by its id (crash recovery) and must not take Codex's
   * `thread/read` as the last word on a turn this client still streams: with codex-cli 0.171.0 under load, a turn
   * started right after the thread's previous one ended can read as `interrupted` on an `idle` thread while it runs.
   *
   * @example
   * ```ts
   * const live = server.runningTurn(threadId, turnId);
   * if (live) {
   *   await live.interrupt({ graceMs: 5_000 });
   *   await live.completion;
   * }
   * ```
   */
  runningTurn(threadId: string, turnId: string): CodexTurn | undefined {
    return this.turns.running(threadId, turnId);
  }

  // -- compaction --------------------------------------------------------------------------------------------------

  /**
   * Run native manual compaction (`thread/compact/start`) and wait, bounded, for its `contextCompaction` item and
   * the end of the compaction turn. A thread this client does not know (the host restarted, a forgotten one) is
   * resumed for it with no overrides, so Codex loads it with the settings it keeps, and released after it; one Codex
   * cannot load resolves `{ ok: false, reason }`.
   *
   * @example
   * ```ts
   * const r = await server.compactThread({ threadId, timeoutMs: 30_000 });
   * if (!r.ok) console.warn(r.reason);
   * ```
   */
  async compactThread(options: { threadId: string; timeoutMs?: number | undefined }): Promise<CompactThreadResult> {
    await this.preflight();
    return this.compactions.compact(options);
  }

  // -- incoming ----------------------------------------------------------------------------------------------------

  private emitRaw(n: { method: string; params: unknown; emittedAtMs?: number | undefined }): void {
    for (const l of this.listeners) {
      try {
        l(n);
      } catch (err) {
        this.logger.error({ event: "codex.listenerError", method: n.method, errName: err instanceof Error ? err.name : typeof err }, "notification listener threw");
      }
    }
  }

  /** A notification of `proc`: to raw listeners, then to the thread's turn and compaction. */
  private route(proc: AppServerProcess, n: IncomingNotification): void {
    if (proc !== this.supervisor.proc) return;
    this.emitRaw(n);
    const setupWarning = configWarningOf(n);
    if (setupWarning) return this.noteConfigWarning(setupWarning);
    const mcpStartup = mcpStartupOf(n);
    if (mcpStartup) return this.noteMcpStartup(mcpStartup);
    if (!n.consumed) {
      // Plan updates are not validated notifications, but the turn's projector records them (codex.plan messages).
      const planThread = (n.params as { threadId?: unknown } | undefined)?.threadId;
      if (n.method === "turn/plan/updated" && typeof planThread === "string") this.turns.onNotification(planThread, proc.generation, n);
      // Codex stopped waiting for a request it sent (it resolved it itself): the host's pending decision is withdrawn.
      if (n.method === "serverRequest/resolved" && typeof planThread === "string") this.turns.onNotification(planThread, proc.generation, n);
      return;
    }
    const threadId = (n.params as { threadId?: string | undefined }).threadId;
    if (threadId === undefined) return;
    if (n.method === "thread/closed") {
      this.threads.markUnloaded(threadId, proc.generation);
      this.mcpFailures.forget(threadId);
      this.turns.forgetThread(threadId);
      return;
    }
    this.turns.onNotification(threadId, proc.generation, n);
    this.compactions.onNotification(threadId, n);
  }

  /** A setup warning not seen before is logged (never its details, which may quote the file) and told to the host. */
  private noteConfigWarning(w: CodexConfigWarning): void {
    if (!this.setupWarnings.add(w)) return;
    const at = w.path ? { path: w.path, ...(w.range ? { line: w.range.start.line } : {}) } : {};
    this.logger.warn({ event: "codex.configWarning", kind: w.kind, summary: w.summary, ...at }, "codex setup warning");
    try {
      this.opts.onConfigWarning?.(w);
    } catch (err) {
      this.logger.error({ event: "codex.listenerError", method: "onConfigWarning", errName: err instanceof Error ? err.name : typeof err }, "onConfigWarning threw");
    }
  }

  /** An MCP server that has just failed on a thread is logged (not Codex's error text) and told to its running turn. */
  private noteMcpStartup(u: McpStartupUpdate): void {
    if (!this.mcpFailures.note(u) || u.threadId === null) return;
    this.logger.warn({ event: "codex.mcpServer.failed", threadId: u.threadId, server: u.server }, "an MCP server failed to start");
    this.turns.active(u.threadId)?.warn(mcpServerFailedWarning({ server: u.server, error: u.error ?? "failed to start" }));
  }

  private serverRequestDeps() {
    return {
      logger: this.logger,
      // A sub-agent's approvals and questions go to the turn it works for.
      activeRun: (threadId: string) => this.turns.runFor(threadId),
      // A Stop is the thread's own turn ending (a sub-agent's final answer is not the turn's).
      ownRun: (threadId: string) => this.turns.active(threadId),
      tool: (threadId: string, name: string) => this.threads.get(threadId)?.tools.get(name),
      armIdle: (run: TurnRun) => this.turns.armIdle(run),
      approvalHandler: this.opts.approvalHandler,
      counters: this.counters,
    };
  }
}

/**
 * `turn/start`'s `collaborationMode`: the mode with the turn's model (Codex requires one) and reasoning effort.
 * Throws INVALID_ARGUMENT when the model is unknown (a thread this client did not start or resume, and no `model`).
 *
 * @example
 * ```ts
 * collaborationModeFor("plan", "gpt-5.5", undefined); // { mode: "plan", settings: { model: "gpt-5.5", reasoning_effort: null, developer_instructions: null } }
 * ```
 */
export function collaborationModeFor(mode: "plan" | "default", model: string | undefined, effort: string | undefined) {
  if (!model) {
    throw new CodexAppServerError(
      "INVALID_ARGUMENT",
      "startTurn options: collaborationMode needs the turn's model: pass model (the thread's is unknown to this client)",
      { method: "turn/start", field: "collaborationMode" },
    );
  }
  return { mode, settings: { model, reasoning_effort: (effort ?? null) as ReasoningEffort | null, developer_instructions: null } };
}
