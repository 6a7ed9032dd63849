/**
 * Requests recorded in a transcript: a turn run with a `requestId` has it on its prompt's entry (a top-level `request`
 * field `{ id, status, cut? }`, written by the mirror beside `idempotencyKey`; pi keeps unknown fields). Finding the
 * request again gives the turn it ran as, so a retried request returns that turn instead of running again.
 */
import type { Logger } from "pino";
import type { RecordedRequest } from "../store/session-store.js";
import { entryContextMessage } from "./context.js";
import { entryIdempotencyKey, parseMirrorKey } from "./entries.js";
import { readSessionTranscript } from "./reader.js";
import type { SessionEntry } from "./entries.js";

/** The request mark as stored on an entry (validated on read: anything else is not a mark). */
function markOf(value: unknown): Pick<RecordedRequest, "id" | "status" | "cut"> | undefined {
  const m = value as { id?: unknown; status?: unknown; cut?: unknown } | null | undefined;
  if (!m || typeof m.id !== "string" || !["completed", "failed", "aborted", "yieldAborted"].includes(m.status as string)) return undefined;
  return { id: m.id, status: m.status as RecordedRequest["status"], ...(m.cut === true ? { cut: true } : {}) };
}

/**
 * The turn `sessionFile` recorded for `requestId` (every entry of the file, not only the visible branch; the last
 * prompt carrying it when several do), or undefined. A missing file holds none.
 *
 * @example
 * ```ts
 * const r = await findRecordedRequest("/data/s1.jsonl", "req-42", { sessionId: "s1" });
 * if (r) console.log(r.status, r.turnId, r.messages.length);
 * ```
 */
export async function findRecordedRequest(
  sessionFile: string,
  requestId: string,
  opts: { sessionId?: string | undefined; sessionRoot?: string | undefined; logger?: Logger | undefined } = {},
): Promise<RecordedRequest | undefined> {
  const transcript = await readSessionTranscript(sessionFile, opts);
  return findRequestInEntries(transcript.entries, requestId);
}

/**
 * The turn `entries` (a transcript's entries, in file order) recorded for `requestId`: the last prompt entry carrying
 * its mark, the turn's messages after it. The one reading of marks every store shares.
 *
 * @example
 * ```ts
 * findRequestInEntries(transcript.entries, "req-42")?.turnId;
 * ```
 */
export function findRequestInEntries(entries: readonly SessionEntry[], requestId: string): RecordedRequest | undefined {
  const transcript = { entries };
  let found: { index: number; mark: NonNullable<ReturnType<typeof markOf>> } | undefined;
  transcript.entries.forEach((e, index) => {
    const mark = markOf(e["request"]);
    if (mark?.id === requestId) found = { index, mark };
  });
  if (!found) return undefined;
  const prompt = transcript.entries[found.index]!;
  const origin = parseMirrorKey(entryIdempotencyKey(prompt) ?? "");
  if (!origin) return undefined;
  const messages = transcript.entries
    .slice(found.index)
    .filter((e) => {
      const key = parseMirrorKey(entryIdempotencyKey(e) ?? "");
      return key !== null && key.threadId === origin.threadId && key.turnId === origin.turnId;
    })
    .flatMap((e) => {
      const m = entryContextMessage(e);
      return m ? [structuredClone(m)] : [];
    });
  return { ...found.mark, threadId: origin.threadId, turnId: origin.turnId, entryId: prompt.id, messages };
}
