/**
 * `codex-turn inspect-session FILE` (or `--pg URL --session ID`): message counts by role, the thread binding and
 * pending finalize records; no message content unless `--show-content`. An inspection never writes.
 */
import { Command } from "commander";
import type { SessionStore } from "../../store/session-store.js";
import type { AgentMessage } from "../../context-engine/types.js";
import { readThreadBinding, type ThreadBinding } from "../../transcript/binding.js";
import { listPendingFinalize } from "../../transcript/pending.js";
import { readSessionHistory } from "../../transcript/session-file.js";
import { CliError, EXIT, envError, usageError } from "../errors.js";
import { openPgSession, pgUrlOf } from "../pg-store.js";
import { addJsonOption } from "../options.js";
import { createOut } from "../output.js";
import { requireExistingSession } from "../session-file.js";

/**
 * Structural summary of a session file; content only when asked.
 *
 * @example
 * ```ts
 * const s = await summarizeSession(file); // { file, messages, byRole, binding, pendingFinalize }
 * ```
 */
export async function summarizeSession(file: string, showContent = false) {
  return summarize(file, await readSessionHistory(file), await readThreadBinding(file, undefined, { readOnly: true }), await listPendingFinalize(file), showContent);
}

/**
 * {@link summarizeSession} of any store (read-only: a corrupt binding or pending record is reported, never moved).
 *
 * @example
 * ```ts
 * const s = await summarizeStore(pgStore); // { file: pgStore.address, messages, byRole, binding, pendingFinalize }
 * ```
 */
export async function summarizeStore(store: SessionStore, showContent = false) {
  return summarize(store.address, await store.readHistory(), await store.readBinding({ readOnly: true }), await store.listPending({ readOnly: true }), showContent);
}

function summarize(
  file: string,
  history: { messages: readonly AgentMessage[] },
  b: ThreadBinding | undefined,
  pending: ReadonlyArray<{ turnId: string }>,
  showContent: boolean,
) {
  const messages = history.messages;
  const byRole: Record<string, number> = {};
  for (const m of messages) byRole[m.role] = (byRole[m.role] ?? 0) + 1;
  // An inspection never writes: a corrupt binding is reported, not moved aside.
  return {
    file,
    messages: messages.length,
    byRole,
    binding: b
      ? {
          threadId: b.threadId,
          mode: b.projectionMode,
          epoch: b.projectionEpoch ?? null,
          engineId: b.engineId,
          ledgerSize: b.ledger.length,
          heldTurns: b.heldTurnIds.length,
          // A turn Codex accepted whose attempt died before recording it (the next turn recovers it from Codex).
          turnInFlight: b.turnInFlight?.turnId ?? null,
        }
      : null,
    pendingFinalize: pending.map((p) => ({ turnId: p.turnId })),
    ...(showContent ? { content: messages } : {}),
  };
}

type Summary = Awaited<ReturnType<typeof summarizeSession>>;

function summaryLines(s: Summary): string[] {
  return [
    `session: ${s.file}`,
    `messages: ${s.messages} (${Object.entries(s.byRole).map(([r, n]) => `${r}=${n}`).join(", ") || "none"})`,
    s.binding
      ? `binding: thread=${s.binding.threadId} mode=${s.binding.mode} epoch=${s.binding.epoch ?? "-"} ledger=${s.binding.ledgerSize} held=${s.binding.heldTurns}`
      : "binding: none",
    `pending finalize: ${s.pendingFinalize.length}`,
    ...(s.binding?.turnInFlight ? [`turn cut short: ${s.binding.turnInFlight} (the next turn rebuilds it from Codex's thread)`] : []),
  ];
}

interface InspectOptions {
  showContent?: boolean | undefined;
  json?: boolean | undefined;
  pg?: string | undefined;
  session?: string | undefined;
}

async function inspectAction(file: string | undefined, opts: InspectOptions): Promise<number> {
  const out = createOut(opts.json === true);
  const url = pgUrlOf(opts);
  let s: Summary;
  if (url !== undefined) {
    if (file !== undefined) throw usageError("inspect-session: with --pg, name the session with --session ID, not a file");
    if (!opts.session) throw usageError("inspect-session: --pg needs --session ID");
    const { store, close } = await openPgSession(url, opts.session);
    try {
      const history = await store.readHistory();
      if (!history.exists) throw envError(`no session ${store.address}`, "SESSION_NOT_FOUND");
      s = await summarizeStore(store, opts.showContent === true);
    } catch (err) {
      if (err instanceof CliError) throw err;
      throw envError(`inspect-session: cannot read ${store.address}: ${(err as Error).message}`, "SESSION_UNREADABLE");
    } finally {
      await close();
    }
  } else {
    if (file === undefined) throw usageError("inspect-session: name a session file (or --pg URL --session ID)");
    if (opts.session !== undefined) throw usageError("inspect-session: --session goes with --pg; name the file as the argument");
    const abs = await requireExistingSession(file);
    try {
      s = await summarizeSession(abs, opts.showContent === true);
    } catch (err) {
      throw envError(`inspect-session: cannot read ${abs}: ${(err as Error).message}`, "SESSION_UNREADABLE");
    }
  }
  if (out.json) out.record(s);
  else {
    for (const line of summaryLines(s)) out.text(line);
    if (s.content) out.text(JSON.stringify(s.content, null, 2));
  }
  return EXIT.ok;
}

/**
 * The `inspect-session` command.
 *
 * @example
 * ```ts
 * program.addCommand(inspectSessionCommand(setExitCode));
 * ```
 */
export function inspectSessionCommand(done: (code: number) => void): Command {
  const cmd = new Command("inspect-session")
    .description("summarize a session (no message content unless --show-content)")
    .argument("[file]", "an existing pi session JSONL transcript (missing or unreadable: exit 3)")
    .option("--show-content", "include the messages themselves")
    .option("--pg <url>", "read the session from this PostgreSQL database (default: CODEX_TURN_PG_URL)")
    .option("--session <id>", "with --pg: the session id");
  addJsonOption(cmd, "print the summary as one JSON line");
  return cmd.action(async (file: string | undefined, opts: InspectOptions) => done(await inspectAction(file, opts)));
}
