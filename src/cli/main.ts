/**
 * `codex-turn` CLI entry (bin/codex-turn.js runs this file, compiled or through tsx). The commands live in
 * ./commands, one per file; this module parses, maps errors to exit codes, and keeps the exports other modules and
 * tests import from here.
 *
 * Exit codes: 0 ok, 1 turn failed, 2 usage error, 3 environment/config error, 130 aborted.
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import { EXIT } from "./errors.js";
import { reportError } from "./output.js";
import { buildProgram, CommanderError, fromCommanderError } from "./program.js";

export { EXIT, CliError, type CliErrorCode } from "./errors.js";
export { loadEngineModule } from "./engine.js";
export { resolveCodexHome, liveCodexSpawnOptions } from "./server.js";
export { isMissingPackageError, missingPackageError, importOptional } from "./optional.js";
export { summarizeSession } from "./commands/inspect-session.js";

/**
 * Run the CLI with argv (without node and script) and resolve with the exit code.
 *
 * @example
 * ```ts
 * process.exitCode = await main(["run", "hello", "--session", file, "--offline"]);
 * ```
 */
export async function main(argv: string[]): Promise<number> {
  const json = argv.includes("--json");
  let code: number = EXIT.ok;
  const program = buildProgram((c) => {
    code = c;
  });
  if (argv.length === 0) {
    program.outputHelp();
    return EXIT.ok;
  }
  try {
    await program.parseAsync(argv, { from: "user" });
    return code;
  } catch (err) {
    if (err instanceof CommanderError) {
      const mapped = fromCommanderError(err);
      return mapped ? reportError(mapped, json) : EXIT.ok;
    }
    return reportError(err, json);
  }
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href;
if (invokedDirectly || process.env.CODEX_TURN_CLI_MAIN === "1") {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`codex-turn: ${String(err)}\n`);
      process.exit(EXIT.env);
    },
  );
}
