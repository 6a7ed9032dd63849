/**
 * Transcript rewrites requested by a context engine (OpenClaw's `runtimeContext.rewriteTranscriptEntries`): replace
 * the message of some entries on the active branch, the way OpenClaw's runtime does it (copy-on-write):
 * - branch from the parent of the first replaced entry and re-append the rest of the branch with new entry ids, the
 *   replaced entries carrying their new message (references to re-appended entries, such as a compaction's
 *   `firstKeptEntryId` or a label's `targetId`, follow them);
 * - drop the abandoned old suffix from the file, except entries that a surviving entry still descends from (another
 *   branch hanging off them stays grounded).
 * The engine decides what is safe to rewrite; this module owns how the session DAG changes on disk.
 *
 * Unlike OpenClaw's runtime, which appends the new suffix and then rewrites the file to drop the old one, the whole
 * change is one atomic replace (temp file, fsync, rename, directory fsync): a crash leaves the old file or the new one.
 * Re-appended entries keep their timestamps and every other field, including the mirror's idempotency keys, so the
 * turns they came from stay known (origins, mirror idempotency). New ids are derived from the old id and the new
 * line, so the same rewrite of the same file gives the same file.
 */
import fs from "node:fs";
import path from "node:path";
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { z } from "zod";
import type { AgentMessage, TranscriptRewriteRequest, TranscriptRewriteResult } from "../context-engine/types.js";
import { silentLogger } from "../log/logger.js";
import { SessionFileError } from "./errors.js";
import { deriveEntryId, type SessionEntry } from "./entries.js";
import { faultPoint } from "./fault.js";
import { fsyncDirectory } from "./fsync-dir.js";
import { fsyncFd } from "./small-file.js";
import { isEntryShape } from "./parse.js";
import { sessionIoError } from "./resolve.js";
import { invalidateSessionIndex } from "./writer-index.js";
import { openSessionFile } from "./writer.js";

/** One entry to rewrite: the id of a `message` entry on the active branch, and the message it gets. */
export type TranscriptRewriteReplacement = TranscriptRewriteRequest["replacements"][number];
export type { TranscriptRewriteRequest, TranscriptRewriteResult };

/** The message shape a transcript entry must carry to be read back (`validate.ts`'s message check). */
const ReplacementMessageSchema = z.looseObject({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(z.unknown())]).optional(),
  timestamp: z.number().optional(),
});

const RequestSchema = z.object({
  replacements: z.array(z.object({ entryId: z.string(), message: ReplacementMessageSchema })),
});

/**
 * Validate a rewrite request at the boundary: an engine's request is untrusted input.
 *
 * @example
 * ```ts
 * parseTranscriptRewriteRequest({ replacements: [{ entryId: "a1b2c3d4", message: { role: "user", content: "[redacted]" } }] }, file);
 * ```
 */
export function parseTranscriptRewriteRequest(request: unknown, reported: string): { replacements: Array<{ entryId: string; message: AgentMessage }> } {
  const parsed = RequestSchema.safeParse(request);
  // The engine's own objects, copied (zod's output would move unknown keys after the known ones and change the line).
  if (parsed.success) return structuredClone(request) as { replacements: Array<{ entryId: string; message: AgentMessage }> };
  const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
  throw new SessionFileError("SESSION_INVALID_ARGUMENT", reported, `invalid transcript rewrite request for session ${reported}: ${issues}`);
}

/** One line of a session file as read: its text (kept byte for byte unless the rewrite drops it) and its entry, if any. */
export interface TranscriptLine {
  text: string;
  /** The parsed entry; absent for the header, corrupt lines and objects that are not entries (all kept verbatim). */
  entry?: SessionEntry | undefined;
}

/** What {@link planTranscriptRewrite} decided: the result, and (when it changed) the file's new lines. */
export interface TranscriptRewritePlan {
  result: TranscriptRewriteResult;
  /** The new file, one string per line (no newlines); undefined when nothing changes. */
  lines?: string[] | undefined;
  /** Entries re-appended with new ids (the replaced ones included). */
  reappended: number;
  /** Old entries dropped from the file. */
  removed: number;
}

const unchanged = (reason: string): TranscriptRewritePlan => ({ result: { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason }, reappended: 0, removed: 0 });

/** The active branch: from the root to the last entry in file order (the leaf pi resumes from), following `parentId`. */
function activeBranch(entries: readonly SessionEntry[], byId: ReadonlyMap<string, SessionEntry>): SessionEntry[] {
  const rev: SessionEntry[] = [];
  const seen = new Set<SessionEntry>();
  for (let e: SessionEntry | undefined = entries.at(-1); e && !seen.has(e); e = e.parentId ? byId.get(e.parentId) : undefined) {
    seen.add(e);
    rev.push(e);
  }
  return rev.reverse();
}

