/**
 * The app-server process over time: spawn and `initialize` handshake (with the version check), exit handling, restart
 * after a crash on the same CODEX_HOME with a crash-loop guard, and close. One live process at a time; each has a
 * generation number so late events of a dead process are recognised and dropped.
 */
import type { Logger } from "pino";
import type { CodexCommand } from "./binary.js";
import { buildChildEnv, withCommandEnvironmentPolicy } from "./child-env.js";
import { checkCodexVersion } from "./codex-version.js";
import { codexConfigArgs } from "./config.js";
import { CodexAppServerError } from "./errors.js";
import { DEFAULT_OPT_OUT_NOTIFICATIONS } from "./known-methods.js";
import type { ResolvedSpawnOptions } from "./options.js";
import { AppServerProcess, type ExitInfo, type ProcessHandlers } from "./process.js";
import type { InitializeParams } from "./protocol/InitializeParams.js";
import type { OutgoingRpcMessage, RpcStats, ServerRequestMessage } from "./rpc.js";
import { initializeResultSchema, type IncomingNotification } from "./schemas.js";

/** How a process ended, as the client reports it: `CLOSED` after close(), else `PROCESS_EXITED`. */
export interface ProcessEnd {
  code: "CLOSED" | "PROCESS_EXITED";
  message: string;
}

/** What the supervisor tells the client about each process. */
export interface SupervisorEvents {
  notification(proc: AppServerProcess, n: IncomingNotification): void;
  serverRequest(proc: AppServerProcess, r: ServerRequestMessage): void;
  unknownNotification(method: string, params: unknown): void;
  /** Every message written to the process (trajectories). */
  outgoing?(message: OutgoingRpcMessage): void;
  exited(proc: AppServerProcess, end: ProcessEnd): void;
}

