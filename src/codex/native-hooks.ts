/**
 * The native tool hook relay (`CodexAppServer.spawn({ nativeToolHooks: true })`): Codex asks the host before it runs
 * a native tool (a shell command, a patch, an MCP tool), and the host's `beforeToolCall` may block it, as OpenClaw's
 * Codex runtime relays Codex's `PreToolUse` hook to its plugins' `before_tool_call`.
 *
 * How (observed with Codex 0.169.0): the app-server gets a `PreToolUse` command hook in its session config. Codex runs
 * the command (bin/codex-turn-hook-relay.mjs, under this Node) with the call as JSON on stdin (`session_id` = the
 * thread, `turn_id`, `tool_name` "Bash" / "apply_patch" / "mcp__<server>__<tool>", `tool_input`, `tool_use_id` = the
 * item id); the script forwards it over a Unix socket (in a private 0700 directory, named by the
 * CODEX_TURN_HOOK_RELAY environment variable Codex passes to hooks) and exits 2 with the host's reason to block.
 * Codex then tells the model "Command blocked by PreToolUse hook: <reason>" and runs nothing.
 *
 * The same command is Codex's `Stop` hook (the agent's natural final answer): the turn's `beforeFinalize` may ask for
 * one more model pass (block with a reason, which Codex sends as a `hookPrompt` user message). A tool call the relay
 * cannot settle is blocked (fail closed); a `Stop` it cannot settle ends the turn (blocking would loop).
 *
 * Codex runs a configured hook only once it is trusted: `hooks.state."<key>".trusted_hash` must equal the hook's
 * current hash. The spawn computes it ({@link computeRelayTrust}) and checks with `hooks/list` that Codex agrees; if a
 * Codex version hashes differently, it learns the hash there and restarts the app-server once with it (ours alone:
 * hooks of the user's own config keep their own trust).
 */
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { removeOnExit } from "../temp-dirs.js";

/** The environment variable naming the relay socket (set on the app-server, inherited by its hooks). */
export const HOOK_RELAY_ENV = "CODEX_TURN_HOOK_RELAY";

/** Bound Codex puts on one hook run, seconds (the host's own bound, `toolInterceptorTimeoutMs`, comes first). */
const HOOK_TIMEOUT_SEC = 900;

/** A native tool call as Codex's `PreToolUse` hook describes it. */
export const preToolUseSchema = z.object({
  hook_event_name: z.literal("PreToolUse"),
  session_id: z.string().min(1),
  turn_id: z.string().nullish(),
  tool_name: z.string().min(1),
  tool_input: z.unknown(),
  tool_use_id: z.string().min(1),
  /** The thread's working directory (where the call runs unless the command names another). */
  cwd: z.string().nullish(),
});
export type PreToolUse = z.infer<typeof preToolUseSchema>;

/**
 * The agent's natural final answer, as Codex's `Stop` hook describes it; `stop_hook_active` once the turn already
 * continued because of a `Stop` hook. Blocking it makes Codex run one more model pass with the reason as a prompt.
 */
export const stopSchema = z.object({
  hook_event_name: z.literal("Stop"),
  session_id: z.string().min(1),
  turn_id: z.string().nullish(),
  stop_hook_active: z.boolean().default(false),
  last_assistant_message: z.string().nullish(),
  /** Codex's own record of the thread (its rollout file), as its hook input names it. */
  transcript_path: z.string().nullish(),
});
export type StopHookCall = z.infer<typeof stopSchema>;

/** A hook call the relay carries. */
export const relayedHookSchema = z.discriminatedUnion("hook_event_name", [preToolUseSchema, stopSchema]);
export type RelayedHook = z.infer<typeof relayedHookSchema>;

/** The host's answer: allow (the tool runs; the turn ends), or block with a reason (no run; one more model pass). */
export type PreToolUseDecision = { decision: "allow" } | { decision: "block"; reason: string };

/** The namespace Codex 0.169.0 puts its sub-agent tools in; the hook names them `multi_agent_v1wait_agent`, ... */
const MULTI_AGENT_NAMESPACE = "multi_agent_v1";

