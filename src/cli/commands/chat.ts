/**
 * `codex-turn chat --session FILE`: interactive turns. Reply text streams as it arrives; a prompt typed while a turn
 * runs is a steer; a steer Codex did not take runs next, shown as such; Ctrl-C aborts the running turn, and when idle
 * (or at end of input) exits. SIGTERM aborts the running turn and exits 130. The lock is released on every path: a
 * turn always settles before the app-server closes (bounded).
 */
import { Command } from "commander";
import type { PromptImage } from "../../codex/prompt-images.js";
import { startCodexTurn, type CodexTurnResult } from "../../turn.js";
import type { HostDecisionContext } from "../../codex/approvals.js";
import type { CodexUserInputRequest } from "../../codex/options.js";
import { approvalQuestion } from "../chat/approvals.js";
import { createPromptReader, type PromptReader } from "../chat/input.js";
import { ChatQuestions, QUESTION_TIMEOUT_MS } from "../chat/questions.js";
import { createTurnRenderer, type TurnRenderer } from "../chat/render.js";
import { askUserInput } from "../chat/user-input.js";
import { EXIT } from "../errors.js";
import { holdInspector } from "../inspector.js";
import {
  addEngineOptions,
  addInspectOptions,
  addJsonOption,
  addServerOptions,
  addTrajectoryOptions,
  addWorkOptions,
  LIVE_PROVIDER_HELP,
  type ApproveAnswer,
} from "../options.js";
import { createOut, type Out } from "../output.js";
import { cutTurnNote, imageLine, planBlock, readImageOptions, replyText, runResultJson, SIGNAL_SETTLE_MS } from "./run.js";
import { sessionResetCommand } from "../session-reset.js";
import { settleWithin, watchSignals, type SignalWatch } from "../signals.js";
import { setUpTurnCommand, type TurnCommandOptions, type TurnInteraction, type TurnSetup } from "../turn-setup.js";

type ChatOptions = TurnCommandOptions & { json?: boolean | undefined };

