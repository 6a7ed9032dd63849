/**
 * `codex-turn compact --session FILE`: explicit compaction of an existing session, reporting the engine's own result.
 */
import { Command } from "commander";
import type { CompactionOutput } from "../../compaction/index.js";
import { compactCodexSession } from "../../compaction/session.js";
import { engineLoadInputs, loadCliEngine } from "../engine.js";
import { EXIT, envError } from "../errors.js";
import { addEngineOptions, addJsonOption, addServerOptions, LIVE_PROVIDER_HELP, type EngineOptionValues, type ServerOptionValues } from "../options.js";
import { createOut, type Out } from "../output.js";
import { estimateTokens } from "../../projection/render.js";
import { readSessionHistory } from "../../transcript/session-file.js";
import { startServer } from "../server.js";
import { cliSessionId, requireExistingSession } from "../session-file.js";
import { openPgSession, pgUrlOf } from "../pg-store.js";
import type { SessionStore } from "../../store/session-store.js";
import { watchSignals } from "../signals.js";

type CompactOptions = EngineOptionValues & ServerOptionValues & { session: string; json?: boolean | undefined; model?: string | undefined; pg?: string | undefined };

/**
 * What `compact` reports: the outcome and the engine's own result (`result`, e.g. tokensBefore/tokensAfter, details).
 *
 * @example
 * ```ts
 * out.record(compactResultJson(output));
 * ```
 */
export function compactResultJson(r: CompactionOutput): Record<string, unknown> {
  return { ok: r.ok, compacted: r.compacted, primary: r.primary ?? null, reason: r.reason ?? null, result: r.result ?? null, native: r.native, outcomes: r.outcomes };
}

/** The session's context as the next turn reads it from the transcript: messages and estimated tokens. */
export interface MeasuredContext {
  messages: number;
  estimatedTokens: number;
}

/**
 * Measure the context a session file holds (its current branch's messages, tokens estimated as the projection does).
 *
 * @example
 * ```ts
 * await measureSessionContext("/data/s1.jsonl"); // { messages: 42, estimatedTokens: 12_345 }
 * ```
 */
export async function measureSessionContext(sessionFile: string | SessionStore): Promise<MeasuredContext> {
  const { messages } = typeof sessionFile === "string" ? await readSessionHistory(sessionFile) : await sessionFile.readHistory();
  return { messages: messages.length, estimatedTokens: estimateTokens(JSON.stringify(messages)) };
}

/**
 * The text lines of a compaction: the outcome, the context measured from the transcript before and after (not the
 * engine's target), the engine's own figures labelled as its, and a failed Codex native compaction.
 *
 * @example
 * ```ts
 * for (const line of compactTextLines(r, before, after)) out.text(line);
 * ```
 */
export function compactTextLines(r: CompactionOutput, before: MeasuredContext, after: MeasuredContext): string[] {
  const lines = [`compaction: ok=${r.ok} compacted=${r.compacted} primary=${r.primary ?? "-"} reason=${r.reason ?? "-"}`];
  lines.push(`context (measured from the transcript): ${before.messages} messages, ~${before.estimatedTokens} tokens -> ${after.messages} messages, ~${after.estimatedTokens} tokens`);
  const res = r.result;
  if (res?.tokensBefore !== undefined) lines.push(`engine reported: tokensBefore=${res.tokensBefore}${res.tokensAfter !== undefined ? ` tokensAfter=${res.tokensAfter}` : ""}`);
  if (!r.native.ok) lines.push(`codex native compaction failed: ${r.native.reason ?? "no reason given"}`);
  return lines;
}

function printResult(out: Out, r: CompactionOutput, before: MeasuredContext, after: MeasuredContext): void {
  if (out.json) return out.record({ ...compactResultJson(r), measured: { before, after } });
  for (const line of compactTextLines(r, before, after)) out.text(line);
}

