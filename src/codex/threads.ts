/**
 * Thread operations of one client: start, resume (re-sending every setting), reuse of a thread already loaded with
 * the same settings, re-attach after a process restart, release of idle threads and forgetting of long-unloaded ones
 * (`thread-release.ts`), and the dynamic tool handlers of each thread.
 */
import type { Logger } from "pino";
import { canonicalJson } from "../projection/render.js";
import type { DynamicToolSpec } from "./dynamic-tools.js";
import { CodexAppServerError, invalidArgument } from "./errors.js";
import { resumeThreadSchema, startThreadSchema, THREAD_SETTING_KEYS, toolListSchema, workingDirectorySchema, type ResumeThreadOptions, type StartThreadOptions, type ThreadSettings } from "./options.js";
import { threadResultSchema } from "./schemas.js";
import { defined, threadResumeParams, threadSettingsOf, threadStartParams } from "./thread-params.js";
import { threadsToForget, threadsToRelease, type ThreadReleasePolicy } from "./thread-release.js";

/** The keys options reused without the schema may have (see `reusableAsGiven`). */
const REUSE_AS_GIVEN_KEYS = new Set(["threadId", "reuseLoaded", ...THREAD_SETTING_KEYS]);
/** The settings the schema fills in when they are omitted (approval policy, sandbox), taken from the schema itself. */
const RESUME_DEFAULTS: ThreadSettings = threadSettingsOf(resumeThreadSchema.parse({ threadId: "-" }));

/** What Codex told us about a thread. */
export interface ThreadInfo {
  threadId: string;
  model?: string | undefined;
  modelProvider?: string | undefined;
  /** `resumeThread({ reuseLoaded: true })` found the thread loaded with the same settings and sent no RPC. */
  reused?: boolean | undefined;
}

/**
 * A thread this client knows. `generation` -1: handlers only (never loaded here); -2: unloaded by Codex, or released by
 * this client (the next use resumes it).
 */
export interface ThreadState {
  generation: number;
  /** When a thread operation or turn last used it (`performance.now()`). */
  lastUsedMs: number;
  tools: Map<string, DynamicToolSpec>;
  /** The handlers in `tools` go when the thread is released or unloaded (`dropToolsOnRelease`). */
  dropToolsOnRelease?: boolean | undefined;
  /** The generation this client released it in, until Codex reports it closed (Codex may hold it till then). */
  releasedIn?: number | undefined;
  settings: ThreadSettings;
  model?: string | undefined;
  modelProvider?: string | undefined;
}

/** What thread operations need from the client. */
export interface ThreadDeps {
  logger: Logger;
  rpcRequest(method: "thread/start" | "thread/resume" | "thread/unsubscribe", params: unknown): Promise<unknown>;
  ensureAlive(): Promise<void>;
  generation(): number;
  defaultCwd(): string;
}

const toolMap = (tools: DynamicToolSpec[]) => new Map(tools.map((t) => [t.name, t]));

/**
 * @example
 * ```ts
 * const threads = new ThreadRegistry(deps);
 * const { threadId } = await threads.start({ sandbox: "workspace-write" });
 * ```
 */
export class ThreadRegistry {
  private readonly threads = new Map<string, ThreadState>();
  /** `thread/unsubscribe` requests in flight: a resume of the thread waits for its release to be answered first. */
  private readonly releasing = new Map<string, Promise<void>>();

  constructor(private readonly deps: ThreadDeps) {}

  get(threadId: string): ThreadState | undefined {
    return this.threads.get(threadId);
  }

  /** The thread was used (a turn started or ended on it): it is the most recently used. */
  touch(threadId: string): void {
    const state = this.threads.get(threadId);
    if (state) state.lastUsedMs = performance.now();
  }

  /**
   * Release the loaded threads the policy picks (`thread/unsubscribe`; Codex unloads them a little later). Each is
   * marked for a real resume first, so its next use resumes it, after the release was answered.
   */
  releaseIdle(policy: ThreadReleasePolicy, busy: (threadId: string) => boolean): string[] {
    const generation = this.deps.generation();
    const loaded = [...this.threads].filter(([, s]) => s.generation === generation).map(([threadId, s]) => ({ threadId, lastUsedMs: s.lastUsedMs, busy: busy(threadId) }));
    const ids = threadsToRelease(loaded, performance.now(), policy);
    for (const threadId of ids) this.release(threadId, generation);
    return ids;
  }

  private release(threadId: string, generation: number): void {
    const state = this.threads.get(threadId);
    if (state) {
      this.unload(state);
      state.releasedIn = generation;
    }
    const done = this.deps
      .rpcRequest("thread/unsubscribe", { threadId })
      .then(
        (res) => this.deps.logger.info({ event: "codex.thread.released", threadId, generation, status: (res as { status?: unknown })?.status }, "idle thread released"),
        (err: unknown) => this.deps.logger.warn({ event: "codex.thread.releaseFailed", threadId, err: err instanceof CodexAppServerError ? err.code : "unknown" }, "idle thread release failed"),
      )
      .finally(() => {
        if (this.releasing.get(threadId) === done) this.releasing.delete(threadId);
      });
    this.releasing.set(threadId, done);
  }