function messageBytes(message: unknown): number {
  return Buffer.byteLength(JSON.stringify(message) ?? "", "utf8");
}

/**
 * Decide a rewrite on the lines of a session file (pure: no I/O). See the module comment for the semantics; the
 * reasons for "nothing changed" are OpenClaw's ("no replacements requested", "empty session", "no matching message
 * entries") and one of ours: "replacements equal the current messages" (OpenClaw would re-issue the branch anyway).
 *
 * @example
 * ```ts
 * const plan = planTranscriptRewrite(lines, [{ entryId: "a1b2c3d4", message: { role: "toolResult", content: "[stub]" } }]);
 * if (plan.lines) fs.writeFileSync(tmp, plan.lines.join("\n") + "\n");
 * ```
 */
export function planTranscriptRewrite(lines: readonly TranscriptLine[], replacements: readonly TranscriptRewriteReplacement[]): TranscriptRewritePlan {
  const wanted = new Map<string, unknown>();
  for (const r of replacements) if (r.entryId.trim().length > 0) wanted.set(r.entryId, r.message);
  if (wanted.size === 0) return unchanged("no replacements requested");
  const entries = lines.flatMap((l) => (l.entry ? [l.entry] : []));
  const byId = new Map<string, SessionEntry>();
  for (const e of entries) if (!byId.has(e.id)) byId.set(e.id, e);
  const branch = activeBranch(entries, byId);
  if (branch.length === 0) return unchanged("empty session");
  const matched = branch.flatMap((e, i) => (e.type === "message" && wanted.has(e.id) ? [i] : []));
  if (matched.length === 0) return unchanged("no matching message entries");
  // A replacement equal to the message it replaces is no change: re-issuing the branch for it would only churn entry
  // ids (an engine that repeats its GC every maintenance asks for exactly that). OpenClaw's runtime re-issues anyway.
  const changing = matched.filter((i) => JSON.stringify(branch[i]!["message"]) !== JSON.stringify(wanted.get(branch[i]!.id)));
  if (changing.length === 0) return unchanged("replacements equal the current messages");

  let bytesFreed = 0;
  for (const i of changing) {
    const e = branch[i]!;
    bytesFreed += Math.max(0, messageBytes(e["message"]) - messageBytes(wanted.get(e.id)));
  }
  const first = changing[0]!;
  const taken = new Set(byId.keys());
  const renamed = new Map<string, string>();
  const remap = (id: unknown): unknown => (typeof id === "string" ? (renamed.get(id) ?? id) : id);
  const newLines: string[] = [];
  for (let i = first; i < branch.length; i++) {
    const old = branch[i]!;
    const replacement = old.type === "message" ? wanted.get(old.id) : undefined;
    const parentId = i === first ? (old.parentId ?? null) : renamed.get(old.parentId ?? "")!;
    const body: Record<string, unknown> = { ...old, parentId };
    if (replacement !== undefined) body["message"] = replacement;
    if (old.type === "compaction") body["firstKeptEntryId"] = remap(old["firstKeptEntryId"]);
    if (old.type === "label") body["targetId"] = remap(old["targetId"]);
    const id = deriveEntryId(`rewrite:${old.id}:${createHash("sha256").update(JSON.stringify(body)).digest("hex")}`, taken);
    taken.add(id);
    renamed.set(old.id, id);
    body["id"] = id;
    newLines.push(JSON.stringify(body));
  }

  // The old suffix is abandoned; keep any of it that a surviving entry (another branch) still descends from.
  const abandoned = new Set(branch.slice(first));
  const live = new Set<SessionEntry>();
  for (const e of entries) {
    if (abandoned.has(e)) continue;
    for (let cur: SessionEntry | undefined = e; cur && !live.has(cur); cur = cur.parentId ? byId.get(cur.parentId) : undefined) live.add(cur);
  }
  let removed = 0;
  const kept: string[] = [];
  for (const l of lines) {
    if (l.entry && abandoned.has(l.entry) && !live.has(l.entry)) removed++;
    else kept.push(l.text);
  }
  return {
    result: { changed: true, bytesFreed, rewrittenEntries: changing.length },
    lines: [...kept, ...newLines],
    reappended: newLines.length,
    removed,
  };
}

