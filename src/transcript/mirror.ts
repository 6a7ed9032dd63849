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
 *
 * Entry types follow pi: a `custom` message (e.g. `codex.plan`) becomes a `custom_message` entry (`customType`,
 * `content`, `display`, `details`), which pi's `buildSessionContext` turns back into the same `custom` message;
 * everything else (user, assistant with text / thinking / toolCall parts, toolResult) a `message` entry.
 */
import path from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import type { AgentMessage } from "../context-engine/types.js";
import { silentLogger } from "../log/logger.js";
import { SessionFileError } from "./errors.js";
import { withSessionLock, withSessionLockUnlessHeld, type SessionLockOptions } from "./lock.js";
import { resolveSessionPath } from "./resolve.js";
import { mirrorKey, type NewSessionEntry } from "./entries.js";
import { openSessionFile } from "./writer.js";

/** Parameters of {@link mirrorTurnToTranscript}. */
export interface MirrorTurnParams {
  sessionFile: string;
  sessionId: string;
  /** Header cwd when the file is created. */
  cwd?: string | undefined;
  threadId: string;
  turnId: string;
  /** The turn's `messagesSnapshot`: the ORIGINAL user prompt first, then what the turn produced. */
  messages: readonly AgentMessage[];
  sessionRoot?: string | undefined;
  logger?: Logger | undefined;
  /**
   * true: the caller holds the session lock, do not take it. false: always take it (throws SESSION_LOCK_REENTRANT if
   * this call chain holds it). Omitted: take it unless this async context is known to hold it. Callers inside a held
   * lock should pass true: from event callbacks the holding context is not always visible (see `lock.ts`).
   */
  locked?: boolean | undefined;
  /** Options for acquiring the lock (ignored when it is not taken here). */
  lock?: Omit<SessionLockOptions, "logger"> | undefined;
  /** An existing header naming another session id: "warn" (default) or "throw" `SESSION_ID_MISMATCH`, nothing appended. */
  onSessionIdMismatch?: "warn" | "throw" | undefined;
  /** Fsynced at the same moment as the append (see `AppendOptions.syncAlongside`); runs even when nothing is new. */
  syncAlongside?: (() => Promise<void>) | undefined;
  /**
   * The host's request mark (`requestId` and the attempt's status), written on the prompt's entry (the first message,
   * when it is the user's prompt) as a top-level `request` field, as `idempotencyKey` is.
   */
  request?: { id: string; status: string; cut?: boolean | undefined } | undefined;
}

