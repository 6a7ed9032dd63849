/**
 * The visible transcript with entry identities (OpenClaw's `readVisibleSessionTranscriptMessageEntries`): the messages
 * of the active branch as pi's `buildSessionContext` rebuilds them, each with its entry id, parent, position, timestamp
 * and idempotency key. Engines that reconcile their own store against the transcript (lossless-claw 1.x, before it
 * persists a turn) read it through `openclaw/plugin-sdk/session-transcript-runtime`.
 *
 * Cost: one read and parse of the whole file per call (engines call it once per turn); the turn's own history read
 * stays on the incremental cache.
 */
import type { Logger } from "pino";
import type { VisibleTranscriptEntry } from "../store/session-store.js";
import type { AgentMessage } from "../context-engine/types.js";
import { entryIdempotencyKey, type SessionEntry } from "./entries.js";
import { readSessionTranscript } from "./reader.js";

/**
 * Read `sessionFile`'s visible entries (a missing file: none). The compaction summary a compaction entry contributes
 * has no entry of its own and is left out; every other context message comes with the entry it was read from.
 *
 * @example
 * ```ts
 * const entries = await readVisibleEntries("/data/s1.jsonl", { sessionId: "s1" });
 * entries.map((e) => [e.seq, e.entryId, e.parentId, e.role]);
 * ```
 */
export async function readVisibleEntries(
  sessionFile: string,
  opts: { sessionId?: string | undefined; sessionRoot?: string | undefined; logger?: Logger | undefined } = {},
): Promise<VisibleTranscriptEntry[]> {
  const transcript = await readSessionTranscript(sessionFile, opts);
  const { messages, sources } = transcript.buildContext();
  return visibleEntriesOf(transcript.entries, messages, sources);
}

/**
 * The visible entries of a rebuilt context (`buildSessionContext`'s messages and the entry each came from), every
 * store's one reading of "visible": compaction summaries left out, `seq` the entry's position in `entries`. With
 * `copy`, the messages are structured clones (a store whose messages are shared with its history cache).
 *
 * @example
 * ```ts
 * const { messages, sources } = buildSessionContextFromEntries(entries);
 * visibleEntriesOf(entries, messages, sources, { copy: true });
 * ```
 */
export function visibleEntriesOf(
  entries: readonly SessionEntry[],
  messages: readonly AgentMessage[],
  sources: readonly SessionEntry[],
  opts: { copy?: boolean | undefined } = {},
): VisibleTranscriptEntry[] {
  const seqOf = new Map(entries.map((e, i) => [e, i] as const));
  const out: VisibleTranscriptEntry[] = [];
  for (let i = 0; i < sources.length; i++) {
    const entry = sources[i]!;
    if (entry.type === "compaction") continue;
    const message = opts.copy ? structuredClone(messages[i]!) : messages[i]!;
    const key = entryIdempotencyKey(entry);
    out.push({
      entryId: entry.id,
      parentId: entry.parentId ?? null,
      seq: seqOf.get(entry) ?? i,
      message,
      role: String((message as { role?: unknown }).role),
      ...(typeof entry.timestamp === "string" ? { createdAt: entry.timestamp } : {}),
      ...(key !== undefined ? { idempotencyKey: key } : {}),
    });
  }
  return out;
}
