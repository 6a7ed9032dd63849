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
import { validateEntry } from "./validate.js";
import { cachedIndex, emptyIndex, rememberIndex, scanIntoIndex } from "./writer-index.js";

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
  if (!st) {
    logger.debug({ event: "transcript.read", sessionFile, exists: false, entries: 0 }, "session file missing: empty session");
    return makeTranscript(real, false, null, [], [], { corruptLines: [], tornTailBytes: 0 });
  }
  const { buf, fst } = await readWholeFile(real, sessionFile);
  const lines = splitLines(buf, sessionFile);
  const { header: h, objects, objectLines, damage } = lines;
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
  // Malformed entries keep their place in the parent chain but add no message (validate.ts); their lines count as damage.
  const contextEntries: SessionEntry[] = [];
  objects.forEach((o, i) => {
    if (!isEntryShape(o)) {
      damage.corruptLines.push(objectLines[i]!);
      return;
    }
    const checked = validateEntry(o);
    if (checked.invalid !== undefined) damage.corruptLines.push(objectLines[i]!);
    entries.push(o);
    contextEntries.push(checked.entry);
  });
  damage.corruptLines.sort((a, b) => a - b);
  logDamage(logger, sessionFile, damage);
  logger.debug({ event: "transcript.read", sessionFile, exists: true, entries: entries.length, bytes: buf.length }, "session file read");
  if (h && (h.version ?? 1) === SESSION_FORMAT_VERSION) warmWriterIndex(real, sessionFile, buf.subarray(0, lines.completeEnd), fst);
  return makeTranscript(real, true, h, entries, contextEntries, damage);
}

async function readWholeFile(real: string, sessionFile: string): Promise<{ buf: Buffer; fst: Stats }> {
  try {
    const fh = await fsp.open(real, "r");
    try {
      const fst = await fh.stat();
      return { buf: await readRange(fh, 0, fst.size), fst };
    } finally {
      await fh.close();
    }
  } catch (err) {
    throw sessionIoError(err, sessionFile, "read");
  }
}

interface SplitLines {
  header: SessionHeader | null;
  objects: Record<string, unknown>[];
  /** 1-based line number of each object. */
  objectLines: number[];
  /** Bytes covered by complete lines. */
  completeEnd: number;
  damage: TranscriptDamage;
}

/** Parse every line: the header, then JSON objects; corrupt lines and a torn tail are recorded as damage. */
function splitLines(buf: Buffer, sessionFile: string): SplitLines {
  const out: SplitLines = { header: null, objects: [], objectLines: [], completeEnd: 0, damage: { corruptLines: [], tornTailBytes: 0 } };
  let lineNo = 0;
  const consume = (start: number, end: number): void => {
    lineNo++;
    const parsed = parseLine(buf, start, end);
    if (parsed.kind === "blank") return;
    if (out.header === null) {
      out.header = checkHeader(parsed.kind === "object" ? parsed.value : null, sessionFile, lineNo);
      return;
    }
    if (parsed.kind === "corrupt") {
      out.damage.corruptLines.push(lineNo);
      return;
    }
    if (parsed.value.type === "session") return;
    out.objects.push(parsed.value);
    out.objectLines.push(lineNo);
  };
  let pos = 0;
  for (let nl = buf.indexOf(10, pos); nl >= 0; nl = buf.indexOf(10, pos)) {
    consume(pos, nl);
    pos = nl + 1;
  }
  out.completeEnd = pos;
  if (pos < buf.length) {
    const parsed = parseLine(buf, pos, buf.length);
    const complete =
      parsed.kind === "object" &&
      (out.header === null ? HeaderSchema.safeParse(parsed.value).success : parsed.value.type === "session" || isEntryShape(parsed.value));
    if (complete) consume(pos, buf.length);
    else if (parsed.kind !== "blank") out.damage.tornTailBytes = buf.length - pos;
  }
  return out;
}

function logDamage(logger: Logger, sessionFile: string, damage: TranscriptDamage): void {
  if (damage.corruptLines.length === 0 && damage.tornTailBytes === 0) return;
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

/** Warm the writer's index so the next append in this process does not re-read the file. */
function warmWriterIndex(real: string, sessionFile: string, complete: Buffer, fst: Stats): void {
  const cached = cachedIndex(real);
  if (cached && cached.dev === fst.dev && cached.ino === fst.ino && cached.size === complete.length && cached.mtimeMs === fst.mtimeMs) return;
  const index = emptyIndex(real);
  index.dev = fst.dev;
  index.ino = fst.ino;
  index.mtimeMs = fst.mtimeMs;
  scanIntoIndex(index, complete, sessionFile, []);
  rememberIndex(real, index);
}

function makeTranscript(
  real: string,
  exists: boolean,
  header: SessionHeader | null,
  entries: SessionEntry[],
  contextEntries: SessionEntry[],
  damage: TranscriptDamage,
): SessionTranscript {
  let ctx: SessionContext | undefined;
  const context = (): SessionContext => (ctx ??= buildSessionContextFromEntries(contextEntries));
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

