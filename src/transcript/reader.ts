/**
 * Read a whole session transcript (pi format v3; v1/v2 migrated in memory, never rewritten) and rebuild its context.
 *
 * Damage policy (a transcript is the user's data: we never rewrite it away):
 * - torn last line (crash mid-append): readers ignore it; the next writer moves the bytes to `<file>.torn-<n>` and
 *   truncates to the last complete line. A last line that is complete JSON but lacks its newline is kept and
 *   terminated instead.
 * - corrupt line in the middle: skipped with a warning, left in place.
 * - missing file: a new, empty session; reading never creates it.
 */
import { promises as fsp, type Stats } from "node:fs";
import type { Logger } from "pino";
import { z } from "zod";
import type { AgentMessage } from "../context-engine/types.js";
import { silentLogger } from "../log/logger.js";
import { buildSessionContextFromEntries } from "./context.js";
import {
  entryOrigin,
  SESSION_FORMAT_VERSION,
  type ReadSessionOptions,
  type SessionContext,
  type SessionEntry,
  type SessionHeader,
  type SessionTranscript,
  type TranscriptDamage,
  type TranscriptOrigin,
} from "./entries.js";
import { checkHeader, HeaderSchema, invalidArgs, isEntryShape, migrateInMemory, parseLine, readRange, statOrMissing } from "./parse.js";
import { resolveSessionPath, sessionIoError } from "./resolve.js";
import { emptyIndex, indexCache, scanIntoIndex } from "./writer-index.js";

const ReadOptionsSchema = z.object({
  sessionId: z.string().min(1).optional(),
  sessionRoot: z.string().min(1).optional(),
  logger: z.any().optional(),
});

/**
 * Read a whole session transcript. A missing file is an empty session (nothing is created). Corrupt lines are
 * skipped (and reported in `damage`), a torn last line is ignored; nothing is written.
 *
 * @example
 * ```ts
 * const t = await readSessionTranscript("/data/s1.jsonl", { sessionRoot: "/data" });
 * const messages = t.buildMessages();
 * ```
 */
