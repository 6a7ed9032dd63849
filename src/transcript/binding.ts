/**
 * The Codex thread binding: a JSON sidecar next to the session transcript recording which Codex thread the session
 * continues, the fingerprints that decide resume vs fresh thread, the projection epoch, which turns' messages the
 * thread holds natively, and the ledger of additionalContext values already injected into it.
 *
 * On disk the sidecar is a small log, one compact JSON record per line: a whole binding, or a patch record holding what
 * changed since the record before it (`binding-log.ts`). A turn appends (one `write` on an open-for-append descriptor)
 * instead of replacing the file: replacing a file with a rename costs about 10x an append on ext4 (the rename flushes
 * the new file's data first), and the turn host writes the binding twice per turn, once while Codex runs the turn.
 * A write on the same thread appends a patch, so its cost does not grow with the held turns and the ledger. Past
 * {@link BINDING_LOG_COMPACT_BYTES} the next write rewrites the log as one whole record (temp file + rename, atomic),
 * and so does every durable write. See {@link inspectThreadBinding} for what a reader does with a torn last line.
 */
import { closeSync, constants as fsConstants, fstatSync, ftruncateSync, openSync, promises as fs, statSync, writeSync, type BigIntStats } from "node:fs";
import path from "node:path";
import { z } from "zod";
import type { Logger } from "pino";
import { sessionSidecarPaths } from "./paths.js";
import { SessionFileError } from "./errors.js";
import { silentLogger } from "../log/logger.js";
import { fsyncDirectory } from "./fsync-dir.js";
import { createLruMap } from "../lru-map.js";
import { deepFreeze } from "./freeze.js";
import { faultPoint, faultsEnabled } from "./fault.js";
import { readSmallFile, replaceSmallFile } from "./small-file.js";
import { applyBindingPatches, bindingPatch, readBindingLog, type BindingPatchRecord } from "./binding-log.js";
import { recordAcceptedTurn, type NativeThreadRecord } from "../projection/native.js";

/** Turn ids kept in `heldTurnIds`; older turns fall out (their messages are then treated as not held). */
export const MAX_HELD_TURNS = 2_000;
/** Ledger entries kept; the oldest fall out (worst case: a value is injected again). */
export const MAX_LEDGER_ENTRIES = 10_000;

const nativeUnitSchema = z.string().regex(/^[met][0-9a-f]+:\d+$/, "a native unit is <kind><hash>:<bytes>");

/**
 * What a thread synced in native projection mode holds (`NativeThreadRecord`, `src/projection/native.ts`): Codex never
 * shows injected items, so the binding records them per turn boundary, with the intent of a sync step in progress.
 */
