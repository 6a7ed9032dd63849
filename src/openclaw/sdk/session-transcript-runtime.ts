/**
 * Our `openclaw/plugin-sdk/session-transcript-runtime`: a session's visible transcript for engines that reconcile
 * against it (lossless-claw 1.x reads it in `bootstrap` and before it persists a turn in `afterTurn`; without it, it
 * "fails closed" and stores nothing). The target is resolved through the sessions this process serves
 * (`src/store/session-directory.ts`: by `storePath`, then `sessionKey`, then `sessionId`); a `storePath` naming a
 * session file this process has not served yet is read as a pi JSONL session.
 */
import { z } from "zod";
import { findSessionStore } from "../../store/session-directory.js";
import type { VisibleTranscriptEntry } from "../../store/session-store.js";
import { readVisibleEntries } from "../../transcript/visible.js";

const targetSchema = z.looseObject({
  sessionId: z.string().trim().min(1).optional(),
  sessionKey: z.string().trim().min(1).optional(),
  agentId: z.string().optional(),
  storePath: z.string().trim().min(1).optional(),
  threadId: z.union([z.string(), z.number()]).optional(),
});

/** OpenClaw's `SessionTranscriptReadTarget`. */
export type SessionTranscriptReadTarget = z.infer<typeof targetSchema>;

/**
 * The visible message entries of the session `target` names (`{ entryId, parentId, seq, message, role, createdAt,
 * idempotencyKey }`, oldest first). Rejects with an error naming the target when it is malformed or names no session
 * this host knows.
 *
 * @example
 * ```ts
 * const entries = await readVisibleSessionTranscriptMessageEntries({ sessionId: "s1", sessionKey: "s1" });
 * entries.at(-1)?.role; // "assistant"
 * ```
 */
export async function readVisibleSessionTranscriptMessageEntries(target: unknown): Promise<VisibleTranscriptEntry[]> {
  const parsed = targetSchema.safeParse(target);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TypeError(`readVisibleSessionTranscriptMessageEntries: target.${issue.path.join(".") || "(target)"}: ${issue.message}`);
  }
  const t = parsed.data;
  if (!t.sessionId && !t.sessionKey && !t.storePath) throw new TypeError("readVisibleSessionTranscriptMessageEntries: the target names no session (sessionId, sessionKey or storePath)");
  const store = findSessionStore(t);
  if (store) return store.readVisibleEntries();
  if (t.storePath) return readVisibleEntries(t.storePath, t.sessionId ? { sessionId: t.sessionId } : {});
  throw new Error(`readVisibleSessionTranscriptMessageEntries: no session ${JSON.stringify({ sessionId: t.sessionId, sessionKey: t.sessionKey })} in this host (it serves the sessions its turns ran on)`);
}
