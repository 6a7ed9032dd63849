/**
 * The app-server a command runs against: the offline fake model (`--offline`) or the user's own Codex setup.
 */
import { mkdir, stat, writeFile } from "node:fs/promises";
import { readRegularTextFile } from "../regular-file.js";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { CodexAppServer } from "../codex/app-server.js";
import { CodexAppServerError } from "../codex/errors.js";
import type { CodexConfigWarning } from "../codex/config-warnings.js";
import { startOfflineCodex } from "../testing/offline-codex.js";
import type { FakeReply, FakeResponsesServer } from "../testing/fake-responses-server.js";
import { envError, usageError } from "./errors.js";

/**
 * The CODEX_HOME a non-offline command runs codex with: `$CODEX_HOME` when set and non-empty (Codex ignores an empty
 * one too), else Codex's own default `~/.codex`, so the user's `codex login` and config.toml are used. Never a
 * temporary directory.
 *
 * @example
 * ```ts
 * resolveCodexHome({}, os.homedir); // { home: path.join(os.homedir(), ".codex"), source: "default" }
 * ```
 */
export function resolveCodexHome(
  env: NodeJS.ProcessEnv = process.env,
  homedir: () => string = os.homedir,
): { home: string; source: "CODEX_HOME" | "default" } {
  const fromEnv = env.CODEX_HOME;
  if (fromEnv !== undefined && fromEnv !== "") return { home: fromEnv, source: "CODEX_HOME" };
  return { home: path.join(homedir(), ".codex"), source: "default" };
}

/**
 * `CodexAppServer.spawn` options of a non-offline command (the user's own Codex setup).
 *
 * @example
 * ```ts
 * await CodexAppServer.spawn(liveCodexSpawnOptions());
 * ```
 */
export function liveCodexSpawnOptions(env: NodeJS.ProcessEnv = process.env, homedir: () => string = os.homedir) {
  return { codexHome: resolveCodexHome(env, homedir).home, passEnv: ["OPENAI_API_KEY"] };
}

/**
 * How the CLI shows one of Codex's setup warnings on stderr: the summary, where (file and line), then Codex's details
 * indented. The details may quote the user's own file; they go to the user's terminal, never to a log.
 *
 * @example
 * ```ts
 * configWarningText({ kind: "config", summary: "Error parsing rules; custom rules not applied.", path: "/h/rules/default.rules",
 *   range: { start: { line: 2, column: 1 }, end: { line: 2, column: 5 } } });
 * // "codex warning: Error parsing rules; custom rules not applied. (/h/rules/default.rules:2)\n"
 * ```
 */
export function configWarningText(w: CodexConfigWarning): string {
  const where = w.path ? ` (${w.path}${w.range ? `:${w.range.start.line}` : ""})` : "";
  const label = w.kind === "deprecation" ? "codex deprecation" : "codex warning";
  const details = w.details ? `${w.details.replace(/\s+$/, "").replace(/^/gm, "  ")}\n` : "";
  return `${label}: ${w.summary}${where}\n${details}`;
}

/** A started app-server and how to stop it. `fake` is the offline model, when offline. */
export interface CliServer {
  codex: CodexAppServer;
  fake: FakeResponsesServer | undefined;
  dispose(): Promise<void>;
}

// A subset of FakeReply that a JSON file can script: enough to slow the offline model for a steer or Ctrl-C.
const offlineScriptSchema = z.array(
  z
    .object({
      text: z.union([z.string(), z.array(z.string())]).optional(),
      delayMs: z.number().int().min(0).max(60_000).optional(),
      holdOpenMs: z.number().int().min(0).max(600_000).optional(),
      /** A tool call of the model (e.g. Codex's `exec_command`): the offline Codex then offers its built-in tools. */
      functionCall: z
        .object({
          name: z.string().min(1),
          arguments: z.record(z.string(), z.unknown()),
          namespace: z.string().min(1).optional(),
          callId: z.string().min(1).optional(),
        })
        .strict()
        .optional(),
      /** The model that answered (the `openai-model` header): another than asked makes Codex report a reroute. */
      answeredBy: z.string().min(1).optional(),
      /** The token usage the reply reports (e.g. a full context window, to make the accordion compaction due). */
      usage: z
        .object({ input_tokens: z.number().int().min(0).optional(), output_tokens: z.number().int().min(0).optional(), total_tokens: z.number().int().min(0).optional() })
        .strict()
        .optional(),
    })
    .strict(),
);

