/**
 * `codex-turn chat --session FILE`: interactive turns. Reply text streams as it arrives; a prompt typed while a turn
 * runs is a steer; a steer Codex did not take runs next, shown as such; Ctrl-C aborts the running turn, and when idle
 * (or at end of input) exits. SIGTERM aborts the running turn and exits 130. The lock is released on every path: a
 * turn always settles before the app-server closes (bounded).
 */
import { Command } from "commander";
import type { PromptImage } from "../../codex/prompt-images.js";
import { startCodexTurn, type CodexTurnResult } from "../../turn.js";
import { ApprovalQuestions, QUESTION_TIMEOUT_MS } from "../chat/approvals.js";
import { createPromptReader } from "../chat/input.js";
import { createTurnRenderer } from "../chat/render.js";
import { EXIT } from "../errors.js";
import { holdInspector } from "../inspector.js";
import { addEngineOptions, addInspectOptions, addJsonOption, addServerOptions, addTrajectoryOptions, addWorkOptions, LIVE_PROVIDER_HELP } from "../options.js";
import { createOut, type Out } from "../output.js";
import { cutTurnNote, imageLine, readImageOptions, replyText, runResultJson, SIGNAL_SETTLE_MS } from "./run.js";
import { sessionResetCommand } from "../session-reset.js";
import { settleWithin, watchSignals, type SignalWatch } from "../signals.js";
import { setUpTurnCommand, type TurnCommandOptions, type TurnSetup } from "../turn-setup.js";

type ChatOptions = TurnCommandOptions & { json?: boolean };

/** A prompt to run, with the images attached (`/image FILE`) before it was typed; or a plugin command line. */
interface QueuedPrompt {
  text: string;
  images: PromptImage[];
  /** A plugin command (`/name args`): answered by the plugin, a turn only if it asks for one. */
  command?: boolean;
}

/** The prompt queue between the reader and the turn loop. */
class PromptQueue {
  private readonly items: QueuedPrompt[] = [];
  private wake: (() => void) | undefined;
  closed = false;
  push(text: string, first = false, images: PromptImage[] = [], command = false): void {
    const item = { text, images, ...(command ? { command } : {}) };
    if (first) this.items.unshift(item);
    else this.items.push(item);
    this.wake?.();
  }
  close(): void {
    this.closed = true;
    this.wake?.();
  }
  /** The next prompt, or undefined once closed and drained. */
  async next(): Promise<QueuedPrompt | undefined> {
    while (this.items.length === 0 && !this.closed) await new Promise<void>((r) => (this.wake = r));
    this.wake = undefined;
    return this.items.shift();
  }
}

/** A line starting with this attaches an image file to the next prompt. */
const IMAGE_COMMAND = "/image ";

/** `/image FILE`: check the file now (a bad one is reported and dropped; the chat goes on) and keep it for the next prompt. */
function attachImage(file: string, attached: PromptImage[], say: (line: string) => void): void {
  try {
    attached.push(...readImageOptions([file], IMAGE_COMMAND.trim()));
    say(`(image attached: ${file}; it goes with your next prompt)`);
  } catch (error) {
    say(`(image not attached: ${error instanceof Error ? error.message : String(error)})`);
  }
}

function reportTurn(out: Out, r: CodexTurnResult, queue: PromptQueue): void {
  if (out.json) out.record(runResultJson(r));
  else {
    for (const image of r.generatedImages ?? []) out.text(imageLine(image));
    if (r.cutTurnRecovered) out.text(cutTurnNote(r.cutTurnRecovered));
    if (r.status === "blocked") out.text(`(turn blocked by ${r.blocked?.blockedBy ?? "a gate"})`);
    else if (r.status !== "completed") out.text(`(turn ${r.status}${r.error ? `: ${r.error.message}` : ""})`);
  }
  // Follow-ups run next, in order, before anything typed later.
  for (const f of [...r.followUps].reverse()) queue.push(f, true);
  if (!out.json) for (const f of r.followUps) out.text(`steer not taken, running next: ${f}`);
}

/** Where `--approve ask` questions are shown: the running turn's display, else plain output. */
interface ChatDisplay {
  view: ReturnType<typeof createTurnRenderer> | undefined;
  /** Shows the "> " input prompt again (TTY) after a question. */
  prompt(): void;
}

