/**
 * The validated options of {@link CodexAppServer}: spawn, thread start/resume and turn start. zod at the boundary;
 * a bad value throws `CodexAppServerError` with code INVALID_ARGUMENT and `field` naming the option.
 */
import { statSync } from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import { contextImagesSchema, promptImagesSchema } from "./prompt-images.js";
import type { ApprovalCallback, HostDecisionContext } from "./approvals.js";
import type { ModelCatalog } from "./config.js";
import type { AfterToolCall, BeforeToolCall, DynamicToolSpec } from "./dynamic-tools.js";
import { DEFAULT_MAX_LINE_BYTES } from "./rpc.js";
import { nonNegativeTimeoutMsSchema, timeoutMsSchema } from "./timeouts.js";
import type { CodexTurnEvent } from "./turn-projector.js";
import type { CodexConfigWarning } from "./config-warnings.js";
import type { CodexTurnWarning } from "./warnings.js";

/**
 * Decides an approval server request (`item/commandExecution/requestApproval`, `applyPatchApproval`, ...). Return
 * the JSON result to send, or `undefined` to fall back to the default: DECLINE. Spawn-level and raw; prefer the typed
 * per-turn `onApproval` of {@link StartTurnOptions}, which is asked first.
 */
export type ApprovalHandler = (request: { method: string; params: unknown }) => unknown;

const fn = <T>(what: string) => z.custom<T>((v) => typeof v === "function", `${what} must be a function`);

export const toolSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "tool names are 1-64 chars of [A-Za-z0-9_-]"),
    description: z.string(),
    inputSchema: z.record(z.string(), z.unknown()),
    handler: fn<DynamicToolSpec["handler"]>("handler"),
  })
  .strict();

/** Dynamic tools: names must be unique (Codex would see two tools of one name and we could route only one). */
export const toolListSchema = z.array(toolSchema).superRefine((tools, ctx) => {
  const seen = new Set<string>();
  tools.forEach((t, i) => {
    if (seen.has(t.name)) ctx.addIssue({ code: "custom", path: [i, "name"], message: `duplicate tool name "${t.name}"` });
    seen.add(t.name);
  });
});

