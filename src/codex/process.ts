/**
 * One `codex app-server` child process and its JSON-RPC connection: spawn, stderr tail, exit detection (after stdout
 * drained), and a bounded close (EOF, then SIGTERM, then SIGKILL).
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import type { Logger } from "pino";
import type { CodexCommand } from "./binary.js";
import { JsonRpcConnection, type OutgoingRpcMessage, type ServerRequestMessage } from "./rpc.js";
import type { IncomingNotification } from "./schemas.js";

/** How the process ended. */
export interface ExitInfo {
  code: number | null;
  signal: string | null;
}

/** What the connection delivers to the client. */
export interface ProcessHandlers {
  onNotification: (n: IncomingNotification) => void;
  onServerRequest: (r: ServerRequestMessage) => void;
  onUnknownNotification: (method: string, params: unknown) => void;
  onOutgoing?: ((message: OutgoingRpcMessage) => void) | undefined;
}

/** Spawn settings of one process. */
export interface ProcessSpec {
  command: CodexCommand;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  generation: number;
  maxLineBytes: number;
  requestTimeoutMs: number;
  logger: Logger;
}

const STDERR_TAIL_BYTES = 8 * 1024;
/** After 'exit', how long to wait for stdout to close (a grandchild may keep the pipe open). */
const STDOUT_DRAIN_MS = 250;

/**
 * A running app-server child.
 *
 * @example
 * ```ts
 * const proc = new AppServerProcess(spec, handlers);
 * await proc.rpc.request("initialize", params);
 * await proc.close(3_000);
 * ```
 */
export class AppServerProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly rpc: JsonRpcConnection;
  readonly generation: number;
  readonly exited: Promise<ExitInfo>;
  alive = true;
  closing = false;
  exitInfo: ExitInfo | undefined;
  spawnError: NodeJS.ErrnoException | undefined;
  stderrBytes = 0;
  private stderrTailBuf = "";

  constructor(spec: ProcessSpec, handlers: ProcessHandlers) {
    this.generation = spec.generation;
    this.child = spawn(spec.command.command, [...spec.command.prefixArgs, ...spec.args], {
      env: spec.env,
      cwd: spec.cwd,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child.stderr.on("data", (chunk: Buffer) => {
      this.stderrBytes += chunk.length;
      this.stderrTailBuf = (this.stderrTailBuf + chunk.toString("utf8")).slice(-STDERR_TAIL_BYTES);
    });
    this.rpc = new JsonRpcConnection({
      input: this.child.stdout,
      output: this.child.stdin,
      logger: spec.logger,
      maxLineBytes: spec.maxLineBytes,
      requestTimeoutMs: spec.requestTimeoutMs,
      ...handlers,
      errorDetails: () => ({ stderrTail: this.stderrTail }),
    });
    this.exited = this.watchExit();
  }

  /** Resolves once the child is gone: on spawn error, or on exit after stdout drained (bounded). */
  private watchExit(): Promise<ExitInfo> {
    return new Promise<ExitInfo>((resolve) => {
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
        // Let stdout drain so the last notifications are processed before pending work is failed.
        const t = setTimeout(() => done({ code, signal }), STDOUT_DRAIN_MS);
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