/**
 * Our transcript's name of a native tool as the hook names it: `shell`, `apply_patch`, `mcp:<server>/<tool>`,
 * `spawn_agent` / `wait_agent` / ... (what the `toolCall` parts and `ToolCallHookEvent.toolName` say for the same call).
 *
 * @example
 * ```ts
 * nativeToolName("Bash"); // "shell"
 * nativeToolName("mcp__echo__say"); // "mcp:echo/say"
 * nativeToolName("multi_agent_v1wait_agent"); // "wait_agent"
 * ```
 */
export function nativeToolName(hookToolName: string): string {
  if (hookToolName === "Bash") return "shell";
  const mcp = /^mcp__(.+?)__(.+)$/.exec(hookToolName);
  if (mcp) return `mcp:${mcp[1]}/${mcp[2]}`;
  if (hookToolName.startsWith(MULTI_AGENT_NAMESPACE) && hookToolName.length > MULTI_AGENT_NAMESPACE.length) return hookToolName.slice(MULTI_AGENT_NAMESPACE.length);
  return hookToolName;
}

/** The relay script shipped in the package's bin/ (found from this module in src/ and in dist/src/ alike). */
export function hookRelayScript(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = path.join(dir, "bin", "codex-turn-hook-relay.mjs");
    if (existsSync(candidate)) return candidate;
    dir = path.dirname(dir);
  }
  throw new Error("bin/codex-turn-hook-relay.mjs not found next to the package");
}

/** POSIX shell single-quoting (Codex runs a hook command through the shell). */
const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** The hook command: this Node running the relay script. Constant per installation, so its trust hash is too. */
export function hookRelayCommand(): string {
  return `${shellQuote(process.execPath)} ${shellQuote(hookRelayScript())}`;
}

/** The hook events the relay carries (Codex's config names), each trusted separately. */
export const RELAYED_HOOK_EVENTS = ["PreToolUse", "Stop"] as const;

/** Codex's key label of each relayed event (in hook keys and in the trust hash). */
const EVENT_LABELS: Record<(typeof RELAYED_HOOK_EVENTS)[number], string> = { PreToolUse: "pre_tool_use", Stop: "stop" };

/** Our handler, every field spelled out: Codex hashes the handler with its defaults filled in. */
const relayHandler = (command: string) => ({ type: "command", command, timeout: HOOK_TIMEOUT_SEC, async: false });

/** JSON with object keys sorted at every level (Codex's canonical form for hook hashes). */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.keys(value as Record<string, unknown>)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value);
}

/**
 * The trust Codex needs for our hooks, computed as Codex computes a hook's hash (observed with 0.169.0, as OpenClaw's
 * relay does): sha256 of the canonical JSON of `{ event_name, hooks: [handler] }` (no matcher: we match every tool),
 * keyed `/<session-flags>/config.toml:<event>:<group index>:0`, our group coming after the user's own session-flag
 * groups. The spawn checks it with `hooks/list` and falls back to learning it there.
 */
export function computeRelayTrust(config: Record<string, unknown>, command: string): Array<{ key: string; hash: string }> {
  const hooks = (config.hooks as Record<string, unknown> | undefined) ?? {};
  return RELAYED_HOOK_EVENTS.map((event) => {
    const label = EVENT_LABELS[event];
    const index = Array.isArray(hooks[event]) ? (hooks[event] as unknown[]).length : 0;
    const digest = createHash("sha256").update(canonicalJson({ event_name: label, hooks: [relayHandler(command)] })).digest("hex");
    return { key: `/<session-flags>/config.toml:${label}:${index}:0`, hash: `sha256:${digest}` };
  });
}

/** `config` with our hook group appended to each relayed event (and, when known, their trust). Neither input changes. */
export function withRelayHook(config: Record<string, unknown>, command: string, trust: ReadonlyArray<{ key: string; hash: string }> = []): Record<string, unknown> {
  const hooks = { ...((config.hooks as Record<string, unknown> | undefined) ?? {}) };
  for (const event of RELAYED_HOOK_EVENTS) {
    const groups = Array.isArray(hooks[event]) ? [...(hooks[event] as unknown[])] : [];
    groups.push({ hooks: [relayHandler(command)] });
    hooks[event] = groups;
  }
  if (trust.length > 0) {
    const state = { ...((hooks.state as Record<string, unknown> | undefined) ?? {}) };
    for (const t of trust) state[t.key] = { trusted_hash: t.hash };
    hooks.state = state;
  }
  return { ...config, hooks };
}