  /** Start a thread (see `CodexAppServer.startThread`). */
  async start(options: StartThreadOptions): Promise<ThreadInfo> {
    const parsed = startThreadSchema.safeParse(options);
    if (!parsed.success) invalidArgument("startThread options", parsed.error.issues);
    const o = parsed.data;
    await this.deps.ensureAlive();
    const tools = o.dynamicTools ?? [];
    const settings = threadSettingsOf(o);
    const params = threadStartParams(settings, tools, { defaultCwd: this.deps.defaultCwd(), ephemeral: o.ephemeral });
    const res = threadResultSchema.safeParse(await this.deps.rpcRequest("thread/start", params));
    if (!res.success) throw new CodexAppServerError("INVALID_RESPONSE", "thread/start returned no thread id", { method: "thread/start" });
    const threadId = res.data.thread.id;
    this.threads.set(threadId, {
      generation: this.deps.generation(),
      lastUsedMs: performance.now(),
      tools: toolMap(tools),
      dropToolsOnRelease: o.dropToolsOnRelease === true && tools.length > 0,
      settings: { ...settings, ...(params.cwd ? { cwd: params.cwd } : {}) },
      ...defined({ model: res.data.model, modelProvider: res.data.modelProvider }),
    });
    this.deps.logger.info({ event: "codex.thread.started", threadId, tools: tools.length, sandbox: settings.sandbox }, "thread started");
    return defined({ threadId, model: res.data.model, modelProvider: res.data.modelProvider });
  }

  /** Resume a thread, or reuse it when loaded with the same settings (see `CodexAppServer.resumeThread`). */
  async resume(options: ResumeThreadOptions): Promise<ThreadInfo> {
    const reusable = this.reusableAsGiven(options);
    if (reusable) {
      await this.deps.ensureAlive();
      if (this.threads.get(options.threadId) === reusable && reusable.generation === this.deps.generation()) return this.reuse(options.threadId, reusable);
    }
    const parsed = resumeThreadSchema.safeParse(options);
    if (!parsed.success) invalidArgument("resumeThread options", parsed.error.issues);
    const o = parsed.data;
    await this.deps.ensureAlive();
    const settings = threadSettingsOf(o);
    const loaded = this.threads.get(o.threadId);
    if (o.reuseLoaded && loaded && loaded.generation === this.deps.generation() && this.sameSettings(loaded.settings, settings)) {
      if (o.dynamicTools) {
        loaded.tools = toolMap(o.dynamicTools);
        loaded.dropToolsOnRelease = o.dropToolsOnRelease === true;
      }
      return this.reuse(o.threadId, loaded);
    }
    return this.resumeWith(o.threadId, settings, o.dynamicTools, o.dropToolsOnRelease === true);
  }

  private reuse(threadId: string, loaded: ThreadState): ThreadInfo {
    loaded.lastUsedMs = performance.now();
    this.deps.logger.debug({ event: "codex.thread.reused", threadId }, "thread already loaded with these settings");
    return defined({ threadId, model: loaded.model, modelProvider: loaded.modelProvider, reused: true });
  }

  /**
   * The loaded thread that `options` reuse, decided on the options as given, before the schema (a host resumes its
   * thread this way on every turn, and the schema's parse was a tenth of a millisecond of it). Only for options that
   * name nothing but the thread, `reuseLoaded: true` and settings equal (the schema's defaults filled in) to those the
   * thread was loaded with: those passed the schema then, and the one check that depends on the file system, that the
   * cwd is still a directory, is made again here. Anything else (tools, unknown keys, other settings) goes through
   * the schema as before.
   */
  private reusableAsGiven(options: unknown): ThreadState | undefined {
    if (typeof options !== "object" || options === null) return undefined;
    const given = options as Record<string, unknown>;
    if (given.reuseLoaded !== true || typeof given.threadId !== "string") return undefined;
    const loaded = this.threads.get(given.threadId);
    if (!loaded || loaded.generation !== this.deps.generation()) return undefined;
    for (const key of Object.keys(given)) if (!REUSE_AS_GIVEN_KEYS.has(key)) return undefined;
    if (given.cwd !== undefined && !workingDirectorySchema.safeParse(given.cwd).success) return undefined;
    const settings = threadSettingsOf({ ...RESUME_DEFAULTS, ...given } as ThreadSettings);
    return this.sameSettings(loaded.settings, settings) ? loaded : undefined;
  }

  /** Settings equal as Codex would apply them (an omitted cwd means the client's default cwd). */
  private sameSettings(a: ThreadSettings, b: ThreadSettings): boolean {
    const normal = (x: ThreadSettings) => canonicalJson({ ...x, cwd: x.cwd ?? this.deps.defaultCwd() });
    return normal(a) === normal(b);
  }

