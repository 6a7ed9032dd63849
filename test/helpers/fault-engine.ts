/**
 * A context engine for fault injection: a recording window engine whose methods can be told to throw, hang (on a
 * promise the test controls), or return malformed data, one method at a time.
 */
import { createRecordingEngine, createWindowEngine } from "../../src/context-engine/engines/index.js";
import type { ContextEngine } from "../../src/context-engine/types.js";

export type EngineMethod = "bootstrap" | "assemble" | "afterTurn" | "ingestBatch" | "ingest" | "maintain";
export type FaultKind = "throw" | "hang" | "malformed" | "gate";

export interface FaultEngine extends ContextEngine {
  calls: Array<{ method: string }>;
  /** Set (or clear) the fault; `gate` blocks the method until `release()`. */
  fault: { method: EngineMethod; kind: FaultKind; when?: (params: unknown) => boolean } | undefined;
  /** Resolves when the faulty method was entered. */
  entered(): Promise<void>;
  /** Let a gated method continue; also lets hung calls settle (so nothing stays pending after a suite). */
  release(): void;
}

const MALFORMED: Record<EngineMethod, unknown> = {
  bootstrap: { bootstrapped: "yes" },
  assemble: { messages: "not an array", estimatedTokens: -1 },
  afterTurn: undefined,
  ingestBatch: { ingestedCount: "many" },
  ingest: { ingested: "maybe" },
  maintain: { changed: "sometimes" },
};

/**
 * @example
 * ```ts
 * const engine = createFaultEngine();
 * engine.fault = { method: "assemble", kind: "throw" };
 * ```
 */
export function createFaultEngine(options: { omit?: ReadonlyArray<"bootstrap" | "maintain" | "afterTurn" | "ingestBatch"> } = {}): FaultEngine {
  const inner = createRecordingEngine(createWindowEngine(), options);
  let releaseAll: () => void = () => undefined;
  let gate = new Promise<void>((r) => (releaseAll = r));
  let enteredResolve: () => void = () => undefined;
  let enteredPromise = new Promise<void>((r) => (enteredResolve = r));
  const engine = { ...inner, fault: undefined } as FaultEngine;
  engine.calls = inner.calls;
  engine.entered = () => enteredPromise;
  engine.release = () => {
    releaseAll();
    gate = new Promise<void>((r) => (releaseAll = r));
    enteredPromise = new Promise<void>((r) => (enteredResolve = r));
  };
  const wrap = (method: EngineMethod) => {
    const original = (inner as unknown as Record<string, ((p: unknown) => Promise<unknown>) | undefined>)[method];
    if (!original) return;
    (engine as unknown as Record<string, unknown>)[method] = async (p: unknown) => {
      const f = engine.fault;
      if (f?.method === method && (!f.when || f.when(p))) {
        enteredResolve();
        if (f.kind === "throw") {
          inner.calls.push({ method: `${method}:threw` });
          throw new Error(`injected ${method} failure`);
        }
        if (f.kind === "hang") {
          inner.calls.push({ method: `${method}:hung` });
          await gate;
          return original.call(inner, p);
        }
        if (f.kind === "malformed") {
          inner.calls.push({ method: `${method}:malformed` });
          if (method === "afterTurn") throw new Error("afterTurn has no result to malform");
          return MALFORMED[method];
        }
        await gate;
      }
      return original.call(inner, p);
    };
  };
  for (const m of ["bootstrap", "assemble", "afterTurn", "ingestBatch", "ingest", "maintain"] as const) wrap(m);
  return engine;
}
