/**
 * A typed client for one `codex app-server` process (newline-delimited JSON-RPC over stdio), with thread/turn
 * helpers, queue steering, dynamic tools, fail-closed approvals, bounded waits and crash recovery.
 *
 * Verified behaviour it relies on: the team notes' codex-app-server.md (P-numbers refer to its pitfalls).
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { accessSync, constants as fsConstants } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pino, type Logger } from "pino";
import { z } from "zod";
import type { AdditionalContextEntry } from "../../machines/turn.contract.js";
import { resolveCodexCommand, type CodexCommand } from "./binary.js";
import { codexConfigArgs, type ModelCatalog } from "./config.js";
import { CodexAppServerError, invalidArgument } from "./errors.js";
import { DEFAULT_OPT_OUT_NOTIFICATIONS, knownServerRequestMethods } from "./known-methods.js";
import type { ClientRequest } from "./protocol/ClientRequest.js";
import type { InitializeParams } from "./protocol/InitializeParams.js";
import type { DynamicToolCallResponse } from "./protocol/v2/DynamicToolCallResponse.js";
import type { ThreadResumeParams } from "./protocol/v2/ThreadResumeParams.js";
import type { ThreadStartParams } from "./protocol/v2/ThreadStartParams.js";
import type { TurnInterruptParams } from "./protocol/v2/TurnInterruptParams.js";
import type { TurnStartParams } from "./protocol/v2/TurnStartParams.js";
import type { TurnSteerParams } from "./protocol/v2/TurnSteerParams.js";
import { DEFAULT_MAX_LINE_BYTES, JsonRpcConnection, type RpcStats, type ServerRequestMessage } from "./rpc.js";
import {
  dynamicToolCallParamsSchema,
  initializeResultSchema,
  threadResultSchema,
  turnStartResultSchema,
  turnSteerResultSchema,
  type IncomingNotification,
} from "./schemas.js";
import { canonicalJson } from "../projection/render.js";
import { SteerBatcher, type SteerResult } from "./steering.js";
import { TurnProjector, type CodexTurnEvent, type TurnRecordCore, type TurnRecordError } from "./turn-projector.js";

// ---------------------------------------------------------------------------------------------------------------
// Public types

/** Context handed to a dynamic tool handler. */
export interface DynamicToolContext {
  threadId: string;
  turnId: string;
  callId: string;
  tool: string;
  namespace: string | null;
}

/** A client-side tool Codex may call (`dynamicTools` on thread/start; calls arrive as `item/tool/call`). */
export interface DynamicToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  inputSchema: Record<string, unknown>;
  /** Returns the text result; a throw is reported to the model as a failed call (`success: false`). */
  handler: (args: unknown, ctx: DynamicToolContext) => Promise<string> | string;
}

/**
 * Decides an approval server request (`item/commandExecution/requestApproval`, `applyPatchApproval`, ...). Return
 * the JSON result to send, or `undefined` to fall back to the default: DECLINE.
 */
export type ApprovalHandler = (request: { method: string; params: unknown }) => unknown;

const toolSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "tool names are 1-64 chars of [A-Za-z0-9_-]"),
    description: z.string(),
    inputSchema: z.record(z.string(), z.unknown()),
    handler: z.custom<DynamicToolSpec["handler"]>((v) => typeof v === "function", "handler must be a function"),
  })
  .strict();

const spawnOptionsSchema = z
  .object({
    /** Path of the codex executable (a .js/.mjs path runs under node). Default: the installed @openai/codex binary. */
    codexBin: z.string().min(1).optional(),
    /** CODEX_HOME; default a fresh temp dir that close() removes. */
    codexHome: z.string().min(1).optional(),
    /** `-c` overrides (nested objects become dotted keys). */
    config: z.record(z.string(), z.unknown()).optional(),
    /** Extra environment (e.g. the provider key variable). The rest of the parent environment is NOT inherited. */
    env: z.record(z.string(), z.string()).optional(),
    /** Names of parent environment variables to pass through (e.g. a real provider key). */
    passEnv: z.array(z.string().min(1)).optional(),
    /** A model catalog to write into CODEX_HOME and point `model_catalog_json` at. */
    modelCatalog: z.custom<ModelCatalog>((v) => typeof v === "object" && v !== null && Array.isArray((v as ModelCatalog).models)).optional(),
    logger: z.custom<Logger>((v) => typeof v === "object" && v !== null && typeof (v as Logger).info === "function").optional(),
    requestTimeoutMs: z.number().int().positive().default(30_000),
    initializeTimeoutMs: z.number().int().positive().default(30_000),
    /** A running turn with no notification for this long is interrupted and ends as "timedOut". */
    turnIdleTimeoutMs: z.number().int().positive().default(120_000),
    /** After an idle timeout's interrupt, how long to wait for Codex to end the turn before giving up. */
    idleInterruptGraceMs: z.number().int().nonnegative().default(2_000),
    closeTimeoutMs: z.number().int().positive().default(3_000),
    clientInfo: z
      .object({ name: z.string().min(1), title: z.string().nullable().optional(), version: z.string().min(1) })
      .strict()
      .optional(),
    optOutNotificationMethods: z.array(z.string()).optional(),
    maxLineBytes: z.number().int().positive().default(DEFAULT_MAX_LINE_BYTES),
    approvalHandler: z.custom<ApprovalHandler>((v) => typeof v === "function").optional(),
    /** Respawn the process on the next call after it died (same CODEX_HOME, so threads can be resumed). */
    autoRestart: z.boolean().default(true),
    /** Crash-loop guard: at most this many restarts within `restartWindowMs`. */
    maxRestarts: z.number().int().nonnegative().default(3),
    restartWindowMs: z.number().int().positive().default(60_000),
    /** Working directory of the child process (default: process.cwd()). */
    cwd: z.string().min(1).optional(),
  })
  .strict();

export type CodexAppServerOptions = z.input<typeof spawnOptionsSchema>;
type ResolvedOptions = z.output<typeof spawnOptionsSchema>;