export const spawnOptionsSchema = z
  .object({
    /** Path of the codex executable (a .js/.mjs path runs under node). Default: the installed @openai/codex binary. */
    codexBin: z.string().min(1).optional(),
    /** CODEX_HOME. Default: see `temporaryHome`. */
    codexHome: z.string().min(1).optional(),
    /**
     * Run in a fresh temporary CODEX_HOME that close() (or process exit) removes. Default: true when no `codexHome`
     * is given and the settings are the offline ones (`offlineCodexConfig`: the fake provider, or a `modelCatalog`);
     * otherwise false, and CODEX_HOME is `resolveCodexHome()` (`$CODEX_HOME`, else `~/.codex`), like Codex itself.
     */
    temporaryHome: z.boolean().optional(),
    /** `-c` overrides (nested objects become dotted keys). */
    config: z.record(z.string(), z.unknown()).optional(),
    /** Extra environment (e.g. the provider key variable). The rest of the parent environment is NOT inherited. */
    env: z.record(z.string(), z.string()).optional(),
    /**
     * Names of parent environment variables to pass through to Codex (e.g. a real provider key). They reach Codex
     * only, never the commands it runs for the model (see `commandEnv`).
     */
    passEnv: z.array(z.string().min(1)).optional(),
    /**
     * Names of Codex's environment variables (from `passEnv` or `env`) that the commands Codex runs for the model
     * (shell, unified exec) may see. By default a command sees only PATH, HOME and the proxy and certificate variables:
     * whatever else Codex's environment holds (a provider key, the offline fake's key, CODEX_HOME, this library's own
     * variables) is excluded through Codex's `shell_environment_policy`, because a model that runs `env` would read it.
     */
    commandEnv: z.array(z.string().min(1)).optional(),
    /** A model catalog to write into CODEX_HOME and point `model_catalog_json` at. */
    modelCatalog: z
      .custom<ModelCatalog>((v) => typeof v === "object" && v !== null && Array.isArray((v as ModelCatalog).models), "modelCatalog must have a models array")
      .optional(),
    logger: z
      .custom<Logger>((v) => typeof v === "object" && v !== null && typeof (v as Logger).info === "function", "logger must be a pino logger")
      .optional(),
    requestTimeoutMs: timeoutMsSchema.default(30_000),
    initializeTimeoutMs: timeoutMsSchema.default(30_000),
    /**
     * A running turn with no notification for this long is interrupted and ends as "timedOut". The clock stops while a
     * tool call runs (dynamic, or a native command or MCP tool call, which Codex bounds) or the host decides a request.
     * A model stream that stays open sending only keep-alives notifies nothing, so it ends here. Default 120 s; 0: no bound.
     */
    turnIdleTimeoutMs: nonNegativeTimeoutMsSchema.default(120_000),
    /** After an idle timeout's interrupt, how long to wait for Codex to end the turn before giving up. */
    idleInterruptGraceMs: nonNegativeTimeoutMsSchema.default(2_000),
    closeTimeoutMs: timeoutMsSchema.default(3_000),
    clientInfo: z
      .object({ name: z.string().min(1), title: z.string().nullable().optional(), version: z.string().min(1) })
      .strict()
      .optional(),
    optOutNotificationMethods: z.array(z.string()).optional(),
    maxLineBytes: z.number().int().positive().default(DEFAULT_MAX_LINE_BYTES),
    approvalHandler: fn<ApprovalHandler>("approvalHandler").optional(),
    /** Respawn the process on the next call after it died (same CODEX_HOME, so threads can be resumed). */
    autoRestart: z.boolean().default(true),
    /** Crash-loop guard: at most this many restarts within `restartWindowMs`. */
    maxRestarts: z.number().int().nonnegative().default(3),
    restartWindowMs: timeoutMsSchema.default(60_000),
    /** Working directory of the child process (default: process.cwd()). */
    cwd: z.string().min(1).optional(),
    /**
     * Ask the turn's `beforeToolCall` before Codex runs a native tool (shell command, patch, MCP tool), which may then
     * block it: Codex's `PreToolUse` hook, relayed to this process over a private Unix socket. Costs one short Node
     * process per native tool call. Default false (native calls are only observed).
     */
    nativeToolHooks: z.boolean().default(false),
    /**
     * Release a thread no turn has used for this long (`thread/unsubscribe`): Codex keeps every thread a client loaded
     * in memory until it is released, then unloads it (about 1 MiB per short thread; unloaded 30-60 s after the
     * release, observed with 0.169). Its next turn resumes it from its rollout, history intact. 0: never. Default
     * 10 minutes.
     */
    releaseIdleThreadsAfterMs: z.number().int().nonnegative().default(600_000),
    /**
     * At most this many threads loaded by this client: beyond it the least recently used ones without a running turn,
     * unused for 30 s (or `releaseIdleThreadsAfterMs` when shorter), are released. 0: no limit. Default 128.
     */
    maxLoadedThreads: z.number().int().nonnegative().default(128),
    /**
     * At most this many threads this client does not hold loaded (released, unloaded by Codex, or loaded by an
     * app-server process that has since exited) are remembered: their settings, with the developer instructions they
     * were last given, and their tool handlers, so that `startTurn` on one resumes it by itself.
     * Beyond it the least recently used are forgotten, and what they held can be collected; a released thread Codex may
     * still hold is never forgotten. A forgotten thread is resumed with `resumeThread()` (as `runCodexTurn` always
     * does); a turn started on it without that is refused by Codex (`TURN_START_REJECTED`). 0: no limit. Default 1000.
     */
    maxRememberedThreads: z.number().int().nonnegative().default(1_000),
    /**
     * Hears each of Codex's setup warnings once, as it arrives (also on `configWarnings` and logged as
     * `codex.configWarning`): a config or rules file Codex could not use, a missing sandbox helper, a deprecation.
     */
    onConfigWarning: fn<(warning: CodexConfigWarning) => void>("onConfigWarning").optional(),
    /**
     * Before the first thread, turn or native compaction, ask Codex for its account state (`account/read`, once per
     * client, answered from CODEX_HOME with no network) and fail with `AUTH_REQUIRED` when the provider needs OpenAI
     * credentials and there is no account and no API key (`OPENAI_API_KEY` / `CODEX_API_KEY` in `env` or `passEnv`).
     * Default: true, except for the offline settings (`offlineCodexConfig`, `startOfflineCodex`).
     */
    accountPreflight: z.boolean().optional(),
  })
  .strict()
  .refine((o) => !(o.codexHome !== undefined && o.temporaryHome === true), {
    path: ["temporaryHome"],
    message: "temporaryHome cannot be combined with codexHome",
  });

