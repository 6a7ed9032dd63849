/**
 * The `codex-turn` command tree, on commander (chosen because it is well kept, prints per-command help with option
 * descriptions, has `--version` and `help <command>`, and rejects excess arguments and unknown options as errors).
 * Each command lives in its own file under ./commands and reports its exit code through `done`.
 */
import { Command, CommanderError } from "commander";
import { chatCommand } from "./commands/chat.js";
import { compactCommand } from "./commands/compact.js";
import { demoCommand } from "./commands/demo.js";
import { exportCommand } from "./commands/export.js";
import { inspectSessionCommand } from "./commands/inspect-session.js";
import { runCommand } from "./commands/run.js";
import { vizCommand } from "./commands/viz.js";
import { CliError, EXIT } from "./errors.js";
import { EXIT_CODES_HELP } from "./options.js";
import { cliVersion } from "./self.js";

function configure(cmd: Command): void {
  cmd
    .exitOverride()
    .allowExcessArguments(false)
    .showSuggestionAfterError(true)
    // Errors are printed by `main` (as text or as JSON), not by commander.
    .configureOutput({ writeOut: (s) => process.stdout.write(s), writeErr: (s) => process.stderr.write(s), outputError: () => undefined });
}

/**
 * Builds the program; `done(code)` receives the exit code of the command that ran.
 *
 * @example
 * ```ts
 * let code = 0;
 * await buildProgram((c) => (code = c)).parseAsync(["run", "--help"], { from: "user" });
 * ```
 */
export function buildProgram(done: (code: number) => void): Command {
  const program = new Command("codex-turn")
    .description("Run OpenAI Codex app-server turns as an XState statechart with a pluggable OpenClaw context engine.")
    .version(cliVersion(), "-V, --version", "print the version")
    .helpOption("-h, --help", "show help");
  configure(program);
  for (const make of [demoCommand, runCommand, chatCommand, compactCommand, inspectSessionCommand, exportCommand, vizCommand]) {
    const cmd = make(done);
    configure(cmd);
    cmd.helpOption("-h, --help", "show help for this command");
    program.addCommand(cmd);
  }
  program.addHelpText(
    "after",
    `\nRun "codex-turn help <command>" or "codex-turn <command> --help" for a command's options.\n${EXIT_CODES_HELP}`,
  );
  return program;
}

/**
 * Maps a commander error to the CLI's: help and version are exit 0; anything else is a usage error (exit 2).
 *
 * @example
 * ```ts
 * if (err instanceof CommanderError) return fromCommanderError(err);
 * ```
 */
export function fromCommanderError(err: CommanderError): CliError | undefined {
  if (err.exitCode === 0) return undefined;
  const message = err.message.replace(/^error: /, "");
  return new CliError("USAGE", `${message} (try --help)`, EXIT.usage);
}

export { CommanderError };