const approvalPolicySchema = z.union([z.enum(["untrusted", "on-request", "never"]), z.record(z.string(), z.unknown())]);
const sandboxSchema = z.enum(["read-only", "workspace-write", "danger-full-access"]);

const threadSettings = {
  cwd: z.string().min(1).optional(),
  developerInstructions: z.string().optional(),
  model: z.string().min(1).optional(),
  approvalPolicy: approvalPolicySchema.default("never"),
  sandbox: sandboxSchema.default("read-only"),
  /** Extra per-thread config overrides (`config` of thread/start / thread/resume). */
  config: z.record(z.string(), z.unknown()).optional(),
};

const startThreadSchema = z
  .object({ ...threadSettings, dynamicTools: z.array(toolSchema).optional(), ephemeral: z.boolean().optional() })
  .strict();
const resumeThreadSchema = z
  .object({
    threadId: z.string().min(1),
    ...threadSettings,
    /** Handlers for the thread's dynamic tools (Codex keeps the declarations from thread/start). */
    dynamicTools: z.array(toolSchema).optional(),
    /**
     * Skip the `thread/resume` RPC when this process already has the thread loaded with exactly these settings
     * (started or resumed here, not closed since, no restart in between): the request would change nothing. Tool
     * handlers are still replaced. Default false: always resume.
     */
    reuseLoaded: z.boolean().optional(),
  })
  .strict();

const additionalContextSchema = z.record(
  z.string().min(1),
  z
    .object({ value: z.string(), kind: z.enum(["untrusted", "application"]), name: z.string().min(1).optional() })
    .strict()
    .refine((e) => e.kind === "untrusted" || e.name === undefined, "name is only allowed on untrusted entries"),
);

const startTurnSchema = z
  .object({
    threadId: z.string().min(1),
    /** The text Codex receives. */
    text: z.string().min(1, "text must not be empty"),
    /** The original prompt for the snapshot (default: `text`). */
    originalPrompt: z.string().optional(),
    additionalContext: additionalContextSchema.optional(),
    model: z.string().min(1).optional(),
    effort: z.string().min(1).optional(),
    steerQuietWindowMs: z.number().int().nonnegative().default(50),
    idleTimeoutMs: z.number().int().positive().optional(),
    onEvent: z.custom<(e: CodexTurnEvent) => void>((v) => typeof v === "function").optional(),
  })
  .strict();

export type StartThreadOptions = z.input<typeof startThreadSchema>;
export type ResumeThreadOptions = z.input<typeof resumeThreadSchema>;
export type StartTurnOptions = z.input<typeof startTurnSchema>;

export interface ThreadInfo {
  threadId: string;
  model?: string;
  modelProvider?: string;
  /** `resumeThread({ reuseLoaded: true })` found the thread loaded with the same settings and sent no RPC. */
  reused?: boolean;
}

/** A running turn. */
export interface CodexTurn {
  threadId: string;
  turnId: string;
  /** Steer the running turn (batched, see {@link SteerBatcher}); texts Codex did not take come back as `followUp`. */
  steer(text: string): Promise<SteerResult>;
  /** Ask Codex to interrupt; `completion` then resolves ("interrupted", or "timedOut" after `graceMs`). */
  interrupt(options?: { graceMs?: number }): Promise<void>;
  /** Resolves (never rejects) when the turn ended, however it ended. */
  completion: Promise<TurnRecordCore>;
  readonly done: boolean;
}

export interface CompactThreadResult {
  ok: boolean;
  reason?: string;
  threadId: string;
  /** The compaction turn's id (manual compaction runs as its own turn). */
  turnId?: string;
  /** The `contextCompaction` item id. */
  itemId?: string;
}

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

// ---------------------------------------------------------------------------------------------------------------
// Process

interface ExitInfo {
  code: number | null;
  signal: string | null;
}

const STDERR_TAIL_BYTES = 8 * 1024;

class AppServerProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly rpc: JsonRpcConnection;
  readonly generation: number;
  readonly exited: Promise<ExitInfo>;
  alive = true;
  closing = false;
  exitInfo: ExitInfo | undefined;
  stderrBytes = 0;
  private stderrTailBuf = "";

  constructor(
    cmd: CodexCommand,
    args: string[],
    env: Record<string, string>,
    cwd: string,
    generation: number,
    opts: ResolvedOptions,
    logger: Logger,
    handlers: {
      onNotification: (n: IncomingNotification) => void;
      onServerRequest: (r: ServerRequestMessage) => void;
      onUnknownNotification: (method: string, params: unknown) => void;
    },
  ) {
    this.generation = generation;
    this.child = spawn(cmd.command, [...cmd.prefixArgs, ...args], { env, cwd, stdio: ["pipe", "pipe", "pipe"] });
    this.child.stderr.on("data", (chunk: Buffer) => {
      this.stderrBytes += chunk.length;
      this.stderrTailBuf = (this.stderrTailBuf + chunk.toString("utf8")).slice(-STDERR_TAIL_BYTES);
    });
    this.rpc = new JsonRpcConnection({
      input: this.child.stdout,
      output: this.child.stdin,
      logger,
      maxLineBytes: opts.maxLineBytes,
      requestTimeoutMs: opts.requestTimeoutMs,
      onNotification: handlers.onNotification,
      onServerRequest: handlers.onServerRequest,
      onUnknownNotification: handlers.onUnknownNotification,
      errorDetails: () => ({ stderrTail: this.stderrTail }),
    });
    this.exited = new Promise<ExitInfo>((resolve) => {
      let settled = false;
      const done = (info: ExitInfo): void => {
        if (settled) return;
        settled = true;
        this.alive = false;
        this.exitInfo = info;
        resolve(info);
      };
      this.child.once("error", (err: NodeJS.ErrnoException) => {
        this.spawnError = err;
        done({ code: null, signal: null });
      });
      this.child.once("exit", (code, signal) => {
        // Let stdout drain so the last notifications are processed before pending work is failed; bounded because
        // a grandchild may keep the pipe open.
        const t = setTimeout(() => done({ code, signal }), 250);
        this.child.stdout.once("close", () => {
          clearTimeout(t);
          done({ code, signal });
        });
        if (this.child.stdout.closed) {
          clearTimeout(t);
          done({ code, signal });
        }
      });
    });
  }

  spawnError: NodeJS.ErrnoException | undefined;

  get pid(): number | undefined {
    return this.child.pid;
  }

  get stderrTail(): string {
    return this.stderrTailBuf;
  }

  /** Close stdin (codex exits on EOF), then escalate to SIGTERM / SIGKILL if it does not exit in time. */
  async close(timeoutMs: number): Promise<ExitInfo> {
    this.closing = true;
    if (!this.alive) return this.exited;
    this.child.stdin.end();
    const bounded = (ms: number): Promise<boolean> =>
      Promise.race([this.exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
    if (await bounded(timeoutMs)) return this.exited;
    this.child.kill("SIGTERM");
    if (await bounded(1_000)) return this.exited;
    this.child.kill("SIGKILL");
    return this.exited;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Turn runtime

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
}
function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

class TurnRun {
  state: "starting" | "running" | "done" = "starting";
  turnId: string | undefined;
  projector: TurnProjector | undefined;
  readonly buffer: IncomingNotification[] = [];
  readonly completion = deferred<TurnRecordCore>();
  batcher: SteerBatcher | undefined;
  idleTimer: NodeJS.Timeout | undefined;
  graceTimer: NodeJS.Timeout | undefined;
  toolCallsInFlight = 0;
  /** Set once we decided how this turn ends (idle timeout / interrupt grace); turn/completed then only finishes it. */
  pendingOverride: { codexStatus: "timedOut"; error: TurnRecordError } | undefined;
  readonly acceptedAt = Date.now();

  constructor(
    readonly threadId: string,
    readonly generation: number,
    readonly originalPrompt: string,
    readonly idleTimeoutMs: number,
    readonly onEvent: ((e: CodexTurnEvent) => void) | undefined,
    readonly model: string | undefined,
    readonly provider: string | undefined,
  ) {}
}

interface CompactionWatch {
  threadId: string;
  turnId?: string;
  itemId?: string;
  itemCompleted: boolean;
  done: Deferred<{ status: string; error?: string } | { status: "exited"; error: string }>;
}

interface ThreadState {
  generation: number;
  tools: Map<string, DynamicToolSpec>;
  settings: {
    cwd?: string;
    developerInstructions?: string;
    model?: string;
    approvalPolicy: z.output<typeof approvalPolicySchema>;
    sandbox: z.output<typeof sandboxSchema>;
    config?: Record<string, unknown>;
  };
  model?: string;
  modelProvider?: string;
}

const APPROVAL_DECLINES: Record<string, unknown> = {
  "item/commandExecution/requestApproval": { decision: "decline" },
  "item/fileChange/requestApproval": { decision: "decline" },
  "item/permissions/requestApproval": { permissions: {}, scope: "turn" },
  "mcpServer/elicitation/request": { action: "decline", content: null, _meta: null },
  applyPatchApproval: { decision: { denied: { rejection: "declined: no approval handler is registered" } } },
  execCommandApproval: { decision: { denied: { rejection: "declined: no approval handler is registered" } } },
};

function isApprovalMethod(method: string): boolean {
  return method in APPROVAL_DECLINES || /approval/i.test(method);
}

function defined<T extends Record<string, unknown>>(obj: T): T {
  for (const k of Object.keys(obj)) if (obj[k] === undefined) delete obj[k];
  return obj;
}

/**
 * Where a temporary CODEX_HOME goes: /var/tmp when it is writable, else `os.tmpdir()`. Under /tmp codex refuses to
 * create its helper aliases and warns on stderr (team notes, codex-app-server.md P13); /var/tmp avoids that. Tests and
 * benches that make their own CODEX_HOME use it too.
 *
 * @example
 * ```ts
 * const home = mkdtempSync(path.join(codexHomeTempBase(), "my-codex-home-"));
 * ```
 */
export function codexHomeTempBase(): string {
  for (const base of ["/var/tmp", os.tmpdir()]) {
    try {
      accessSync(base, fsConstants.W_OK);
      return base;
    } catch {
      /* try the next one */
    }
  }
  return os.tmpdir();
}

type ClientMethod = ClientRequest["method"];
type ParamsOf<M extends ClientMethod> = Extract<ClientRequest, { method: M }>["params"];

// ---------------------------------------------------------------------------------------------------------------
// The client

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
  private readonly opts: ResolvedOptions;
  private readonly logger: Logger;
  private readonly command: CodexCommand;
  private readonly ownsHome: boolean;
  /** CODEX_HOME of the process (kept across restarts so threads can be resumed). */
  readonly codexHome: string;
  private proc: AppServerProcess | undefined;
  private starting: Promise<AppServerProcess> | undefined;
  private generation = 0;
  private readonly restartTimes: number[] = [];
  private restarts = 0;
  private closedPromise: Promise<void> | undefined;
  private readonly threads = new Map<string, ThreadState>();
  private readonly runs = new Map<string, TurnRun>();
  private readonly compactions = new Map<string, CompactionWatch>();
  private readonly listeners = new Set<(n: { method: string; params: unknown; emittedAtMs?: number }) => void>();
  private readonly retiredStats: RpcStats[] = [];
  private readonly counters = { toolCalls: 0, approvalsDeclined: 0, unsupportedServerRequests: 0, stderrBytes: 0 };
  /** Milliseconds from spawn to the `initialize` response of the current process. */
  startupMs = 0;

  private constructor(opts: ResolvedOptions, codexHome: string, ownsHome: boolean) {
    this.opts = opts;
    this.logger = opts.logger ?? pino({ level: "silent" });
    this.command = resolveCodexCommand(opts.codexBin);
    this.codexHome = codexHome;
    this.ownsHome = ownsHome;
  }

  /**
   * Start `codex app-server` and complete the `initialize` handshake.
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
    let codexHome = opts.codexHome;
    const ownsHome = codexHome === undefined;
    if (codexHome === undefined) codexHome = await mkdtemp(path.join(codexHomeTempBase(), "codex-turn-home-"));
    const server = new CodexAppServer(opts, codexHome, ownsHome);
    try {
      if (opts.modelCatalog) {
        const catalogPath = path.join(codexHome, "model-catalog.json");
        await writeFile(catalogPath, `${JSON.stringify(opts.modelCatalog, null, 2)}\n`);
        server.opts.config = { ...(opts.config ?? {}), model_catalog_json: catalogPath };
      }
      await server.startProcess();
    } catch (err) {
      if (ownsHome) await rm(codexHome, { recursive: true, force: true });
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
    const sum = all.reduce<RpcStats>(
      (acc, s) => {
        for (const k of Object.keys(acc) as Array<keyof RpcStats>) acc[k] += s[k];
        return acc;
      },
      {
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
      },
    );
    return {
      ...sum,
      processes: this.generation,
      restarts: this.restarts,
      activeTurns: [...this.runs.values()].filter((r) => r.state !== "done").length,
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

  private buildEnv(): Record<string, string> {
    const env: Record<string, string> = {};
    if (process.env.PATH !== undefined) env.PATH = process.env.PATH;
    if (process.env.HOME !== undefined) env.HOME = process.env.HOME;
    for (const name of this.opts.passEnv ?? []) {
      const v = process.env[name];
      if (v !== undefined) env[name] = v;
    }
    env.RUST_LOG = "warn";
    Object.assign(env, this.opts.env ?? {});
    env.CODEX_HOME = this.codexHome;
    return env;
  }

  private async startProcess(): Promise<AppServerProcess> {
    if (this.starting) return this.starting;
    this.starting = (async () => {
      const generation = ++this.generation;
      const args = ["app-server", ...codexConfigArgs(this.opts.config ?? {})];
      const t0 = performance.now();
      const proc = new AppServerProcess(
        this.command,
        args,
        this.buildEnv(),
        this.opts.cwd ?? process.cwd(),
        generation,
        this.opts,
        this.logger,
        {
          onNotification: (n) => this.onNotification_(proc, n),
          onServerRequest: (r) => void this.onServerRequest(proc, r),
          onUnknownNotification: (method, params) => this.emitRaw({ method, params }),
        },
      );
      this.proc = proc;
      void proc.exited.then((info) => this.onExit(proc, info));
      try {
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
        this.startupMs = performance.now() - t0;
        this.logger.info(
          { event: "codex.spawned", pid: proc.pid, generation, startupMs: Math.round(this.startupMs), source: this.command.source },
          "codex app-server ready",
        );
        return proc;
      } catch (err) {
        await proc.close(1_000).catch(() => undefined);
        if (err instanceof CodexAppServerError && (err.code === "SPAWN_FAILED" || err.code === "INITIALIZE_FAILED")) throw err;
        throw new CodexAppServerError(
          proc.spawnError ? "SPAWN_FAILED" : "INITIALIZE_FAILED",
          `codex app-server failed to start: ${proc.spawnError ? proc.spawnError.message : err instanceof Error ? err.message : String(err)}`,
          { stderrTail: proc.stderrTail, cause: err },
        );
      }
    })();
    try {
      return await this.starting;
    } finally {
      this.starting = undefined;
    }
  }

  private exitError(proc: AppServerProcess, during: string): CodexAppServerError {
    if (proc.spawnError) {
      return new CodexAppServerError("SPAWN_FAILED", `could not start codex: ${proc.spawnError.message}`, {
        stderrTail: proc.stderrTail,
      });
    }
    const info = proc.exitInfo;
    return new CodexAppServerError(
      "INITIALIZE_FAILED",
      `codex app-server exited during ${during} (code ${info?.code ?? "?"}, signal ${info?.signal ?? "none"})`,
      { stderrTail: proc.stderrTail, exitCode: info?.code ?? null, signal: info?.signal ?? null },
    );
  }

  private onExit(proc: AppServerProcess, info: ExitInfo): void {
    const intentional = proc.closing;
    const code = intentional ? "CLOSED" : "PROCESS_EXITED";
    const message = intentional
      ? "codex app-server was closed"
      : `codex app-server exited unexpectedly (code ${info.code ?? "none"}, signal ${info.signal ?? "none"})`;
    const err = new CodexAppServerError(code, message, {
      stderrTail: proc.stderrTail,
      exitCode: info.code,
      signal: info.signal,
    });
    proc.rpc.failAll(err);
    (intentional ? this.logger.info : this.logger.warn).call(
      this.logger,
      { event: "codex.exited", pid: proc.pid, generation: proc.generation, exitCode: info.code, signal: info.signal, intentional },
      "codex app-server exited",
    );
    for (const run of [...this.runs.values()]) {
      if (run.generation !== proc.generation || run.state !== "running") continue;
      this.finishRun(run, {
        codexStatus: "failed",
        error: { message, code: intentional ? "closed" : "processExited" },
      });
    }
    for (const watch of [...this.compactions.values()]) watch.done.resolve({ status: "exited", error: message });
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
      throw new CodexAppServerError("PROCESS_EXITED", "codex app-server is not running (autoRestart is off)", {
        stderrTail: this.stderrTail,
      });
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
    if (!this.closedPromise) {
      this.closedPromise = (async () => {
        if (this.starting) await this.starting.catch(() => undefined);
        const proc = this.proc;
        if (proc) await proc.close(this.opts.closeTimeoutMs);
        for (const run of [...this.runs.values()]) {
          this.finishRun(run, { codexStatus: "failed", error: { message: "codex app-server was closed", code: "closed" } });
        }
        if (this.ownsHome) await rm(this.codexHome, { recursive: true, force: true }).catch(() => undefined);
      })();
    }
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
   * Start a thread. Approval policy defaults to "never" and the sandbox to "read-only".
   *
   * @example
   * ```ts
   * const { threadId } = await server.startThread({ developerInstructions: "Be brief.", dynamicTools: [lookupTool] });
   * ```
   */
  async startThread(options: StartThreadOptions = {}): Promise<ThreadInfo> {
    const parsed = startThreadSchema.safeParse(options);
    if (!parsed.success) invalidArgument("startThread options", parsed.error.issues);
    const o = parsed.data;
    await this.ensureAlive();
    const tools = o.dynamicTools ?? [];
    const params: ThreadStartParams = defined({
      cwd: o.cwd ?? this.opts.cwd ?? process.cwd(),
      developerInstructions: o.developerInstructions,
      model: o.model,
      approvalPolicy: o.approvalPolicy as ThreadStartParams["approvalPolicy"],
      sandbox: o.sandbox,
      config: o.config as ThreadStartParams["config"],
      ephemeral: o.ephemeral,
      dynamicTools:
        tools.length > 0
          ? tools.map((t) => ({ type: "function" as const, name: t.name, description: t.description, inputSchema: t.inputSchema as never }))
          : undefined,
    });
    const raw = await this.rpcRequest("thread/start", params);
    const res = threadResultSchema.safeParse(raw);
    if (!res.success) throw new CodexAppServerError("INVALID_RESPONSE", "thread/start returned no thread id", { method: "thread/start" });
    const threadId = res.data.thread.id;
    this.threads.set(threadId, {
      generation: this.generation,
      tools: new Map(tools.map((t) => [t.name, t])),
      settings: defined({
        cwd: params.cwd ?? undefined,
        developerInstructions: o.developerInstructions,
        model: o.model,
        approvalPolicy: o.approvalPolicy,
        sandbox: o.sandbox,
        config: o.config,
      }),
      ...(res.data.model !== undefined ? { model: res.data.model } : {}),
      ...(res.data.modelProvider !== undefined ? { modelProvider: res.data.modelProvider } : {}),
    });
    this.logger.info({ event: "codex.thread.started", threadId, tools: tools.length }, "thread started");
    return defined({ threadId, model: res.data.model, modelProvider: res.data.modelProvider });
  }

  /**
   * Resume a persisted thread (e.g. in a fresh process on the same CODEX_HOME). Always `excludeTurns: true` (P11).
   * Pass the same developerInstructions every time: Codex does not restore them on resume (P4).
   *
   * @example
   * ```ts
   * await server.resumeThread({ threadId, developerInstructions: "Be brief." });
   * ```
   */
  async resumeThread(options: ResumeThreadOptions): Promise<ThreadInfo> {
    const parsed = resumeThreadSchema.safeParse(options);
    if (!parsed.success) invalidArgument("resumeThread options", parsed.error.issues);
    const o = parsed.data;
    await this.ensureAlive();
    const settings: ThreadState["settings"] = defined({
      cwd: o.cwd,
      developerInstructions: o.developerInstructions,
      model: o.model,
      approvalPolicy: o.approvalPolicy,
      sandbox: o.sandbox,
      config: o.config,
    });
    const loaded = this.threads.get(o.threadId);
    if (o.reuseLoaded && loaded && loaded.generation === this.generation && this.sameThreadSettings(loaded.settings, settings)) {
      if (o.dynamicTools) loaded.tools = new Map(o.dynamicTools.map((t) => [t.name, t]));
      this.logger.debug({ event: "codex.thread.reused", threadId: o.threadId }, "thread already loaded with these settings");
      return defined({ threadId: o.threadId, model: loaded.model, modelProvider: loaded.modelProvider, reused: true });
    }
    return this.resumeInternal(o.threadId, settings, o.dynamicTools);
  }

  /** Settings equal as Codex would apply them (an omitted cwd means the client's default cwd). */
  private sameThreadSettings(a: ThreadState["settings"], b: ThreadState["settings"]): boolean {
    const normal = (x: ThreadState["settings"]) =>
      canonicalJson({ ...x, cwd: x.cwd ?? this.opts.cwd ?? process.cwd() });
    return normal(a) === normal(b);
  }

  private async resumeInternal(threadId: string, settings: ThreadState["settings"], tools?: DynamicToolSpec[]): Promise<ThreadInfo> {
    const params: ThreadResumeParams = defined({
      threadId,
      excludeTurns: true,
      cwd: settings.cwd,
      developerInstructions: settings.developerInstructions,
      model: settings.model,
      approvalPolicy: settings.approvalPolicy as ThreadResumeParams["approvalPolicy"],
      sandbox: settings.sandbox,
      config: settings.config as ThreadResumeParams["config"],
    });
    const raw = await this.rpcRequest("thread/resume", params);
    const res = threadResultSchema.safeParse(raw);
    if (!res.success) throw new CodexAppServerError("INVALID_RESPONSE", "thread/resume returned no thread", { method: "thread/resume" });
    const prev = this.threads.get(threadId);
    this.threads.set(threadId, {
      generation: this.generation,
      tools: tools ? new Map(tools.map((t) => [t.name, t])) : (prev?.tools ?? new Map()),
      settings,
      ...(res.data.model !== undefined ? { model: res.data.model } : {}),
      ...(res.data.modelProvider !== undefined ? { modelProvider: res.data.modelProvider } : {}),
    });
    this.logger.info({ event: "codex.thread.resumed", threadId }, "thread resumed");
    return defined({ threadId, model: res.data.model, modelProvider: res.data.modelProvider });
  }

  /** Replace the dynamic tool handlers of a thread (declarations stay as given at thread/start). */
  setThreadTools(threadId: string, tools: DynamicToolSpec[]): void {
    const parsed = z.array(toolSchema).safeParse(tools);
    if (!parsed.success) invalidArgument("dynamic tools", parsed.error.issues);
    const state = this.threads.get(threadId);
    const map = new Map(parsed.data.map((t) => [t.name, t]));
    if (state) state.tools = map;
    else
      this.threads.set(threadId, {
        generation: -1,
        tools: map,
        settings: { approvalPolicy: "never", sandbox: "read-only" },
      });
  }

  /** A thread this client knows but whose process died must be resumed in the new process first. */
  private async reattach(threadId: string): Promise<void> {
    const state = this.threads.get(threadId);
    if (!state || state.generation === this.generation || state.generation === -1) return;
    this.logger.info({ event: "codex.thread.reattach", threadId }, "resuming thread in the restarted app-server");
    await this.resumeInternal(threadId, state.settings);
  }

  // -- turns -------------------------------------------------------------------------------------------------------

  /**
   * Start a turn. Resolves once Codex accepted `turn/start` (rejects with TURN_START_REJECTED otherwise); the
   * returned handle's `completion` resolves with the projected record when the turn ends.
   *
   * @example
   * ```ts
   * const turn = await server.startTurn({ threadId, text: "summarize", onEvent: (e) => e.type === "agentMessageDelta" && process.stdout.write(e.delta) });
   * setTimeout(() => void turn.steer("be brief"), 100);
   * const record = await turn.completion;
   * ```
   */
  async startTurn(options: StartTurnOptions): Promise<CodexTurn> {
    const parsed = startTurnSchema.safeParse(options);
    if (!parsed.success) invalidArgument("startTurn options", parsed.error.issues);
    const o = parsed.data;
    await this.ensureAlive();
    const pendingCompaction = this.compactions.get(o.threadId);
    if (pendingCompaction) await pendingCompaction.done.promise;
    const existing = this.runs.get(o.threadId);
    if (existing && existing.state !== "done") {
      throw new CodexAppServerError("TURN_ALREADY_ACTIVE", `thread ${o.threadId} already has a running turn`);
    }
    await this.reattach(o.threadId);
    const thread = this.threads.get(o.threadId);
    const run = new TurnRun(
      o.threadId,
      this.generation,
      o.originalPrompt ?? o.text,
      o.idleTimeoutMs ?? this.opts.turnIdleTimeoutMs,
      o.onEvent,
      o.model ?? thread?.model,
      thread?.modelProvider,
    );
    // Registered before sending: turn/started and items may arrive before or after the response (P11).
    this.runs.set(o.threadId, run);
    const params: TurnStartParams = defined({
      threadId: o.threadId,
      input: [{ type: "text" as const, text: o.text, text_elements: [] }],
      additionalContext: o.additionalContext as Record<string, AdditionalContextEntry> | undefined,
      model: o.model,
      effort: o.effort,
    });
    let raw: unknown;
    try {
      raw = await this.rpcRequest("turn/start", params);
    } catch (err) {
      if (this.runs.get(o.threadId) === run) this.runs.delete(o.threadId);
      run.state = "done";
      if (err instanceof CodexAppServerError && err.code === "RPC_ERROR") {
        this.logger.warn({ event: "codex.turn.rejected", threadId: o.threadId, rpcCode: err.rpcCode }, "turn/start rejected");
        throw new CodexAppServerError("TURN_START_REJECTED", `codex rejected turn/start: ${err.rpcMessage ?? err.message}`, {
          method: "turn/start",
          ...(err.rpcCode !== undefined ? { rpcCode: err.rpcCode } : {}),
          ...(err.rpcMessage !== undefined ? { rpcMessage: err.rpcMessage } : {}),
          ...(err.stderrTail !== undefined ? { stderrTail: err.stderrTail } : {}),
          cause: err,
        });
      }
      throw err;
    }
    const res = turnStartResultSchema.safeParse(raw);
    if (!res.success) {
      this.runs.delete(o.threadId);
      run.state = "done";
      throw new CodexAppServerError("INVALID_RESPONSE", "turn/start returned no turn id", { method: "turn/start" });
    }
    const turnId = res.data.turn.id;
    this.acceptRun(run, o.steerQuietWindowMs, turnId);
    return this.handleFor(run, turnId);
  }

  private acceptRun(run: TurnRun, quietWindowMs: number, turnId: string): void {
    run.turnId = turnId;
    run.state = "running";
    run.projector = new TurnProjector(
      defined({
        threadId: run.threadId,
        turnId,
        originalPrompt: run.originalPrompt,
        model: run.model,
        provider: run.provider,
        fallbackTimestamp: run.acceptedAt,
      }),
    );
    run.batcher = new SteerBatcher({
      quietWindowMs,
      logger: this.logger,
      send: (text) => this.sendSteer(run, text),
    });
    this.logger.info({ event: "codex.turn.started", threadId: run.threadId, turnId }, "turn accepted");
    this.armIdle(run);
    const buffered = run.buffer.splice(0);
    for (const n of buffered) this.applyToRun(run, n);
    // The process may have died between the response and now.
    if (run.generation !== this.proc?.generation || !this.proc.alive) {
      this.finishRun(run, { codexStatus: "failed", error: { message: "codex app-server exited", code: "processExited" } });
    }
  }

  private handleFor(run: TurnRun, turnId: string): CodexTurn {
    return {
      threadId: run.threadId,
      turnId,
      steer: (text: string) => {
        if (typeof text !== "string" || text.length === 0) {
          return Promise.reject(new CodexAppServerError("INVALID_ARGUMENT", "steer text must be a non-empty string"));
        }
        return run.batcher!.steer(text);
      },
      interrupt: (options) => this.interruptRun(run, options?.graceMs ?? 10_000),
      completion: run.completion.promise,
      get done() {
        return run.state === "done";
      },
    };
  }

  private async sendSteer(run: TurnRun, text: string): Promise<{ accepted: true } | { accepted: false; reason: string }> {
    if (run.state !== "running" || run.generation !== this.proc?.generation) return { accepted: false, reason: "turn ended" };
    const params: TurnSteerParams = {
      threadId: run.threadId,
      expectedTurnId: run.turnId!,
      input: [{ type: "text", text, text_elements: [] }],
    };
    try {
      const raw = await this.rpcRequest("turn/steer", params);
      const res = turnSteerResultSchema.safeParse(raw);
      if (res.success && res.data.turnId === run.turnId) {
        this.logger.info({ event: "codex.turn.steered", threadId: run.threadId, turnId: run.turnId }, "steer accepted");
        return { accepted: true };
      }
      return { accepted: false, reason: "turn/steer answered for a different turn" };
    } catch (err) {
      const reason = err instanceof CodexAppServerError ? (err.rpcMessage ?? err.code) : String(err);
      this.logger.info({ event: "codex.turn.steerRejected", threadId: run.threadId, turnId: run.turnId }, "steer not taken");
      return { accepted: false, reason };
    }
  }

  private async interruptRun(run: TurnRun, graceMs: number): Promise<void> {
    if (run.state !== "running") return;
    const params: TurnInterruptParams = { threadId: run.threadId, turnId: run.turnId! };
    try {
      await this.rpcRequest("turn/interrupt", params);
    } catch (err) {
      this.logger.warn(
        { event: "codex.turn.interruptFailed", threadId: run.threadId, turnId: run.turnId, code: (err as CodexAppServerError).code },
        "turn/interrupt failed",
      );
    }
    if (run.state === "running" && !run.graceTimer) {
      run.graceTimer = setTimeout(() => {
        this.finishRun(run, {
          codexStatus: "timedOut",
          error: { message: `turn did not end within ${graceMs} ms of the interrupt`, code: "interruptTimeout" },
        });
      }, graceMs);
    }
  }

  private armIdle(run: TurnRun): void {
    if (run.idleTimer) clearTimeout(run.idleTimer);
    run.idleTimer = undefined;
    if (run.state !== "running" || run.pendingOverride || run.toolCallsInFlight > 0) return;
    run.idleTimer = setTimeout(() => void this.onIdle(run), run.idleTimeoutMs);
  }

  private async onIdle(run: TurnRun): Promise<void> {
    if (run.state !== "running") return;
    const error: TurnRecordError = {
      message: `no notification for ${run.idleTimeoutMs} ms; the turn was interrupted`,
      code: "idleTimeout",
    };
    run.pendingOverride = { codexStatus: "timedOut", error };
    this.logger.warn({ event: "codex.turn.idleTimeout", threadId: run.threadId, turnId: run.turnId }, "turn idle; interrupting");
    try {
      await this.rpcRequest("turn/interrupt", { threadId: run.threadId, turnId: run.turnId! } satisfies TurnInterruptParams, Math.min(5_000, this.opts.requestTimeoutMs));
    } catch {
      /* best effort */
    }
    if (run.state !== "running") return;
    // Wait briefly for Codex to end the turn so the next turn/start does not land in it.
    run.graceTimer = setTimeout(() => this.finishRun(run, run.pendingOverride!), this.opts.idleInterruptGraceMs);
  }

  private finishRun(run: TurnRun, override?: { codexStatus: TurnRecordCore["codexStatus"]; error?: TurnRecordError }): void {
    if (run.state === "done") return;
    const wasStarting = run.state === "starting";
    run.state = "done";
    if (run.idleTimer) clearTimeout(run.idleTimer);
    if (run.graceTimer) clearTimeout(run.graceTimer);
    run.batcher?.close(override ? `turn ${override.codexStatus}` : "turn completed");
    if (this.runs.get(run.threadId) === run) this.runs.delete(run.threadId);
    if (wasStarting || !run.projector) return;
    const record = run.projector.finish(run.pendingOverride ?? override);
    this.logger.info(
      {
        event: "codex.turn.completed",
        threadId: record.threadId,
        turnId: record.turnId,
        codexStatus: record.codexStatus,
        itemCount: record.items.length,
        messageCount: record.messagesSnapshot.length,
        compactions: record.compactions.length,
        errorCode: record.error?.code ?? record.error?.codexErrorInfo,
        durationMs: Date.now() - run.acceptedAt,
      },
      "turn ended",
    );
    run.completion.resolve(record);
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
  async compactThread(options: { threadId: string; timeoutMs?: number }): Promise<CompactThreadResult> {
    const parsed = z
      .object({ threadId: z.string().min(1), timeoutMs: z.number().int().positive().default(60_000) })
      .strict()
      .safeParse(options);
    if (!parsed.success) invalidArgument("compactThread options", parsed.error.issues);
    const { threadId, timeoutMs } = parsed.data;
    await this.ensureAlive();
    const active = this.runs.get(threadId);
    if (active && active.state !== "done") return { ok: false, reason: "a turn is running on this thread", threadId };
    const inFlight = this.compactions.get(threadId);
    if (inFlight) await inFlight.done.promise;
    await this.reattach(threadId);
    const watch: CompactionWatch = { threadId, itemCompleted: false, done: deferred() };
    this.compactions.set(threadId, watch);
    const result = (ok: boolean, reason?: string): CompactThreadResult =>
      defined({ ok, reason, threadId, turnId: watch.turnId, itemId: watch.itemId });
    let timer: NodeJS.Timeout | undefined;
    try {
      try {
        await this.rpcRequest("thread/compact/start", { threadId });
      } catch (err) {
        return result(false, err instanceof CodexAppServerError ? (err.rpcMessage ?? err.message) : String(err));
      }
      const outcome = await Promise.race([
        watch.done.promise,
        new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), timeoutMs))),
      ]);
      if (outcome === "timeout") return result(false, `compaction did not finish within ${timeoutMs} ms`);
      if (outcome.status === "exited") return result(false, outcome.error);
      if (outcome.status !== "completed") return result(false, outcome.error ?? `compaction turn ${outcome.status}`);
      if (!watch.itemCompleted) return result(false, "compaction turn completed without a contextCompaction item");
      this.logger.info({ event: "codex.compaction.completed", threadId, turnId: watch.turnId, itemId: watch.itemId }, "manual compaction done");
      return result(true);
    } finally {
      if (timer) clearTimeout(timer);
      if (this.compactions.get(threadId) === watch) this.compactions.delete(threadId);
      watch.done.resolve({ status: "abandoned" });
    }
  }

  private onCompactionNotification(watch: CompactionWatch, n: IncomingNotification): void {
    if (!n.consumed) return;
    switch (n.method) {
      case "turn/started":
        watch.turnId ??= n.params.turn.id;
        break;
      case "item/started":
      case "item/completed":
        if (watch.turnId !== undefined && n.params.turnId !== watch.turnId) return;
        watch.turnId ??= n.params.turnId;
        if (n.params.item.type === "contextCompaction") {
          watch.itemId = n.params.item.id;
          if (n.method === "item/completed") watch.itemCompleted = true;
        }
        break;
      case "turn/completed":
        if (watch.turnId !== undefined && n.params.turn.id !== watch.turnId) return;
        watch.turnId ??= n.params.turn.id;
        watch.done.resolve(
          defined({ status: n.params.turn.status, error: n.params.turn.error?.message }) as { status: string; error?: string },
        );
        break;
      default:
        break;
    }
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

  private onNotification_(proc: AppServerProcess, n: IncomingNotification): void {
    if (proc !== this.proc) return;
    this.emitRaw(n);
    if (!n.consumed) return;
    const threadId = (n.params as { threadId?: string }).threadId;
    if (threadId === undefined) return;
    if (n.method === "thread/closed") {
      // Unloaded by Codex: the next resume must really resume (keep the tool handlers for it).
      const state = this.threads.get(threadId);
      if (state && state.generation === proc.generation) state.generation = -2;
      return;
    }
    const run = this.runs.get(threadId);
    if (run && run.generation === proc.generation) {
      if (run.state === "starting") run.buffer.push(n);
      else if (run.state === "running") this.applyToRun(run, n);
    }
    const watch = this.compactions.get(threadId);
    if (watch) this.onCompactionNotification(watch, n);
  }

  private applyToRun(run: TurnRun, n: IncomingNotification): void {
    const projector = run.projector!;
    if (!projector.matches(n)) return;
    const events = projector.apply(n);
    if (run.onEvent) {
      for (const e of events) {
        try {
          run.onEvent(e);
        } catch (err) {
          this.logger.error({ event: "codex.onEventError", type: e.type, errName: err instanceof Error ? err.name : typeof err }, "onEvent callback threw");
        }
      }
    }
    if (projector.completed) this.finishRun(run);
    else this.armIdle(run);
  }

  private async onServerRequest(proc: AppServerProcess, req: ServerRequestMessage): Promise<void> {
    const rpc = proc.rpc;
    if (req.method === "item/tool/call") {
      await this.onToolCall(proc, req);
      return;
    }
    if (isApprovalMethod(req.method) || req.method === "mcpServer/elicitation/request") {
      let decided: unknown;
      if (this.opts.approvalHandler) {
        try {
          decided = await this.opts.approvalHandler({ method: req.method, params: req.params });
        } catch (err) {
          this.logger.error({ event: "codex.approval.handlerError", method: req.method, errName: err instanceof Error ? err.name : typeof err }, "approval handler threw");
        }
      }
      if (decided !== undefined) {
        this.logger.info({ event: "codex.approval.decided", method: req.method }, "approval decided by handler");
        rpc.respond(req.id, decided);
        return;
      }
      this.counters.approvalsDeclined++;
      this.logger.info({ event: "codex.approval.declined", method: req.method }, "approval declined (fail closed)");
      const decline = APPROVAL_DECLINES[req.method];
      if (decline !== undefined) rpc.respond(req.id, decline);
      else rpc.respondError(req.id, -32000, `approval declined: ${req.method} is not supported by this client`);
      return;
    }
    if (req.method === "currentTime/read") {
      rpc.respond(req.id, { currentTimeAt: Math.floor(Date.now() / 1000) });
      return;
    }
    this.counters.unsupportedServerRequests++;
    this.logger.warn(
      { event: "codex.serverRequest.unsupported", method: req.method, known: knownServerRequestMethods.has(req.method) },
      "unsupported server request",
    );
    rpc.respondError(req.id, -32601, `unsupported server request: ${req.method}`);
  }

  private async onToolCall(proc: AppServerProcess, req: ServerRequestMessage): Promise<void> {
    const parsed = dynamicToolCallParamsSchema.safeParse(req.params);
    if (!parsed.success) {
      proc.rpc.respondError(req.id, -32602, "invalid item/tool/call params");
      return;
    }
    const p = parsed.data;
    this.counters.toolCalls++;
    const run = this.runs.get(p.threadId);
    const tool = this.threads.get(p.threadId)?.tools.get(p.tool);
    const t0 = Date.now();
    let reply: DynamicToolCallResponse;
    if (!tool) {
      reply = { contentItems: [{ type: "inputText", text: `unknown tool: ${p.tool}` }], success: false };
    } else {
      if (run) {
        run.toolCallsInFlight++;
        this.armIdle(run);
      }
      try {
        const text = await tool.handler(p.arguments, {
          threadId: p.threadId,
          turnId: p.turnId,
          callId: p.callId,
          tool: p.tool,
          namespace: p.namespace ?? null,
        });
        reply = { contentItems: [{ type: "inputText", text: typeof text === "string" ? text : String(text) }], success: true };
      } catch (err) {
        reply = {
          contentItems: [{ type: "inputText", text: `tool failed: ${err instanceof Error ? err.message : String(err)}` }],
          success: false,
        };
      } finally {
        if (run) {
          run.toolCallsInFlight--;
          this.armIdle(run);
        }
      }
    }
    this.logger.info(
      { event: "codex.tool.call", threadId: p.threadId, turnId: p.turnId, callId: p.callId, tool: p.tool, success: reply.success, durationMs: Date.now() - t0 },
      "dynamic tool call answered",
    );
    proc.rpc.respond(req.id, reply);
  }
}