export type CodexAppServerOptions = z.input<typeof spawnOptionsSchema>;
export type ResolvedSpawnOptions = z.output<typeof spawnOptionsSchema>;

/** Codex's `AskForApproval` (src/codex/protocol/v2/AskForApproval.ts). */
export const approvalPolicySchema = z.union([
  z.enum(["untrusted", "on-request", "never"]),
  z
    .object({
      granular: z
        .object({
          sandbox_approval: z.boolean(),
          rules: z.boolean(),
          skill_approval: z.boolean(),
          request_permissions: z.boolean(),
          mcp_elicitations: z.boolean(),
        })
        .strict(),
    })
    .strict(),
]);
/** Codex's `SandboxMode`. */
export const sandboxSchema = z.enum(["read-only", "workspace-write", "danger-full-access"]);
/** Codex's `ReasoningSummary`. */
export const reasoningSummarySchema = z.enum(["auto", "concise", "detailed", "none"]);
/** Codex's `ReasoningEffort` is an open string ("minimal", "low", "medium", "high", "xhigh", ...); a lower-case word. */
export const reasoningEffortSchema = z.string().regex(/^[a-z]+$/, "reasoning effort is a lower-case word such as low, medium or high");

/**
 * A thread's working directory: an absolute path to an existing directory. Codex takes any string and the turn then
 * "completes" with every command failing ("Failed to create unified exec process"), so a typo is caught here.
 *
 * @example
 * ```ts
 * workingDirectorySchema.safeParse("relative/dir").success; // false: must be an absolute path
 * ```
 */
export const workingDirectorySchema = z
  .string()
  .min(1)
  .superRefine((dir, ctx) => {
    if (!path.isAbsolute(dir)) return void ctx.addIssue({ code: "custom", message: `must be an absolute path (got ${dir})` });
    const st = statSync(dir, { throwIfNoEntry: false });
    if (st === undefined) ctx.addIssue({ code: "custom", message: `${dir} does not exist` });
    else if (!st.isDirectory()) ctx.addIssue({ code: "custom", message: `${dir} is not a directory` });
  });

const threadSettings = {
  cwd: workingDirectorySchema.optional(),
  developerInstructions: z.string().optional(),
  model: z.string().min(1).optional(),
  /** Default "never": Codex does not ask, the sandbox decides. */
  approvalPolicy: approvalPolicySchema.default("never"),
  /** Default "read-only". */
  sandbox: sandboxSchema.default("read-only"),
  /** Extra writable directories for "workspace-write" (absolute paths; the thread's cwd is always writable). */
  writableRoots: z.array(z.string().min(1).refine((p) => path.isAbsolute(p), "writable roots must be absolute paths")).optional(),
  /** Outbound network from sandboxed commands ("read-only" / "workspace-write"; default Codex's: off). */
  networkAccess: z.boolean().optional(),
  reasoningEffort: reasoningEffortSchema.optional(),
  reasoningSummary: reasoningSummarySchema.optional(),
  serviceTier: z.string().min(1).optional(),
  /** Extra per-thread config overrides (`config` of thread/start / thread/resume). */
  config: z.record(z.string(), z.unknown()).optional(),
};

type SandboxFields = { sandbox: z.output<typeof sandboxSchema>; writableRoots?: string[] | undefined; networkAccess?: boolean | undefined };
/** `writableRoots` only mean something in "workspace-write"; network access not in "danger-full-access" (always on). */
function checkSandboxFields(o: SandboxFields, ctx: z.RefinementCtx): void {
  if (o.writableRoots !== undefined && o.sandbox !== "workspace-write") {
    ctx.addIssue({ code: "custom", path: ["writableRoots"], message: 'writableRoots needs sandbox "workspace-write"' });
  }
  if (o.networkAccess !== undefined && o.sandbox === "danger-full-access") {
    ctx.addIssue({ code: "custom", path: ["networkAccess"], message: 'networkAccess does not apply to sandbox "danger-full-access"' });
  }
}

