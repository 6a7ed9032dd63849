/**
 * The binding sidecar's log format (docs/storage.md, "The binding log"): one JSON record per line, each either a whole
 * binding or a patch record (`{"patch":1,...}`) saying what changed since the record before it. The binding is the last
 * whole record with the patches after it applied in order.
 *
 * Why patches: a binding carries the turn ids its thread holds (up to `MAX_HELD_TURNS`) and the injection ledger, so a
 * whole record grows with the session (about 78 KB at 2,000 held turns), and a turn writes the binding twice. A patch
 * holds what the turn changed (the new turn id, the usage, the in-flight marker): a few hundred bytes, whatever the
 * session's length. Measured at 2,000 held turns: +1.2 ms of CPU per turn against a fresh session with whole records.
 *
 * Nothing here touches the file system; `binding.ts` reads and writes the sidecar.
 */
import { isDeepStrictEqual } from "node:util";

/** Array fields a patch changes by dropping elements at the front and adding some at the end (their usual change). */
const LOG_ARRAY_FIELDS: ReadonlySet<string> = new Set(["heldTurnIds", "ledger", "developerDeliveries"]);

/** How far into the old array a patch looks for where the new one starts (a turn drops at most a few at the front). */
const MAX_FRONT_DROP_SCAN = 64;

/**
 * A patch record. `unset`: fields removed; `set`: fields given whole; `arrays`: for an array field of
 * {@link LOG_ARRAY_FIELDS}, `[dropped at the front, added at the end]`. Applied in that order.
 */
export interface BindingPatchRecord {
  patch: 1;
  unset?: string[] | undefined;
  set?: Record<string, unknown> | undefined;
  arrays?: Record<string, [number, unknown[]]> | undefined;
}

type JsonObject = Record<string, unknown>;

function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A patch record (a line with a `patch` key) rather than a whole binding. */
export function isBindingPatchRecord(value: unknown): boolean {
  return isPlainObject(value) && "patch" in value;
}

/**
 * The patch that turns `prev` into `next` (both bindings of the same thread), or `undefined` when nothing changed.
 * Fields whose value is `undefined` count as absent, as in JSON.
 *
 * @example
 * ```ts
 * const patch = bindingPatch(cached, next); // { patch: 1, arrays: { heldTurnIds: [0, ["turn-9"]] } }
 * ```
 */
export function bindingPatch(prev: object, next: object): BindingPatchRecord | undefined {
  const before = prev as JsonObject;
  const after = next as JsonObject;
  const set: JsonObject = {};
  const unset: string[] = [];
  const arrays: Record<string, [number, unknown[]]> = {};
  let changed = false;
  for (const key of Object.keys(after)) {
    const b = after[key];
    const a = before[key];
    if (b === undefined || a === b) continue;
    if (LOG_ARRAY_FIELDS.has(key) && Array.isArray(a) && Array.isArray(b)) {
      const change = arrayChange(a, b);
      if (change === undefined) set[key] = b;
      else if (change[0] > 0 || change[1].length > 0) arrays[key] = change;
      else continue;
      changed = true;
    } else if (!isDeepStrictEqual(a, b)) {
      set[key] = b;
      changed = true;
    }
  }
  for (const key of Object.keys(before)) {
    if (before[key] !== undefined && after[key] === undefined) {
      unset.push(key);
      changed = true;
    }
  }
  if (!changed) return undefined;
  return {
    patch: 1,
    ...(unset.length > 0 ? { unset } : {}),
    ...(Object.keys(set).length > 0 ? { set } : {}),
    ...(Object.keys(arrays).length > 0 ? { arrays } : {}),
  };
}

/** `[d, add]` with `b = a.slice(d) ++ add` and a non-empty kept part, or undefined (write `b` whole). */
function arrayChange(a: readonly unknown[], b: readonly unknown[]): [number, unknown[]] | undefined {
  if (b.length === 0) return a.length === 0 ? [0, []] : undefined;
  const scan = Math.min(a.length, MAX_FRONT_DROP_SCAN);
  for (let d = 0; d < scan; d++) {
    if (a[d] !== b[0]) continue;
    const kept = a.length - d;
    if (kept > b.length) continue;
    let i = 1;
    while (i < kept && a[d + i] === b[i]) i++;
    if (i === kept) return [d, b.slice(kept)];
  }
  return undefined;
}

/** Why `value` is not a patch record this version applies, or undefined when it is one. */
function patchRecordProblem(value: JsonObject): string | undefined {
  if (value.patch !== 1) return "unknown patch version";
  if (value.unset !== undefined && !(Array.isArray(value.unset) && value.unset.every((k) => typeof k === "string"))) return "unset is not a list of field names";
  if (value.set !== undefined && !isPlainObject(value.set)) return "set is not an object";
  if (value.arrays !== undefined) {
    if (!isPlainObject(value.arrays)) return "arrays is not an object";
    for (const [key, change] of Object.entries(value.arrays)) {
      if (!LOG_ARRAY_FIELDS.has(key)) return `arrays.${key} is not a list field`;
      if (!Array.isArray(change) || change.length !== 2 || !Number.isInteger(change[0]) || (change[0] as number) < 0 || !Array.isArray(change[1])) {
        return `arrays.${key} is not [dropped, added]`;
      }
    }
  }
  return undefined;
}

