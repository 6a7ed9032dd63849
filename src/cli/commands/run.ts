/**
 * `codex-turn run "<prompt>" --session FILE`: one turn. SIGINT/SIGTERM abort the turn, wait (bounded) for it to
 * settle so the session lock is released and the app-server closed, then exit 130.
 */
import path from "node:path";
import { Command } from "commander";
import { promptImagesSchema, type PromptImage } from "../../codex/prompt-images.js";
import { runCodexTurn, type CodexTurnResult, type TurnStreamEvent } from "../../turn.js";
import { EXIT, statusExit, usageError } from "../errors.js";
import { holdInspector } from "../inspector.js";
import {
  addEngineOptions,
  addInspectOptions,
  addJsonOption,
  addServerOptions,
  addWorkOptions,
  addTrajectoryOptions,
  LIVE_PROVIDER_HELP,
} from "../options.js";
import { createTurnRenderer, type TurnRenderer } from "../chat/render.js";
import { createOut, type Out } from "../output.js";
import { settleWithin, watchSignals } from "../signals.js";
import { sessionResetCommand } from "../session-reset.js";
import { setUpTurnCommand, type TurnCommandOptions } from "../turn-setup.js";
import { userInputRecords } from "../user-input.js";

/** How long a signalled turn may take to settle before the CLI closes the app-server anyway (ms). */
export const SIGNAL_SETTLE_MS = 15_000;

type RunOptions = TurnCommandOptions & { json?: boolean | undefined; events?: boolean | undefined; image?: string[] | undefined };

/**
 * `--image` files as turn images (paths resolved against the current directory), checked before anything starts: a
 * missing, unreadable or non-image file is a usage error (exit 2) naming it.
 *
 * @example
 * ```ts
 * const images = readImageOptions(["shot.png"]); // [{ data, mimeType: "image/png", path: "/abs/shot.png" }]
 * ```
 */