  private async resumeWith(threadId: string, settings: ThreadSettings, tools?: DynamicToolSpec[], dropToolsOnRelease = false): Promise<ThreadInfo> {
    // Resumed after its release was answered: a resume Codex handled first would lose its subscription to it.
    await this.releasing.get(threadId);
    const raw = await this.deps.rpcRequest("thread/resume", threadResumeParams(threadId, settings));
    const res = threadResultSchema.safeParse(raw);
    if (!res.success) throw new CodexAppServerError("INVALID_RESPONSE", "thread/resume returned no thread", { method: "thread/resume" });
    const prev = this.threads.get(threadId);
    this.threads.set(threadId, {
      generation: this.deps.generation(),
      lastUsedMs: performance.now(),
      tools: tools ? toolMap(tools) : (prev?.tools ?? new Map()),
      dropToolsOnRelease: tools ? dropToolsOnRelease : prev?.dropToolsOnRelease,
      settings,
      ...defined({ model: res.data.model, modelProvider: res.data.modelProvider }),
    });
    this.deps.logger.info({ event: "codex.thread.resumed", threadId }, "thread resumed");
    return defined({ threadId, model: res.data.model, modelProvider: res.data.modelProvider });
  }

  /** Replace the dynamic tool handlers of a thread (declarations stay as given at thread/start). */
  setTools(threadId: string, tools: DynamicToolSpec[]): void {
    const parsed = toolListSchema.safeParse(tools);
    if (!parsed.success) invalidArgument("dynamic tools", parsed.error.issues);
    const state = this.threads.get(threadId);
    const map = toolMap(parsed.data);
    if (!state) {
      this.threads.set(threadId, { generation: -1, lastUsedMs: performance.now(), tools: map, settings: { approvalPolicy: "never", sandbox: "read-only" } });
      return;
    }
    state.tools = map;
    state.dropToolsOnRelease = false;
  }

  /** Codex unloaded the thread (`thread/closed`): the next resume must really resume (see `unload` for its handlers). */
  markUnloaded(threadId: string, generation: number): void {
    const state = this.threads.get(threadId);
    if (!state) return;
    if (state.generation === generation) this.unload(state);
    // Closed after this client released it: Codex no longer holds it (it may be forgotten now).
    if (state.releasedIn === generation) state.releasedIn = undefined;
  }

  /**
   * Forget the least recently used threads this client remembers but does not hold loaded, beyond `maxRemembered`
   * (see `threadsToForget`). Returns their ids.
   */
  forgetUnloaded(maxRemembered: number): string[] {
    const current = this.deps.generation();
    const remembered = [...this.threads]
      .filter(([, s]) => s.generation !== current && s.generation !== -1)
      .map(([threadId, s]) => ({ threadId, lastUsedMs: s.lastUsedMs, mayStillBeLoaded: s.releasedIn === current }));
    const ids = threadsToForget(remembered, maxRemembered);
    for (const threadId of ids) this.threads.delete(threadId);
    if (ids.length > 0) this.deps.logger.info({ event: "codex.thread.forgotten", count: ids.length, remembered: remembered.length - ids.length }, "settings of unloaded threads forgotten");
    return ids;
  }

  /** Not loaded any more: the next use resumes it; handlers given with `dropToolsOnRelease` are let go. */
  private unload(state: ThreadState): void {
    state.generation = -2;
    if (state.dropToolsOnRelease) {
      state.tools = new Map();
      state.dropToolsOnRelease = false;
    }
  }

  /**
   * Load a thread for a native compaction. One this client knows is re-attached (`reattach`). One it does not know
   * (the host restarted, a CLI run, a forgotten thread) is resumed with no overrides, so Codex loads it from its
   * rollout with the settings it keeps; it is not recorded here (no turn should run on it with settings the host did
   * not give), so the caller releases it after the compaction (`releaseUnrecorded`). Returns whether it was resumed
   * that way.
   */
  async loadForCompaction(threadId: string): Promise<boolean> {
    if (this.threads.has(threadId)) {
      await this.reattach(threadId);
      return false;
    }
    await this.releasing.get(threadId);
    const res = threadResultSchema.safeParse(await this.deps.rpcRequest("thread/resume", { threadId, excludeTurns: true }));
    if (!res.success) throw new CodexAppServerError("INVALID_RESPONSE", "thread/resume returned no thread", { method: "thread/resume" });
    this.deps.logger.info({ event: "codex.thread.resumedForCompaction", threadId }, "thread resumed (no overrides) for a compaction");
    return true;
  }

  /**
   * Release a thread Codex holds without a record here: a sub-agent's (Codex loaded it for a thread of ours) or one
   * resumed only for a compaction (`loadForCompaction`). Not one recorded since (a turn resumed it), nor twice.
   */
  releaseUnrecorded(threadId: string): void {
    if (this.threads.has(threadId) || this.releasing.has(threadId)) return;
    this.release(threadId, this.deps.generation());
  }

  /** A thread this client knows but whose process died must be resumed in the new process first. */
  async reattach(threadId: string): Promise<void> {
    const state = this.threads.get(threadId);
    if (!state || state.generation === this.deps.generation() || state.generation === -1) return;
    this.deps.logger.info({ event: "codex.thread.reattach", threadId }, "resuming thread in the restarted app-server");
    await this.resumeWith(threadId, state.settings);
  }
}
