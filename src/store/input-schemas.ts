/**
 * The boundary checks of store writes that every `SessionStore` makes the same way (the JSONL store, the PostgreSQL
 * store): a reset's options, a compaction entry, a message outside any turn. One copy, so the stores cannot drift on
 * what they accept.
 */
import { z } from "zod";

/** `SessionStore.reset`'s options; unknown keys are refused (`SESSION_INVALID_ARGUMENT`). */
export const StoreResetSchema = z.strictObject({
  archiveTranscript: z.boolean().optional(),
  nextSessionId: z.string().min(1).optional(),
  cwd: z.string().min(1).optional(),
});

/** `SessionStore.appendCompaction`'s entry. */
export const CompactionEntrySchema = z.object({
  summary: z.string(),
  firstKeptEntryId: z.string().min(1),
  tokensBefore: z.number().int().nonnegative(),
  details: z.record(z.string(), z.unknown()).optional(),
});

/** `SessionStore.appendMessage`'s input. */
export const AppendMessageSchema = z.object({
  message: z.looseObject({ role: z.string().min(1), content: z.union([z.string(), z.array(z.unknown())]), timestamp: z.number().optional() }),
  idempotencyKey: z.string().min(1),
  cwd: z.string().min(1).optional(),
});
