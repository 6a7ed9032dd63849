/**
 * Outgoing JSON-RPC text made safe for Codex. `JSON.stringify` writes a lone UTF-16 surrogate (a string cut in the
 * middle of an emoji, `"\ud800"`) as the escape `\ud800`; Codex's JSON parser (serde_json) rejects such a line, so the
 * request is never answered and the turn waits for a timeout (or for ever, for a tool result).
 *
 * Decision: REPLACE, not reject. Each lone surrogate becomes U+FFFD (the Unicode replacement character, what
 * `String.prototype.toWellFormed` does), the line is sent, and the replacement is counted and logged (counts only).
 * Rejecting would fail a whole turn, or lose a tool result, over one broken character the model can live with.
 */

/** An escaped lone surrogate in serialized JSON: `\uD800`-`\uDFFF` not part of a pair, after an even run of backslashes. */
const LONE_SURROGATE_ESCAPE = /(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2}(?!\\ud[c-f][0-9a-f]{2})|d[c-f][0-9a-f]{2})/gi;

/**
 * Replace every escaped lone surrogate in a line produced by `JSON.stringify` with the escape of U+FFFD. Paired
 * surrogates are never escaped by `JSON.stringify` (they are written as the character), so every `\udXXX` escape
 * it produces is a lone one; the pattern still leaves a written-out escaped pair alone.
 *
 * @example
 * ```ts
 * replaceLoneSurrogates(JSON.stringify({ text: "a\ud800b" })); // { text: '{"text":"a\\ufffdb"}', replaced: 1 }
 * ```
 */
export function replaceLoneSurrogates(json: string): { text: string; replaced: number } {
  // Fast path: almost every line has no \u escape of a surrogate at all.
  if (!/\\u[dD][89a-fA-F]/.test(json)) return { text: json, replaced: 0 };
  let replaced = 0;
  const text = json.replace(LONE_SURROGATE_ESCAPE, (_match, backslashes: string) => {
    replaced++;
    return `${backslashes}\\ufffd`;
  });
  return { text, replaced };
}

/**
 * Serialize one JSON-RPC message as a line Codex can parse (lone surrogates replaced, see the module comment).
 *
 * @example
 * ```ts
 * const { line, replaced } = encodeRpcLine({ id: 1, method: "turn/start", params });
 * stdin.write(line);
 * ```
 */
export function encodeRpcLine(message: object): { line: string; replaced: number } {
  const { text, replaced } = replaceLoneSurrogates(JSON.stringify(message));
  return { line: `${text}\n`, replaced };
}
