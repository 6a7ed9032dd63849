/**
 * Chat input: turns what a person types or pastes into whole prompts. A bracketed paste (the terminal wraps pasted
 * text in ESC[200~ ... ESC[201~ once we ask with ESC[?2004h) becomes part of ONE prompt, sent when Enter is pressed
 * after it; a line ending in a backslash continues on the next line (works in pipes too). Without these, every
 * line is a prompt.
 */
import { createInterface, type Interface } from "node:readline";

/** Callbacks of {@link createPromptReader}. */
export interface PromptReaderHandlers {
  /** A whole prompt (lines joined with "\n"), never empty. */
  onPrompt(text: string): void;
  /** Enter on an empty line (outside a paste): answers a question being asked (declines it); ignored otherwise. */
  onEmptyLine?(): void;
  /** Ctrl-C (TTY) — the host decides: abort a running turn, or exit when idle. */
  onInterrupt(): void;
  /** End of input (Ctrl-D, a closed pipe, or {@link PromptReader.close}). */
  onClose(): void;
}

/** The running reader. */
export interface PromptReader {
  /** Whether the input is a terminal (live display, prompts, bracketed paste). */
  readonly tty: boolean;
  /** Shows the "> " prompt (TTY only). */
  prompt(): void;
  close(): void;
}

const PASTE_ON = "\x1b[?2004h";
const PASTE_OFF = "\x1b[?2004l";

/**
 * Starts reading prompts from `input`.
 *
 * @example
 * ```ts
 * const reader = createPromptReader(process.stdin, process.stdout, { onPrompt, onInterrupt, onClose });
 * ```
 */
export function createPromptReader(
  input: NodeJS.ReadableStream & { isTTY?: boolean | undefined },
  output: NodeJS.WritableStream,
  handlers: PromptReaderHandlers,
): PromptReader {
  const tty = input.isTTY === true;
  const rl: Interface = createInterface({ input, output, terminal: tty });
  const pending: string[] = [];
  let pasting = false;
  let closed = false;
  if (tty) {
    output.write(PASTE_ON);
    input.on("keypress", (_chunk: unknown, key: { name?: string | undefined } | undefined) => {
      if (key?.name === "paste-start") pasting = true;
      else if (key?.name === "paste-end") pasting = false;
    });
  }
  rl.on("line", (line: string) => {
    // Inside a paste, a newline is part of the prompt; so is a line that ends with a backslash.
    if (pasting) return void pending.push(line);
    if (line.endsWith("\\")) return void pending.push(line.slice(0, -1));
    pending.push(line);
    const text = pending.splice(0).join("\n").trim();
    if (text !== "") handlers.onPrompt(text);
    else handlers.onEmptyLine?.();
  });
  rl.on("SIGINT", () => handlers.onInterrupt());
  rl.on("close", () => {
    closed = true;
    if (tty) output.write(PASTE_OFF);
    const rest = pending.splice(0).join("\n").trim();
    if (rest !== "") handlers.onPrompt(rest);
    handlers.onClose();
  });
  rl.setPrompt("> ");
  return {
    tty,
    prompt: () => {
      if (tty && !closed) rl.prompt();
    },
    close: () => {
      if (!closed) rl.close();
    },
  };
}
