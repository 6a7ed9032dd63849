/**
 * Line-level parsing of a session file: JSON lines, the header, entry shapes, pi's in-memory migrations, and the small
 * file helpers the reader and the writer share.
 */
import fs, { promises as fsp, type Stats } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { z } from "zod";
import { SessionFileError } from "./errors.js";
import { deriveEntryId, SESSION_FORMAT_VERSION, type SessionEntry, type SessionHeader } from "./entries.js";
import { errCode, sessionIoError } from "./resolve.js";

export const HeaderSchema = z.looseObject({
  type: z.literal("session"),
  id: z.string().min(1),
  version: z.number().int().optional(),
});

export type ParsedLine = { kind: "blank" } | { kind: "corrupt" } | { kind: "object"; value: Record<string, unknown> };

export function parseLine(buf: Buffer, start: number, end: number): ParsedLine {
  const text = buf.toString("utf8", start, end);
  if (text.trim().length === 0) return { kind: "blank" };
  try {
    const v: unknown = JSON.parse(text);
    if (v && typeof v === "object" && !Array.isArray(v)) return { kind: "object", value: v as Record<string, unknown> };
    return { kind: "corrupt" };
  } catch {
    return { kind: "corrupt" };
  }
}

export function isEntryShape(v: Record<string, unknown>): v is SessionEntry {
  return typeof v.type === "string" && v.type !== "session" && typeof v.id === "string";
}

function headerError(file: string, lineNo: number, why: string): SessionFileError {
  return new SessionFileError(
    "SESSION_HEADER_INVALID",
    file,
    `session file ${file} has no valid session header (line ${lineNo}: ${why}); refusing to treat it as a pi transcript`,
  );
}

export function checkHeader(value: Record<string, unknown> | null, file: string, lineNo: number): SessionHeader {
  if (!value) throw headerError(file, lineNo, "not JSON");
  const r = HeaderSchema.safeParse(value);
  if (!r.success) throw headerError(file, lineNo, `expected {"type":"session","id":<string>}, got type ${JSON.stringify(value.type)}`);
  return value as SessionHeader;
}

/** Apply pi's v1->v2->v3 migrations in memory (reading only; we never rewrite an old file). */
export function migrateInMemory(header: SessionHeader, objects: Record<string, unknown>[]): void {
  const version = header.version ?? 1;
  if (version < 2) {
    const ids = new Set<string>();
    let prev: string | null = null;
    for (let i = 0; i < objects.length; i++) {
      const e = objects[i]!;
      // pi assigns random ids here; ours are derived from the position so a re-read is stable.
      const id = deriveEntryId(`v1-entry:${i}`, ids);
      ids.add(id);
      e.id = id;
      e.parentId = prev;
      prev = id;
      if (e.type === "compaction" && typeof e.firstKeptEntryIndex === "number") {
        // pi's index counts the header as entry 0.
        const target = e.firstKeptEntryIndex === 0 ? undefined : objects[e.firstKeptEntryIndex - 1];
        if (target) e.firstKeptEntryId = target.id;
        delete e.firstKeptEntryIndex;
      }
    }
  }
  if (version < 3) {
    for (const e of objects) {
      const m = e.message as { role?: unknown } | undefined;
      if (e.type === "message" && m && m.role === "hookMessage") m.role = "custom";
    }
  }
}

/** The session file's stat, null when missing; a directory or a non-file is a typed error. */
export async function statOrMissing(real: string, reported: string): Promise<Stats | null> {
  try {
    return checkRegularFile(await fsp.stat(real), reported);
  } catch (err) {
    if (errCode(err) === "ENOENT") return null;
    throw sessionIoError(err, reported, "read");
  }
}

/**
 * {@link statOrMissing} without the thread-pool round trip: the per-turn history read stats the file once per turn,
 * and a synchronous stat costs microseconds where an asynchronous one waits for a busy event loop.
 */
export function statOrMissingSync(real: string, reported: string): Stats | null {
  try {
    return checkRegularFile(fs.statSync(real), reported);
  } catch (err) {
    if (errCode(err) === "ENOENT") return null;
    throw sessionIoError(err, reported, "read");
  }
}

function checkRegularFile(st: Stats, reported: string): Stats {
  if (st.isDirectory()) {
    throw new SessionFileError("SESSION_PATH_IS_DIRECTORY", reported, `session path ${reported} is a directory, not a session file`);
  }
  if (!st.isFile()) {
    throw new SessionFileError("SESSION_UNREADABLE", reported, `session path ${reported} is not a regular file`);
  }
  return st;
}

export async function readRange(fh: FileHandle, start: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  let off = 0;
  while (off < length) {
    const { bytesRead } = await fh.read(buf, off, length - off, start + off);
    if (bytesRead === 0) break;
    off += bytesRead;
  }
  return off === length ? buf : buf.subarray(0, off);
}


export function versionError(file: string, version: number): SessionFileError {
  return new SessionFileError(
    "SESSION_VERSION_UNSUPPORTED",
    file,
    version < SESSION_FORMAT_VERSION
      ? `session file ${file} is version ${version}; open it once with pi (which migrates by rewriting) before mirroring into it`
      : `session file ${file} is version ${version}; this writer only appends to version ${SESSION_FORMAT_VERSION}`,
  );
}


export function invalidArgs(what: string, file: string, err: z.ZodError): SessionFileError {
  return new SessionFileError(
    "SESSION_INVALID_ARGUMENT",
    file,
    `invalid ${what} for session file ${file}: ${err.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ")}`,
  );
}
