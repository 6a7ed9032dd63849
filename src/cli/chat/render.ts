/**
 * Chat display of one turn: reply text as it streams in (TTY: each delta at once; a pipe: whole lines, so a reader
 * of the pipe never sees half a line), and on a TTY a spinner with the current lifecycle state until text arrives.
 */
import type { TurnStreamEvent } from "../../params.js";

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
export function createTurnRenderer(out: NodeJS.WritableStream, tty: boolean): TurnRenderer {
  let state = "starting";
  let frame = 0;
  let spinning = tty;
  let streamed = false;
  let atLineStart = true;
  let lineBuffer = "";
  const drawSpinner = () => {
    if (spinning) out.write(`${CLEAR_LINE}${FRAMES[frame++ % FRAMES.length]} ${state}`);
  };
  const timer = tty ? setInterval(drawSpinner, 120) : undefined;
  timer?.unref();
  const stopSpinner = () => {
    if (!spinning) return;
    spinning = false;
    clearInterval(timer);
    out.write(CLEAR_LINE);
  };
  const writeText = (text: string) => {
    if (text === "") return;
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
      } else if (event.type === "agentMessageDelta") {
        stopSpinner();
        writeText(event.delta);
      }
    },
    stopSpinner,
    note(line) {
      if (spinning) out.write(CLEAR_LINE);
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
