/**
 * `codex-turn export`: a session as a pi session JSONL file (the header line, then one line per entry), from
 * PostgreSQL (`--pg URL --session ID`) or from a session file. Writes `--out` (created new: an existing file is
 * refused) or stdout. Never changes the session.
 */
import { open, readFile } from "node:fs/promises";
import path from "node:path";
import { Command } from "commander";
import { CliError, EXIT, envError, usageError } from "../errors.js";
import { addJsonOption } from "../options.js";
import { createOut } from "../output.js";
import { openPgSession, pgUrlOf } from "../pg-store.js";
import { requireExistingSession } from "../session-file.js";

interface ExportOptions {
  pg?: string | undefined;
  session?: string | undefined;
  out?: string | undefined;
  json?: boolean | undefined;
}

async function sessionJsonl(file: string | undefined, opts: ExportOptions): Promise<{ text: string; from: string }> {
  const url = pgUrlOf(opts);
  if (url !== undefined) {
    if (file !== undefined) throw usageError("export: with --pg, name the session with --session ID, not a file");
    if (!opts.session) throw usageError("export: --pg needs --session ID");
    const { store, close } = await openPgSession(url, opts.session);
    try {
      const text = await store.exportJsonl();
      if (text === "") throw envError(`no session ${store.address}`, "SESSION_NOT_FOUND");
      return { text, from: store.address };
    } catch (err) {
      if (err instanceof CliError) throw err;
      throw envError(`export: cannot read ${store.address}: ${(err as Error).message}`, "SESSION_UNREADABLE");
    } finally {
      await close();
    }
  }
  if (file === undefined) throw usageError("export: name a session file (or --pg URL --session ID)");
  if (opts.session !== undefined) throw usageError("export: --session goes with --pg; name the file as the argument");
  const abs = await requireExistingSession(file);
  try {
    return { text: await readFile(abs, "utf8"), from: abs };
  } catch (err) {
    throw envError(`export: cannot read ${abs}: ${(err as Error).message}`, "SESSION_UNREADABLE");
  }
}

async function exportAction(file: string | undefined, opts: ExportOptions): Promise<number> {
  const out = createOut(opts.json === true);
  const { text, from } = await sessionJsonl(file, opts);
  const lines = text.split("\n").filter((l) => l.length > 0).length;
  if (opts.out === undefined) {
    if (out.json) out.record({ from, lines, jsonl: text });
    else process.stdout.write(text);
    return EXIT.ok;
  }
  const dest = path.resolve(opts.out);
  try {
    const fh = await open(dest, "wx", 0o600);
    try {
      await fh.writeFile(text);
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === "EEXIST") throw envError(`export: ${dest} exists; choose another --out (nothing was written)`);
    throw envError(`export: cannot write ${dest}: ${(err as Error).message}`);
  }
  if (out.json) out.record({ from, out: dest, lines });
  else out.text(`exported ${lines - 1} entries of ${from} to ${dest}`);
  return EXIT.ok;
}

/**
 * The `export` command.
 *
 * @example
 * ```ts
 * program.addCommand(exportCommand(setExitCode));
 * ```
 */
export function exportCommand(done: (code: number) => void): Command {
  const cmd = new Command("export")
    .description("write a session as a pi session JSONL file (from --pg or from a session file)")
    .argument("[file]", "a pi session JSONL transcript (without --pg)")
    .option("--pg <url>", "read the session from this PostgreSQL database (default: CODEX_TURN_PG_URL)")
    .option("--session <id>", "with --pg: the session id")
    .option("--out <file>", "write here (a new file; default: stdout)");
  addJsonOption(cmd, "print a JSON record (with --out: where it went; without: the JSONL as a field)");
  return cmd.action(async (file: string | undefined, opts: ExportOptions) => done(await exportAction(file, opts)));
}
