/**
 * The one-row live status line of a terminal display (the demo's states, the spinner of `run` and `chat`): it is
 * redrawn in place with `\r` and erase-line, which only works while it fits one row; a line wider than the terminal
 * wraps, and every redraw then leaves the wrapped rows behind as stale copies. So it is cut to the width first.
 */

/** What the terminal's width is taken to be when the stream does not say (a pipe, a test): 80 columns. */
export const DEFAULT_COLUMNS = 80;

/**
 * The width of the terminal `stream` writes to, or {@link DEFAULT_COLUMNS}.
 *
 * @example
 * ```ts
 * terminalColumns(process.stderr); // 120 in a 120-column terminal
 * ```
 */
export function terminalColumns(stream: NodeJS.WritableStream | undefined): number {
  const columns = (stream as { columns?: unknown } | undefined)?.columns;
  return typeof columns === "number" && Number.isInteger(columns) && columns > 0 ? columns : DEFAULT_COLUMNS;
}

/**
 * `prefix` and `parts` joined by `separator`, at most `columns - 1` characters (the last column stays empty, so the
 * cursor never wraps): the newest parts are kept and the dropped ones become `…`; a prefix alone too long is cut.
 *
 * @example
 * ```ts
 * fitStatusLine("turn 1: ", ["a", "b", "c"], 14, " > "); // "turn 1: … > c"
 * ```
 */
export function fitStatusLine(prefix: string, parts: readonly string[], columns: number, separator = " > "): string {
  const width = Math.max(1, columns - 1);
  const full = prefix + parts.join(separator);
  if (full.length <= width) return full;
  let kept = "";
  for (let i = parts.length - 1; i >= 0; i--) {
    const next = kept === "" ? parts[i]! : `${parts[i]}${separator}${kept}`;
    if (prefix.length + 1 + separator.length + next.length > width) break;
    kept = next;
  }
  const line = kept === "" ? `${prefix}…` : `${prefix}…${separator}${kept}`;
  return line.length <= width ? line : `${line.slice(0, width - 1)}…`;
}