/** A prompt to run, with the images attached (`/image FILE`) before it was typed; or a plugin command line. */
interface QueuedPrompt {
  text: string;
  images: PromptImage[];
  /** A plugin command (`/name args`): answered by the plugin, a turn only if it asks for one. */
  command?: boolean | undefined;
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

/**
 * The chat's own `/help` (answered here, never sent to the model): the chat's commands, steering, the keys, and the
 * loaded plugins' commands.
 *
 * @example
 * ```ts
 * chatHelpLines([{ name: "lcm", description: "lossless-claw status" }]);
 * ```
 */
export function chatHelpLines(pluginCommands: ReadonlyArray<{ name: string; description?: string | undefined }> = []): string[] {
  return [
    "/help            this list (answered here, not sent to the model)",
    "/new, /reset     start a fresh session on the same file (text after it is the first prompt)",
    "/image FILE      attach a PNG, JPEG, GIF or WebP image to your next prompt",
    "a line typed while a turn runs steers it; one Codex did not take runs next",
    "a line ending in \\ continues on the next; a paste is one prompt",
    "Ctrl-C aborts the running turn (when idle: exits); Ctrl-D (end of input) exits",
    ...pluginCommands.map((c) => `/${c.name.padEnd(15)} ${c.description ?? "a plugin command"}`),
  ];
}

/**
 * The one line the chat starts with (text mode): which session, live or offline, and where help is.
 *
 * @example
 * ```ts
 * chatBanner("/data/s1.jsonl", true); // "codex-turn chat: session /data/s1.jsonl (offline model). /help for commands, Ctrl-D to exit."
 * ```
 */
export function chatBanner(sessionFile: string, offline: boolean): string {
  return `codex-turn chat: session ${sessionFile} (${offline ? "offline model" : "live Codex"}). /help for commands, Ctrl-D to exit.`;
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

function reportTurn(out: Out, r: CodexTurnResult, queue: PromptQueue, warned: Set<string>): void {
  if (out.json) out.record(runResultJson(r));
  else {
    if (r.proposedPlan !== undefined) out.text(planBlock(r.proposedPlan));
    for (const image of r.generatedImages ?? []) out.text(imageLine(image));
    if (r.cutTurnRecovered) out.text(cutTurnNote(r.cutTurnRecovered));
    // Each warning once per chat: an MCP server that failed to start is reported by every turn on its thread.
    for (const w of r.warnings) {
      const text = typeof w === "string" ? w : JSON.stringify(w);
      if (warned.has(text)) continue;
      warned.add(text);
      out.text(`(warning: ${text})`);
    }
    if (r.status === "blocked") out.text(`(turn blocked by ${r.blocked?.blockedBy ?? "a gate"})`);
    else if (r.status !== "completed") out.text(`(turn ${r.status}${r.error ? `: ${r.error.message}` : ""})`);
  }
  // Follow-ups run next, in order, before anything typed later.
  for (const f of [...r.followUps].reverse()) queue.push(f, true);
  if (!out.json) for (const f of r.followUps) out.text(`steer not taken, running next: ${f}`);
}

/** Where the chat's questions are shown: the running turn's display, else plain output. */
interface ChatDisplay {
  view: TurnRenderer | undefined;
  /** Shows the "> " input prompt again (TTY) after a question. */
  prompt(): void;
}

/** What the chat's input handlers and its turn loop share. */
interface ChatState {
  readonly setup: TurnSetup;
  readonly out: Out;
  readonly display: ChatDisplay;
  /** The questions put to the person (`--approve ask`, Codex's questions on a terminal); none: nobody is asked. */
  readonly questions: ChatQuestions | undefined;
  readonly queue: PromptQueue;
  /** Images attached with `/image FILE`, sent with the next prompt that is queued (not with a steer). */
  readonly attached: PromptImage[];
  running: ReturnType<typeof startCodexTurn> | undefined;
  /** The latest turn's display (notes go through it so they are not glued to streamed text). */
  view: TurnRenderer | undefined;
  /** The turn warnings already shown (each is shown once per chat). */
  readonly warned: Set<string>;
}

/** A line of our own: a note with --json, else through the turn's display. */
function say(state: ChatState, line: string): void {
  if (state.out.json) state.out.note(line);
  else if (state.view) state.view.note(line);
  else state.out.text(line);
}

/** A typed line: a question's answer, an image to attach, a queued command, the next prompt, or a steer. */
function routeLine(state: ChatState, text: string): void {
  const { setup, queue, running } = state;
  // While a question waits (an approval, Codex's question), the line typed is its answer, not a steer or a prompt.
  if (state.questions?.answer(text)) return;
  if (text.trim() === "/help") {
    const commands = (setup.loaded.commands ?? []) as Array<{ name: string; description?: string | undefined }>;
    for (const line of chatHelpLines(commands.filter((c) => typeof c?.name === "string"))) say(state, line);
    if (!running) state.display.prompt();
    return;
  }
  if (text.startsWith(IMAGE_COMMAND)) return attachImage(text.slice(IMAGE_COMMAND.length).trim(), state.attached, (l) => say(state, l));
  // A session reset or a plugin command is never a steer: it runs between turns, in the order typed.
  if (sessionResetCommand(text)) {
    if (running) say(state, "(session reset queued: it runs when the turn ends)");
    return queue.push(text, false, [], true);
  }
  if (setup.loaded.findCommand?.(text)) {
    if (running) say(state, "(plugin command queued: it runs when the turn ends)");
    return queue.push(text, false, [], true);
  }
  if (!running) return queue.push(text, false, state.attached.splice(0));
  running.steer(text);
  if (!state.out.json) state.view?.note("(steer sent)");
}

/** The chat's input: lines go to {@link routeLine}; Ctrl-C aborts the turn (idle: exits); the end of input ends the chat. */
function openInput(state: ChatState, watch: SignalWatch): PromptReader {
  const reader = createPromptReader(process.stdin, process.stdout, {
    onPrompt: (text) => routeLine(state, text),
    // Enter alone answers a waiting question (declines it); otherwise it is nothing.
    onEmptyLine: () => void state.questions?.answer(""),
    onInterrupt: () => {
      if (!state.running) return reader.close();
      state.running.abort("user");
      if (!state.out.json) state.view?.note("(aborting turn)");
    },
    onClose: () => {
      // Nobody can answer any more: what is asked now, or later in the running turn, is declined at once.
      state.questions?.close("end of input");
      state.queue.close();
    },
  });
  state.display.prompt = () => reader.prompt();
  void watch.first.then(() => {
    state.running?.abort("signal");
    reader.close();
  });
  return reader;
}

/**
 * A queued session reset (`/new`, `/reset`) or plugin command runs here. Returns the prompt to run as a turn (the text
 * after a reset command, a command whose plugin asks for a turn, or a plain prompt), or `failed`/`done` when no turn runs.
 */
async function promptOf(state: ChatState, next: QueuedPrompt): Promise<string | "done" | "failed"> {
  const { setup, out } = state;
  const reset = next.command ? sessionResetCommand(next.text) : undefined;
  if (reset) {
    // OpenClaw's /new and /reset: a fresh session on the same file; text after the command is its first prompt.
    let failed = false;
    try {
      await setup.resetSession(reset.action, out, (l) => say(state, l));
    } catch (error) {
      say(state, `(/${reset.action} failed: ${error instanceof Error ? error.message : String(error)})`);
      failed = true;
    }
    if (reset.rest === "") return failed ? "failed" : "done";
    return reset.rest;
  }
  if (next.command && (await setup.answerCommand(next.text, out)) !== "continueAgent") return "done";
  return next.text;
}

/** Runs one turn with its live display; undefined when a signal came and the turn did not settle in time. */
async function runChatTurn(state: ChatState, reader: PromptReader, watch: SignalWatch, prompt: string, images: PromptImage[]): Promise<CodexTurnResult | undefined> {
  const { setup, out, display } = state;
  setup.recordTurnRequest(prompt);
  const view = out.json ? undefined : createTurnRenderer(process.stdout, reader.tty);
  state.view = view;
  display.view = view;
  const withImages = images.length > 0 ? { images } : {};
  state.running = startCodexTurn({ ...setup.baseParams(), prompt, ...withImages, onEvent: (e) => view?.onEvent(e) });
  const r = await settleWithin(state.running.result, watch, SIGNAL_SETTLE_MS);
  state.running = undefined;
  // Questions of a turn that ended (aborted, interrupted) can no longer be answered.
  state.questions?.declineAll("the turn ended");
  display.view = undefined;
  if (r === undefined) return undefined;
  await r.backgroundMaintenance.catch(() => undefined);
  view?.finish(replyText(r));
  reportTurn(out, r, state.queue, state.warned);
  return r;
}

/** Runs what is typed, prompt after prompt, until the end of input, Ctrl-C when idle, or a signal. */
async function chatLoop(state: ChatState, watch: SignalWatch): Promise<number> {
  const reader = openInput(state, watch);
  const promptAgain = () => {
    if (state.queue.closed === false) reader.prompt();
  };
  let exitCode: number = EXIT.ok;
  try {
    if (!state.out.json) state.out.text(chatBanner(state.setup.sessionFile, state.setup.server.fake !== undefined));
    reader.prompt();
    for (let next = await state.queue.next(); next !== undefined && watch.received === undefined; next = await state.queue.next()) {
      const prompt = await promptOf(state, next);
      if (prompt === "done" || prompt === "failed") {
        if (prompt === "failed") exitCode = EXIT.env;
        promptAgain();
        continue;
      }
      const r = await runChatTurn(state, reader, watch, prompt, next.images);
      if (r === undefined) return EXIT.aborted;
      exitCode = r.status === "failed" ? EXIT.turnFailed : EXIT.ok;
      promptAgain();
    }
    return watch.received !== undefined ? EXIT.aborted : exitCode;
  } finally {
    reader.close();
  }
}

/**
 * The chat's question queue, when someone is asked (`--approve ask`, or Codex's questions on a terminal): its questions
 * and outcomes go through the running turn's display (the spinner stops), or plain output; after a question, the
 * input prompt again.
 */
function chatQuestions(out: Out, display: ChatDisplay, asks: boolean): ChatQuestions | undefined {
  if (!asks) return undefined;
  return new ChatQuestions((line, asking) => {
    if (out.json) out.note(line);
    else if (display.view) {
      display.view.stopSpinner();
      display.view.note(line);
    } else out.text(line);
    if (asking) display.prompt();
  }, QUESTION_TIMEOUT_MS);
}

/** How the chat's turns reach the person: approvals (`--approve ask`), and Codex's questions when input is a terminal. */
function chatInteraction(questions: ChatQuestions | undefined, approve: ApproveAnswer | undefined, tty: boolean): TurnInteraction {
  return {
    ...(questions && approve === "ask" ? { askApproval: (question, signal) => questions.put(approvalQuestion(question), signal) } : {}),
    ...(questions && tty
      ? { onUserInput: (request: CodexUserInputRequest, { signal }: HostDecisionContext) => askUserInput(questions, request, signal) }
      : { noAnswerWhy: "chat's input is not a terminal" }),
  };
}

async function chatAction(opts: ChatOptions): Promise<number> {
  const out = createOut(opts.json === true);
  // Ctrl-C on a TTY reaches readline as a key; SIGINT/SIGTERM from outside (kill, a pipe's terminal) come here.
  const watch = watchSignals();
  try {
    const display: ChatDisplay = { view: undefined, prompt: () => undefined };
    // Codex's questions are asked only on a terminal: a pipe's next line was not written as an answer.
    const tty = process.stdin.isTTY === true;
    const questions = chatQuestions(out, display, opts.approve === "ask" || tty);
    const setup = await setUpTurnCommand(opts, out, chatInteraction(questions, opts.approve, tty));
    try {
      const state: ChatState = { setup, out, display, questions, queue: new PromptQueue(), attached: [], running: undefined, view: undefined, warned: new Set() };
      const code = await chatLoop(state, watch);
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
    .requiredOption("--session <file>", "pi session JSONL transcript (created on the first turn; its directory must exist); with --pg the session id")
    .option("--pg <url>", "keep the session in this PostgreSQL database (default: CODEX_TURN_PG_URL)")
    .option("--mkdir", "create the session file's directory when it does not exist")
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
(approve), s (approve for the session), anything else (Enter alone too) denies; unanswered for 300 s: denied.
With --plan, Codex plans first and may ask you questions (request_user_input): on a terminal each is shown with its
numbered options and the next line typed answers it, a number picking that option, other text being your own answer;
Enter alone, end of input, the turn ending or 300 s without an answer declines (Codex goes on without one). When input
is not a terminal, questions are declined and printed on stderr. Ctrl-C aborts the running turn; Ctrl-C when idle, or
end of input, exits.
SIGTERM aborts the running turn and exits 130.
${LIVE_PROVIDER_HELP}`,
  );
  return cmd.action(async (opts: ChatOptions) => done(await chatAction(opts)));
}