export const nativeThreadRecordSchema = z.object({
  preamble: z.array(nativeUnitSchema),
  turns: z.array(z.object({ id: z.string().min(1), units: z.array(nativeUnitSchema), dev: z.string().optional(), lead: z.array(nativeUnitSchema).optional() })),
  /** Units riding with the next turn as its additionalContext (moved to that turn's `lead` once it is accepted). */
  lead: z.array(nativeUnitSchema).optional(),
  startDev: z.string().optional(),
  unknownFrom: z.string().min(1).nullable().optional(),
  intent: z
    .discriminatedUnion("step", [
      z.object({ step: z.literal("revert"), beforeTurnId: z.string().min(1) }),
      z.object({ step: z.literal("inject"), afterTurnId: z.string().min(1).nullable(), units: z.array(nativeUnitSchema) }),
    ])
    .optional(),
  rentBytes: z.number().nonnegative().optional(),
  cut: z.array(z.string().min(1)).optional(),
  /** A thread adopted from `delta`/`threadBootstrap` (issue 64): its turns up to `through` also hold the ledger's blocks. */
  adopted: z.object({ through: z.string().min(1), dev: z.array(z.string()).optional() }).optional(),
});

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
  /**
   * Injection ledger: one unit per message block injected into this thread as additionalContext and not dropped since
   * (`<hash>[#n]:<tokens>`, see `ledgerUnit` in `projection/index.ts`). It survives a cold `thread/resume` (Codex
   * replays persisted context items) and is cleared by a native compaction (which drops them, P3).
   */
  ledger: z.array(z.string()),
  /** Hash of the developer instructions the thread last received (thread/start, or an injected update). */
  developerInstructionsHash: z.string().optional(),
  /**
   * Every copy of developer instructions this thread received, oldest first (`<hash>:<tokens>`): thread/start, then
   * each injected update. All but a current last one are stale context (`staleDeveloperTokens`, projection).
   */
  developerDeliveries: z.array(z.string()).optional(),
  /**
   * Rent-or-buy state of the rotation policy: stale cost accrued on this thread since it started, in uncached-token
   * units (each turn adds stale tokens x cachedPriceRatio). A fresh thread starts at 0.
   */
  staleCostTokens: z.number().nonnegative().optional(),
  /** Stale tokens the thread carried in its last accepted turn (for inspection). */
  staleTokens: z.number().int().nonnegative().optional(),
  /** The last token usage Codex reported on this thread (read by the accordion cadence). */
  lastUsage: z
    .object({
      inputTokens: z.number().nonnegative(),
      totalTokens: z.number().nonnegative(),
      modelContextWindow: z.number().positive().optional(),
    })
    .optional(),
  /** Native compactions observed on this thread since the binding was made (each cleared ledger and held turns). */
  nativeCompactions: z.number().int().nonnegative().optional(),
  /**
   * The last turn on this thread failed because its input no longer fit the model's context window (Codex's
   * `contextWindowExceeded`): the next turn's accordion compacts the engine's view first when the accordion is on.
   * Not carried past the next accepted turn (`applyBindingUpdate` builds the binding afresh).
   */
  contextOverflow: z.object({ turnId: z.string().min(1) }).optional(),
  /** Native projection mode: what the thread holds, per turn boundary (see `nativeThreadRecordSchema`). */
  native: nativeThreadRecordSchema.optional(),
  /** Who wrote the binding last (e.g. "turn", "compaction", "cli"); for inspection only. */
  updatedBy: z.string().optional(),
  /**
   * The turn Codex accepted on this thread whose pending-finalize record this host has not written yet, with the
   * original prompt (and its images) the transcript records for it. Set when Codex accepts the turn, removed once the
   * turn's pending record is written. An attempt that died in between leaves it, and the next attempt rebuilds that
   * turn from Codex's own record of the thread (`thread/read`): see `src/recovery/cut-turn.ts`.
   */
  turnInFlight: z
    .object({
      turnId: z.string().min(1),
      prompt: z.string(),
      images: z.array(z.object({ type: z.literal("image"), data: z.string(), mimeType: z.string() })).optional(),
      /** The host's `requestId` of the turn: the recovered turn's prompt entry records it (marked cut). */
      requestId: z.string().min(1).max(200).optional(),
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
  projectionEpoch?: string | undefined;
  /** Hash of the developer instructions the thread now holds. */
  developerInstructionsHash?: string | undefined;
  /** A copy of developer instructions delivered with this turn (`<hash>:<tokens>`), appended to `developerDeliveries`. */
  developerDelivery?: string | undefined;
  /** Stale tokens of held messages and injected blocks the engine's view no longer shows (developer copies excluded). */
  staleContextTokens?: number | undefined;
  /** The thread's accrued stale cost after this turn (rotation policy); absent: unchanged (0 on a fresh thread). */
  staleCostTokens?: number | undefined;
  /** Total stale tokens of this turn's request (context + superseded developer copies). */
  staleTokens?: number | undefined;
  /**
   * Native mode: what the thread holds once this turn's sync is done (before the turn itself; `applyBindingUpdate`
   * adds it). Its turns replace `heldTurnIds`.
   */
  native?: NativeThreadRecord | undefined;
  /** Native mode, after a revert: the developer copies the kept thread carries (replaces `developerDeliveries`). */
  developerDeliveriesHeld?: string[] | undefined;
}

/** Developer deliveries kept per thread; the oldest fall out (their stale tokens are then no longer counted). */
export const MAX_DEVELOPER_DELIVERIES = 1_000;

/** Options of {@link readThreadBinding}. */
export interface ReadThreadBindingOptions {
  /**
   * Never write: a corrupt binding is reported (a warning naming the file, and `undefined`) and left in place instead
   * of being moved aside. For inspection (`inspect-session`); {@link inspectThreadBinding} also says why.
   */
  readOnly?: boolean | undefined;
  /** Hears what a corrupt binding became (moved aside, and where): the turn's `result.warnings`. */
  onSetAside?: ((warning: string) => void) | undefined;
}

/** What {@link inspectThreadBinding} found. */
export type ThreadBindingInspection =
  | { status: "missing" }
  | { status: "ok"; binding: ThreadBinding }
  | { status: "corrupt"; reason: string }
  /** Of a format version this version does not read (a newer version wrote it): never moved aside. */
  | { status: "unsupported"; version: string };

/** Bindings kept (least recently used dropped first). */
const MAX_CACHED_BINDINGS = 32;

/**
 * The binding log is rewritten as one line by the first write that would take it past this size (or past four times
 * the whole record the log starts from, for a binding larger than a quarter of it). Patch records are a few hundred
 * bytes: a rewrite every ~100-300 turns, and a cold read never parses more than this.
 */
export const BINDING_LOG_COMPACT_BYTES = 64 * 1024;

interface CachedBinding {
  dev: bigint;
  ino: bigint;
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
  binding: ThreadBinding;
  /** The file ends with the newline of the record this entry holds: the next write may append to it. */
  appendable: boolean;
  /** Bytes of the whole record the binding starts from (patch records follow it). */
  baseBytes: number;
}

/**
 * The binding this process last read or wrote, per file, with that file's identity. Every write changes the identity
 * (an append grows the file, a rewrite makes a new inode), and writes happen under the session lock, so another writer
 * always changes it. What it hands out is deeply frozen (shared between turns): update a binding with the functions
 * below, which copy.
 */
const bindingCache = createLruMap<string, CachedBinding>(MAX_CACHED_BINDINGS);

function sameIdentity(c: CachedBinding, st: BigIntStats): boolean {
  return c.dev === st.dev && c.ino === st.ino && c.size === st.size && c.mtimeNs === st.mtimeNs && c.ctimeNs === st.ctimeNs;
}

function cachedBinding(file: string, st: BigIntStats): ThreadBinding | undefined {
  const c = bindingCache.get(file);
  return c && sameIdentity(c, st) ? c.binding : undefined;
}

function rememberBinding(file: string, st: BigIntStats, binding: ThreadBinding, appendable: boolean, baseBytes: number): ThreadBinding {
  // The ledger changes only when the thread receives context, rotates or is compacted: an unchanged one keeps the
  // previous binding's frozen array, so what the projection derives from it is kept by the array's identity across
  // turns instead of being rebuilt from ~2,000 units on every turn of a long session.
  const previous = bindingCache.get(file)?.binding;
  if (previous !== undefined && previous.ledger !== binding.ledger && sameStrings(previous.ledger, binding.ledger)) {
    binding = { ...binding, ledger: previous.ledger };
  }
  const frozen = deepFreeze(binding);
  bindingCache.set(file, { dev: st.dev, ino: st.ino, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs, binding: frozen, appendable, baseBytes });
  return frozen;
}

function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Read the binding; a missing file is `undefined`, a corrupt one (not JSON, or not this schema) is moved aside
 * (`.corrupt-<n>`, the first free n) with a warning and also `undefined`, so the next turn starts a fresh thread
 * instead of failing. With `{ readOnly: true }` nothing is written: a corrupt binding is reported with a warning and
 * left in place (use {@link inspectThreadBinding} to get the reason).
 *
 * @example
 * ```ts
 * const binding = await readThreadBinding("/data/s1.jsonl", logger); // undefined => fresh thread
 * await readThreadBinding("/data/s1.jsonl", logger, { readOnly: true }); // inspect-session: never moves anything
 * ```
 */
export async function readThreadBinding(
  sessionFile: string,
  logger: Logger = silentLogger,
  options: ReadThreadBindingOptions = {},
): Promise<ThreadBinding | undefined> {
  const file = sessionSidecarPaths(sessionFile).binding;
  const found = await inspectThreadBinding(sessionFile);
  if (found.status === "missing") return undefined;
  if (found.status === "ok") return found.binding;
  if (found.status === "unsupported") {
    throw new SessionFileError(
      "SESSION_SIDECAR_VERSION_UNSUPPORTED",
      file,
      `thread binding ${file} has format version ${found.version}, and this version of codex-turn-machine reads version 1 (written by a newer version?); nothing was moved or changed: run the version that wrote it, or move the file aside yourself (the next turn then starts a fresh Codex thread)`,
    );
  }
  if (options.readOnly) {
    logger.warn({ event: "thread binding corrupt", file: path.basename(file), reason: found.reason }, "corrupt thread binding (read-only: left in place)");
    return undefined;
  }
  const aside = await moveThreadBindingAside(sessionFile);
  // Another reader moved it first: the outcome (no binding, fresh thread) is the same.
  if (aside === undefined) return undefined;
  logger.warn({ event: "thread binding corrupt", movedTo: path.basename(aside) }, "corrupt thread binding moved aside; starting a fresh thread");
  options.onSetAside?.(`the thread binding ${path.basename(file)} was corrupt (${found.reason}); it was moved aside to ${path.basename(aside)} and this turn starts a fresh Codex thread from the transcript`);
  return undefined;
}

/**
 * Move the binding sidecar aside to `<binding>.corrupt-<n>` (the first free n), kept for inspection: the next read
 * finds no binding and the next turn starts a fresh Codex thread. Returns the new path, or undefined when there was
 * no binding. The session store's `setAsideBinding()`.
 *
 * @example
 * ```ts
 * await moveThreadBindingAside("/data/s1.jsonl"); // "/data/s1.jsonl.codex-binding.json.corrupt-1"
 * ```
 */
export async function moveThreadBindingAside(sessionFile: string): Promise<string | undefined> {
  const file = sessionSidecarPaths(sessionFile).binding;
  const aside = await nextFreePath(`${file}.corrupt`);
  try {
    await fs.rename(file, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new SessionFileError("SESSION_WRITE_FAILED", file, `cannot move the thread binding ${file} aside (${(error as NodeJS.ErrnoException).code ?? String(error)})`, { cause: error });
  }
  bindingCache.delete(file);
  return aside;
}

/**
 * Read the binding without ever writing: missing, valid, or corrupt with the reason (not JSON, or the schema issue
 * with its field path). Nothing is moved aside.
 *
 * The binding is the last whole record of the file with the patch records after it applied (`readBindingLog`); bytes
 * after the last newline are an append cut short and are ignored. A last line that is not JSON (an append an OS crash
 * left half on disk) is ignored too: the binding is then one write behind, which a turn handles like any binding that
 * lags its thread. A file whose lines are not records is read whole (a pretty-printed binding written by an earlier
 * version). A record that is JSON but does not make a valid binding is corrupt; it is never skipped for an older one.
 *
 * @example
 * ```ts
 * const found = await inspectThreadBinding(sessionFile);
 * if (found.status === "corrupt") console.log(`binding corrupt: ${found.reason}`);
 * ```
 */
export async function inspectThreadBinding(sessionFile: string): Promise<ThreadBindingInspection> {
  const file = sessionSidecarPaths(sessionFile).binding;
  // The turn reads the binding every time; re-parsing (and validating) it costs as much as its ledger is long, so a
  // file whose identity is the one this process last read or wrote is not read again (one stat).
  const st = statSync(file, { bigint: true, throwIfNoEntry: false });
  const hit = st ? cachedBinding(file, st) : undefined;
  if (hit) return { status: "ok", binding: hit };
  const text = readSmallFile(file);
  if (text === undefined) {
    bindingCache.delete(file);
    return { status: "missing" };
  }
  const record = readBindingLog(text);
  if (!record.ok) return record.reason.endsWith(": unknown patch version") ? { status: "unsupported", version: "a newer patch record" } : { status: "corrupt", reason: record.reason };
  const { version } = (typeof record.json === "object" && record.json !== null ? record.json : {}) as { version?: unknown };
  if (version !== undefined && version !== 1) return { status: "unsupported", version: JSON.stringify(version) };
  const parsed = threadBindingSchema.safeParse(record.json);
  // The identity is the one stat'ed before the read: a file replaced or appended to in between mismatches on the next
  // read. Only a file read whole up to its last newline-terminated record may be appended to (and only if its size is
  // the one stat'ed: the text read is that long).
  const appendable = record.appendable && st !== undefined && BigInt(Buffer.byteLength(text)) === st.size;
  if (parsed.success) return { status: "ok", binding: st ? rememberBinding(file, st, parsed.data, appendable, record.baseBytes) : parsed.data };
  const issue = parsed.error.issues[0];
  const field = issue && issue.path.length > 0 ? issue.path.join(".") : "(root)";
  return { status: "corrupt", reason: `${field}: ${issue?.message ?? "invalid"}` };
}

let tmpCounter = 0;

/** Options of {@link writeThreadBinding}. */
export interface WriteThreadBindingOptions {
  /**
   * Default true: fsync the file before the rename and the directory after it, so the binding survives an OS crash.
   * With false the write is atomic and visible to every process at once, and it survives a crash of the writing
   * process, but an OS crash may bring back the previous binding (or a damaged file, which the next read moves aside
   * and treats as no binding). Follow it with a durable write.
   */
  durable?: boolean | undefined;
}

/**
 * Write the binding atomically: a unique temp file holding it as one line, fsync, rename over the old one, then a
 * best-effort fsync of the directory so the rename itself survives a crash. Readers see the old or the new binding,
 * never a torn one. With `durable: false`, a binding file this process last read or wrote, still as it left it, gets
 * the binding appended as a new line instead (see the module comment); readers then see the old binding until the
 * line is complete.
 *
 * @example
 * ```ts
 * await writeThreadBinding(sessionFile, applyBindingUpdate(await readThreadBinding(sessionFile), { ... }));
 * await writeThreadBinding(sessionFile, binding, { durable: false }); // no fsync; a durable write must follow
 * ```
 */
export async function writeThreadBinding(sessionFile: string, binding: ThreadBinding, options: WriteThreadBindingOptions = {}): Promise<void> {
  await writeValidatedThreadBinding(sessionFile, threadBindingSchema.parse(binding), options);
}

/**
 * {@link writeThreadBinding} for a binding built from already-validated data (the turn host's binding keeper updates
 * the binding it read): the same atomic write, without a schema walk of its ledger on every turn.
 */
export async function writeValidatedThreadBinding(sessionFile: string, valid: ThreadBinding, options: WriteThreadBindingOptions = {}): Promise<void> {
  const durable = options.durable ?? true;
  const file = sessionSidecarPaths(sessionFile).binding;
  if (!durable && appendBindingRecord(file, valid)) return;
  const text = `${JSON.stringify(valid)}\n`;
  // Unique per process and per call: two writes racing in one process must not share a temp file.
  const tmp = `${file}.tmp-${process.pid}-${++tmpCounter}`;
  await replaceSmallFile(file, tmp, text, { durable });
  // Under the session lock nothing else replaces it between the rename and this stat: the next read is one stat.
  const st = statSync(file, { bigint: true, throwIfNoEntry: false });
  // The cached copy is the text just written, parsed: what a fresh read of the file gives (JSON.parse is several times
  // cheaper than structuredClone here, and the caller's object stays its own).
  const bytes = Buffer.byteLength(text);
  if (st) rememberBinding(file, st, JSON.parse(text) as ThreadBinding, st.size === BigInt(bytes), bytes);
  else bindingCache.delete(file);
  if (durable) await fsyncDirectory(path.dirname(file));
}

/**
 * The record that appends `next` to a log whose binding is `cached`: a patch on the same thread when it is well smaller
 * than the whole binding (the usual turn: a held turn id, the usage, the in-flight marker), else the whole binding.
 */
function nextLogRecord(cached: CachedBinding, next: ThreadBinding): { text: string; patch?: BindingPatchRecord | undefined } | "unchanged" {
  if (cached.binding.threadId === next.threadId) {
    const patch = bindingPatch(cached.binding, next);
    if (patch === undefined) return "unchanged";
    const text = `${JSON.stringify(patch)}\n`;
    if (text.length * 2 < cached.baseBytes) return { text, patch };
  }
  return { text: `${JSON.stringify(next)}\n` };
}

/**
 * Append `next` to the binding log as one record (see {@link nextLogRecord}), when the file is exactly as this process
 * last read or wrote it, ending with a complete record, and stays under {@link BINDING_LOG_COMPACT_BYTES} (or four
 * times its whole record); a binding equal to the one the file holds appends nothing. Returns false, having written
 * nothing, when the caller must rewrite the file instead. A failed or short write is cut back to the previous length
 * (the old binding stays the binding) and rethrown.
 */
function appendBindingRecord(file: string, next: ThreadBinding): boolean {
  const cached = bindingCache.get(file);
  if (!cached?.appendable) return false;
  const record = nextLogRecord(cached, next);
  if (record === "unchanged") {
    // The binding asked for is the one the file holds as this process last saw it: there is nothing to append (an empty
    // patch record would only grow the log). A file changed or removed since is written whole by the caller.
    const st = statSync(file, { bigint: true, throwIfNoEntry: false });
    return st !== undefined && sameIdentity(cached, st);
  }
  const bytes = Buffer.from(record.text);
  const baseBytes = record.patch ? cached.baseBytes : bytes.length;
  if (cached.size + BigInt(bytes.length) > BigInt(Math.max(BINDING_LOG_COMPACT_BYTES, 4 * baseBytes))) return false;
  let fd: number;
  try {
    // No O_CREAT: a binding removed since (a reset) is written whole.
    fd = openSync(file, fsConstants.O_WRONLY | fsConstants.O_APPEND);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw error;
  }
  try {
    const before = fstatSync(fd, { bigint: true });
    if (!sameIdentity(cached, before)) return false;
    try {
      const written = faultsEnabled() ? appendInTwo(fd, bytes) : writeSync(fd, bytes);
      if (written !== bytes.length) throw new Error(`short write to the thread binding (${written} of ${bytes.length} bytes)`);
    } catch (error) {
      bindingCache.delete(file);
      // Cut the partial record off, so the next record starts on a line of its own. If that fails too, the reader
      // ignores a line without its newline, and the next write rewrites the file (the cache entry is gone).
      try {
        ftruncateSync(fd, Number(before.size));
      } catch {
        // see above
      }
      throw error;
    }
    // The cached copy is what a fresh read gives: the record just written, parsed, applied to the cached binding
    // (fields the patch does not name keep their frozen values; the caller's object stays its own).
    const after = record.patch ? patchedCopy(cached.binding, record.text) : (JSON.parse(record.text) as ThreadBinding);
    rememberBinding(file, fstatSync(fd, { bigint: true }), after, true, baseBytes);
    return true;
  } finally {
    closeSync(fd);
  }
}

function patchedCopy(binding: ThreadBinding, patchText: string): ThreadBinding {
  const applied = applyBindingPatches(binding as unknown as Record<string, unknown>, [JSON.parse(patchText) as Record<string, unknown>]);
  // Cannot happen: the patch was made from this binding.
  if ("problem" in applied) throw new Error(`thread binding patch does not apply to the binding it was made from: ${applied.problem}`);
  return applied.value as unknown as ThreadBinding;
}

/** The append in two writes with a fault point between them (fault tests only: a failure or crash mid-record). */
function appendInTwo(fd: number, bytes: Buffer): number {
  const half = bytes.length >> 1;
  const first = writeSync(fd, bytes, 0, half);
  faultPoint("binding:mid-append");
  return first + writeSync(fd, bytes, half, bytes.length - half);
}

/**
 * Remove the binding (the next turn starts a fresh thread). Returns whether one existed.
 *
 * @example
 * ```ts
 * await clearThreadBinding(sessionFile); // e.g. on /new or /reset
 * ```
 */
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
    /** Usage Codex reported for this turn; recorded as `lastUsage` (else the same thread's previous usage is kept). */
    usage?: BindingUsage | undefined;
    updatedBy?: string | undefined;
  },
): ThreadBinding {
  const update = isBindingUpdate(p.update) ? p.update : undefined;
  const sameThread = binding !== undefined && binding.threadId === p.threadId && !update?.reset;
  // A native thread keeps its record through a turn projected otherwise (an assemble that failed: mode none).
  const nativeBase = update?.native ?? (sameThread ? (binding.native as NativeThreadRecord | undefined) : undefined);
  let native = nativeBase ? recordAcceptedTurn(nativeBase, p.turnId, update?.reset ? undefined : update?.developerDelivery) : undefined;
  // Without a sync of its own the turn repaired nothing: an unfinished step or an unknown stretch is still there.
  if (native && !update?.native && nativeBase) {
    if (nativeBase.intent !== undefined) native = { ...native, intent: nativeBase.intent };
    if (nativeBase.unknownFrom !== undefined) native = { ...native, unknownFrom: nativeBase.unknownFrom };
  }
  if (native && update?.reset && update.developerDelivery !== undefined) native.startDev = update.developerDelivery;
  const held = native ? native.turns.map((t) => t.id).filter((t) => t !== p.turnId) : sameThread ? binding.heldTurnIds : [];
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
    ledger: withLedgerAdded(ledger, update?.ledgerAdd ?? []),
  };
  if (epoch !== undefined) next.projectionEpoch = epoch;
  const devHash = update?.developerInstructionsHash ?? (sameThread ? binding.developerInstructionsHash : undefined);
  if (devHash !== undefined) next.developerInstructionsHash = devHash;
  const deliveries = [...(update?.developerDeliveriesHeld ?? (sameThread ? (binding.developerDeliveries ?? []) : []))];
  if (update?.developerDelivery !== undefined) deliveries.push(update.developerDelivery);
  if (deliveries.length > 0) next.developerDeliveries = deliveries.slice(-MAX_DEVELOPER_DELIVERIES);
  const staleCost = update?.staleCostTokens ?? (sameThread ? binding.staleCostTokens : undefined);
  if (staleCost !== undefined) next.staleCostTokens = staleCost;
  if (update?.staleTokens !== undefined) next.staleTokens = Math.round(update.staleTokens);
  const usage = p.usage ?? (sameThread ? binding.lastUsage : undefined);
  if (usage) next.lastUsage = usage;
  if (sameThread && binding.nativeCompactions !== undefined) next.nativeCompactions = binding.nativeCompactions;
  if (native) next.native = native;
  if (p.updatedBy !== undefined) next.updatedBy = p.updatedBy;
  return next;
}

