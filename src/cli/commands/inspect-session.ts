/**
 * `codex-turn inspect-session FILE`: message counts by role, the thread binding and pending finalize records; no
 * message content unless `--show-content`. An inspection never writes.
 */
import { Command } from "commander";
import { readThreadBinding } from "../../transcript/binding.js";
import { listPendingFinalize } from "../../transcript/pending.js";
import { readSessionHistory } from "../../transcript/session-file.js";
import { EXIT, envError } from "../errors.js";
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
  const { messages } = await readSessionHistory(file);
  const byRole: Record<string, number> = {};
  for (const m of messages) byRole[m.role] = (byRole[m.role] ?? 0) + 1;
  // An inspection never writes: a corrupt binding is reported, not moved aside.
  const b = await readThreadBinding(file, undefined, { readOnly: true });
  const pending = await listPendingFinalize(file);
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

async function inspectAction(file: string, opts: { showContent?: boolean | undefined; json?: boolean | undefined }): Promise<number> {
  const out = createOut(opts.json === true);
  const abs = await requireExistingSession(file);
  let s: Summary;
  try {
    s = await summarizeSession(abs, opts.showContent === true);
  } catch (err) {
    throw envError(`inspect-session: cannot read ${abs}: ${(err as Error).message}`, "SESSION_UNREADABLE");
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
    .description("summarize a session file (no message content unless --show-content)")
    .argument("<file>", "an existing pi session JSONL transcript (missing or unreadable: exit 3)")
    .option("--show-content", "include the messages themselves");
  addJsonOption(cmd, "print the summary as one JSON line");
  return cmd.action(async (file: string, opts: { showContent?: boolean | undefined; json?: boolean | undefined }) => done(await inspectAction(file, opts)));
}