const hooksListSchema = z.object({
  data: z.array(z.object({ hooks: z.array(z.object({ key: z.string(), eventName: z.string(), command: z.string().optional(), currentHash: z.string(), trustStatus: z.string() }).passthrough()) }).passthrough()),
});

/** One of our hooks in a `hooks/list` answer: its key, hash and trust. */
export interface RelayHookEntry {
  key: string;
  hash: string;
  trusted: boolean;
}

/**
 * Our hooks in a `hooks/list` answer (one per relayed event, by command); undefined unless Codex loaded all of them.
 */
export function findRelayHooks(listed: unknown, command: string): RelayHookEntry[] | undefined {
  const parsed = hooksListSchema.safeParse(listed);
  if (!parsed.success) return undefined;
  const ours = parsed.data.data.flatMap((entry) => entry.hooks).filter((h) => h.command === command);
  const found: RelayHookEntry[] = [];
  for (const event of RELAYED_HOOK_EVENTS) {
    const name = `${event[0]!.toLowerCase()}${event.slice(1)}`;
    const hook = ours.find((h) => h.eventName === name);
    if (!hook) return undefined;
    found.push({ key: hook.key, hash: hook.currentHash, trusted: hook.trustStatus === "trusted" });
  }
  return found;
}

/** Trust learned per hook definition (the JSON of the hooks config), so later spawns start trusted at once. */
const learnedTrust = new Map<string, ReadonlyArray<{ key: string; hash: string }>>();

/** The trust learned for `hooksConfig` in this process, if any. */
export function learnedRelayTrust(hooksConfig: unknown): ReadonlyArray<{ key: string; hash: string }> | undefined {
  return learnedTrust.get(JSON.stringify(hooksConfig));
}

/** Remember the trust of `hooksConfig`. */
export function rememberRelayTrust(hooksConfig: unknown, trust: ReadonlyArray<{ key: string; hash: string }>): void {
  learnedTrust.set(JSON.stringify(hooksConfig), trust);
}

/** A running relay: the socket Codex's hook command talks to. */
export interface HookRelay {
  readonly socketPath: string;
  close(): Promise<void>;
}

/**
 * Listen on a fresh Unix socket in a private directory; each connection carries one hook call (a JSON line) and gets
 * one decision (a JSON line). A malformed call is blocked (the relay fails closed, like the script).
 */
export async function startHookRelay(decide: (call: RelayedHook) => Promise<PreToolUseDecision>): Promise<HookRelay> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "ctm-hooks-"));
  const untrack = removeOnExit(dir);
  const closeRelayDir = () => {
    untrack();
    rmSync(dir, { recursive: true, force: true });
  };
  const socketPath = path.join(dir, "relay.sock");
  // Open hook connections, ended at close(): a hook still waiting for a decision must not hold the close up.
  const open = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    open.add(socket);
    socket.on("close", () => open.delete(socket));
    let buffer = "";
    socket.setEncoding("utf8");
    socket.on("error", () => socket.destroy());
    socket.on("data", (chunk: string) => {
      buffer += chunk;
      const nl = buffer.indexOf("\n");
      if (nl < 0) return;
      socket.removeAllListeners("data");
      void answer(buffer.slice(0, nl)).then((reply) => socket.end(`${JSON.stringify(reply)}\n`));
    });
  });
  const answer = async (line: string): Promise<PreToolUseDecision> => {
    let raw: unknown;
    try {
      const envelope = JSON.parse(line) as { hook?: unknown };
      raw = typeof envelope.hook === "string" ? JSON.parse(envelope.hook) : undefined;
    } catch {
      raw = undefined;
    }
    // Fail closed for a tool call (it does not run); a Stop we cannot settle ends the turn (blocking it would loop).
    const isStop = (raw as { hook_event_name?: unknown } | null | undefined)?.hook_event_name === "Stop";
    const call = relayedHookSchema.safeParse(raw);
    if (!call.success) return isStop ? { decision: "allow" } : { decision: "block", reason: "codex-turn: malformed hook input" };
    try {
      return await decide(call.data);
    } catch {
      // Never leave the hook waiting (Codex would wait for its timeout).
      return isStop ? { decision: "allow" } : { decision: "block", reason: "codex-turn: the host failed to decide" };
    }
  };
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => resolve());
  }).catch((err: unknown) => {
    closeRelayDir();
    throw err;
  });
  return {
    socketPath,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of open) socket.destroy();
        closeRelayDir();
      }),
  };
}