/**
 * `base` with `patches` applied in order, as a new object (`base` and its arrays are not changed; fields no patch
 * touches keep their values, by reference). An array field is copied once, however many patches extend it.
 * Returns the reason when a patch is malformed or does not apply (it drops more than the array holds).
 *
 * @example
 * ```ts
 * const r = applyBindingPatches(wholeRecord, [patchA, patchB]);
 * if ("problem" in r) throw new Error(r.problem);
 * ```
 */
export function applyBindingPatches(base: JsonObject, patches: readonly JsonObject[]): { value: JsonObject } | { problem: string } {
  const out: JsonObject = { ...base };
  // Arrays being extended: a private copy and how many of its front elements are dropped.
  const growing = new Map<string, { items: unknown[]; from: number }>();
  for (let n = 0; n < patches.length; n++) {
    const patch = patches[n]!;
    const problem = patchRecordProblem(patch);
    if (problem) return { problem: `patch ${n + 1} after the binding: ${problem}` };
    for (const key of (patch.unset as string[] | undefined) ?? []) {
      delete out[key];
      growing.delete(key);
    }
    for (const [key, value] of Object.entries((patch.set as JsonObject | undefined) ?? {})) {
      out[key] = value;
      growing.delete(key);
    }
    for (const [key, [drop, add]] of Object.entries((patch.arrays as Record<string, [number, unknown[]]> | undefined) ?? {})) {
      let g = growing.get(key);
      if (!g) {
        const current = out[key];
        if (!Array.isArray(current)) return { problem: `patch ${n + 1} after the binding: ${key} is not a list to extend` };
        g = { items: current.slice(), from: 0 };
        growing.set(key, g);
      }
      if (drop > g.items.length - g.from) return { problem: `patch ${n + 1} after the binding: drops ${drop} of ${g.items.length - g.from} ${key}` };
      g.from += drop;
      for (const item of add) g.items.push(item);
    }
  }
  for (const [key, g] of growing) out[key] = g.from === 0 ? g.items : g.items.slice(g.from);
  return { value: out };
}

/** What {@link readBindingLog} found in a sidecar's text. */
export type BindingLogRead =
  | {
      ok: true;
      /** The binding (not validated: the caller checks it against the schema). */
      json: unknown;
      /** The text ends with the newline of the record this binding ends at: the next write may append to it. */
      appendable: boolean;
      /** Bytes of the whole record the binding starts from, newline included (the log's compaction threshold). */
      baseBytes: number;
    }
  | { ok: false; reason: string };

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false };
  }
}

/**
 * The binding a sidecar's text holds: the last whole record with the patch records after it applied. Bytes after the
 * last newline are an append cut short and are ignored. A last line that is not JSON (an append an OS crash left half
 * on disk) is ignored too: the binding is then one write behind. Any other line that is not JSON, or patches without
 * a whole record before them, make the file corrupt. A file whose last line is not JSON but whose whole text is (a
 * pretty-printed binding written by an earlier version) is that record.
 *
 * @example
 * ```ts
 * const r = readBindingLog(`${JSON.stringify(binding)}\n{"patch":1,"unset":["turnInFlight"]}\n`);
 * ```
 */
export function readBindingLog(text: string): BindingLogRead {
  const end = text.lastIndexOf("\n");
  if (end < 0) {
    // No newline at all: one record written without one.
    const whole = parseJson(text);
    return whole.ok ? { ok: true, json: whole.value, appendable: false, baseBytes: Buffer.byteLength(text) } : { ok: false, reason: "not JSON" };
  }
  const lines = text.slice(0, end).split("\n");
  let appendable = end === text.length - 1;
  let i = lines.length - 1;
  let last = parseJson(lines[i]!);
  if (!last.ok) {
    // A file written whole (pretty-printed, an earlier version), or a torn append.
    const whole = parseJson(text);
    if (whole.ok) return { ok: true, json: whole.value, appendable: false, baseBytes: Buffer.byteLength(text) };
    appendable = false;
    i--;
    if (i < 0) return { ok: false, reason: "not JSON" };
    last = parseJson(lines[i]!);
  }
  const patches: JsonObject[] = [];
  for (let parsed = last; ; parsed = parseJson(lines[i]!)) {
    if (!parsed.ok) return { ok: false, reason: "not JSON" };
    if (!isBindingPatchRecord(parsed.value)) {
      if (patches.length === 0) return { ok: true, json: parsed.value, appendable, baseBytes: Buffer.byteLength(lines[i]!) + 1 };
      if (!isPlainObject(parsed.value)) return { ok: false, reason: "(root): the record before the patches is not an object" };
      const applied = applyBindingPatches(parsed.value, patches.reverse());
      if ("problem" in applied) return { ok: false, reason: applied.problem };
      return { ok: true, json: applied.value, appendable, baseBytes: Buffer.byteLength(lines[i]!) + 1 };
    }
    patches.push(parsed.value as JsonObject);
    if (--i < 0) return { ok: false, reason: "patch records without a binding before them" };
  }
}
