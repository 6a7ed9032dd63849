/**
 * The Codex thread binding: a JSON sidecar next to the session transcript recording which Codex thread the session
 * continues, the fingerprints that decide resume vs fresh thread, the projection epoch, which turns' messages the
 * thread holds natively, and the ledger of additionalContext values already injected into it.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import { z } from "zod";
import type { Logger } from "pino";
import { sessionSidecarPaths } from "./paths.js";
import { silentLogger } from "../log/logger.js";

/** Turn ids kept in `heldTurnIds`; older turns fall out (their messages are then treated as not held). */
export const MAX_HELD_TURNS = 2_000;
/** Ledger entries kept; the oldest fall out (worst case: a value is injected again). */
export const MAX_LEDGER_ENTRIES = 10_000;

export const threadBindingSchema = z.object({
  version: z.literal(1),
  threadId: z.string().min(1),
  dynamicToolsFingerprint: z.string(),
  engineId: z.string(),
  policyFingerprint: z.string(),
  projectionMode: z.string(),
  projectionEpoch: z.string().optional(),
  /** Turns whose messages the thread holds natively (cleared by a native compaction). */
  heldTurnIds: z.array(z.string()),
  /** Hashes of additionalContext values injected into this thread and not dropped since. */
  ledger: z.array(z.string()),
  /** Hash of the developer instructions the thread last received (thread/start, or an injected update). */
  developerInstructionsHash: z.string().optional(),
  /** The last token usage Codex reported on this thread (read by the accordion cadence). */
  lastUsage: z
    .object({
      inputTokens: z.number().nonnegative(),
      totalTokens: z.number().nonnegative(),
      modelContextWindow: z.number().positive().optional(),
    })
    .optional(),
});

export type ThreadBinding = z.infer<typeof threadBindingSchema>;

/** What a projection asks to change in the binding once Codex accepted the turn. */
export interface BindingUpdate {
  /** The turn runs on a fresh thread: forget what the old thread held. */
  reset: boolean;
  /** Hashes of the additionalContext values sent with this turn. */
  ledgerAdd: string[];
  projectionEpoch?: string;
  /** Hash of the developer instructions the thread now holds. */
  developerInstructionsHash?: string;
}

/**
 * Read the binding; a missing file is `undefined`, a corrupt one is moved aside (`.corrupt-<n>`) with a warning and
 * also `undefined`, so the next turn starts a fresh thread instead of failing.
 */
export async function readThreadBinding(sessionFile: string, logger: Logger = silentLogger): Promise<ThreadBinding | undefined> {
  const file = sessionSidecarPaths(sessionFile).binding;
  let text: string;
  try {
    text = await fs.readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  let parsed: ReturnType<typeof threadBindingSchema.safeParse> | undefined;
  try {
    parsed = threadBindingSchema.safeParse(JSON.parse(text));
  } catch {
    parsed = undefined;
  }
  if (parsed?.success) return parsed.data;
  const aside = await nextFreePath(`${file}.corrupt`);
  await fs.rename(file, aside);
  logger.warn({ event: "thread binding corrupt", movedTo: path.basename(aside) }, "corrupt thread binding moved aside; starting a fresh thread");
  return undefined;
}

/** Write the binding atomically (temp file, fsync, rename). */
export async function writeThreadBinding(sessionFile: string, binding: ThreadBinding): Promise<void> {
  const file = sessionSidecarPaths(sessionFile).binding;
  const valid = threadBindingSchema.parse(binding);
  const tmp = `${file}.tmp-${process.pid}`;
  const handle = await fs.open(tmp, "w");
  try {
    await handle.writeFile(`${JSON.stringify(valid, null, 2)}\n`, "utf8");
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fs.rename(tmp, file);
}

/** Remove the binding (the next turn starts a fresh thread). Returns whether one existed. */
export async function clearThreadBinding(sessionFile: string): Promise<boolean> {
  try {
    await fs.unlink(sessionSidecarPaths(sessionFile).binding);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw error;
  }
}

/**
 * The binding after Codex accepted a turn on `threadId`.
 *
 * @example
 * ```ts
 * const next = applyBindingUpdate(binding, { threadId, turnId, update, dynamicToolsFingerprint: "…", engineId: "e",
 *   policyFingerprint: "…", projectionMode: "delta" });
 * ```
 */
export function applyBindingUpdate(
  binding: ThreadBinding | undefined,
  p: {
    threadId: string;
    turnId: string;
    update?: unknown;
    dynamicToolsFingerprint: string;
    engineId: string;
    policyFingerprint: string;
    projectionMode: string;
  },
): ThreadBinding {
  const update = isBindingUpdate(p.update) ? p.update : undefined;
  const sameThread = binding !== undefined && binding.threadId === p.threadId && !update?.reset;
  const held = sameThread ? binding.heldTurnIds : [];
  const ledger = sameThread ? binding.ledger : [];
  const epoch = update?.projectionEpoch ?? (sameThread ? binding.projectionEpoch : undefined);
  const next: ThreadBinding = {
    version: 1,
    threadId: p.threadId,
    dynamicToolsFingerprint: p.dynamicToolsFingerprint,
    engineId: p.engineId,
    policyFingerprint: p.policyFingerprint,
    projectionMode: p.projectionMode,
    heldTurnIds: [...held.filter((t) => t !== p.turnId), p.turnId].slice(-MAX_HELD_TURNS),
    ledger: [...new Set([...ledger, ...(update?.ledgerAdd ?? [])])].slice(-MAX_LEDGER_ENTRIES),
  };
  if (epoch !== undefined) next.projectionEpoch = epoch;
  const devHash = update?.developerInstructionsHash ?? (sameThread ? binding.developerInstructionsHash : undefined);
  if (devHash !== undefined) next.developerInstructionsHash = devHash;
  if (sameThread && binding.lastUsage) next.lastUsage = binding.lastUsage;
  return next;
}

function isBindingUpdate(value: unknown): value is BindingUpdate {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as BindingUpdate).reset === "boolean" &&
    Array.isArray((value as BindingUpdate).ledgerAdd)
  );
}

async function nextFreePath(base: string): Promise<string> {
  for (let n = 1; ; n++) {
    const candidate = `${base}-${n}`;
    try {
      await fs.access(candidate);
    } catch {
      return candidate;
    }
  }
}
