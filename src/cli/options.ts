/**
 * Options shared by several commands, declared once so every command spells and documents them the same way.
 */
import { environmentLines, exitCodesLine } from "./reference.js";
import { InvalidArgumentError, Option, type Command } from "commander";

/** Help text: which model and CODEX_HOME a command uses with and without --offline. */
export const LIVE_PROVIDER_HELP = `--offline uses the fake model (answers "offline reply"). Without it, codex app-server runs
with CODEX_HOME set to $CODEX_HOME when that is set and non-empty, else ~/.codex (Codex's own default; created if
missing), so your \`codex login\` credentials and config.toml there are used; of the environment only PATH, HOME, the
proxy variables and OPENAI_API_KEY (when set) are passed to it. With no login and no OPENAI_API_KEY, a live command
exits 3 at once, naming \`npx codex login\`.`;

/** Help text: the exit codes and the environment (one source with the docs: ./reference.ts). */
export const EXIT_CODES_HELP = `${exitCodesLine()}\nEnvironment:\n${environmentLines().join("\n")}`;

/**
 * The largest number an integer option takes (2^31-1): past it Node's timers fire at once (a 99999999999 ms timeout
 * became 1 ms), and no token budget or count gets near it.
 */
export const MAX_INT_OPTION = 2_147_483_647;

/** Parses a positive integer option value, at most {@link MAX_INT_OPTION} (commander reports a bad one as a usage error, exit 2). */
export function positiveInt(value: string): number {
  if (!/^[1-9]\d*$/.test(value) || !Number.isSafeInteger(Number(value))) throw new InvalidArgumentError("must be a positive integer");
  if (Number(value) > MAX_INT_OPTION) throw new InvalidArgumentError(`must be at most ${MAX_INT_OPTION}`);
  return Number(value);
}

/** Parses a non-negative integer option value, at most {@link MAX_INT_OPTION}. */
export function nonNegativeInt(value: string): number {
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) throw new InvalidArgumentError("must be an integer >= 0");
  if (Number(value) > MAX_INT_OPTION) throw new InvalidArgumentError(`must be at most ${MAX_INT_OPTION}`);
  return Number(value);
}

/** Values of the options {@link addEngineOptions} declares. */
export interface EngineOptionValues {
  engine?: string | undefined;
  pluginConfig?: string | undefined;
  /** `--plugin`, repeatable: OpenClaw plugins loaded beside the engine. */
  plugin?: string[] | undefined;
  pluginsConfig?: string | undefined;
  openclawConfig?: string | undefined;
  contextEngine?: string | undefined;
  budget?: number | undefined;
  sessionKey?: string | undefined;
  engineTimeout: number;
}

/** Values of the options {@link addServerOptions} declares. */
export interface ServerOptionValues {
  offline?: boolean | undefined;
  offlineScript?: string | undefined;
  offlineRequests?: string | undefined;
}

/** How `--approve` answers Codex's approval requests (`ask`: the person at the chat answers each one). */
export type ApproveAnswer = "deny" | "approve" | "approve-for-session" | "ask";

/** Values of the options {@link addWorkOptions} declares. */
export interface WorkOptionValues {
  cwd?: string | undefined;
  sandbox?: "read-only" | "workspace-write" | "danger-full-access" | undefined;
  approvalPolicy?: "untrusted" | "on-request" | "never" | undefined;
  approve: ApproveAnswer;
  nativeToolHooks?: boolean | undefined;
  /**
   * `--plan`: Codex's Plan mode (`collaborationMode: "plan"`); `--no-plan` (false): Codex's Default mode, to leave Plan
   * mode (a thread keeps the mode of its last turn); absent: no mode is sent.
   */
  plan?: boolean | undefined;
}

/** Values of the options {@link addInspectOptions} declares. */
export interface InspectOptionValues {
  inspect?: boolean | undefined;
  inspectWait?: number | undefined;
  inspectUiUrl?: string | undefined;
}

/** Values of the options {@link addTrajectoryOptions} declares. */
export interface TrajectoryOptionValues {
  trajectory?: string | undefined;
  trajectoryFull?: boolean | undefined;
}

