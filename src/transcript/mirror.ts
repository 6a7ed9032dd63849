/**
 * Mirror one Codex turn into the pi session transcript, idempotently.
 *
 * Each message gets the key `codex-app-server:<threadId>:<turnId>:<kind>`; a key already in the file is skipped, so
 * a retried mirror (after a crash, a timeout, a re-run of the mirror state) never duplicates a message. Kinds:
 * `prompt` (the first message, when it is the user's original prompt), `reasoning` (an assistant message with only
 * thinking parts), `assistant` (an assistant message with text), `tool-call-<callId>` (an assistant message carrying
 * tool calls, named by its first call), `tool-result-<callId>`, and `message-<index>` for anything else or for a
 * second message that would repeat a kind already used in this turn. Kinds depend only on the snapshot, so the
 * same snapshot always yields the same keys and the same entry ids.
 */
import path from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import type { AgentMessage } from "../context-engine/types.js";
import { silentLogger } from "../log/logger.js";
import { SessionFileError } from "./errors.js";
import { withSessionLock, withSessionLockUnlessHeld, type SessionLockOptions } from "./lock.js";
import { resolveSessionPath } from "./resolve.js";
import { mirrorKey, openSessionFile } from "./session-file.js";

/** Parameters of {@link mirrorTurnToTranscript}. */
export interface MirrorTurnParams {
  sessionFile: string;
  sessionId: string;
  /** Header cwd when the file is created. */
  cwd?: string;
  threadId: string;
  turnId: string;
  /** The turn's `messagesSnapshot`: the ORIGINAL user prompt first, then what the turn produced. */
  messages: AgentMessage[];
  sessionRoot?: string;
  logger?: Logger;
  /**
   * true: the caller holds the session lock, do not take it. false: always take it (throws SESSION_LOCK_REENTRANT if
   * this call chain holds it). Omitted: take it unless this async context is known to hold it. Callers inside a held
   * lock should pass true: from event callbacks the holding context is not always visible (see `lock.ts`).
   */
  locked?: boolean;
  /** Options for acquiring the lock (ignored when it is not taken here). */
  lock?: Omit<SessionLockOptions, "logger">;
}

/** What {@link mirrorTurnToTranscript} did. */
export interface MirrorTurnResult {
  /** Entries written by this call. */
  appended: number;
  /** Messages whose key was already in the file. */
  skipped: number;
  /** Entry id of every message of the turn, in snapshot order (existing ids for skipped ones). */
  entryIds: string[];
}

const idPart = z
  .string()
  .min(1)
  .refine((s) => !s.includes(":"), "must not contain ':' (it separates the parts of an idempotency key)");

const ParamsSchema = z.object({
  sessionFile: z.string().min(1),
  sessionId: z.string().min(1),
  cwd: z.string().min(1).optional(),
  threadId: idPart,
  turnId: idPart,
  messages: z.array(z.looseObject({ role: z.string().min(1) })),
  sessionRoot: z.string().min(1).optional(),
  logger: z.any().optional(),
  locked: z.boolean().optional(),
  lock: z.any().optional(),
});

function partsOf(m: AgentMessage): Array<Record<string, unknown>> {
  const content = (m as { content?: unknown }).content;
  return Array.isArray(content) ? content.filter((p): p is Record<string, unknown> => !!p && typeof p === "object") : [];
}

function baseKind(m: AgentMessage, index: number): string {
  if (index === 0 && m.role === "user") return "prompt";
  if (m.role === "assistant") {
    const parts = partsOf(m);
    const call = parts.find((p) => (p.type === "toolCall" || p.type === "tool_use") && typeof p.id === "string" && p.id.length > 0);
    if (call) return `tool-call-${call.id as string}`;
    if (parts.some((p) => p.type === "text")) return "assistant";
    if (parts.length > 0 && parts.every((p) => p.type === "thinking")) return "reasoning";
    return "assistant";
  }
  if (m.role === "toolResult") {
    const id = (m as { toolCallId?: unknown }).toolCallId;
    if (typeof id === "string" && id.length > 0) return `tool-result-${id}`;
  }
  return `message-${index}`;
}

/**
 * The idempotency keys the mirror uses for a turn's messages (exported so callers and tests can predict them).
 *
 * @example
 * ```ts
 * mirrorKeysForTurn("thr", "turn", [prompt, answer]);
 * // ["codex-app-server:thr:turn:prompt", "codex-app-server:thr:turn:assistant"]
 * ```
 */
export function mirrorKeysForTurn(threadId: string, turnId: string, messages: readonly AgentMessage[]): string[] {
  const used = new Set<string>();
  return messages.map((m, i) => {
    let kind = baseKind(m, i);
    if (used.has(kind)) kind = `message-${i}`;
    used.add(kind);
    return mirrorKey(threadId, turnId, kind);
  });
}

/**
 * Append this turn's messages to the transcript (skipping those already there): one O_APPEND write, then fsync,
 * before returning. Creates the file and its header when missing. Takes the session lock unless told otherwise.
 *
 * @example
 * ```ts
 * const { appended, skipped } = await mirrorTurnToTranscript({
 *   sessionFile: "/data/s1.jsonl", sessionId: "s1", threadId: record.threadId, turnId: record.turnId,
 *   messages: record.messagesSnapshot,
 * });
 * ```
 */
export async function mirrorTurnToTranscript(params: MirrorTurnParams): Promise<MirrorTurnResult> {
  const parsed = ParamsSchema.safeParse(params);
  if (!parsed.success) {
    const file = typeof params?.sessionFile === "string" ? params.sessionFile : "(unknown)";
    throw new SessionFileError(
      "SESSION_INVALID_ARGUMENT",
      file,
      `invalid mirror parameters for session ${file}: ${parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ")}`,
    );
  }
  const logger: Logger = params.logger ?? silentLogger;
  const { sessionFile, sessionId, threadId, turnId, messages } = params;
  const keys = mirrorKeysForTurn(threadId, turnId, messages);

  const run = async (): Promise<MirrorTurnResult> => {
    const writer = await openSessionFile(sessionFile, {
      sessionId,
      ...(params.cwd !== undefined ? { cwd: params.cwd } : {}),
      ...(params.sessionRoot !== undefined ? { sessionRoot: params.sessionRoot } : {}),
      logger,
    });
    const fresh: number[] = [];
    keys.forEach((k, i) => {
      if (!writer.hasKey(k)) fresh.push(i);
    });
    const written =
      fresh.length === 0
        ? []
        : await writer.append(fresh.map((i) => ({ type: "message", idempotencyKey: keys[i]!, message: messages[i]! })));
    const entryIds = keys.map((k) => writer.entryIdForKey(k) ?? "");
    const result: MirrorTurnResult = { appended: written.length, skipped: keys.length - fresh.length, entryIds };
    logger.info(
      {
        event: "transcript.mirror",
        sessionId,
        sessionFile: path.basename(writer.path),
        threadId,
        turnId,
        messages: keys.length,
        appended: result.appended,
        skipped: result.skipped,
      },
      "turn mirrored to transcript",
    );
    return result;
  };

  if (messages.length === 0) return { appended: 0, skipped: 0, entryIds: [] };
  // Check the root before locking: taking the lock creates the session's directory.
  if (params.sessionRoot !== undefined) await resolveSessionPath(sessionFile, params.sessionRoot);
  const lockOpts: SessionLockOptions = { ...(params.lock ?? {}), logger };
  if (params.locked === true) return run();
  if (params.locked === false) return withSessionLock(sessionFile, run, lockOpts);
  return withSessionLockUnlessHeld(sessionFile, run, lockOpts);
}
