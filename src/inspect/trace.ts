/**
 * An offline trace recorder built on XState's inspection API. It keeps only what a replay needs — event types,
 * state values, actor ids and counts — and never event payloads or context, because those carry prompts and
 * transcript text. The JSONL form is what `renderStatechartPage({ trace })` replays.
 */
import { writeFile } from "node:fs/promises";
import { readRegularTextFile } from "../regular-file.js";
import { pino, type Logger } from "pino";
import type { InspectionEvent } from "xstate";
import { z } from "zod";

/** Codes of {@link TraceFileError}. */
export type TraceFileErrorCode =
  /** A line of a trace file is not JSON or not a valid {@link TraceStep}. */
  | "TRACE_LINE_INVALID"
  /** Step numbers in a trace file do not strictly increase. */
  | "TRACE_STEP_ORDER"
  /** The trace file could not be read or written. */
  | "TRACE_IO"
  /** A caller passed steps that are not valid {@link TraceStep}s. */
  | "TRACE_INVALID_ARGUMENT";

/**
 * The one error type thrown by trace file helpers. `line` is 1-based and set when a specific line was at fault.
 *
 * @example
 * ```ts
 * try {
 *   await readTraceFile(path.join(os.tmpdir(), "turn.trace.jsonl"));
 * } catch (err) {
 *   if (err instanceof TraceFileError && err.code === "TRACE_LINE_INVALID") console.error(err.line);
 * }
 * ```
 */
export class TraceFileError extends Error {
  readonly code: TraceFileErrorCode;
  readonly path: string;
  readonly line?: number;

  constructor(code: TraceFileErrorCode, path: string, message: string, options?: { line?: number | undefined; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "TraceFileError";
    this.code = code;
    this.path = path;
    if (options?.line !== undefined) this.line = options.line;
  }
}

/**
 * Snapshot statuses a step can carry (XState's `snapshot.status`).
 *
 * @example
 * ```ts
 * TRACE_STATUSES.includes("done"); // true
 * ```
 */
export const TRACE_STATUSES = ["active", "done", "error", "stopped"] as const;

/**
 * Zod schema of one {@link TraceStep} (one JSONL line).
 *
 * @example
 * ```ts
 * traceStepSchema.parse(JSON.parse(line));
 * ```
 */
// Strict: an unknown key in a file (e.g. a hand-added `context`) is rejected rather than carried into a page.
export const traceStepSchema = z
  .object({
    /** 1-based, strictly increasing within one recorder. */
    step: z.number().int().positive(),
    /**
     * `actorRef.id` (a child's invoke id such as `loadHistory`, or the id given to `createActor`); actors with an
     * auto-generated id get a stable alias: `root` for the first root actor, `anon-<n>` for others.
     */
    actorId: z.string().min(1).max(200),
    /** Id (or alias) of the parent actor; absent for the root. */
    parentId: z.string().min(1).max(200).optional(),
    /** The machine's `id` when the actor runs a state machine (promise/callback actors have none). */
    machineId: z.string().min(1).max(200).optional(),
    /** `type` of the event that produced this snapshot (e.g. `xstate.init`, `xstate.done.actor.assemble`). */
    eventType: z.string().min(1).max(200),
    /** Active leaf state paths, dotted (`["turnRunning.streaming"]`); empty for actors without states. */
    state: z.array(z.string().min(1).max(500)).max(200),
    status: z.enum(TRACE_STATUSES),
  })
  .strict();

/**
 * One recorded snapshot of one actor.
 *
 * @example
 * ```ts
 * const step: TraceStep = {
 *   step: 3, actorId: "root", machineId: "turn", eventType: "xstate.done.actor.loadHistory",
 *   state: ["bootstrap"], status: "active",
 * };
 * ```
 */
export type TraceStep = z.infer<typeof traceStepSchema>;

/** What {@link createTraceRecorder} returns. */
export interface TraceRecorder {
  /** Pass as `createActor(machine, { inspect: recorder.inspect })`. */
  inspect: (ev: InspectionEvent) => void;
  /** A copy of the steps recorded so far. */
  events(): TraceStep[];
  /** The steps as JSONL (one step per line, trailing newline; empty string when nothing was recorded). */
  toJSONL(): string;
}

export interface TraceRecorderOptions {
  logger?: Logger | undefined;
  /** Stop recording after this many steps (a runaway actor must not grow memory without bound). Default 100 000. */
  maxSteps?: number | undefined;
}

/**
 * Flattens an XState state value into dotted leaf paths, in definition order.
 *
 * @example
 * ```ts
 * stateValueToPaths({ turnRunning: "streaming" }); // ["turnRunning.streaming"]
 * stateValueToPaths("loadHistory"); // ["loadHistory"]
 * ```
 */
export function stateValueToPaths(value: unknown, prefix = ""): string[] {
  if (typeof value === "string") return [prefix === "" ? value : `${prefix}.${value}`];
  if (value === null || typeof value !== "object") return [];
  const entries = Object.entries(value as Record<string, unknown>);
  // A compound state whose child is not yet resolved serializes as `{ parent: {} }`: the parent itself is active.
  if (entries.length === 0) return prefix === "" ? [] : [prefix];
  return entries.flatMap(([key, child]) => stateValueToPaths(child, prefix === "" ? key : `${prefix}.${key}`));
}

// Private XState fields read defensively: `_parent` links a child to its parent, `logic` is the actor's machine.
interface ActorInternals {
  id?: unknown;
  sessionId?: unknown;
  _parent?: ActorInternals | undefined;
  logic?: { id?: unknown; root?: unknown } | undefined;
}

function machineIdOf(actorRef: unknown): string | undefined {
  const logic = (actorRef as ActorInternals).logic;
  // Only state machines have a `root` state node; promise/callback logic has an unrelated `id`-less shape.
  if (logic && typeof logic === "object" && logic.root !== undefined && typeof logic.id === "string") return logic.id;
  return undefined;
}

function toStatus(status: unknown): TraceStep["status"] {
  return (TRACE_STATUSES as readonly string[]).includes(status as string) ? (status as TraceStep["status"]) : "active";
}

/** Serializes with a fixed key order so identical runs give byte-identical JSONL. */
function stepToLine(s: TraceStep): string {
  const ordered: Record<string, unknown> = { step: s.step, actorId: s.actorId };
  if (s.parentId !== undefined) ordered.parentId = s.parentId;
  if (s.machineId !== undefined) ordered.machineId = s.machineId;
  ordered.eventType = s.eventType;
  ordered.state = s.state;
  ordered.status = s.status;
  return JSON.stringify(ordered);
}

/**
 * Serializes steps as JSONL (validated first, so a caller cannot smuggle extra fields such as context into a file).
 *
 * @example
 * ```ts
 * const text = traceToJSONL(recorder.events());
 * ```
 */
export function traceToJSONL(steps: readonly TraceStep[]): string {
  const parsed = z.array(traceStepSchema).safeParse(steps);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new TraceFileError(
      "TRACE_INVALID_ARGUMENT",
      "",
      `invalid trace step at ${issue?.path.join(".") ?? "?"}: ${issue?.message ?? "invalid"}`,
    );
  }
  return parsed.data.map((s) => `${stepToLine(s)}\n`).join("");
}