/** `--engine`, `--plugin-config`, `--plugin`, `--plugins-config`, `--openclaw-config`, `--context-engine`, `--budget`, `--session-key`, `--engine-timeout`. */
export function addEngineOptions(cmd: Command): Command {
  return cmd
    .option("--engine <spec>", "context engine: a module path, an installed package name, or package#engine-id (OpenClaw plugins too)")
    .option("--plugin-config <file>", "JSON object handed to the plugin as its configuration")
    .option("--plugin <spec>", "another OpenClaw plugin loaded beside the engine (memory, guard or tool plugins); repeatable", (v: string, prev: string[] = []) => [...prev, v])
    .option("--plugins-config <file>", "JSON object of plugin configurations by plugin id ({ \"<id>\": {...} }), as OpenClaw's plugins.entries.<id>.config")
    .option("--openclaw-config <file>", "an OpenClaw config, read as OpenClaw reads it (JSON5, $include, ${VAR}; e.g. ~/.openclaw/openclaw.json): plugins.entries.<id>.config/.hooks and plugins.slots.contextEngine")
    .option("--context-engine <id>", "the context engine to use when the loaded plugins register several (OpenClaw's plugins.slots.contextEngine; legacy: none)")
    .option("--budget <tokens>", "context token budget for the engine (assemble, afterTurn, compact)", positiveInt)
    .option("--session-key <key>", "session key passed to the engine")
    .option("--engine-timeout <ms>", "give up (exit 3) when the engine does not load within this time", positiveInt, 30_000);
}

/**
 * `--offline` and the hidden `--offline-script FILE` (scripted fake replies, for tests and demos) and
 * `--offline-requests FILE` (what the offline model received, for tests).
 */
export function addServerOptions(cmd: Command): Command {
  return cmd
    .option("--offline", 'use the offline fake model (answers "offline reply"); nothing leaves 127.0.0.1')
    .addOption(new Option("--offline-script <file>", "JSON array of fake replies queued for the offline model").hideHelp())
    .addOption(new Option("--offline-requests <file>", "write the requests the offline model received (JSON lines) when the command ends").hideHelp());
}

/**
 * `--cwd`, `--sandbox`, `--approval-policy`, `--approve`, `--native-tool-hooks`, `--plan`/`--no-plan`: where Codex works, what it may do, how the CLI
 * answers its approval requests (commands, patches, permissions, MCP tools; a sub-agent's too), and whether it plans
 * first. Each request and its answer is printed as a note (stderr with --json).
 */
export function addWorkOptions(cmd: Command): Command {
  return cmd
    .option("--cwd <dir>", "Codex's working directory (default: the current directory)")
    .addOption(new Option("--sandbox <mode>", "what Codex's commands may touch (default read-only)").choices(["read-only", "workspace-write", "danger-full-access"]))
    .addOption(new Option("--approval-policy <policy>", "when Codex asks before acting").choices(["untrusted", "on-request", "never"]))
    .addOption(
      new Option("--approve <answer>", "how the CLI answers Codex's approval requests (each one is printed; ask: chat only, you answer each)")
        .choices(["deny", "approve", "approve-for-session", "ask"])
        .default("deny"),
    )
    .option("--native-tool-hooks", "put Codex's own tool calls (commands, patches, MCP tools) to the plugins' before_tool_call hooks, which may block them")
    .option("--plan", PLAN_HELP)
    .option("--no-plan", "Codex's Default mode: leave Plan mode (a session's Codex thread stays in the mode of its last turn)");
}

/** Help text of `--plan`. */
export const PLAN_HELP =
  "Codex's Plan mode: it plans before acting and may ask you questions (request_user_input); chat on a terminal asks you each one, run and chat without a terminal decline them and print them on stderr";

/** `--inspect` and `--inspect-wait`. */
export function addInspectOptions(cmd: Command): Command {
  return cmd
    .option("--inspect", "start the live inspector (needs @statelyai/inspect) and print its URL")
    .option("--inspect-wait <seconds>", "with --inspect: keep the inspector this long after the work ends (default: until Ctrl-C)", nonNegativeInt)
    // The hosted UI the bridge page embeds; tests point it at a closed loopback port to exercise the offline view.
    .addOption(new Option("--inspect-ui-url <url>", "inspector UI embedded by the bridge page").hideHelp());
}

/** `--trajectory` and `--trajectory-full`. */
export function addTrajectoryOptions(cmd: Command): Command {
  return cmd
    .option("--trajectory <file>", "append app-server notifications and turn requests as JSONL (content redacted)")
    .option("--trajectory-full", "with --trajectory: keep content");
}

/** `--json`. */
export function addJsonOption(cmd: Command, what: string): Command {
  return cmd.option("--json", what);
}