/** The names of a thread's settings (every key of start/resume options but the thread id, tools and flags). */
export const THREAD_SETTING_KEYS: readonly string[] = Object.keys(threadSettings);

/** The dynamic tools of thread/start and thread/resume. */
const threadTools = {
  /** Handlers for the thread's dynamic tools (on a resume Codex keeps the declarations from thread/start). */
  dynamicTools: toolListSchema.optional(),
  /**
   * Drop these tool handlers when the thread is released for idleness (`releaseIdleThreadsAfterMs`,
   * `maxLoadedThreads`) or unloaded by Codex, so whatever they hold (a session's state) can be collected; the next
   * resume of the thread must pass them again, as `runCodexTurn` does on every turn. Default false: the client keeps
   * them for as long as it knows the thread, so a turn started on a released thread still finds them.
   */
  dropToolsOnRelease: z.boolean().optional(),
};

export const startThreadSchema = z
  .object({
    ...threadSettings,
    ...threadTools,
    ephemeral: z.boolean().optional(),
  })
  .strict()
  .superRefine(checkSandboxFields);

export const resumeThreadSchema = z
  .object({
    threadId: z.string().min(1),
    ...threadSettings,
    ...threadTools,
    /**
     * Skip the `thread/resume` RPC when this process already has the thread loaded with exactly these settings
     * (started or resumed here, not closed since, no restart in between): the request would change nothing. Tool
     * handlers are still replaced. Default false: always resume.
     */
    reuseLoaded: z.boolean().optional(),
  })
  .strict()
  .superRefine(checkSandboxFields);

export const additionalContextSchema = z.record(
  z.string().min(1),
  z
    .object({ value: z.string(), kind: z.enum(["untrusted", "application"]), name: z.string().min(1).optional() })
    .strict()
    .refine((e) => e.kind === "untrusted" || e.name === undefined, "name is only allowed on untrusted entries"),
);

/** Answers to a `request_user_input` request: question id -> chosen/typed answers. */
export type UserInputAnswers = Record<string, { answers: string[] }>;

/** A `request_user_input` request (Codex's `ToolRequestUserInputParams`, experimental). */
export interface CodexUserInputRequest {
  /** The asking thread: the turn's own, or a sub-agent's working for the turn. */
  threadId: string;
  turnId: string;
  itemId: string;
  questions: Array<{ id: string; header: string; question: string; isOther: boolean; isSecret: boolean; options: Array<{ label: string; description: string }> | null }>;
}

/** The agent's final answer as `beforeFinalize` sees it (`stopHookActive`: this turn already revised once). */
export interface FinalizeRequest {
  threadId: string;
  turnId: string;
  assistantText: string;
  stopHookActive: boolean;
  /** Extra model passes already asked for in this turn. */
  revisions: number;
  /** Codex's own record of the thread (its rollout file), when its `Stop` hook named it. */
  transcriptPath?: string | undefined;
}

/** `StartTurnOptions.beforeFinalize`: `{ action: "revise", reason }` asks for one more model pass; anything else ends the turn. */
export type BeforeFinalize = (
  request: FinalizeRequest,
) => { action: "revise"; reason: string } | undefined | void | Promise<{ action: "revise"; reason: string } | undefined | void>;

/** Host callback for `request_user_input`; `undefined` declines (as without a callback). */
export type UserInputCallback = (
  request: CodexUserInputRequest,
  context: HostDecisionContext,
) => UserInputAnswers | undefined | Promise<UserInputAnswers | undefined>;

