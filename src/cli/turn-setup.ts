/**
 * What `run` and `chat` share: the inspector (first, so a missing optional package fails before an app-server
 * process exists), the app-server, the engine (through the plugin host, bounded), the trajectory writer, and the
 * `runCodexTurn` parameters they all feed.
 */
import { mkdir, stat } from "node:fs/promises";
import path from "node:path";
import type { InspectionEvent } from "xstate";
import type { CodexApprovalDecision, CodexApprovalRequest, HostDecisionContext } from "../codex/approvals.js";
import type { UserInputCallback } from "../codex/options.js";
import type { CodexTurnParams } from "../params.js";
import type { PluginApprovalCallback, PluginWarning } from "../openclaw/index.js";
import { createTrajectoryWriter, type TrajectoryWriter } from "../trajectory/index.js";
import { engineLoadInputs, loadCliEngine, type LoadedEngine } from "./engine.js";
import { PERSON_BACKSTOP_MS } from "./chat/questions.js";
import { envError, usageError } from "./errors.js";
import { startInspector, type CliInspector } from "./inspector.js";
import { answerPluginCommand, type PluginCommandAnswer } from "./plugin-command.js";
import type { ApproveAnswer, EngineOptionValues, InspectOptionValues, ServerOptionValues, TrajectoryOptionValues, WorkOptionValues } from "./options.js";
import type { Out } from "./output.js";
import { startServer, type CliServer } from "./server.js";
import { openPgSession, pgUrlOf } from "./pg-store.js";
import { cliSessionId } from "./session-file.js";
import { resetCliSession, type SessionResetAction } from "./session-reset.js";
import { declineUserInput } from "./user-input.js";

/** Option values `run` and `chat` both have. */
export type TurnCommandOptions = EngineOptionValues &
  ServerOptionValues &
  Partial<WorkOptionValues> &
  InspectOptionValues &
  TrajectoryOptionValues & { session: string; model?: string | undefined; mkdir?: boolean | undefined; pg?: string | undefined };

/** Everything a turn command runs with; `dispose()` releases it in reverse order. */
export interface TurnSetup {
  server: CliServer;
  loaded: LoadedEngine;
  inspector: CliInspector | undefined;
  trajectory: TrajectoryWriter | undefined;
  sessionFile: string;
  /** The `runCodexTurn` parameters every turn of this command shares (no prompt, signal or callbacks). */
  baseParams(): Omit<CodexTurnParams, "prompt">;
  /** Records our own turn request in the trajectory (prompt redacted unless --trajectory-full). */
  recordTurnRequest(prompt: string): void;
  /** Answers `line` when it is a plugin command (`/name args`), printing the reply; see `answerPluginCommand`. */
  answerCommand(line: string, out: Out, say?: (line: string) => void): Promise<PluginCommandAnswer>;
  /** `/new` or `/reset`: a fresh session on the same file (see `resetCliSession`). */
  resetSession(action: SessionResetAction, out: Out, say: (line: string) => void): Promise<void>;
  dispose(): Promise<void>;
}

/**
 * How a command's turns reach the person: `askApproval` (chat `--approve ask`) and `onUserInput` (chat on a terminal:
 * Codex's questions are asked). Without `onUserInput`, Codex's questions are declined and printed on stderr, with
 * `noAnswerWhy` saying why nobody was asked.
 */
export interface TurnInteraction {
  askApproval?: ApprovalAsker | undefined;
  onUserInput?: UserInputCallback | undefined;
  noAnswerWhy?: string | undefined;
}

/** Prints each distinct plugin warning once on stderr as it happens (plugins often repeat theirs every turn). */
function pluginWarningPrinter(): (w: PluginWarning) => void {
  const shown = new Set<string>();
  return (w) => {
    const line = `warning: plugin ${w.pluginId}${w.level === "error" ? " error" : ""}: ${w.message}`;
    if (shown.has(line)) return;
    shown.add(line);
    process.stderr.write(`${line}\n`);
  };
}

