/**
 * Boundary validation of transcript entries (zod), applied when a transcript is read for a model context.
 *
 * A transcript is written by us, by pi and by OpenClaw, and can be edited by hand. An entry that has an id but a
 * malformed payload (a `message` entry without a message, a compaction whose `tokensBefore` is a string, ...) would
 * crash pi's `buildSessionContext` or hand an engine a message it cannot read. Such an entry is replaced by a
 * chain-only stub: it keeps its place in the `parentId` chain (so the entries before it stay reachable, as they are
 * for pi) but contributes no message. Callers count these as skipped, with a warning naming the line, never content.
 */
import { z } from "zod";
import type { SessionEntry } from "./entries.js";

/** The `type` of a stub that stands in for a malformed entry in the context rebuild. */
export const SKIPPED_ENTRY_TYPE = "codex.skipped_entry";

const contentSchema = z.union([z.string(), z.array(z.unknown())]);

const messageSchema = z.looseObject({
  role: z.string().min(1),
  content: contentSchema.optional(),
  timestamp: z.number().optional(),
});

const baseSchema = z.looseObject({
  type: z.string().min(1),
  id: z.string().min(1),
  parentId: z.string().min(1).nullable().optional(),
  timestamp: z.string().optional(),
});

/** Payload checks for the entry types that contribute to the model context. Other types are checked only as entries. */
const payloadSchemas: Record<string, z.ZodType> = {
  message: z.looseObject({ message: messageSchema }),
  custom_message: z.looseObject({
    customType: z.string().min(1),
    content: contentSchema,
    display: z.boolean().optional(),
    timestamp: z.string(),
  }),
  compaction: z.looseObject({
    summary: z.string(),
    firstKeptEntryId: z.string(),
    tokensBefore: z.number(),
    timestamp: z.string(),
  }),
  branch_summary: z.looseObject({ fromId: z.string(), summary: z.string(), timestamp: z.string() }),
};

/**
 * The common case, checked by hand because a cold read of a long transcript validates thousands of entries: a
 * `message` entry that the zod schemas above accept. It only ever answers "valid" where they would; everything else
 * (including every rejection and its reason) goes through zod.
 */
function isPlainValidMessageEntry(v: SessionEntry): boolean {
  if (v.type !== "message" || typeof v.id !== "string" || v.id.length === 0) return false;
  const p = v.parentId as unknown;
  if (!(p === null || p === undefined || (typeof p === "string" && p.length > 0))) return false;
  if (!(v.timestamp === undefined || typeof v.timestamp === "string")) return false;
  const m = v["message"] as Record<string, unknown> | null | undefined;
  if (!m || typeof m !== "object" || Array.isArray(m) || typeof m.role !== "string" || m.role.length === 0) return false;
  const c = m.content;
  if (!(c === undefined || typeof c === "string" || Array.isArray(c))) return false;
  return m.timestamp === undefined || typeof m.timestamp === "number";
}

/** Result of {@link validateEntry}: the entry to use, and why it was replaced (a short reason, never content). */
export interface ValidatedEntry {
  entry: SessionEntry;
  /** Set when the entry was malformed and replaced by a chain-only stub. */
  invalid?: string | undefined;
}

/**
 * Check one parsed entry. A valid entry is returned as is; a malformed one as a chain-only stub (same `id` and
 * `parentId`, type {@link SKIPPED_ENTRY_TYPE}) plus the reason.
 *
 * @example
 * ```ts
 * validateEntry({ type: "message", id: "a1b2c3d4", parentId: null, timestamp: "2026-01-01T00:00:00.000Z" });
 * // { entry: { type: "codex.skipped_entry", id: "a1b2c3d4", parentId: null, ... }, invalid: "message: Invalid input..." }
 * ```
 */
export function validateEntry(value: SessionEntry): ValidatedEntry {
  if (isPlainValidMessageEntry(value)) return { entry: value };
  const base = baseSchema.safeParse(value);
  const payload = base.success ? payloadSchemas[value.type]?.safeParse(value) : undefined;
  const error = !base.success ? base.error : payload && !payload.success ? payload.error : undefined;
  if (!error) return { entry: value };
  const issue = error.issues[0];
  const reason = `${value.type}: ${issue ? `${issue.path.join(".") || "(entry)"} ${issue.message}` : "invalid"}`;
  const parentId = typeof value.parentId === "string" && value.parentId.length > 0 ? value.parentId : null;
  const stub: SessionEntry = {
    type: SKIPPED_ENTRY_TYPE,
    id: value.id,
    parentId,
    timestamp: typeof value.timestamp === "string" ? value.timestamp : "",
    originalType: value.type,
  };
  return { entry: stub, invalid: reason };
}