async function chatLoop(setup: TurnSetup, out: Out, watch: SignalWatch, display: ChatDisplay, questions: ApprovalQuestions | undefined): Promise<number> {
  const queue = new PromptQueue();
  let running: ReturnType<typeof startCodexTurn> | undefined;
  let view: ReturnType<typeof createTurnRenderer> | undefined;
  // Images attached with `/image FILE`, sent with the next prompt that is queued (not with a steer).
  const attached: PromptImage[] = [];
  const say = (line: string) => (out.json ? out.note(line) : view ? view.note(line) : out.text(line));
  const reader = createPromptReader(process.stdin, process.stdout, {
    onPrompt: (text) => {
      // While Codex waits for an approval, the line typed is its answer, not a steer or the next prompt.
      if (questions?.answer(text)) return;
      if (text.startsWith(IMAGE_COMMAND)) return attachImage(text.slice(IMAGE_COMMAND.length).trim(), attached, say);
      // A session reset or a plugin command is never a steer: it runs between turns, in the order typed.
      if (sessionResetCommand(text)) {
        if (running) say("(session reset queued: it runs when the turn ends)");
        return queue.push(text, false, [], true);
      }
      if (setup.loaded.findCommand?.(text)) {
        if (running) say("(plugin command queued: it runs when the turn ends)");
        return queue.push(text, false, [], true);
      }
      if (!running) return queue.push(text, false, attached.splice(0));
      running.steer(text);
      if (!out.json) view?.note("(steer sent)");
    },
    onInterrupt: () => {
      if (!running) return reader.close();
      running.abort("user");
      if (!out.json) view?.note("(aborting turn)");
    },
    onClose: () => queue.close(),
  });
  display.prompt = () => reader.prompt();
  void watch.first.then(() => {
    running?.abort("signal");
    reader.close();
  });
  let exitCode: number = EXIT.ok;
  try {
    reader.prompt();
    for (let next = await queue.next(); next !== undefined && watch.received === undefined; next = await queue.next()) {
      let prompt = next.text;
      const reset = next.command ? sessionResetCommand(prompt) : undefined;
      if (reset) {
        // OpenClaw's /new and /reset: a fresh session on the same file; text after the command is its first prompt.
        try {
          await setup.resetSession(reset.action, out, say);
        } catch (error) {
          say(`(/${reset.action} failed: ${error instanceof Error ? error.message : String(error)})`);
          exitCode = EXIT.env;
        }
        if (reset.rest === "") {
          if (queue.closed === false) reader.prompt();
          continue;
        }
        prompt = reset.rest;
      } else if (next.command && (await setup.answerCommand(prompt, out)) !== "continueAgent") {
        if (queue.closed === false) reader.prompt();
        continue;
      }
      setup.recordTurnRequest(prompt);
      view = out.json ? undefined : createTurnRenderer(process.stdout, reader.tty);
      display.view = view;
      const turnView = view;
      const images = next.images.length > 0 ? { images: next.images } : {};
      running = startCodexTurn({ ...setup.baseParams(), prompt, ...images, onEvent: (e) => turnView?.onEvent(e) });
      const r = await settleWithin(running.result, watch, SIGNAL_SETTLE_MS);
      running = undefined;
      // Questions of a turn that ended (aborted, interrupted) can no longer be answered.
      questions?.denyAll("the turn ended");
      display.view = undefined;
      if (r === undefined) return EXIT.aborted;
      await r.backgroundMaintenance.catch(() => undefined);
      view?.finish(replyText(r));
      reportTurn(out, r, queue);
      exitCode = r.status === "failed" ? EXIT.turnFailed : EXIT.ok;
      if (queue.closed === false) reader.prompt();
    }
    return watch.received !== undefined ? EXIT.aborted : exitCode;
  } finally {
    reader.close();
  }
}

async function chatAction(opts: ChatOptions): Promise<number> {
  const out = createOut(opts.json === true);
  // Ctrl-C on a TTY reaches readline as a key; SIGINT/SIGTERM from outside (kill, a pipe's terminal) come here.
  const watch = watchSignals();
  try {
    const display: ChatDisplay = { view: undefined, prompt: () => undefined };
    const questions =
      opts.approve === "ask"
        ? new ApprovalQuestions((line, asking) => {
            if (out.json) out.note(line);
            else if (display.view) {
              display.view.stopSpinner();
              display.view.note(line);
            }
            else out.text(line);
            if (asking) display.prompt();
          }, QUESTION_TIMEOUT_MS)
        : undefined;
    const setup = await setUpTurnCommand(opts, out, questions ? { askApproval: (question, signal) => questions.ask(question, signal) } : {});
    try {
      const code = await chatLoop(setup, out, watch, display, questions);
      if (watch.received === undefined) await holdInspector(setup.inspector, opts.inspectWait, out);
      return code;
    } finally {
      await setup.dispose();
    }
  } finally {
    watch.dispose();
  }
}

/**
 * The `chat` command.
 *
 * @example
 * ```ts
 * program.addCommand(chatCommand(setExitCode));
 * ```
 */
export function chatCommand(done: (code: number) => void): Command {
  const cmd = new Command("chat")
    .description("interactive multi-turn session: streamed replies, steer while a turn runs")
    .requiredOption("--session <file>", "pi session JSONL transcript (created on the first turn)")
    .option("--model <model>", "model for every turn (default: Codex's configured model)");
  addEngineOptions(cmd);
  addServerOptions(cmd);
  addWorkOptions(cmd);
  addJsonOption(cmd, "no live display: one JSON line per turn (the fields of run --json)");
  addInspectOptions(cmd);
  addTrajectoryOptions(cmd);
  cmd.addHelpText(
    "after",
    `
Each line is a prompt; a line ending in "\\" continues on the next, and a bracketed paste is one prompt (sent with
Enter). "/image FILE" attaches an image (PNG, JPEG, GIF or WebP) to the next prompt. "/name args" runs a loaded
plugin's command (e.g. "/lcm status"), answered by the plugin without the model, between turns. A prompt typed while a turn
runs is sent as a steer; a steer the turn did not take runs next ("steer not taken, running next: ..."). With
--approve ask, each approval request Codex makes is shown as a question and the next line typed answers it: y
(approve), s (approve for the session), anything else denies; unanswered for 300 s: denied. Ctrl-C aborts the
running turn; Ctrl-C when idle, or end of input, exits.
SIGTERM aborts the running turn and exits 130.
${LIVE_PROVIDER_HELP}`,
  );
  return cmd.action(async (opts: ChatOptions) => done(await chatAction(opts)));
}