async function compactAction(opts: CompactOptions): Promise<number> {
  const out = createOut(opts.json === true);
  const pgUrl = pgUrlOf(opts);
  const pgSession = pgUrl !== undefined ? await openPgSession(pgUrl, opts.session) : undefined;
  try {
    if (pgSession && !(await pgSession.store.readHistory()).exists) throw envError(`no session ${pgSession.store.address}`, "SESSION_NOT_FOUND");
    const sessionFile = pgSession ? pgSession.store.address : await requireExistingSession(opts.session);
    const sessionId = pgSession ? pgSession.store.sessionId : await cliSessionId(sessionFile);
    return await compactWith(opts, out, sessionFile, sessionId, pgSession?.store);
  } finally {
    await pgSession?.close();
  }
}

async function compactWith(opts: CompactOptions, out: Out, sessionFile: string, sessionId: string, store: SessionStore | undefined): Promise<number> {
  const measured = store ?? sessionFile;
  const engineInputs = await engineLoadInputs(opts);
  const ac = new AbortController();
  const watch = watchSignals(() => ac.abort());
  const server = await startServer({ offline: opts.offline === true, ...(opts.offlineScript ? { offlineScript: opts.offlineScript } : {}) });
  try {
    const loaded = await loadCliEngine({
      ...engineInputs,
      defaultEngine: { ownsCompaction: true, ...(opts.budget !== undefined ? { tokenBudget: opts.budget } : {}) },
      appServer: server.codex,
      ...(opts.model ? { model: opts.model } : {}),
      sessionId,
      ...(opts.sessionKey !== undefined ? { sessionKey: opts.sessionKey } : {}),
    });
    try {
      // The library's host-level compaction, as a host calls it: under the session lock, the engine's summary written
      // as a pi compaction entry, maintenance after it, the plugin's compaction hooks, its runtime context (provider,
      // model, llm) and the transcript rewrite helper.
      const before = await measureSessionContext(measured);
      const r = await compactCodexSession({
        appServer: server.codex,
        sessionId,
        sessionFile,
        ...(store ? { store } : {}),
        contextEngine: loaded.engine,
        ...(loaded.runtimeContext ? { runtimeContext: loaded.runtimeContext } : {}),
        ...(loaded.hooks ? { hooks: loaded.hooks } : {}),
        trigger: "manual",
        nativeTimeoutMs: 30_000,
        signal: ac.signal,
        ...(opts.sessionKey !== undefined ? { sessionKey: opts.sessionKey } : {}),
        ...(opts.budget !== undefined ? { contextTokenBudget: opts.budget } : {}),
      });
      printResult(out, r, before, await measureSessionContext(measured));
      if (watch.received !== undefined) return EXIT.aborted;
      return r.ok ? EXIT.ok : EXIT.turnFailed;
    } finally {
      await loaded.close().catch(() => undefined);
    }
  } finally {
    await server.dispose();
    watch.dispose();
  }
}

/**
 * The `compact` command.
 *
 * @example
 * ```ts
 * program.addCommand(compactCommand(setExitCode));
 * ```
 */
export function compactCommand(done: (code: number) => void): Command {
  const cmd = new Command("compact")
    .description("compact a session: the engine's compact() when it owns compaction, plus Codex native compaction")
    .requiredOption("--session <file>", "an existing pi session JSONL transcript (missing or unreadable: exit 3); with --pg the session id")
    .option("--pg <url>", "the session is in this PostgreSQL database (default: CODEX_TURN_PG_URL)")
    .option("--model <model>", "model the engine may use (plugin hosts pass it to runtime.llm)");
  addEngineOptions(cmd);
  addServerOptions(cmd);
  addJsonOption(cmd, "print one JSON line: ok, compacted, primary, reason, result (the engine's own result)");
  cmd.addHelpText("after", `\nExit 0 when the compaction is ok, 1 when not, 3 when the session is missing or unreadable.\n${LIVE_PROVIDER_HELP}`);
  return cmd.action(async (opts: CompactOptions) => done(await compactAction(opts)));
}