/**
 * Starts what a turn command needs. On a failure part-way, what was already started is stopped again.
 *
 * @example
 * ```ts
 * const setup = await setUpTurnCommand(opts, out);
 * try { await runCodexTurn({ ...setup.baseParams(), prompt }); } finally { await setup.dispose(); }
 * ```
 */
export async function setUpTurnCommand(opts: TurnCommandOptions, out: Out, interactive: TurnInteraction = {}): Promise<TurnSetup> {
  if (opts.approve === "ask" && !interactive.askApproval) throw usageError("--approve ask needs someone to answer: use it with chat");
  // --pg: the session lives in PostgreSQL and `--session` is its id; else `--session` is the transcript file.
  const pgUrl = pgUrlOf(opts);
  if (pgUrl === undefined) await sessionDirectory(opts.session, opts.mkdir === true);
  const engineInputs = await engineLoadInputs(opts);
  const cwd = opts.cwd !== undefined ? await workingDirectory(opts.cwd) : undefined;
  // The session's id: its transcript header's (a /new or /reset changes it), else the file's base name.
  const pgSession = pgUrl !== undefined ? await openPgSession(pgUrl, opts.session) : undefined;
  const session = { id: pgSession ? pgSession.store.sessionId : await cliSessionId(path.resolve(opts.session)) };
  /** With --pg, the store of the session as it is now (a /new or /reset goes on under a fresh id). */
  let store = pgSession?.store;
  const inspector = await startInspector(opts.inspect === true, out, opts.inspectUiUrl);
  const cleanups: Array<() => Promise<void> | void> = [async () => pgSession?.close(), async () => inspector?.close()];
  const disposeAll = async () => {
    for (const fn of cleanups.splice(0).reverse()) await Promise.resolve(fn()).catch(() => undefined);
  };
  try {
    const server = await startServer({
      offline: opts.offline === true,
      ...(opts.offlineScript ? { offlineScript: opts.offlineScript } : {}),
      ...(opts.offlineRequests ? { offlineRequests: path.resolve(opts.offlineRequests) } : {}),
      ...(opts.nativeToolHooks ? { nativeToolHooks: true } : {}),
    });
    cleanups.push(() => server.dispose());
    const loaded = await loadCliEngine({
      ...engineInputs,
      onPluginApproval: pluginApprover(opts.approve, out, interactive.askApproval),
      onPluginWarning: pluginWarningPrinter(),
      defaultEngine: opts.budget !== undefined ? { tokenBudget: opts.budget } : {},
      appServer: server.codex,
      ...(opts.model ? { model: opts.model } : {}),
      sessionId: session.id,
      ...(opts.sessionKey !== undefined ? { sessionKey: opts.sessionKey } : {}),
    });
    cleanups.push(() => loaded.close());
    const exists = store ? (await store.readHistory()).exists : (await stat(path.resolve(opts.session)).catch(() => undefined)) !== undefined;
    await announceNewSession(loaded, exists, session.id, opts.sessionKey, out);
    const trajectory =
      opts.trajectory !== undefined ? createTrajectoryWriter({ file: path.resolve(opts.trajectory), full: opts.trajectoryFull === true }) : undefined;
    const detach = trajectory?.attach(server.codex);
    if (detach) cleanups.push(detach);
    const sessionFile = store ? store.address : path.resolve(opts.session);
    return {
      server,
      loaded,
      inspector,
      trajectory,
      sessionFile,
      baseParams: () => ({
        ...turnParams(opts, server, loaded, inspector, sessionFile, session.id),
        ...(store ? { store } : {}),
        ...workParams(opts, cwd, out, interactive),
      }),
      answerCommand: (line, cmdOut, say) =>
        answerPluginCommand(loaded, line, { sessionId: session.id, sessionFile, ...(opts.sessionKey !== undefined ? { sessionKey: opts.sessionKey } : {}) }, cmdOut, say),
      resetSession: async (action, cmdOut, say) => {
        // The session goes on under the fresh id the reset wrote into the new transcript's header.
        const keys = { sessionId: session.id, ...(opts.sessionKey !== undefined ? { sessionKey: opts.sessionKey } : {}) };
        const via = store ? { store: { store, base: opts.session } } : {};
        const reset = await resetCliSession({ loaded, sessionFile, ...keys, action, cwd, ...via }, cmdOut, say);
        session.id = reset.sessionId;
        if (pgSession) store = pgSession.stores.session(opts.session, { sessionId: reset.sessionId });
      },
      recordTurnRequest: (prompt) => trajectory?.record("request", "codexTurn/run", { sessionFile, prompt, engineId: loaded.engine.info.id }),
      dispose: disposeAll,
    };
  } catch (err) {
    await disposeAll();
    throw err;
  }
}

