/**
 * A plugin command typed at the CLI (`codex-turn run "/lcm status"`, or a `/lcm status` line in `chat`): answered by
 * the plugin's command handler, without the model, as OpenClaw's chat surfaces do. The reply is printed (JSON mode: one
 * `{ command, text, media, isError, continueAgent }` line); `continueAgent` sends the line on to the agent as a prompt.
 */
import type { PluginCommandOutcome } from "../openclaw/index.js";
import type { LoadedEngine } from "./engine.js";
import type { Out } from "./output.js";

/** What answering a line came to: not a command; answered; failed (printed); or answered and to be run as a prompt. */
export type PluginCommandAnswer = "notCommand" | "answered" | "failed" | "continueAgent";

/**
 * Answer `line` when it is a plugin command.
 *
 * @example
 * ```ts
 * const answer = await answerPluginCommand(setup.loaded, "/lcm status", { sessionId: "s1" }, out);
 * ```
 */
export async function answerPluginCommand(
  loaded: LoadedEngine,
  line: string,
  session: { sessionId: string; sessionKey?: string | undefined; sessionFile?: string | undefined },
  out: Out,
  say: (line: string) => void = (l) => out.text(l),
): Promise<PluginCommandAnswer> {
  if (!loaded.findCommand?.(line) || !loaded.runCommand) return "notCommand";
  let outcome: PluginCommandOutcome | undefined;
  try {
    outcome = await loaded.runCommand(line, session);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (out.json) out.record({ command: loaded.findCommand(line)?.name, error: { message } });
    else say(`(command ${message})`);
    return "failed";
  }
  if (!outcome) return "notCommand";
  if (out.json) out.record({ command: outcome.command, text: outcome.text, media: outcome.media, isError: outcome.isError, continueAgent: outcome.continueAgent });
  else {
    if (outcome.text !== "") say(outcome.text);
    for (const m of outcome.media) say(`media: ${m}`);
  }
  if (outcome.continueAgent) return "continueAgent";
  return outcome.isError ? "failed" : "answered";
}
