/**
 * A typed client for one `codex app-server` process (newline-delimited JSON-RPC over stdio): `CodexAppServer`, the one
 * public class. It composes the concepts that live in their own modules:
 * - the process (process.ts), its CODEX_HOME (codex-home.ts), environment (child-env.ts) and version (codex-version.ts);
 * - the JSON-RPC session (rpc.ts, json-safe.ts);
 * - thread operations (threads.ts, thread-params.ts) and native compaction (compaction.ts);
 * - the turn run (turn-runner.ts, turn-run.ts): steering, watchdogs, and server requests (server-requests.ts:
 *   dynamic tools, approvals, user input).
 *
 * Verified behaviour it relies on: the team notes' codex-app-server.md (P-numbers refer to its pitfalls).
 */
import { mkdir, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { pino, type Logger } from "pino";
import type { AdditionalContextEntry } from "../../machines/turn.contract.js";
import { resolveCodexCommand, type CodexCommand } from "./binary.js";
import { buildChildEnv } from "./child-env.js";
import { createTempCodexHome, removeTempCodexHome, resolveCodexHome } from "./codex-home.js";
import { checkCodexVersion } from "./codex-version.js";
import { CompactionRunner, type CompactThreadResult } from "./compaction.js";
import { OFFLINE_KEY_ENV, OFFLINE_PROVIDER_ID, codexConfigArgs } from "./config.js";
import { CodexAppServerError, invalidArgument } from "./errors.js";
import { DEFAULT_OPT_OUT_NOTIFICATIONS } from "./known-methods.js";
import {
  spawnOptionsSchema,
  startTurnSchema,
  type CodexAppServerOptions,
  type ResolvedSpawnOptions,
  type ResumeThreadOptions,
  type StartThreadOptions,
  type StartTurnOptions,
} from "./options.js";
import { AppServerProcess, type ExitInfo } from "./process.js";
import type { ClientRequest } from "./protocol/ClientRequest.js";
import type { InitializeParams } from "./protocol/InitializeParams.js";
import type { RpcStats } from "./rpc.js";
import { initializeResultSchema, type IncomingNotification } from "./schemas.js";
import { answerServerRequest } from "./server-requests.js";
import { turnSandboxPolicy } from "./thread-params.js";
import { ThreadRegistry, type ThreadInfo } from "./threads.js";
import { TurnRun } from "./turn-run.js";
import { TurnRunner, type CodexTurn } from "./turn-runner.js";

export type { ApprovalCallback, CodexApprovalDecision, CodexApprovalRequest, CodexFileChange } from "./approvals.js";
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
  private readonly command: CodexCommand;
  private readonly ownsHome: boolean;
  /** CODEX_HOME of the process (kept across restarts so threads can be resumed). */
  readonly codexHome: string;
  /** Version of the running codex binary (from its `initialize` answer), when it could be read. */
  codexVersion: string | undefined;
  private proc: AppServerProcess | undefined;
  private starting: Promise<AppServerProcess> | undefined;
  private generation = 0;
  private readonly restartTimes: number[] = [];
  private restarts = 0;
  private closedPromise: Promise<void> | undefined;
  private readonly threads: ThreadRegistry;
  private readonly turns: TurnRunner;
  private readonly compactions: CompactionRunner;
  private readonly listeners = new Set<(n: { method: string; params: unknown; emittedAtMs?: number }) => void>();
  private readonly retiredStats: RpcStats[] = [];
  private readonly counters = { toolCalls: 0, approvalsDeclined: 0, unsupportedServerRequests: 0, stderrBytes: 0 };
  /** Milliseconds from spawn to the `initialize` response of the current process. */
  startupMs = 0;

  private constructor(opts: ResolvedSpawnOptions, command: CodexCommand, codexHome: string, ownsHome: boolean) {
    this.opts = opts;
    this.logger = opts.logger ?? pino({ level: "silent" });
    this.command = command;
    this.codexHome = codexHome;
    this.ownsHome = ownsHome;
    const rpcRequest = (method: ClientMethod, params: unknown, timeoutMs?: number) => this.rpcRequest(method, params, timeoutMs);
    const defaultCwd = () => this.opts.cwd ?? process.cwd();
    this.threads = new ThreadRegistry({ logger: this.logger, rpcRequest, ensureAlive: () => this.ensureAlive(), generation: () => this.generation, defaultCwd });
    this.turns = new TurnRunner({
      logger: this.logger,
      rpcRequest,
      liveGeneration: () => (this.proc?.alive ? this.proc.generation : undefined),
      requestTimeoutMs: opts.requestTimeoutMs,
      idleInterruptGraceMs: opts.idleInterruptGraceMs,
    });
    this.compactions = new CompactionRunner({
      logger: this.logger,
      rpcRequest,
      ensureAlive: () => this.ensureAlive(),
      turnRunning: (threadId) => this.turns.active(threadId) !== undefined,
      reattach: (threadId) => this.threads.reattach(threadId),
    });
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
    try {
      if (opts.modelCatalog) {
        const catalogPath = path.join(home, "model-catalog.json");
        await writeFile(catalogPath, `${JSON.stringify(opts.modelCatalog, null, 2)}\n`);
        server.opts.config = { ...(opts.config ?? {}), model_catalog_json: catalogPath };
      }
      await server.startProcess();
    } catch (err) {
      if (owned) await removeTempCodexHome(home);
      throw err;
    }
    return server;
  }

  /** PID of the current process (undefined when none is running). */
  get pid(): number | undefined {
    return this.proc?.alive ? this.proc.pid : undefined;
  }

  /** A live process is running. */
  get alive(): boolean {
    return this.proc?.alive === true;
  }

  get closed(): boolean {
    return this.closedPromise !== undefined;
  }

  /** Last part of the current (or last) process's stderr. */
  get stderrTail(): string {
    return this.proc?.stderrTail ?? "";
  }

  /** Counters (never content). */
  stats(): CodexAppServerStats {
    const all = [...this.retiredStats, ...(this.proc ? [this.proc.rpc.stats()] : [])];
    const sum: RpcStats = {
      linesReceived: 0,
      notifications: 0,
      serverRequests: 0,
      responses: 0,
      malformedLines: 0,
      oversizedLines: 0,
      unknownNotifications: 0,
      invalidNotifications: 0,
      unknownResponses: 0,
      lateResponses: 0,
      sanitizedMessages: 0,
    };
    for (const s of all) for (const k of Object.keys(sum) as Array<keyof RpcStats>) sum[k] += s[k];
    return {
      ...sum,
      processes: this.generation,
      restarts: this.restarts,
      activeTurns: this.turns.activeCount(),
      stderrBytes: this.counters.stderrBytes + (this.proc?.stderrBytes ?? 0),
      toolCalls: this.counters.toolCalls,
      approvalsDeclined: this.counters.approvalsDeclined,
      unsupportedServerRequests: this.counters.unsupportedServerRequests,
    };
  }

  /** Listen to every notification (validated ones and unknown methods). Returns an unsubscribe function. */
  onNotification(listener: (n: { method: string; params: unknown; emittedAtMs?: number }) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  // -- process lifecycle -----------------------------------------------------------------------------------------

  private startProcess(): Promise<AppServerProcess> {
    if (this.starting) return this.starting;
    this.starting = this.launch().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  /** Spawn a process and run the `initialize` handshake; a failure closes it and throws SPAWN_FAILED / INITIALIZE_FAILED. */
  private async launch(): Promise<AppServerProcess> {
    const generation = ++this.generation;
    const t0 = performance.now();
    const proc: AppServerProcess = new AppServerProcess(
      {
        command: this.command,
        args: ["app-server", ...codexConfigArgs(this.opts.config ?? {})],
        env: buildChildEnv({ parent: process.env, passEnv: this.opts.passEnv ?? [], extra: this.opts.env ?? {}, codexHome: this.codexHome }),
        cwd: this.opts.cwd ?? process.cwd(),
        generation,
        maxLineBytes: this.opts.maxLineBytes,
        requestTimeoutMs: this.opts.requestTimeoutMs,
        logger: this.logger,
      },
      {
        onNotification: (n) => this.route(proc, n),
        onServerRequest: (r) => void answerServerRequest(this.serverRequestDeps(), proc.rpc, r),
        onUnknownNotification: (method, params) => this.emitRaw({ method, params }),
      },
    );
    this.proc = proc;
    void proc.exited.then((info) => this.onExit(proc, info));
    try {
      await this.initialize(proc);
    } catch (err) {
      await proc.close(1_000).catch(() => undefined);
      if (err instanceof CodexAppServerError && (err.code === "SPAWN_FAILED" || err.code === "INITIALIZE_FAILED")) throw err;
      const why = proc.spawnError ? proc.spawnError.message : err instanceof Error ? err.message : String(err);
      throw new CodexAppServerError(proc.spawnError ? "SPAWN_FAILED" : "INITIALIZE_FAILED", `codex app-server failed to start: ${why}`, {
        stderrTail: proc.stderrTail,
        cause: err,
      });
    }
    this.startupMs = performance.now() - t0;
    this.logger.info(
      { event: "codex.spawned", pid: proc.pid, generation, startupMs: Math.round(this.startupMs), source: this.command.source, codexVersion: this.codexVersion },
      "codex app-server ready",
    );
    return proc;
  }

  private async initialize(proc: AppServerProcess): Promise<void> {
    const initParams: InitializeParams = {
      clientInfo: {
        name: this.opts.clientInfo?.name ?? "codex-turn-machine",
        title: this.opts.clientInfo?.title ?? null,
        version: this.opts.clientInfo?.version ?? "0.1.0",
      },
      capabilities: {
        experimentalApi: true,
        requestAttestation: false,
        optOutNotificationMethods: this.opts.optOutNotificationMethods ?? [...DEFAULT_OPT_OUT_NOTIFICATIONS],
      },
    };
    const raw = await Promise.race([
      proc.rpc.request("initialize", initParams, { timeoutMs: this.opts.initializeTimeoutMs }),
      proc.exited.then(() => {
        throw this.exitError(proc, "initialize");
      }),
    ]);
    const res = initializeResultSchema.safeParse(raw);
    if (!res.success) throw new CodexAppServerError("INVALID_RESPONSE", "initialize returned an unexpected shape");
    proc.rpc.notify("initialized");
    const version = checkCodexVersion(res.data.userAgent);
    this.codexVersion = version.actual;
    if (!version.ok) {
      this.logger.warn(
        { event: "codex.versionMismatch", codexVersion: version.actual, protocolVersion: version.expected },
        "codex binary version differs from the protocol types' version",
      );
    }
  }

  private exitError(proc: AppServerProcess, during: string): CodexAppServerError {
    if (proc.spawnError) {
      return new CodexAppServerError("SPAWN_FAILED", `could not start codex: ${proc.spawnError.message}`, { stderrTail: proc.stderrTail });
    }
    const info = proc.exitInfo;
    return new CodexAppServerError(
      "INITIALIZE_FAILED",
      `codex app-server exited during ${during} (code ${info?.code ?? "?"}, signal ${info?.signal ?? "none"})`,
      { stderrTail: proc.stderrTail, exitCode: info?.code ?? null, signal: info?.signal ?? null },
    );
  }

  /**
   * The process ended: fail its pending requests, its running turns and waiting compactions. The code is the same
   * everywhere: `PROCESS_EXITED` (or `CLOSED` after close()), on the thrown errors and on the turn record's `error.code`.
   */
  private onExit(proc: AppServerProcess, info: ExitInfo): void {
    const intentional = proc.closing;
    const code = intentional ? "CLOSED" : "PROCESS_EXITED";
    const message = intentional
      ? "codex app-server was closed"
      : `codex app-server exited unexpectedly (code ${info.code ?? "none"}, signal ${info.signal ?? "none"})`;
    proc.rpc.failAll(new CodexAppServerError(code, message, { stderrTail: proc.stderrTail, exitCode: info.code, signal: info.signal }));
    (intentional ? this.logger.info : this.logger.warn).call(
      this.logger,
      { event: "codex.exited", pid: proc.pid, generation: proc.generation, exitCode: info.code, signal: info.signal, intentional },
      "codex app-server exited",
    );
    this.turns.finishAll({ codexStatus: "failed", error: { message, code } }, proc.generation);
    this.compactions.failAll(message);
  }

  /**
   * Make sure a live process is running: respawns after a crash (same CODEX_HOME) unless closed, autoRestart is off,
   * or the crash-loop guard tripped (CRASH_LOOP).
   */
  async ensureAlive(): Promise<void> {
    if (this.closedPromise) throw new CodexAppServerError("CLOSED", "codex app-server client is closed");
    if (this.starting) {
      await this.starting;
      return;
    }
    if (this.proc?.alive) return;
    if (!this.opts.autoRestart) {
      throw new CodexAppServerError("PROCESS_EXITED", "codex app-server is not running (autoRestart is off)", { stderrTail: this.stderrTail });
    }
    await this.restart();
  }

  /** Replace the process with a fresh one (same CODEX_HOME). Subject to the crash-loop guard. */
  async restart(): Promise<void> {
    if (this.closedPromise) throw new CodexAppServerError("CLOSED", "codex app-server client is closed");
    const now = Date.now();
    while (this.restartTimes.length > 0 && now - this.restartTimes[0]! > this.opts.restartWindowMs) this.restartTimes.shift();
    if (this.restartTimes.length >= this.opts.maxRestarts) {
      throw new CodexAppServerError(
        "CRASH_LOOP",
        `codex app-server restarted ${this.restartTimes.length} times within ${this.opts.restartWindowMs} ms; giving up`,
        { stderrTail: this.stderrTail },
      );
    }
    this.restartTimes.push(now);
    this.restarts++;
    const old = this.proc;
    if (old) {
      await old.close(this.opts.closeTimeoutMs);
      this.counters.stderrBytes += old.stderrBytes;
      this.retiredStats.push(old.rpc.stats());
    }
    this.logger.warn({ event: "codex.restart", restarts: this.restarts }, "restarting codex app-server");
    await this.startProcess();
  }

  /** Close stdin, wait for exit (kill after a bound), and remove the temp CODEX_HOME if we created it. Idempotent. */
  close(): Promise<void> {
    this.closedPromise ??= (async () => {
      if (this.starting) await this.starting.catch(() => undefined);
      if (this.proc) await this.proc.close(this.opts.closeTimeoutMs);
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
  async request<M extends ClientMethod>(method: M, params: ParamsOf<M>, options: { timeoutMs?: number } = {}): Promise<unknown> {
    await this.ensureAlive();
    return this.proc!.rpc.request(method, params, options);
  }

  private rpcRequest(method: ClientMethod, params: unknown, timeoutMs?: number): Promise<unknown> {
    const proc = this.proc;
    if (!proc) return Promise.reject(new CodexAppServerError("PROCESS_EXITED", "codex app-server is not running"));
    return proc.rpc.request(method, params, timeoutMs === undefined ? {} : { timeoutMs });
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
  startThread(options: StartThreadOptions = {}): Promise<ThreadInfo> {
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
    await this.compactions.idle(o.threadId);
    if (this.turns.active(o.threadId)) {
      throw new CodexAppServerError("TURN_ALREADY_ACTIVE", `thread ${o.threadId} already has a running turn`);
    }
    await this.threads.reattach(o.threadId);
    const thread = this.threads.get(o.threadId);
    const run = new TurnRun({
      threadId: o.threadId,
      generation: this.generation,
      originalPrompt: o.originalPrompt ?? o.text,
      idleTimeoutMs: o.idleTimeoutMs ?? this.opts.turnIdleTimeoutMs,
      model: o.model ?? thread?.model,
      provider: thread?.modelProvider,
      options: o,
    });
    return this.turns.start(run, {
      text: o.text,
      additionalContext: o.additionalContext as Record<string, AdditionalContextEntry> | undefined,
      model: o.model,
      effort: o.effort,
      sandboxPolicy: thread ? turnSandboxPolicy(thread.settings) : undefined,
    });
  }

  // -- compaction --------------------------------------------------------------------------------------------------

  /**
   * Run native manual compaction (`thread/compact/start`) and wait, bounded, for its `contextCompaction` item and
   * the end of the compaction turn.
   *
   * @example
   * ```ts
   * const r = await server.compactThread({ threadId, timeoutMs: 30_000 });
   * if (!r.ok) console.warn(r.reason);
   * ```
   */
  compactThread(options: { threadId: string; timeoutMs?: number }): Promise<CompactThreadResult> {
    return this.compactions.compact(options);
  }

  // -- incoming ----------------------------------------------------------------------------------------------------

  private emitRaw(n: { method: string; params: unknown; emittedAtMs?: number }): void {
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
    if (proc !== this.proc) return;
    this.emitRaw(n);
    if (!n.consumed) return;
    const threadId = (n.params as { threadId?: string }).threadId;
    if (threadId === undefined) return;
    if (n.method === "thread/closed") {
      this.threads.markUnloaded(threadId, proc.generation);
      return;
    }
    this.turns.onNotification(threadId, proc.generation, n);
    this.compactions.onNotification(threadId, n);
  }

  private serverRequestDeps() {
    return {
      logger: this.logger,
      activeRun: (threadId: string) => this.turns.active(threadId),
      tool: (threadId: string, name: string) => this.threads.get(threadId)?.tools.get(name),
      armIdle: (run: TurnRun) => this.turns.armIdle(run),
      approvalHandler: this.opts.approvalHandler,
      counters: this.counters,
    };
  }
}
