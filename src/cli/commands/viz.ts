/**
 * `codex-turn viz [--trace FILE] [--out FILE.html]`: the turn and compaction statecharts as one self-contained page,
 * with a replay of a recorded trace (only the steps that change a state). Default output: a new file under the OS
 * temp directory, path printed.
 */
import { mkdtemp, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Command } from "commander";
import { EXIT, envError } from "../errors.js";
import { addJsonOption } from "../options.js";
import { isMissingPackageError, missingPackageError } from "../optional.js";
import { createOut } from "../output.js";

type VizOptions = { trace?: string | undefined; out?: string | undefined; allSteps?: boolean | undefined; json?: boolean | undefined };

async function loadTrace(file: string | undefined, allSteps: boolean) {
  if (file === undefined) return undefined;
  const { readTraceFile } = await import("../../inspect/trace.js");
  const { stateChangingSteps } = await import("../../inspect/replay.js");
  try {
    const steps = await readTraceFile(path.resolve(file));
    return allSteps ? steps : stateChangingSteps(steps);
  } catch (err) {
    throw envError(`viz: cannot read trace ${file}: ${(err as Error).message}`);
  }
}

async function renderPage(trace: Awaited<ReturnType<typeof loadTrace>>): Promise<string> {
  const { renderStatechartPage } = await import("../../inspect/viz.js");
  const { turnMachine } = await import("../../../machines/turn.machine.js");
  const { compactionMachine } = await import("../../../machines/compaction.machine.js");
  try {
    return renderStatechartPage({
      title: "codex-turn-machine",
      machines: [
        { id: "turn", title: "Turn", machine: turnMachine },
        { id: "compaction", title: "Compaction", machine: compactionMachine },
      ],
      ...(trace ? { trace } : {}),
    });
  } catch (err) {
    // The page inlines mermaid's browser bundle (resolved from node_modules when the page is rendered).
    if ((err as { code?: unknown } | null)?.code === "VIZ_MERMAID_MISSING" || isMissingPackageError(err, "mermaid")) {
      throw missingPackageError("mermaid", "viz");
    }
    throw envError(`viz: cannot render the page: ${(err as Error)?.message ?? String(err)}`);
  }
}

async function vizAction(opts: VizOptions): Promise<number> {
  const out = createOut(opts.json === true);
  const trace = await loadTrace(opts.trace, opts.allSteps === true);
  const html = await renderPage(trace);
  const outFile =
    opts.out !== undefined ? path.resolve(opts.out) : path.join(await mkdtemp(path.join(os.tmpdir(), "codex-turn-viz-")), "statecharts.html");
  try {
    await writeFile(outFile, html);
  } catch (err) {
    throw envError(`viz: cannot write ${outFile}: ${(err as Error).message}`);
  }
  if (out.json) out.record({ file: outFile, steps: trace?.length ?? 0 });
  else out.text(`wrote ${outFile}${trace ? ` (${trace.length} replay steps)` : ""}`);
  return EXIT.ok;
}

/**
 * The `viz` command.
 *
 * @example
 * ```ts
 * program.addCommand(vizCommand(setExitCode));
 * ```
 */
export function vizCommand(done: (code: number) => void): Command {
  const cmd = new Command("viz")
    .description("write a self-contained statechart page (turn + compaction), with a replay of a trace")
    .option("--trace <file>", "a trace JSONL (the demo writes one) to replay")
    .option("--out <file>", "where to write the page (default: a new directory under the OS temp dir)")
    .option("--all-steps", "replay every recorded step, not only those that change a state");
  addJsonOption(cmd, 'print one JSON line: { "file", "steps" }');
  cmd.addHelpText("after", '\nNeeds the package "mermaid" (a devDependency of codex-turn-machine).');
  return cmd.action(async (opts: VizOptions) => done(await vizAction(opts)));
}