export const startTurnSchema = z
  .object({
    threadId: z.string().min(1),
    /** The text Codex receives. */
    text: z.string().min(1, "text must not be empty"),
    /** The original prompt for the snapshot (default: `text`). */
    originalPrompt: z.string().optional(),
    /**
     * Images sent after the text (`{ path }` files, or `{ data, mimeType }` base64), checked and read before the turn
     * starts; the snapshot's prompt message carries them as image parts. See `PromptImageInput`.
     */
    images: promptImagesSchema.optional(),
    /**
     * Images of earlier user messages that are part of the context this turn sends (see `ContextImage`): each goes
     * before the text, after a text item with its label. Not part of the snapshot (the transcript holds them already).
     */
    contextImages: contextImagesSchema.optional(),
    additionalContext: additionalContextSchema.optional(),
    model: z.string().min(1).optional(),
    effort: reasoningEffortSchema.optional(),
    /**
     * Codex's collaboration mode for this turn (experimental `turn/start` field): `"plan"` gives the model Codex's Plan
     * mode instructions and its `request_user_input` tool (answered by `onUserInput`); `"default"` is Codex's Default
     * mode. Absent: the thread's current mode. The mode's settings name the turn's model (`model`, else the thread's).
     */
    collaborationMode: z.enum(["plan", "default"]).optional(),
    steerQuietWindowMs: nonNegativeTimeoutMsSchema.default(50),
    /** The spawn's `turnIdleTimeoutMs` for this turn (0: no bound). */
    idleTimeoutMs: nonNegativeTimeoutMsSchema.optional(),
    /**
     * A turn whose only notifications are Codex's retry errors (`error` with willRetry: reconnecting to the model)
     * for this long is interrupted and fails with code `retryWithoutProgress`. Default 90 s; 0: no bound.
     */
    retryWithoutProgressMs: nonNegativeTimeoutMsSchema.default(90_000),
    /** Bound on one dynamic tool handler call; Codex then gets "tool X timed out after N ms". Default 300 s. */
    toolCallTimeoutMs: timeoutMsSchema.default(300_000),
    /** Bound on each `beforeToolCall` / `afterToolCall` call (then ignored, with a warning). Default 60 s. */
    toolInterceptorTimeoutMs: timeoutMsSchema.default(60_000),
    beforeToolCall: fn<BeforeToolCall>("beforeToolCall").optional(),
    afterToolCall: fn<AfterToolCall>("afterToolCall").optional(),
    /**
     * With `nativeToolHooks`: asked when the agent gives its natural final answer (Codex's `Stop` hook); returning
     * `{ action: "revise", reason }` makes Codex run one more model pass with `reason` as a user message (at most 3 per
     * turn). Bounded by `toolInterceptorTimeoutMs`; anything else ends the turn.
     */
    beforeFinalize: fn<BeforeFinalize>("beforeFinalize").optional(),
    /** Decides command, file-change and permission approval requests. Absent: deny. */
    onApproval: fn<ApprovalCallback>("onApproval").optional(),
    /** Bound on one `onApproval` call; no answer in time denies. Default 60 s. */
    approvalTimeoutMs: timeoutMsSchema.default(60_000),
    /** Answers `request_user_input`. Absent or `undefined`: declined. */
    onUserInput: fn<UserInputCallback>("onUserInput").optional(),
    /** Bound on one `onUserInput` call; no answer in time declines. Default 300 s. */
    userInputTimeoutMs: timeoutMsSchema.default(300_000),
    onEvent: fn<(e: CodexTurnEvent) => void>("onEvent").optional(),
    /** Called with each warning of the turn (also collected on `CodexTurn.warnings`). */
    onWarning: fn<(w: CodexTurnWarning) => void>("onWarning").optional(),
  })
  .strict();

export type StartThreadOptions = z.input<typeof startThreadSchema>;
export type ResumeThreadOptions = z.input<typeof resumeThreadSchema>;
export type StartTurnOptions = z.input<typeof startTurnSchema>;
export type ResolvedStartTurnOptions = z.output<typeof startTurnSchema>;

/** The thread settings this client applies (and compares for `reuseLoaded`). */
export interface ThreadSettings {
  cwd?: string | undefined;
  developerInstructions?: string | undefined;
  model?: string | undefined;
  approvalPolicy: z.output<typeof approvalPolicySchema>;
  sandbox: z.output<typeof sandboxSchema>;
  writableRoots?: string[] | undefined;
  networkAccess?: boolean | undefined;
  reasoningEffort?: string | undefined;
  reasoningSummary?: z.output<typeof reasoningSummarySchema> | undefined;
  serviceTier?: string | undefined;
  config?: Record<string, unknown> | undefined;
}