/**
 * The ledger with `add` appended (deduplicated, the oldest past {@link MAX_LEDGER_ENTRIES} dropped). Nothing to add,
 * the usual turn on a held thread, keeps the same array: the turn does not copy a ledger of thousands of units, and the
 * binding's patch and cache see it unchanged by reference.
 */
function withLedgerAdded(ledger: string[], add: readonly string[]): string[] {
  if (add.length === 0 && ledger.length <= MAX_LEDGER_ENTRIES) return ledger;
  return [...new Set([...ledger, ...add])].slice(-MAX_LEDGER_ENTRIES);
}

/** Usage as the binding records it. */
export type BindingUsage = NonNullable<ThreadBinding["lastUsage"]>;

/**
 * The binding after a native Codex compaction on `threadId`: the compaction dropped every earlier additionalContext
 * item and all assistant output (notes §5.1, P3), so the ledger and `heldTurnIds` are cleared and the next projection
 * re-sends what the engine still shows. A compaction on another thread changes nothing. Conservative for a mid-turn
 * compaction too: this turn's items may be partly kept, and re-sending them costs a duplicate, not lost context.
 *
 * @example
 * ```ts
 * binding = markNativeCompaction(binding, record.threadId);
 * ```
 */
export function markNativeCompaction(binding: ThreadBinding, threadId: string, updatedBy?: string): ThreadBinding {
  if (binding.threadId !== threadId) return binding;
  const next: ThreadBinding = { ...binding, ledger: [], heldTurnIds: [], nativeCompactions: (binding.nativeCompactions ?? 0) + 1 };
  // Native mode: what the thread holds is unknown from its last recorded turn on (a compaction outside a turn comes
  // after it); the next sync cuts before it, which restores the history before the compaction (null: rotate).
  if (binding.native) next.native = { ...binding.native, unknownFrom: binding.native.turns.at(-1)?.id ?? null };
  // The compaction dropped injected developer updates and earlier items: nothing stale is left to pay for.
  delete next.developerDeliveries;
  // Nor is the thread still over its window: the next turn need not compact for an earlier overflow.
  delete next.contextOverflow;
  if (next.staleCostTokens !== undefined) next.staleCostTokens = 0;
  if (next.staleTokens !== undefined) next.staleTokens = 0;
  if (updatedBy !== undefined) next.updatedBy = updatedBy;
  return next;
}

