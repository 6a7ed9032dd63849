/**
 * Terminal display of one turn (`chat`, and `run` on a terminal): reply text as it streams in (TTY: each delta at
 * once; a pipe: whole lines, so a reader of the pipe never sees half a line), and on a TTY a spinner with the current
 * lifecycle state until text arrives, cut to the terminal's width so that its redraws leave no stale rows.
 */
import type { TurnStreamEvent } from "../../params.js";
import { fitStatusLine, terminalColumns } from "../status-line.js";

/** One turn's display. */
export interface TurnRenderer {
  /** Feed `onEvent` events here. */
  onEvent(event: TurnStreamEvent): void;
  /** A line of our own (steer sent, aborting) that must not be glued to streamed text. */
  note(line: string): void;
  /** Stop the spinner for the rest of the turn (a question waits for typing, which the spinner would overdraw). */
  stopSpinner(): void;
  /** Ends the display: flushes buffered text; `fallbackText` is printed when nothing streamed (e.g. no deltas). */
  finish(fallbackText: string): void;
}

const FRAMES = ["|", "/", "-", "\\"];
const CLEAR_LINE = "\r\x1b[2K";

/** Where the parts of a turn's display go, when not all on `out`. */
export interface TurnRendererOptions {
  /** The stream of the spinner (default: `out` on a TTY, else none); `run` puts it on stderr. */
  status?: NodeJS.WritableStream | undefined;
  /** Show the reply text on `out` (default true); false: the spinner only, and `finish` prints nothing. */
  text?: boolean | undefined;
}

/**
 * Creates the display of one turn on `out`.
 *
 * @example
 * ```ts
 * const view = createTurnRenderer(process.stdout, process.stdout.isTTY === true);
 * const r = await runCodexTurn({ ...params, onEvent: (e) => view.onEvent(e) });
 * view.finish(r.assistantText);
 * ```
 */
export function createTurnRenderer(out: NodeJS.WritableStream, tty: boolean, options: TurnRendererOptions = {}): TurnRenderer {
  const statusOut = options.status ?? (tty ? out : undefined);
  const showText = options.text !== false;
  let state = "starting";
  let frame = 0;
  let spinning = statusOut !== undefined;
  let streamed = false;
  let atLineStart = true;
  let lineBuffer = "";
  const drawSpinner = () => {
    if (spinning) statusOut!.write(`${CLEAR_LINE}${fitStatusLine(`${FRAMES[frame++ % FRAMES.length]} `, [state], terminalColumns(statusOut))}`);
  };
  const timer = spinning ? setInterval(drawSpinner, 120) : undefined;
  timer?.unref();
  const stopSpinner = () => {
    if (!spinning) return;
    spinning = false;
    clearInterval(timer);
    statusOut!.write(CLEAR_LINE);
  };
  const writeText = (text: string) => {
    if (text === "" || !showText) return;
    streamed = true;
    if (tty) {
      out.write(text);
      atLineStart = text.endsWith("\n");
      return;
    }
    lineBuffer += text;
    const nl = lineBuffer.lastIndexOf("\n");
    if (nl >= 0) {
      out.write(lineBuffer.slice(0, nl + 1));
      lineBuffer = lineBuffer.slice(nl + 1);
    }
  };
  drawSpinner();
  return {
    onEvent(event) {
      if (event.type === "state") {
        state = event.state;
        drawSpinner();
      } else if (event.type === "agentMessageDelta" && showText) {
        stopSpinner();
        writeText(event.delta);
      }
    },
    stopSpinner,
    note(line) {
      if (spinning) statusOut!.write(CLEAR_LINE);
      else if (tty && !atLineStart) out.write("\n");
      out.write(`${line}\n`);
      atLineStart = true;
      drawSpinner();
    },
    finish(fallbackText) {
      stopSpinner();
      if (!streamed) writeText(fallbackText);
      if (lineBuffer !== "") out.write(`${lineBuffer}\n`);
      else if (tty && !atLineStart) out.write("\n");
      lineBuffer = "";
      atLineStart = true;
    },
  };
}