/**
 * Creates a recorder for `createActor(..., { inspect })`. It records every `@xstate.snapshot` of the root actor and
 * every descendant: state paths, the causing event's `type`, status, actor and parent ids. Event payloads, context,
 * input and output are never read into the trace.
 *
 * @example
 * ```ts
 * const recorder = createTraceRecorder();
 * const actor = createActor(turnMachine.provide({ actors }), { input, inspect: recorder.inspect });
 * actor.start();
 * await toPromise(actor);
 * await writeTraceFile(path.join(os.tmpdir(), "turn.trace.jsonl"), recorder.events());
 * ```
 */
export function createTraceRecorder(options: TraceRecorderOptions = {}): TraceRecorder {
  const logger = options.logger ?? pino({ level: "silent" });
  const maxSteps = options.maxSteps ?? 100_000;
  const steps: TraceStep[] = [];
  let dropped = 0;
  // Actors created without an explicit id get XState's process-wide session id ("x:17"), which differs between runs
  // in one process. Such ids are replaced by aliases in order of first appearance ("root", "root-2", "anon-1").
  const aliases = new Map<string, string>();
  let roots = 0;
  let anons = 0;
  const idOf = (ref: ActorInternals): string => {
    const id = typeof ref.id === "string" ? ref.id : "?";
    if (typeof ref.sessionId !== "string" || ref.id !== ref.sessionId) return id;
    let alias = aliases.get(ref.sessionId);
    if (alias === undefined) {
      if (ref._parent === undefined) {
        roots += 1;
        alias = roots === 1 ? "root" : `root-${roots}`;
      } else {
        anons += 1;
        alias = `anon-${anons}`;
      }
      aliases.set(ref.sessionId, alias);
    }
    return alias;
  };

  const inspect = (ev: InspectionEvent): void => {
    if (ev.type !== "@xstate.snapshot") return;
    if (steps.length >= maxSteps) {
      if (dropped === 0) logger.warn({ event: "trace.limit", maxSteps }, "trace step limit reached; dropping steps");
      dropped += 1;
      return;
    }
    const actorRef = ev.actorRef as unknown as ActorInternals;
    const snapshot = ev.snapshot as { status?: unknown; value?: unknown };
    const step: TraceStep = {
      step: steps.length + 1,
      actorId: idOf(actorRef),
      // Clamped to the schema's limits so one odd event type cannot make the whole trace unserializable.
      eventType: typeof ev.event?.type === "string" && ev.event.type !== "" ? ev.event.type.slice(0, 200) : "?",
      state: "value" in snapshot ? stateValueToPaths(snapshot.value).slice(0, 200).map((p) => p.slice(0, 500)) : [],
      status: toStatus(snapshot.status),
    };
    if (actorRef._parent !== undefined) step.parentId = idOf(actorRef._parent);
    const machineId = machineIdOf(ev.actorRef);
    if (machineId !== undefined) step.machineId = machineId;
    steps.push(step);
    logger.debug(
      { event: "trace.step", step: step.step, actorId: step.actorId, eventType: step.eventType, states: step.state.length },
      "trace step",
    );
  };

  return {
    inspect,
    events: () => steps.map((s) => ({ ...s, state: [...s.state] })),
    toJSONL: () => traceToJSONL(steps),
  };
}