/** What {@link mirrorTurnToTranscript} did. */
export interface MirrorTurnResult {
  /** Entries written by this call. */
  appended: number;
  /** Messages whose key was already in the file. */
  skipped: number;
  /** Entry id of every message of the turn, in snapshot order (existing ids for skipped ones). */
  entryIds: string[];
  /** The transcript's last entry and entry count after this call (absent for an empty snapshot: the file is not opened). */
  lastEntryId?: string | undefined;
  entryCount?: number | undefined;
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
  onSessionIdMismatch: z.enum(["warn", "throw"]).optional(),
  syncAlongside: z.any().optional(),
  request: z.object({ id: z.string().min(1).max(200), status: z.string().min(1), cut: z.boolean().optional() }).optional(),
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

const customMessageSchema = z.looseObject({
  role: z.literal("custom"),
  customType: z.string().min(1),
  content: z.union([z.string(), z.array(z.unknown())]),
  display: z.boolean().optional(),
  timestamp: z.number().optional(),
});

/**
 * The entry a message is mirrored as: a well-formed `custom` message as pi's `custom_message` entry (as pi's
 * `appendCustomMessageEntry` writes it), anything else as a `message` entry.
 *
 * @example
 * ```ts
 * mirrorEntryFor({ role: "custom", customType: "codex.plan", content: "1. read", display: true, timestamp: 1 }, key);
 * // { type: "custom_message", idempotencyKey: key, customType: "codex.plan", content: "1. read", display: true, timestamp: "1970-..." }
 * ```
 */
/**
 * The entry with the host's request mark when it is the turn's prompt entry (the first message, when it is the user's
 * prompt: its key ends in `:prompt`), else the entry as it is. Every store writes the mark the same way.
 *
 * @example
 * ```ts
 * withRequestMark(mirrorEntryFor(prompt, key), { id: "req-1", status: "completed" }, 0, key).request; // { id: "req-1", status: "completed" }
 * ```
 */
export function withRequestMark(
  entry: NewSessionEntry,
  request: { id: string; status: string; cut?: boolean | undefined } | undefined,
  index: number,
  key: string,
): NewSessionEntry {
  if (!request || index !== 0 || !key.endsWith(":prompt")) return entry;
  return { ...entry, request: { id: request.id, status: request.status, ...(request.cut ? { cut: true } : {}) } } as NewSessionEntry;
}

export function mirrorEntryFor(message: AgentMessage, idempotencyKey: string): NewSessionEntry {
  // Only a `custom` message can match (and a failed zod parse is costly: it builds an error with its issues).
  if ((message as { role?: unknown }).role !== "custom") return { type: "message", idempotencyKey, message };
  const custom = customMessageSchema.safeParse(message);
  if (!custom.success) return { type: "message", idempotencyKey, message };
  const m = message as { customType: string; content: unknown; display?: boolean | undefined; details?: unknown; timestamp?: number | undefined };
  const at = typeof m.timestamp === "number" && Number.isFinite(m.timestamp) ? new Date(m.timestamp).toISOString() : undefined;
  return {
    type: "custom_message",
    idempotencyKey,
    customType: m.customType,
    content: m.content,
    // Kept as given (pi always writes a boolean; an absent one reads back absent, as the engine saw it).
    ...(m.display !== undefined ? { display: m.display } : {}),
    ...(m.details !== undefined ? { details: m.details } : {}),
    ...(at !== undefined ? { timestamp: at } : {}),
  };
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
  return mirrorValidatedTurn(params);
}

/**
 * {@link mirrorTurnToTranscript} for parameters the caller built from already-validated data (the session store
 * mirroring a turn record): the same write, without validating the parameters again on the turn's critical path.
 */
export async function mirrorValidatedTurn(params: MirrorTurnParams): Promise<MirrorTurnResult> {
  const logger: Logger = params.logger ?? silentLogger;
  const { sessionFile, sessionId, threadId, turnId, messages } = params;
  const keys = mirrorKeysForTurn(threadId, turnId, messages);

  const run = async (): Promise<MirrorTurnResult> => {
    const writer = await openSessionFile(sessionFile, {
      sessionId,
      ...(params.cwd !== undefined ? { cwd: params.cwd } : {}),
      ...(params.sessionRoot !== undefined ? { sessionRoot: params.sessionRoot } : {}),
      ...(params.onSessionIdMismatch !== undefined ? { onSessionIdMismatch: params.onSessionIdMismatch } : {}),
      logger,
    });
    const fresh: number[] = [];
    keys.forEach((k, i) => {
      if (!writer.hasKey(k)) fresh.push(i);
    });
    const request = params.request;
    const written = await writer.append(
      fresh.map((i) => {
        return withRequestMark(mirrorEntryFor(messages[i]!, keys[i]!), request, i, keys[i]!);
      }),
      params.syncAlongside ? { syncAlongside: params.syncAlongside } : {},
    );
    const entryIds = keys.map((k) => writer.entryIdForKey(k) ?? "");
    const result: MirrorTurnResult = {
      appended: written.length,
      skipped: keys.length - fresh.length,
      entryIds,
      ...(writer.lastEntryId !== null ? { lastEntryId: writer.lastEntryId } : {}),
      entryCount: writer.entryCount,
    };
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
