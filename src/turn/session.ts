/**
 * A session object over `runCodexTurn` / `startCodexTurn`: the parameters every turn of one session shares
 * (`appServer`, `sessionFile`, `contextEngine`, ...) given once, then `run(prompt)` / `start(prompt)` per turn, as the
 * Codex SDK's `thread.run()`.
 */
import path from "node:path";
import { parseCodexTurnParams, type CodexTurnResult } from "../params.js";
import type { CodexTurnParams } from "../turn-params.js";
import { startCodexTurn, type CodexTurnHandle } from "./index.js";

/**
 * What every turn of the session shares: the turn parameters without `prompt` (and the per-turn `images`, `signal`,
 * `runId`); `sessionId` defaults to the session file's base name without extension (as the CLI names sessions).
 */
export type CodexSessionOptions = Omit<CodexTurnParams, "prompt" | "sessionId" | "images" | "signal" | "runId"> & {
  /** The session's id; default: the session file's base name without its extension (`/data/s1.jsonl` -> `s1`). */
  sessionId?: string | undefined;
};

/** Per-turn parameters: the turn's own (`images`, `signal`, `runId`) and any shared one overridden for this turn. */
export type CodexSessionTurnOptions = Partial<Omit<CodexTurnParams, "appServer" | "sessionId" | "sessionFile" | "store" | "prompt">>;

/** One session: its turns share the options it was created with. */
export interface CodexSession {
  readonly sessionId: string;
  readonly sessionFile: string;
  /**
   * Run one turn and resolve with its result (a failed turn resolves too: check `result.status`).
   *
   * @example
   * ```ts
   * const result = await session.run("What changed since yesterday?");
   * ```
   */
  run(prompt: string, options?: CodexSessionTurnOptions): Promise<CodexTurnResult>;
  /**
   * Start one turn and return its handle (`events`, `steer`, `abort`, `result`).
   *
   * @example
   * ```ts
   * const turn = session.start("Count to twenty");
   * for await (const e of turn.events) if (e.type === "agentMessageDelta") process.stdout.write(e.delta);
   * ```
   */
  start(prompt: string, options?: CodexSessionTurnOptions): CodexTurnHandle;
}

/**
 * Create a session object. The options are checked at once (a bad one throws `CodexTurnParamsError` naming it);
 * each turn checks its own. Turns of one session run one at a time (the session lock refuses a second writer).
 *
 * @example
 * ```ts
 * const session = createCodexSession({
 *   appServer,
 *   sessionFile: "/data/sessions/s1.jsonl",
 *   contextEngine: createWindowEngine({ tokenBudget: 16_000 }),
 *   contextTokenBudget: 16_000,
 * });
 * const first = await session.run("Hello");
 * const second = await session.run("And now?", { model: "gpt-5.5" });
 * ```
 */
export function createCodexSession(options: CodexSessionOptions): CodexSession {
  const sessionFile = options.sessionFile ?? options.store?.sessionFile;
  // A store knows its session's id; a file's is its base name.
  const sessionId = options.sessionId ?? options.store?.sessionId ?? (typeof sessionFile === "string" ? path.basename(sessionFile, path.extname(sessionFile)) : "");
  const shared: Omit<CodexTurnParams, "prompt"> = { ...options, sessionId };
  // Checked once here, with a stand-in prompt, so a bad option fails before the first turn.
  parseCodexTurnParams({ ...shared, prompt: "(session options check)" });
  const start = (prompt: string, turn: CodexSessionTurnOptions = {}): CodexTurnHandle => startCodexTurn({ ...shared, ...turn, prompt });
  return {
    sessionId,
    // Checked above: a string (the given one, or the store's).
    sessionFile: sessionFile as string,
    start,
    run: (prompt, turn) => start(prompt, turn).result,
  };
}
