import type { ContextEngine } from "../types.js";
import { createWindowEngine } from "./window.js";

/** One recorded engine call: the method and counts, never content. */
export interface RecordedEngineCall {
  method: string;
  messageCount?: number | undefined;
  prePromptMessageCount?: number | undefined;
  hasRuntimeContext?: boolean | undefined;
  runtimeContextKeys?: string[] | undefined;
  force?: boolean | undefined;
  compactionTarget?: string | undefined;
}

/**
 * An engine for tests that records every call in order and delegates to `inner` (default: a window engine).
 *
 * @example
 * ```ts
 * const engine = createRecordingEngine();
 * await runCodexTurn({ ...params, contextEngine: engine });
 * engine.calls.map((c) => c.method); // ["assemble", "afterTurn", "maintain"]
 * ```
 */
export function createRecordingEngine(
  inner: ContextEngine = createWindowEngine(),
  options: { omit?: ReadonlyArray<"bootstrap" | "maintain" | "afterTurn" | "ingestBatch"> | undefined } = {},
): ContextEngine & { calls: RecordedEngineCall[] } {
  const calls: RecordedEngineCall[] = [];
  const omit = new Set(options.omit ?? []);
  const engine: ContextEngine & { calls: RecordedEngineCall[] } = {
    info: { ...inner.info, id: inner.info.id === "legacy" ? "recording" : inner.info.id },
    calls,
    async ingest(p) {
      calls.push({ method: "ingest", messageCount: 1 });
      return inner.ingest(p);
    },
    async assemble(p) {
      calls.push({ method: "assemble", messageCount: p.messages.length });
      return inner.assemble(p);
    },
    async compact(p) {
      calls.push({ method: "compact", force: p.force, ...(p.compactionTarget ? { compactionTarget: p.compactionTarget } : {}) });
      return inner.compact(p);
    },
  };
  if (!omit.has("bootstrap")) {
    engine.bootstrap = async (p) => {
      calls.push({ method: "bootstrap" });
      return inner.bootstrap ? inner.bootstrap(p) : { bootstrapped: true };
    };
  }
  if (!omit.has("maintain")) {
    engine.maintain = async (p) => {
      calls.push({
        method: "maintain",
        hasRuntimeContext: p.runtimeContext !== undefined,
        runtimeContextKeys: Object.keys(p.runtimeContext ?? {}).sort(),
      });
      return inner.maintain ? inner.maintain(p) : { changed: false, bytesFreed: 0, rewrittenEntries: 0 };
    };
  }
  if (!omit.has("afterTurn")) {
    engine.afterTurn = async (p) => {
      calls.push({
        method: "afterTurn",
        messageCount: p.messages.length,
        prePromptMessageCount: p.prePromptMessageCount,
        runtimeContextKeys: Object.keys(p.runtimeContext ?? {}).sort(),
      });
      if (inner.afterTurn) await inner.afterTurn(p);
    };
  }
  if (!omit.has("ingestBatch")) {
    engine.ingestBatch = async (p) => {
      calls.push({ method: "ingestBatch", messageCount: p.messages.length });
      return inner.ingestBatch ? inner.ingestBatch(p) : { ingestedCount: p.messages.length };
    };
  }
  // Optional members the inner engine has are forwarded (and recorded) so wrapping never hides a capability.
  if (inner.interceptCompaction) {
    const intercept = inner.interceptCompaction.bind(inner);
    engine.interceptCompaction = async (req) => {
      calls.push({ method: "interceptCompaction" });
      return intercept(req);
    };
  }
  if (inner.dispose) {
    const dispose = inner.dispose.bind(inner);
    engine.dispose = async () => {
      calls.push({ method: "dispose" });
      await dispose();
    };
  }
  return engine;
}
