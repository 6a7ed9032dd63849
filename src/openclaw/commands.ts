/**
 * Plugin commands (`api.registerCommand`): a user's `/name args` line answered by the plugin without the model, as
 * OpenClaw's chat surfaces do (lossless-claw's `/lcm status`). A line is a command when its first word names a
 * registered command (case-insensitive) and, when it has arguments, the command accepts them (`acceptsArgs`);
 * anything else is an ordinary prompt.
 */
import { z } from "zod";
import { errorText } from "./errors.js";
import type { PluginRegistry } from "./registry.js";

/** A line recognised as a plugin command. */
export interface PluginCommandInvocation {
  /** The registered name. */
  name: string;
  /** What follows the name, trimmed; absent when nothing does. */
  args?: string | undefined;
  /** The whole normalized line (`/name args`). */
  commandBody: string;
}

/** What a command answered. */
export interface PluginCommandOutcome {
  command: string;
  /** The reply text ("" when the command returned none). */
  text: string;
  /** Media the reply points at (`mediaUrl`, `mediaUrls`). */
  media: string[];
  /** The plugin marked the reply as an error. */
  isError: boolean;
  /** The plugin asked for the line to reach the agent too (OpenClaw's `continueAgent`): run it as a prompt. */
  continueAgent: boolean;
}

/** The session a command runs for (OpenClaw's `PluginCommandContext` session fields). */
export interface PluginCommandSession {
  sessionId?: string | undefined;
  sessionKey?: string | undefined;
  sessionFile?: string | undefined;
}

const resultSchema = z
  .looseObject({
    text: z.string().optional(),
    mediaUrl: z.string().optional(),
    mediaUrls: z.array(z.string()).optional(),
    isError: z.boolean().optional(),
    continueAgent: z.boolean().optional(),
  })
  .optional()
  .nullable();

type CommandEntry = PluginRegistry["commands"][number];

const handlerOf = (entry: CommandEntry) => (entry.definition as { handler?: unknown }).handler;

/**
 * The command a line invokes, or undefined when it is an ordinary prompt.
 *
 * @example
 * ```ts
 * matchPluginCommand(registry.commands, "/lcm status"); // { name: "lcm", args: "status", commandBody: "/lcm status" }
 * ```
 */
export function matchPluginCommand(commands: readonly CommandEntry[], line: string): PluginCommandInvocation | undefined {
  const m = /^\/(\S+)(?:\s+([\s\S]*))?$/.exec(line.trim());
  if (!m) return undefined;
  const entry = commands.find((c) => c.name.toLowerCase() === m[1]!.toLowerCase() && typeof handlerOf(c) === "function");
  if (!entry) return undefined;
  const args = m[2]?.trim() || undefined;
  // OpenClaw hands a line with arguments to the agent when the command takes none.
  if (args !== undefined && (entry.definition as { acceptsArgs?: unknown }).acceptsArgs !== true) return undefined;
  return { name: entry.name, ...(args !== undefined ? { args } : {}), commandBody: `/${entry.name}${args !== undefined ? ` ${args}` : ""}` };
}

/**
 * Run the command `line` invokes with OpenClaw's command context (a CLI surface: the local user is the authorized
 * owner). Undefined when the line is not a command. A handler that throws or returns something that is not a reply
 * rejects with an error naming the command.
 *
 * @example
 * ```ts
 * const outcome = await runPluginCommand(registry.commands, "/lcm status", { config, session: { sessionId: "s1" } });
 * console.log(outcome?.text);
 * ```
 */
export async function runPluginCommand(
  commands: readonly CommandEntry[],
  line: string,
  ctx: { config: Record<string, unknown>; session: PluginCommandSession; runtimeContext?: Record<string, unknown> | undefined },
): Promise<PluginCommandOutcome | undefined> {
  const invocation = matchPluginCommand(commands, line);
  if (!invocation) return undefined;
  const entry = commands.find((c) => c.name === invocation.name)!;
  const { session } = ctx;
  const commandCtx = {
    channel: "cli",
    isAuthorizedSender: true,
    senderIsOwner: true,
    ...(invocation.args !== undefined ? { args: invocation.args } : {}),
    commandBody: invocation.commandBody,
    config: ctx.config,
    ...(session.sessionId !== undefined ? { sessionId: session.sessionId } : {}),
    ...(session.sessionKey !== undefined ? { sessionKey: session.sessionKey } : {}),
    ...(session.sessionFile !== undefined ? { sessionFile: session.sessionFile } : {}),
    ...(ctx.runtimeContext ? { runtimeContext: ctx.runtimeContext } : {}),
  };
  let raw: unknown;
  try {
    raw = await (handlerOf(entry) as (c: unknown) => unknown)(commandCtx);
  } catch (error) {
    throw new Error(`/${invocation.name} failed: ${errorText(error)}`, { cause: error });
  }
  const parsed = resultSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`/${invocation.name} returned no reply: ${parsed.error.issues[0]?.path.join(".") || "(result)"}: ${parsed.error.issues[0]?.message ?? "invalid"}`);
  const r = parsed.data ?? {};
  return {
    command: invocation.name,
    text: r.text ?? "",
    media: [...(r.mediaUrl !== undefined ? [r.mediaUrl] : []), ...(r.mediaUrls ?? [])],
    isError: r.isError === true,
    continueAgent: r.continueAgent === true,
  };
}