/**
 * A session file that does not exist yet is a new session: the plugins' `session_start` handlers hear of it before its
 * first turn (as OpenClaw fires them when it creates a session). A failing handler is a note, not a failed command.
 */
async function announceNewSession(loaded: LoadedEngine, exists: boolean, sessionId: string, sessionKey: string | undefined, out: Out): Promise<void> {
  if (!loaded.sessionStart || exists) return;
  try {
    await loaded.sessionStart({ sessionId, ...(sessionKey !== undefined ? { sessionKey } : {}) });
  } catch (error) {
    out.note(`warning: ${(error as Error).message}`);
  }
}

function turnParams(
  opts: TurnCommandOptions,
  server: CliServer,
  loaded: LoadedEngine,
  inspector: CliInspector | undefined,
  sessionFile: string,
  sessionId: string,
): Omit<CodexTurnParams, "prompt"> {
  const params: Omit<CodexTurnParams, "prompt"> & { runtimeContext?: Record<string, unknown> | undefined } = {
    appServer: server.codex,
    sessionId,
    sessionFile,
    contextEngine: loaded.engine,
    ...(opts.sessionKey !== undefined ? { sessionKey: opts.sessionKey } : {}),
    ...(opts.budget !== undefined ? { contextTokenBudget: opts.budget } : {}),
    ...(opts.model !== undefined ? { model: opts.model } : {}),
    ...(loaded.dynamicTools?.length ? { dynamicTools: loaded.dynamicTools } : {}),
    ...(loaded.hooks ? { hooks: loaded.hooks } : {}),
    // `runtimeContext` is the plugin host's (a turn parameter the lead adds with it); only set when it gave one.
    ...(loaded.runtimeContext ? { runtimeContext: loaded.runtimeContext } : {}),
    ...(inspector ? { inspect: (e: InspectionEvent) => inspector.send(e) } : {}),
  };
  return params;
}

/**
 * The directory of `--session` must exist (a typo in it would otherwise create a directory tree): exit 3 naming it,
 * unless `--mkdir`, which creates it.
 *
 * @example
 * ```ts
 * await sessionDirectory("/data/sessions/s1.jsonl", false); // throws SESSION_NOT_FOUND when /data/sessions is missing
 * ```
 */
export async function sessionDirectory(sessionFile: string, mkdirIfMissing: boolean): Promise<string> {
  const dir = path.dirname(path.resolve(sessionFile));
  const st = await stat(dir).catch(() => undefined);
  if (st?.isDirectory()) return dir;
  if (st) throw envError(`--session ${sessionFile}: ${dir} is not a directory`, "SESSION_NOT_FOUND");
  if (!mkdirIfMissing) throw envError(`--session ${sessionFile}: the directory ${dir} does not exist (create it, or pass --mkdir)`, "SESSION_NOT_FOUND");
  await mkdir(dir, { recursive: true });
  return dir;
}

/** `--cwd`, resolved; it must be an existing directory (exit 3 otherwise, before any app-server starts). */
async function workingDirectory(dir: string): Promise<string> {
  const resolved = path.resolve(dir);
  const isDir = await stat(resolved).then((st) => st.isDirectory(), () => false);
  if (!isDir) throw envError(`--cwd ${dir}: not an existing directory`);
  return resolved;
}

const DECISIONS: Record<Exclude<ApproveAnswer, "ask">, CodexApprovalDecision> = { deny: "deny", approve: "approve", "approve-for-session": "approveForSession" };

/** Asks the person at the terminal (`--approve ask`) a one-line question; the answer is already printed when it resolves. */
export type ApprovalAsker = (question: string, signal?: AbortSignal) => Promise<CodexApprovalDecision>;