/** Split a file into lines (a final line without newline included), skipping blank ones; entries parsed. */
export function transcriptLines(text: string): TranscriptLine[] {
  const out: TranscriptLine[] = [];
  let header = true;
  for (const line of text.split("\n")) {
    if (line.trim().length === 0) continue;
    if (header) {
      header = false;
      out.push({ text: line });
      continue;
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      out.push({ text: line }); // a corrupt line stays where it is, as the reader leaves it
      continue;
    }
    const isEntry = value !== null && typeof value === "object" && !Array.isArray(value) && (value as { type?: unknown }).type !== "session" && isEntryShape(value as Record<string, unknown>);
    out.push(isEntry ? { text: line, entry: value as SessionEntry } : { text: line });
  }
  return out;
}

/** Options of {@link rewriteTranscriptEntriesInFile}. */
export interface RewriteTranscriptOptions {
  sessionId: string;
  sessionRoot?: string | undefined;
  logger?: Logger | undefined;
}

let tmpCounter = 0;

/**
 * Rewrite message entries of a session file (see the module comment). Call it while holding the session lock. A bad
 * request throws `SESSION_INVALID_ARGUMENT` naming the field; a failed write throws `SESSION_WRITE_FAILED` and leaves
 * the file as it was. A torn last line is repaired first, as before any append.
 *
 * @example
 * ```ts
 * await withSessionLock(file, () =>
 *   rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId, message: { role: "toolResult", content: "[stub]" } }] }, { sessionId: "s1" }),
 * );
 * ```
 */
export async function rewriteTranscriptEntriesInFile(
  sessionFile: string,
  request: unknown,
  opts: RewriteTranscriptOptions,
): Promise<TranscriptRewriteResult> {
  const logger = opts.logger ?? silentLogger;
  const { replacements } = parseTranscriptRewriteRequest(request, sessionFile);
  if (replacements.every((r) => r.entryId.trim().length === 0)) return unchanged("no replacements requested").result;
  // Opening as the writer does validates the header and session id and repairs a torn tail before we copy the file.
  const writer = await openSessionFile(sessionFile, {
    sessionId: opts.sessionId,
    ...(opts.sessionRoot !== undefined ? { sessionRoot: opts.sessionRoot } : {}),
    logger,
    onSessionIdMismatch: "throw",
  });
  const real = writer.path;
  let text: string;
  let mode: number;
  try {
    text = fs.readFileSync(real, "utf8");
    mode = fs.statSync(real).mode & 0o777;
  } catch (err) {
    if ((err as { code?: string | undefined }).code === "ENOENT") return unchanged("empty session").result;
    throw sessionIoError(err, sessionFile, "read");
  }
  const plan = planTranscriptRewrite(transcriptLines(text), replacements);
  if (!plan.lines) return plan.result;
  await replaceTranscript(real, sessionFile, `${plan.lines.join("\n")}\n`, mode);
  invalidateSessionIndex(real);
  logger.info(
    {
      event: "transcript.rewritten",
      sessionFile: path.basename(real),
      rewrittenEntries: plan.result.rewrittenEntries,
      reappended: plan.reappended,
      removed: plan.removed,
      bytesFreed: plan.result.bytesFreed,
    },
    "transcript entries rewritten",
  );
  return plan.result;
}

/**
 * Remove temp files of rewrites that died before their rename (a crash, a kill). Only called under the session lock,
 * so no rewrite of this session is running: every such file is stale. Best effort.
 */
function removeStaleRewriteTemps(real: string): void {
  const base = `${path.basename(real)}.rewrite-`;
  let names: string[];
  try {
    names = fs.readdirSync(path.dirname(real));
  } catch {
    return;
  }
  for (const name of names) if (name.startsWith(base) && name.endsWith(".tmp")) fs.rmSync(path.join(path.dirname(real), name), { force: true });
}

/** Atomic replace: a new temp file (same mode), fsync, rename over the transcript, directory fsync. */
async function replaceTranscript(real: string, reported: string, content: string, mode: number): Promise<void> {
  removeStaleRewriteTemps(real);
  const tmp = `${real}.rewrite-${process.pid}-${++tmpCounter}.tmp`;
  let fd: number | undefined;
  try {
    fd = fs.openSync(tmp, "wx", mode);
    fs.writeFileSync(fd, content);
    await fsyncFd(fd);
    fs.closeSync(fd);
    fd = undefined;
    faultPoint("rewrite:before-rename");
    fs.renameSync(tmp, real);
  } catch (err) {
    if (fd !== undefined) fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw new SessionFileError("SESSION_WRITE_FAILED", reported, `cannot rewrite session file ${reported} (${(err as { code?: string | undefined }).code ?? String(err)}); it is unchanged`, {
      cause: err,
    });
  }
  await fsyncDirectory(path.dirname(real));
}