/**
 * Writes steps as a JSONL trace file.
 *
 * @example
 * ```ts
 * await writeTraceFile(path.join(os.tmpdir(), "turn.trace.jsonl"), recorder.events());
 * ```
 */
export async function writeTraceFile(path: string, steps: readonly TraceStep[]): Promise<void> {
  let text: string;
  try {
    text = traceToJSONL(steps);
  } catch (err) {
    if (err instanceof TraceFileError) throw new TraceFileError(err.code, path, `${path}: ${err.message}`);
    throw err;
  }
  try {
    await writeFile(path, text, "utf8");
  } catch (cause) {
    throw new TraceFileError("TRACE_IO", path, `cannot write trace file ${path}: ${(cause as Error).message}`, {
      cause,
    });
  }
}

/**
 * Parses JSONL trace text. Blank lines are ignored; any other bad line throws a {@link TraceFileError} naming its
 * 1-based line number.
 *
 * @example
 * ```ts
 * const steps = parseTraceJSONL(recorder.toJSONL(), "memory");
 * ```
 */
export function parseTraceJSONL(text: string, path = "<memory>"): TraceStep[] {
  const steps: TraceStep[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i += 1) {
    const raw = lines[i]?.replace(/\r$/, "") ?? "";
    if (raw.trim() === "") continue;
    const lineNo = i + 1;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (cause) {
      throw new TraceFileError("TRACE_LINE_INVALID", path, `${path} line ${lineNo}: not valid JSON`, {
        line: lineNo,
        cause,
      });
    }
    const parsed = traceStepSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue && issue.path.length > 0 ? ` (field ${issue.path.join(".")})` : "";
      throw new TraceFileError(
        "TRACE_LINE_INVALID",
        path,
        `${path} line ${lineNo}: not a trace step${where}: ${issue?.message ?? "invalid"}`,
        { line: lineNo },
      );
    }
    const prev = steps[steps.length - 1];
    if (prev !== undefined && parsed.data.step <= prev.step) {
      throw new TraceFileError(
        "TRACE_STEP_ORDER",
        path,
        `${path} line ${lineNo}: step ${parsed.data.step} does not follow step ${prev.step}`,
        { line: lineNo },
      );
    }
    steps.push(parsed.data);
  }
  return steps;
}

/**
 * Reads and validates a JSONL trace file written by {@link writeTraceFile}.
 *
 * @example
 * ```ts
 * const trace = await readTraceFile(path.join(os.tmpdir(), "turn.trace.jsonl"));
 * const html = renderStatechartPage({ machines: [{ id: "turn", title: "Turn", machine: turnMachine }], trace });
 * ```
 */
export async function readTraceFile(path: string): Promise<TraceStep[]> {
  let text: string;
  try {
    // A trace is a regular file (a FIFO would block; /dev/zero would fill memory); 256 MiB is a very long session.
    text = await readRegularTextFile(path, 256 * 1024 * 1024);
  } catch (cause) {
    throw new TraceFileError("TRACE_IO", path, `cannot read trace file ${path}: ${(cause as Error).message}`, {
      cause,
    });
  }
  return parseTraceJSONL(text, path);
}