export function readImageOptions(files: readonly string[], option = "--image"): PromptImage[] {
  const parsed = promptImagesSchema.safeParse(files.map((f) => ({ path: path.resolve(f) })));
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw usageError(`${option} ${files[Number(issue.path[0])] ?? ""}: ${issue.message}`);
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/**
 * The JSON line `run --json` prints for a settled turn.
 *
 * @example
 * ```ts
 * out.record(runResultJson(result));
 * ```
 */
export function runResultJson(r: CodexTurnResult): Record<string, unknown> {
  const userInput = userInputRecords(r.messagesSnapshot);
  return {
    status: r.status,
    runId: r.runId,
    threadId: r.threadId,
    turnId: r.turnId,
    assistantText: r.assistantText,
    trace: r.trace,
    error: r.error,
    warnings: r.warnings,
    projection: r.projection,
    usage: r.usage,
    engine: r.engine,
    followUps: r.followUps,
    ...(r.blocked ? { blocked: r.blocked } : {}),
    ...(r.modelRerouted ? { modelRerouted: r.modelRerouted } : {}),
    ...(r.cutTurnRecovered ? { cutTurnRecovered: r.cutTurnRecovered } : {}),
    ...(r.request ? { request: r.request } : {}),
    ...(r.generatedImages ? { generatedImages: r.generatedImages } : {}),
    ...(r.proposedPlan !== undefined ? { proposedPlan: r.proposedPlan } : {}),
    // Codex's questions (Plan mode) and the answers given (null: declined), as the turn's messages record them.
    ...(userInput.length > 0 ? { userInput } : {}),
  };
}

/**
 * What the user is shown as the turn's reply: the model's answer, or for a turn a gate refused the gate's user-facing
 * text (as OpenClaw shows it in place of a reply).
 *
 * @example
 * ```ts
 * out.text(replyText(result));
 * ```
 */
export function replyText(r: CodexTurnResult): string {
  return r.status === "blocked" && r.blocked ? r.blocked.message : r.assistantText;
}

/**
 * The line shown before a reply when the attempt first recovered a turn an earlier one left in flight.
 *
 * @example
 * ```ts
 * cutTurnNote({ turnId: "t1", codexStatus: "interrupted", messages: 2 });
 * // "note: an earlier turn (t1) was cut short (interrupted) and recovered from Codex's thread: 2 messages"
 * ```
 */
export function cutTurnNote(c: NonNullable<CodexTurnResult["cutTurnRecovered"]>): string {
  return `note: an earlier turn (${c.turnId}) was cut short (${c.codexStatus}) and recovered from Codex's thread: ${c.messages} messages`;
}

/**
 * The line naming an image Codex generated in the turn (the file it saved), after the reply.
 *
 * @example
 * ```ts
 * imageLine({ itemId: "ig_1", path: "/codex-home/images/ig_1.png" }); // "image: /codex-home/images/ig_1.png"
 * ```
 */
export function imageLine(image: { path: string }): string {
  return `image: ${image.path}`;
}

/**
 * The plan Codex proposed in Plan mode, as the CLI prints it after the reply (Codex takes it out of the reply text).
 *
 * @example
 * ```ts
 * planBlock("1. Add the button\n2. Test it\n"); // "plan:\n1. Add the button\n2. Test it"
 * ```
 */
export function planBlock(plan: string): string {
  return `plan:\n${plan.replace(/\s+$/, "")}`;
}

/**
 * How `run` shows a turn as it runs. `--events`: every stream event as a JSON line on stdout (then the result line,
 * `"type": "result"`). Text mode on a terminal: the reply streams to stdout as it arrives and the lifecycle state is
 * a spinner on stderr (when stderr is a terminal); stdout to a pipe or file gets the reply whole at the end (as
 * before), with the spinner still on a terminal's stderr. `--json` alone: nothing until the result line.
 */
export function runDisplay(
  opts: { json: boolean; events: boolean },
  stdout: NodeJS.WritableStream & { isTTY?: boolean | undefined },
  stderr: NodeJS.WritableStream & { isTTY?: boolean | undefined },
  out: Out,
): { onEvent?: ((e: TurnStreamEvent) => void) | undefined; view?: TurnRenderer | undefined; streamsText?: boolean | undefined } {
  if (opts.events) return { onEvent: (e) => out.record(e) };
  if (opts.json) return {};
  const status = stderr.isTTY === true ? stderr : undefined;
  if (stdout.isTTY !== true && status === undefined) return {};
  const view = createTurnRenderer(stdout, stdout.isTTY === true, { status, text: stdout.isTTY === true });
  return { onEvent: (e) => view.onEvent(e), view, streamsText: stdout.isTTY === true };
}

function printResult(out: Out, r: CodexTurnResult, events: boolean, display: ReturnType<typeof runDisplay>): void {
  if (events) return out.record({ type: "result", ...runResultJson(r) });
  if (out.json) return out.record(runResultJson(r));
  if (r.cutTurnRecovered) out.text(cutTurnNote(r.cutTurnRecovered));
  // Streamed on a terminal (the renderer prints the reply when nothing streamed, e.g. a gate's refusal).
  if (display.view && display.streamsText) display.view.finish(replyText(r));
  else {
    display.view?.finish("");
    out.text(replyText(r));
  }
  if (r.proposedPlan !== undefined) out.text(planBlock(r.proposedPlan));
  for (const image of r.generatedImages ?? []) out.text(imageLine(image));
  for (const w of r.warnings) out.text(`warning: ${typeof w === "string" ? w : JSON.stringify(w)}`);
  for (const f of r.followUps) out.text(`follow-up not run (steer not taken): ${f}`);
  out.text(`status: ${r.status}${r.error ? ` (${JSON.stringify(r.error)})` : ""}`);
}

async function runAction(prompt: string, opts: RunOptions): Promise<number> {
  const events = opts.events === true;
  const out = createOut(opts.json === true || events);
  const images = readImageOptions(opts.image ?? []);
  const ac = new AbortController();
  const watch = watchSignals(() => ac.abort());
  try {
    // Nobody can answer Codex's questions here: each is declined (waiting would hang) and printed on stderr.
    const setup = await setUpTurnCommand(opts, out, { noAnswerWhy: "run cannot ask; answer Codex's questions in chat on a terminal" });
    try {
      // `/new` or `/reset`: a fresh session (text after it is its first prompt).
      const reset = sessionResetCommand(prompt);
      if (reset) {
        await setup.resetSession(reset.action, out, (l) => out.text(l));
        if (reset.rest === "") return EXIT.ok;
        prompt = reset.rest;
      } else {
        // A plugin command (`/lcm status`) is the plugin's to answer, without a turn unless it asks for one.
        const answer = await setup.answerCommand(prompt, out);
        if (answer === "answered" || answer === "failed") return answer === "failed" ? EXIT.turnFailed : EXIT.ok;
      }
      setup.recordTurnRequest(prompt);
      const display = runDisplay({ json: out.json, events }, process.stdout, process.stderr, out);
      const turn = runCodexTurn({
        ...setup.baseParams(),
        prompt,
        ...(images.length > 0 ? { images } : {}),
        signal: ac.signal,
        ...(display.onEvent ? { onEvent: display.onEvent } : {}),
      });
      const r = await settleWithin(turn, watch, SIGNAL_SETTLE_MS);
      if (r === undefined) {
        display.view?.finish("");
        out.note(`codex-turn: the turn did not settle within ${SIGNAL_SETTLE_MS} ms of the signal; closing the app-server`);
        return EXIT.aborted;
      }
      await settleWithin(r.backgroundMaintenance.catch(() => undefined), watch, SIGNAL_SETTLE_MS);
      printResult(out, r, events, display);
      if (watch.received === undefined) await holdInspector(setup.inspector, opts.inspectWait, out);
      return watch.received !== undefined ? EXIT.aborted : statusExit(r.status);
    } finally {
      await setup.dispose();
    }
  } finally {
    watch.dispose();
  }
}

/**
 * The `run` command.
 *
 * @example
 * ```ts
 * program.addCommand(runCommand(setExitCode));
 * ```
 */
export function runCommand(done: (code: number) => void): Command {
  const cmd = new Command("run")
    .description("run one turn against a session file and print the reply")
    .argument("<prompt>", "the user's request (quote it: one argument)")
    .requiredOption("--session <file>", "pi session JSONL transcript (created on the first turn; its directory must exist); with --pg the session id")
    .option("--pg <url>", "keep the session in this PostgreSQL database (default: CODEX_TURN_PG_URL)")
    .option("--mkdir", "create the session file's directory when it does not exist")
    .option("--model <model>", "model for the turn (default: Codex's configured model)")
    .option("--image <file>", "send an image (PNG, JPEG, GIF or WebP) with the prompt; repeat for more", collect, []);
  addEngineOptions(cmd);
  addServerOptions(cmd);
  addWorkOptions(cmd);
  cmd.option("--events", "stream the turn's events as JSON lines on stdout ({\"type\":\"state\"|\"agentMessageDelta\"|...}), then the --json result line with \"type\":\"result\"");
  addJsonOption(cmd, "print one JSON line: status, runId, threadId, turnId, assistantText, trace, error, warnings, projection, usage, engine, followUps, blocked, modelRerouted, cutTurnRecovered, generatedImages, proposedPlan, userInput");
  addInspectOptions(cmd);
  addTrajectoryOptions(cmd);
  cmd.addHelpText(
    "after",
    `
With --plan, Codex may ask questions (request_user_input): run cannot ask anyone, so each is declined at once and
printed on stderr, and Codex goes on without an answer (it sees {"answers":{}}); --json lists them under userInput.
SIGINT/SIGTERM abort the turn, wait for it to settle, then exit 130.
${LIVE_PROVIDER_HELP}`,
  );
  return cmd.action(async (prompt: string, opts: RunOptions) => done(await runAction(prompt, opts)));
}