/** What an approval request asks, in one line (no file contents). */
export function describeApproval(r: CodexApprovalRequest): string {
  switch (r.kind) {
    case "commandExecution":
      return r.network
        ? `network access to ${r.network.protocol}://${r.network.host} for ${JSON.stringify(r.command ?? "")}`
        : `${r.commandKind === "writeStdin" ? "send input to" : "run"} ${JSON.stringify(r.command ?? "")}${r.cwd ? ` in ${r.cwd}` : ""}`;
    case "fileChange":
      return `change ${r.changes.map((c) => c.path).join(", ") || "files"}`;
    case "permissions":
      return `grant permissions ${JSON.stringify(r.permissions)}`;
    case "mcpToolCall":
      return `run MCP tool ${r.server}/${r.tool}`;
  }
}

const PLUGIN_DECISIONS = { approve: "allow-once", approveForSession: "allow-always", deny: "deny" } as const;

/**
 * `--approve` for plugins' `requireApproval` (a `before_tool_call` asking before a tool runs): `ask` puts the question
 * to the person at the chat; otherwise the fixed answer (deny by default), printed as a note.
 */
function pluginApprover(approve: ApproveAnswer | undefined, out: Out, ask: ApprovalAsker | undefined): PluginApprovalCallback {
  return async (request, { signal }) => {
    const what = `codex-turn: plugin ${request.pluginId} asks approval for ${request.toolName}: ${request.title}${request.description ? ` (${request.description})` : ""}`;
    if (approve === "ask" && ask) return PLUGIN_DECISIONS[await ask(what, signal)];
    const decision = PLUGIN_DECISIONS[DECISIONS[approve === "ask" || approve === undefined ? "deny" : approve]];
    out.note(`${what} -> ${decision}`);
    return decision;
  };
}

/**
 * The work options as turn parameters: `cwd`, `sandbox`, `approvalPolicy`, `--approve` as the `onApproval` answer,
 * `--plan` / `--no-plan` as `collaborationMode` `"plan"` / `"default"` (neither: none sent), and the `onUserInput`
 * that answers Codex's questions (or declines them, printed on stderr). It is passed with or without `--plan`: a
 * thread put in Plan mode stays in it (observed with 0.169), so its questions can come on a later turn too.
 */
function workParams(opts: Partial<WorkOptionValues>, cwd: string | undefined, out: Out, interactive: TurnInteraction): Partial<CodexTurnParams> {
  const ask = opts.approve === "ask" ? interactive.askApproval : undefined;
  const params: Partial<CodexTurnParams> = {
    ...(cwd !== undefined ? { cwd } : {}),
    ...(opts.sandbox !== undefined ? { sandbox: opts.sandbox } : {}),
    ...(opts.approvalPolicy !== undefined ? { approvalPolicy: opts.approvalPolicy } : {}),
    ...(opts.plan !== undefined ? { collaborationMode: opts.plan ? ("plan" as const) : ("default" as const) } : {}),
    onUserInput: interactive.onUserInput ?? declineUserInput(process.stderr, interactive.noAnswerWhy ?? "nobody can answer here"),
    // The person's questions time out visibly first (QUESTION_TIMEOUT_MS each); the turn's bound is only the backstop.
    ...(ask || interactive.onUserInput ? { timeouts: { approvalMs: PERSON_BACKSTOP_MS } } : {}),
  };
  if (ask) {
    // Codex may withdraw a request (the turn was interrupted or ended): the question is then withdrawn too.
    return { ...params, onApproval: (request: CodexApprovalRequest, { signal }: HostDecisionContext) => ask(`codex-turn: approval ${request.kind}: ${describeApproval(request)}`, signal) };
  }
  const decision = DECISIONS[opts.approve === "ask" || opts.approve === undefined ? "deny" : opts.approve];
  return {
    ...params,
    onApproval: (request: CodexApprovalRequest) => {
      out.note(`codex-turn: approval ${request.kind}: ${describeApproval(request)} -> ${decision}`);
      return decision;
    },
  };
}