/**
 * Reads `--offline-script FILE`: a JSON array of fake replies (`{ text?, delayMs?, holdOpenMs?, functionCall?, answeredBy?, usage? }`) queued
 * for the offline model, one per model request, before it falls back to "offline reply". For tests and demos.
 */
async function readOfflineScript(file: string): Promise<FakeReply[]> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readRegularTextFile(file));
  } catch (err) {
    throw envError(`--offline-script ${file}: cannot read JSON: ${(err as Error).message}`);
  }
  const parsed = offlineScriptSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw usageError(`--offline-script ${file}: ${issue?.path.join(".") || "(root)"}: ${issue?.message ?? "invalid"}`);
  }
  return parsed.data;
}

/**
 * `--offline-requests FILE`: every request the offline model received, one JSON line each (`index`, `requestKind`,
 * `body`), written when the command ends; tests read what the model was sent (a tool's output, an answer) from it.
 */
async function writeOfflineRequests(fake: FakeResponsesServer, file: string): Promise<void> {
  const lines = fake.requests.map((r) => JSON.stringify({ index: r.index, requestKind: r.requestKind, body: r.body }));
  await writeFile(file, lines.map((l) => `${l}\n`).join(""));
}

async function startOffline(scriptFile: string | undefined, nativeToolHooks: boolean, requestsFile: string | undefined): Promise<CliServer> {
  const script = scriptFile === undefined ? [] : await readOfflineScript(scriptFile);
  let env;
  try {
    // Lean (small requests, no built-in tools) unless the script has the model call tools, which need Codex's own.
    // The fake model takes images (`run --image`), so its catalog entry says so; Codex would replace them otherwise.
    env = await startOfflineCodex({
      offline: { lean: !script.some((reply) => reply.functionCall !== undefined), inputModalities: ["text", "image"] },
      ...(nativeToolHooks ? { codex: { nativeToolHooks } } : {}),
    });
  } catch (err) {
    throw envError(`cannot start the offline codex app-server: ${(err as Error).message}`);
  }
  env.fake.setDefault({ text: "offline reply" });
  if (script.length > 0) env.fake.enqueue(script);
  const started = env;
  const dispose = async () => {
    if (requestsFile !== undefined) await writeOfflineRequests(started.fake, requestsFile).catch(() => undefined);
    await started.dispose();
  };
  return { codex: env.codex, fake: env.fake, dispose };
}

async function checkCodexHome(): Promise<string> {
  const { home, source } = resolveCodexHome();
  try {
    // Codex refuses a CODEX_HOME that does not exist; its default ~/.codex it would create itself, so create that one.
    if (source === "default") await mkdir(home, { recursive: true });
    else if (!(await stat(home)).isDirectory()) throw new Error("not a directory");
  } catch (err) {
    const origin = source === "default" ? "default ~/.codex" : "from $CODEX_HOME";
    throw envError(`CODEX_HOME ${home} (${origin}) is not usable: ${(err as Error).message}`);
  }
  return home;
}

/**
 * Starts the app-server of a command: offline (fake model, optionally scripted) or live (the user's CODEX_HOME).
 *
 * @example
 * ```ts
 * const server = await startServer({ offline: true });
 * try { ... } finally { await server.dispose(); }
 * ```
 */
export async function startServer(options: { offline: boolean; offlineScript?: string | undefined; offlineRequests?: string | undefined; nativeToolHooks?: boolean | undefined }): Promise<CliServer> {
  const nativeToolHooks = options.nativeToolHooks === true;
  if (options.offline) return startOffline(options.offlineScript, nativeToolHooks, options.offlineRequests);
  const home = await checkCodexHome();
  let codex: CodexAppServer | undefined;
  try {
    // The user's own setup: what Codex could not use in it (a rules file, a config value) is theirs to fix, so it is
    // shown. Offline runs use a temporary home this CLI configures, so their warnings are only the machine's.
    const onConfigWarning = (w: CodexConfigWarning) => void process.stderr.write(configWarningText(w));
    codex = await CodexAppServer.spawn({ ...liveCodexSpawnOptions(), nativeToolHooks, onConfigWarning });
    // The live preflight, before any engine or turn: no login and no key fails here, in milliseconds (exit 3).
    await codex.requireAccount();
    const started = codex;
    return { codex: started, fake: undefined, dispose: () => started.close() };
  } catch (err) {
    await codex?.close().catch(() => undefined);
    if (err instanceof CodexAppServerError && err.code === "AUTH_REQUIRED") throw envError(err.message, "AUTH_REQUIRED");
    throw envError(`cannot start codex app-server (CODEX_HOME ${home}): ${(err as Error).message}`);
  }
}