export async function readSessionTranscript(sessionFile: string, opts: ReadSessionOptions = {}): Promise<SessionTranscript> {
  const parsedOpts = ReadOptionsSchema.safeParse(opts);
  if (!parsedOpts.success) throw invalidArgs("read options", sessionFile, parsedOpts.error);
  const logger: Logger = opts.logger ?? silentLogger;
  const real = await resolveSessionPath(sessionFile, opts.sessionRoot);
  const st = await statOrMissing(real, sessionFile);
  const damage: TranscriptDamage = { corruptLines: [], tornTailBytes: 0 };
  if (!st) {
    logger.debug({ event: "transcript.read", sessionFile, exists: false, entries: 0 }, "session file missing: empty session");
    return makeTranscript(real, false, null, [], damage);
  }
  let buf: Buffer;
  let fst: Stats;
  try {
    const fh = await fsp.open(real, "r");
    try {
      fst = await fh.stat();
      buf = await readRange(fh, 0, fst.size);
    } finally {
      await fh.close();
    }
  } catch (err) {
    throw sessionIoError(err, sessionFile, "read");
  }

  let header: SessionHeader | null = null;
  const objects: Record<string, unknown>[] = [];
  const objectLines: number[] = [];
  let lineNo = 0;
  let pos = 0;
  const consume = (start: number, end: number): void => {
    lineNo++;
    const parsed = parseLine(buf, start, end);
    if (parsed.kind === "blank") return;
    if (header === null) {
      header = checkHeader(parsed.kind === "object" ? parsed.value : null, sessionFile, lineNo);
      return;
    }
    if (parsed.kind === "corrupt") {
      damage.corruptLines.push(lineNo);
      return;
    }
    if (parsed.value.type === "session") return;
    objects.push(parsed.value);
    objectLines.push(lineNo);
  };
  for (;;) {
    const nl = buf.indexOf(10, pos);
    if (nl < 0) break;
    consume(pos, nl);
    pos = nl + 1;
  }
  const completeEnd = pos;
  if (pos < buf.length) {
    const parsed = parseLine(buf, pos, buf.length);
    const complete =
      parsed.kind === "object" &&
      (header === null ? HeaderSchema.safeParse(parsed.value).success : parsed.value.type === "session" || isEntryShape(parsed.value));
    if (complete) consume(pos, buf.length);
    else if (parsed.kind !== "blank") damage.tornTailBytes = buf.length - pos;
  }

  const h = header as SessionHeader | null;
  if (h) {
    const version = h.version ?? 1;
    if (version < SESSION_FORMAT_VERSION) migrateInMemory(h, objects);
    else if (version > SESSION_FORMAT_VERSION) {
      logger.warn({ event: "transcript.version_newer", sessionFile, version }, "session file is newer than version 3; reading as version 3");
    }
    if (opts.sessionId !== undefined && h.id !== opts.sessionId) {
      logger.warn({ event: "transcript.session_id_mismatch", sessionFile, headerId: h.id, sessionId: opts.sessionId }, "session id differs from the header");
    }
  }
  const entries: SessionEntry[] = [];
  objects.forEach((o, i) => {
    if (isEntryShape(o)) entries.push(o);
    else damage.corruptLines.push(objectLines[i]!);
  });
  damage.corruptLines.sort((a, b) => a - b);

  if (damage.corruptLines.length > 0 || damage.tornTailBytes > 0) {
    logger.warn(
      {
        event: "transcript.damage",
        sessionFile,
        corruptLines: damage.corruptLines.length,
        firstCorruptLines: damage.corruptLines.slice(0, 20),
        tornTailBytes: damage.tornTailBytes,
      },
      "transcript damage skipped while reading",
    );
  }
  logger.debug({ event: "transcript.read", sessionFile, exists: true, entries: entries.length, bytes: buf.length }, "session file read");

  // Warm the writer's index so the next append in this process does not re-read the file.
  const cached = indexCache.get(real);
  const cacheValid = cached && cached.dev === fst.dev && cached.ino === fst.ino && cached.size === completeEnd && cached.mtimeMs === fst.mtimeMs;
  if (h && (h.version ?? 1) === SESSION_FORMAT_VERSION && !cacheValid) {
    const index = emptyIndex(real);
    index.dev = fst.dev;
    index.ino = fst.ino;
    index.mtimeMs = fst.mtimeMs;
    scanIntoIndex(index, buf.subarray(0, completeEnd), sessionFile, []);
    indexCache.set(real, index);
  }
  return makeTranscript(real, true, h, entries, damage);
}

function makeTranscript(
  real: string,
  exists: boolean,
  header: SessionHeader | null,
  entries: SessionEntry[],
  damage: TranscriptDamage,
): SessionTranscript {
  let ctx: SessionContext | undefined;
  const context = (): SessionContext => (ctx ??= buildSessionContextFromEntries(entries));
  return {
    path: real,
    exists,
    header,
    entries,
    leafId: entries.length > 0 ? entries[entries.length - 1]!.id : null,
    damage,
    buildMessages: () => context().messages.slice(),
    buildContext: () => {
      const c = context();
      return { messages: c.messages.slice(), sources: c.sources.slice() };
    },
  };
}

/**
 * Read the mirrored history in the shape `readHistory` returns (`HistoryOutput`): the rebuilt messages and, in
 * parallel, the Codex thread/turn each came from (null for messages with no mirror key, e.g. a compaction summary).
 *
 * @example
 * ```ts
 * const { messages, origins } = await readSessionHistory(sessionFile, { sessionId });
 * ```
 */
export async function readSessionHistory(
  sessionFile: string,
  opts: ReadSessionOptions = {},
): Promise<{ messages: AgentMessage[]; origins: Array<TranscriptOrigin | null> }> {
  return historyFromTranscript(await readSessionTranscript(sessionFile, opts));
}

/**
 * The history of an already-read transcript, as {@link readSessionHistory} returns it.
 *
 * @example
 * ```ts
 * const t = await readSessionTranscript(sessionFile);
 * const { messages, origins } = historyFromTranscript(t); // t.entries.length: entries in the file
 * ```
 */
export function historyFromTranscript(t: SessionTranscript): { messages: AgentMessage[]; origins: Array<TranscriptOrigin | null> } {
  const { messages, sources } = t.buildContext();
  return { messages, origins: sources.map((s) => (s.type === "compaction" ? null : entryOrigin(s))) };
}