/**
 * The binding after a turn on `threadId` failed with Codex's `contextWindowExceeded` (unchanged for another thread).
 *
 * @example
 * ```ts
 * const next = withContextOverflow(binding, threadId, turnId); // next.contextOverflow: { turnId }
 * ```
 */
export function withContextOverflow(binding: ThreadBinding, threadId: string, turnId: string): ThreadBinding {
  if (binding.threadId !== threadId) return binding;
  return { ...binding, contextOverflow: { turnId } };
}

/**
 * The binding with the last usage Codex reported on its thread (read by the accordion cadence). Usage reported for
 * another thread changes nothing.
 *
 * @example
 * ```ts
 * binding = withLastUsage(binding, record.threadId, { inputTokens: 900, totalTokens: 950, modelContextWindow: 190_000 });
 * ```
 */
export function withLastUsage(binding: ThreadBinding, threadId: string, usage: BindingUsage): ThreadBinding {
  if (binding.threadId !== threadId) return binding;
  return { ...binding, lastUsage: { ...usage } };
}

function isBindingUpdate(value: unknown): value is BindingUpdate {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as BindingUpdate).reset === "boolean" &&
    Array.isArray((value as BindingUpdate).ledgerAdd)
  );
}

/** `<base>-<n>` for the first n that does not exist (where a corrupt sidecar is moved aside). */
export async function nextFreePath(base: string): Promise<string> {
  for (let n = 1; ; n++) {
    const candidate = `${base}-${n}`;
    try {
      await fs.access(candidate);
    } catch {
      return candidate;
    }
  }
}