const ZERO_STATS: RpcStats = {
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

/**
 * @example
 * ```ts
 * const supervisor = new ProcessSupervisor(opts, command, codexHome, logger, events);
 * await supervisor.start();
 * await supervisor.rpcRequest("thread/start", params);
 * ```
 */
export class ProcessSupervisor {
  proc: AppServerProcess | undefined;
  generation = 0;
  restarts = 0;
  /** Milliseconds from spawn to the `initialize` response of the current process. */
  startupMs = 0;
  /** Version of the running codex binary (from its `initialize` answer), when it could be read. */
  codexVersion: string | undefined;
  private starting: Promise<AppServerProcess> | undefined;
  private readonly restartTimes: number[] = [];
  private readonly retiredStats: RpcStats[] = [];
  private retiredStderrBytes = 0;

  constructor(
    private readonly opts: ResolvedSpawnOptions,
    private readonly command: CodexCommand,
    private readonly codexHome: string,
    private readonly logger: Logger,
    private readonly events: SupervisorEvents,
  ) {}

  /** Generation of the live process, `undefined` when none is alive. */
  liveGeneration(): number | undefined {
    return this.proc?.alive ? this.proc.generation : undefined;
  }

  /** Start a process (or join the start in progress). */
  start(): Promise<AppServerProcess> {
    this.starting ??= this.launch().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  /** Wait for a start in progress, if any (its failure is the caller's to see elsewhere). */
  async settled(): Promise<void> {
    if (this.starting) await this.starting.catch(() => undefined);
  }

  /** Make sure a live process runs: joins a start, else restarts (unless `autoRestart` is off). */
  async ensureAlive(): Promise<void> {
    if (this.starting) {
      await this.starting;
      return;
    }
    if (this.proc?.alive) return;
    if (!this.opts.autoRestart) {
      throw new CodexAppServerError("PROCESS_EXITED", "codex app-server is not running (autoRestart is off)", { stderrTail: this.proc?.stderrTail ?? "" });
    }
    await this.restart();
  }

  /** Replace the process with a fresh one (same CODEX_HOME), subject to the crash-loop guard (CRASH_LOOP). */
  async restart(): Promise<void> {
    const now = Date.now();
    while (this.restartTimes.length > 0 && now - this.restartTimes[0]! > this.opts.restartWindowMs) this.restartTimes.shift();
    if (this.restartTimes.length >= this.opts.maxRestarts) {
      throw new CodexAppServerError(
        "CRASH_LOOP",
        `codex app-server restarted ${this.restartTimes.length} times within ${this.opts.restartWindowMs} ms; giving up`,
        { stderrTail: this.proc?.stderrTail ?? "" },
      );
    }
    this.restartTimes.push(now);
    this.restarts++;
    const old = this.proc;
    if (old) {
      await old.close(this.opts.closeTimeoutMs);
      this.retiredStderrBytes += old.stderrBytes;
      this.retiredStats.push(old.rpc.stats());
    }
    this.logger.warn({ event: "codex.restart", restarts: this.restarts }, "restarting codex app-server");
    await this.start();
  }

  /** Close the current process (EOF, then signals after a bound). */
  async close(): Promise<void> {
    await this.settled();
    if (this.proc) await this.proc.close(this.opts.closeTimeoutMs);
  }

  /** A request on the current process; PROCESS_EXITED when there is none. */
  rpcRequest(method: string, params: unknown, timeoutMs?: number): Promise<unknown> {
    const proc = this.proc;
    if (!proc) return Promise.reject(new CodexAppServerError("PROCESS_EXITED", "codex app-server is not running"));
    return proc.rpc.request(method, params, timeoutMs === undefined ? {} : { timeoutMs });
  }

  /** Wire counters summed over every process so far. */
  rpcStats(): RpcStats {
    const sum = { ...ZERO_STATS };
    for (const s of [...this.retiredStats, ...(this.proc ? [this.proc.rpc.stats()] : [])]) {
      for (const k of Object.keys(sum) as Array<keyof RpcStats>) sum[k] += s[k];
    }
    return sum;
  }

  /** Stderr bytes over every process so far. */
  stderrBytes(): number {
    return this.retiredStderrBytes + (this.proc?.stderrBytes ?? 0);
  }

  /** Spawn and run the `initialize` handshake; a failure closes the process and throws SPAWN_FAILED / INITIALIZE_FAILED. */
  private async launch(): Promise<AppServerProcess> {
    const generation = ++this.generation;
    const t0 = performance.now();
    const handlers: ProcessHandlers = {
      onNotification: (n) => this.events.notification(proc, n),
      onServerRequest: (r) => this.events.serverRequest(proc, r),
      onUnknownNotification: (method, params) => this.events.unknownNotification(method, params),
      onOutgoing: (message) => this.events.outgoing?.(message),
    };
    // Built once: the command environment policy names what it holds.
    const env = buildChildEnv({ parent: process.env, passEnv: this.opts.passEnv ?? [], extra: this.opts.env ?? {}, codexHome: this.codexHome });
    const proc: AppServerProcess = new AppServerProcess(
      {
        command: this.command,
        args: ["app-server", ...codexConfigArgs(withCommandEnvironmentPolicy(this.opts.config ?? {}, env, this.opts.commandEnv ?? []))],
        env,
        cwd: this.opts.cwd ?? process.cwd(),
        generation,
        maxLineBytes: this.opts.maxLineBytes,
        requestTimeoutMs: this.opts.requestTimeoutMs,
        logger: this.logger,
      },
      handlers,
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

  /** `initialize` (bounded, and raced against the process dying), `initialized`, then the version check (a warning). */
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

  /** The process ended: fail its pending requests with one code (`PROCESS_EXITED` / `CLOSED`), then tell the client. */
  private onExit(proc: AppServerProcess, info: ExitInfo): void {
    const intentional = proc.closing;
    const end: ProcessEnd = intentional
      ? { code: "CLOSED", message: "codex app-server was closed" }
      : { code: "PROCESS_EXITED", message: `codex app-server exited unexpectedly (code ${info.code ?? "none"}, signal ${info.signal ?? "none"})` };
    proc.rpc.failAll(new CodexAppServerError(end.code, end.message, { stderrTail: proc.stderrTail, exitCode: info.code, signal: info.signal }));
    (intentional ? this.logger.info : this.logger.warn).call(
      this.logger,
      { event: "codex.exited", pid: proc.pid, generation: proc.generation, exitCode: info.code, signal: info.signal, intentional },
      "codex app-server exited",
    );
    this.events.exited(proc, end);
  }
}
