/**
 * An explicit compaction (`/compact` or a plugin request) as a pure XState v5 statechart. No I/O happens here:
 * every effect is a named actor a host binds with `compactionMachine.provide({ actors })`.
 *
 * | state         | invoke id       | src                    | what the host does                                   |
 * |---------------|-----------------|------------------------|------------------------------------------------------|
 * | loadBinding   | `loadBinding`   | `readBinding`          | read the Codex thread binding (null when none)       |
 * | engineCompact | `engineCompact` | `compactEngine`        | context-engine `compact()`                           |
 * | maintain      | `maintain`      | `maintainEngine`       | context-engine maintenance (reason "compaction")     |
 * | nativeCompact | `nativeCompact` | `compactNative`        | Codex `thread/compact/start`, bounded by a timeout   |
 * | markBinding   | `markBinding`   | `markBindingCompacted` | clear the injection ledger + held turns (P3/P4)      |
 *
 * Engine owns compaction: loadBinding -> engineCompact -> [maintain] -> [nativeCompact -> [markBinding]] -> done.
 * Otherwise:              loadBinding -> [nativeCompact -> [markBinding]] -> [maintain] -> done.
 * ABORT from any state ends in `aborted`, except `markBinding`, which is never cut in half (the abort is recorded
 * and honoured right after it). Nothing loops: a compaction error is reported, never retried.
 */
import { assign, fromPromise, setup } from "xstate";
import type { CompactResult } from "../src/context-engine/types.js";
import {
  NO_THREAD_BINDING,
  canMaintainAfterCompaction,
  compactionMaintenanceSkipReason,
  engineCompactionRequest,
  engineOwnsCompaction,
  hasThreadBinding,
  isEngineCompactionOk,
  isNativeCompactionOk,
  nativeStatusFromOutput,
  settleCompaction,
  type BindingFacts,
  type CompactionMachineInput,
  type CompactionOutcomes,
  type CompactionOutput,
  type EngineCompactionRequest,
  type NativeCompactOutput,
  type NativeCompactionStatus,
} from "./compaction.rules.js";

export type * from "./compaction.rules.js";

/** The machine's context: JSON-friendly, so a persisted snapshot and the inspector can carry it. */
export interface CompactionContext {
  input: CompactionMachineInput;
  binding: BindingFacts | null;
  engineResult?: CompactResult | undefined;
  /** Message of the error the engine's `compact()` threw. */
  engineError?: string | undefined;
  native?: NativeCompactionStatus | undefined;
  aborted: boolean;
  outcomes: CompactionOutcomes;
  trace: string[];
  warnings: string[];
}

/** Events a host sends: the only external one is an abort (from the caller's AbortSignal). */
export type CompactionEvent = { type: "ABORT" };

/** Input of the `markBindingCompacted` actor. */
export interface MarkBindingInput {
  threadId: string;
  turnId?: string | undefined;
  itemId?: string | undefined;
}

const notProvided = (name: string) => () => {
  throw new Error(`compaction machine actor not provided: ${name}`);
};

function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === "string" ? error : "unknown error";
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** A short label for a failure: its code when it has one (never prompt content), else its message. */
function errorLabel(error: unknown): string {
  return errorCode(error) ?? errorMessage(error);
}

function primaryOk(context: CompactionContext): boolean {
  if (engineOwnsCompaction(context.input.engine)) {
    return context.engineError === undefined && isEngineCompactionOk(context.engineResult);
  }
  return context.native?.ok === true;
}

export const compactionMachine = setup({
  types: {
    context: {} as CompactionContext,
    events: {} as CompactionEvent,
    input: {} as CompactionMachineInput,
    output: {} as CompactionOutput,
  },
  actors: {
    readBinding: fromPromise<BindingFacts | null, { sessionFile: string }>(notProvided("readBinding")),
    compactEngine: fromPromise<CompactResult, { request: EngineCompactionRequest }>(notProvided("compactEngine")),
    maintainEngine: fromPromise<{ changed: boolean }, { reason: "compaction" }>(notProvided("maintainEngine")),
    compactNative: fromPromise<NativeCompactOutput, { threadId: string; timeoutMs: number }>(notProvided("compactNative")),
    markBindingCompacted: fromPromise<void, MarkBindingInput>(notProvided("markBindingCompacted")),
  },
  delays: {
    // A hard bound even if the native actor ignores its own timeout.
    nativeTimeout: ({ context }) => context.input.nativeTimeoutMs,
  },
  guards: {
    ownsCompaction: ({ context }) => engineOwnsCompaction(context.input.engine),
    hasThreadBinding: ({ context }) => hasThreadBinding(context.binding),
    engineOk: (_, params: { output: CompactResult }) => isEngineCompactionOk(params.output),
    nativeOk: (_, params: { output: NativeCompactOutput }) => isNativeCompactionOk(params.output),
    canMaintain: ({ context }) => canMaintainAfterCompaction(context.input.engine, primaryOk(context)),
    isAborted: ({ context }) => context.aborted,
  },
  actions: {
    /** Host hook: one structured log event per step (ids and counts only). */
    logStep: (_, _params: { event: string; level?: "info" | "warn" | undefined; [key: string]: unknown }) => {},
    enterState: assign({ trace: ({ context }, params: { state: string }) => [...context.trace, params.state] }),
    storeBinding: assign((_, params: { binding: BindingFacts | null }) => ({ binding: params.binding ?? null })),
    warnBindingUnreadable: assign(({ context }) => ({
      binding: null,
      warnings: [...context.warnings, "thread binding unreadable; treating the session as unbound"],
    })),
    markEngineSkipped: assign(({ context }) => ({
      outcomes: {
        ...context.outcomes,
        engineCompact: context.input.engine.active ? "skipped:notOwner" : "skipped:noEngine",
      },
    })),
    storeEngineResult: assign(({ context }, params: { output: CompactResult; ok: boolean }) => ({
      engineResult: params.output,
      outcomes: { ...context.outcomes, engineCompact: params.ok ? "ran" : "rejected" },
    })),
    storeEngineError: assign(({ context }, params: { message: string }) => ({
      engineError: params.message,
      outcomes: { ...context.outcomes, engineCompact: "failed" },
      warnings: [...context.warnings, "context-engine compaction failed; still running Codex native compaction"],
    })),
    markMaintenanceSkipped: assign(({ context }) => ({
      outcomes: {
        ...context.outcomes,
        maintenance: compactionMaintenanceSkipReason(context.input.engine, primaryOk(context)) ?? "skipped",
      },
    })),
    storeMaintained: assign(({ context }) => ({ outcomes: { ...context.outcomes, maintenance: "ran" } })),
    warnMaintenanceFailed: assign(({ context }) => ({
      outcomes: { ...context.outcomes, maintenance: "failed" },
      warnings: [...context.warnings, "context-engine maintenance after compaction failed"],
    })),
    recordNoBinding: assign(({ context }) => ({
      native: { ...NO_THREAD_BINDING },
      outcomes: { ...context.outcomes, bindingMark: "skipped:noThreadBinding" },
    })),
    storeNative: assign(({ context }, params: { output: NativeCompactOutput }) => ({
      native: nativeStatusFromOutput(params.output),
      outcomes: params.output.ok ? context.outcomes : { ...context.outcomes, bindingMark: "skipped:nativeFailed" },
    })),
    storeNativeError: assign(({ context }, params: { label: string }) => ({
      native: { ok: false, reason: `nativeError: ${params.label}`, threadId: context.binding?.threadId ?? "" },
      outcomes: { ...context.outcomes, bindingMark: "skipped:nativeFailed" },
      warnings: [...context.warnings, "codex native compaction failed"],
    })),
    storeNativeTimeout: assign(({ context }) => ({
      native: { ok: false, reason: "timeout", threadId: context.binding?.threadId ?? "" },
      outcomes: { ...context.outcomes, bindingMark: "skipped:nativeFailed" },
      warnings: [...context.warnings, "codex native compaction timed out"],
    })),
    storeBindingMarked: assign(({ context }) => ({ outcomes: { ...context.outcomes, bindingMark: "marked" } })),
    warnBindingMarkFailed: assign(({ context }) => ({
      outcomes: { ...context.outcomes, bindingMark: "failed" },
      warnings: [
        ...context.warnings,
        "thread binding could not be marked after native compaction; the next turn may miss dropped context",
      ],
    })),
    markAbortFlag: assign({ aborted: true }),
    recordAbort: assign(({ context }) => {
      const abortedIfPending = (label: string) => (label === "pending" ? "aborted" : label);
      return {
        aborted: true,
        outcomes: {
          engineCompact: abortedIfPending(context.outcomes.engineCompact),
          maintenance: abortedIfPending(context.outcomes.maintenance),
          bindingMark: context.outcomes.bindingMark === "pending" ? "skipped:aborted" : context.outcomes.bindingMark,
        },
      };
    }),
  },
}).createMachine({
  id: "compaction",
  initial: "loadBinding",
  context: ({ input }) => ({
    input,
    binding: null,
    aborted: false,
    outcomes: { engineCompact: "pending", maintenance: "pending", bindingMark: "pending" },
    trace: [],
    warnings: [],
  }),
  // Leaving an invoking state stops its actor, whose AbortSignal reaches the in-flight engine or Codex call.
  on: {
    ABORT: {
      target: ".aborted",
      actions: ["recordAbort", { type: "logStep", params: { event: "compaction aborted", level: "warn" } }],
    },
  },
  states: {
    loadBinding: {
      entry: { type: "enterState", params: { state: "loadBinding" } },
      invoke: {
        id: "loadBinding",
        src: "readBinding",
        input: ({ context }) => ({ sessionFile: context.input.sessionFile }),
        onDone: {
          target: "route",
          actions: [
            { type: "storeBinding", params: ({ event }) => ({ binding: event.output }) },
            {
              type: "logStep",
              params: ({ event }) => ({ event: "thread binding loaded", hasBinding: hasThreadBinding(event.output) }),
            },
          ],
        },
        onError: {
          target: "route",
          actions: ["warnBindingUnreadable", { type: "logStep", params: { event: "thread binding unreadable", level: "warn" } }],
        },
      },
    },
    // Transient routing (not a lifecycle state; not recorded in the trace).
    route: {
      always: [
        { guard: "ownsCompaction", target: "engineCompact" },
        { target: "nativeGate", actions: "markEngineSkipped" },
      ],
    },
    engineCompact: {
      entry: { type: "enterState", params: { state: "engineCompact" } },
      invoke: {
        id: "engineCompact",
        src: "compactEngine",
        input: ({ context }) => ({
          request: engineCompactionRequest(context.input.trigger, context.binding?.lastUsage?.inputTokens),
        }),
        onDone: [
          {
            guard: { type: "engineOk", params: ({ event }) => ({ output: event.output }) },
            target: "afterEngine",
            actions: [
              { type: "storeEngineResult", params: ({ event }) => ({ output: event.output, ok: true }) },
              {
                type: "logStep",
                params: ({ event }) => ({
                  event: "engine compaction completed",
                  compacted: event.output.compacted,
                  tokensBefore: event.output.result?.tokensBefore,
                  tokensAfter: event.output.result?.tokensAfter,
                }),
              },
            ],
          },
          {
            target: "afterEngine",
            actions: [
              { type: "storeEngineResult", params: ({ event }) => ({ output: event.output, ok: false }) },
              { type: "logStep", params: { event: "engine compaction rejected", level: "warn" } },
            ],
          },
        ],
        onError: {
          target: "afterEngine",
          actions: [
            { type: "storeEngineError", params: ({ event }) => ({ message: errorMessage(event.error) }) },
            {
              type: "logStep",
              params: ({ event }) => ({ event: "engine compaction failed", level: "warn", err: errorCode(event.error) }),
            },
          ],
        },
      },
    },
    afterEngine: {
      always: [
        { guard: "canMaintain", target: "maintain" },
        {
          target: "nativeGate",
          actions: ["markMaintenanceSkipped", { type: "logStep", params: { event: "engine maintenance skipped" } }],
        },
      ],
    },
    maintain: {
      entry: { type: "enterState", params: { state: "maintain" } },
      invoke: {
        id: "maintain",
        src: "maintainEngine",
        input: () => ({ reason: "compaction" as const }),
        onDone: {
          target: "afterMaintain",
          actions: [
            "storeMaintained",
            {
              type: "logStep",
              params: ({ event }) => ({ event: "engine maintenance completed", changed: event.output.changed }),
            },
          ],
        },
        onError: {
          target: "afterMaintain",
          actions: ["warnMaintenanceFailed", { type: "logStep", params: { event: "engine maintenance failed", level: "warn" } }],
        },
      },
    },
    afterMaintain: {
      always: [{ guard: "ownsCompaction", target: "nativeGate" }, { target: "done" }],
    },
    nativeGate: {
      always: [
        { guard: "hasThreadBinding", target: "nativeCompact" },
        {
          target: "afterNative",
          actions: ["recordNoBinding", { type: "logStep", params: { event: "codex native compaction skipped: no thread binding" } }],
        },
      ],
    },
    nativeCompact: {
      entry: { type: "enterState", params: { state: "nativeCompact" } },
      invoke: {
        id: "nativeCompact",
        src: "compactNative",
        input: ({ context }) => ({ threadId: context.binding?.threadId ?? "", timeoutMs: context.input.nativeTimeoutMs }),
        onDone: [
          {
            guard: { type: "nativeOk", params: ({ event }) => ({ output: event.output }) },
            target: "markBinding",
            actions: [
              { type: "storeNative", params: ({ event }) => ({ output: event.output }) },
              {
                type: "logStep",
                params: ({ context, event }) => ({
                  event: engineOwnsCompaction(context.input.engine)
                    ? "codex native compaction completed alongside context-engine compaction"
                    : "codex native compaction completed",
                  threadId: event.output.threadId,
                  compactionTurnId: event.output.turnId,
                  itemId: event.output.itemId,
                }),
              },
            ],
          },
          {
            target: "afterNative",
            actions: [
              { type: "storeNative", params: ({ event }) => ({ output: event.output }) },
              {
                type: "logStep",
                params: ({ event }) => ({
                  event: "codex native compaction failed",
                  level: "warn",
                  threadId: event.output.threadId,
                  nativeReason: event.output.reason,
                }),
              },
            ],
          },
        ],
        onError: {
          target: "afterNative",
          actions: [
            { type: "storeNativeError", params: ({ event }) => ({ label: errorLabel(event.error) }) },
            {
              type: "logStep",
              params: ({ event }) => ({ event: "codex native compaction failed", level: "warn", err: errorCode(event.error) }),
            },
          ],
        },
      },
      after: {
        nativeTimeout: {
          target: "afterNative",
          actions: ["storeNativeTimeout", { type: "logStep", params: { event: "codex native compaction timed out", level: "warn" } }],
        },
      },
    },
    markBinding: {
      entry: { type: "enterState", params: { state: "markBinding" } },
      // Persistence is never cut in half: an abort here is honoured once the binding is written.
      on: { ABORT: { actions: "markAbortFlag" } },
      invoke: {
        id: "markBinding",
        src: "markBindingCompacted",
        input: ({ context }) => {
          const input: MarkBindingInput = { threadId: context.native?.threadId ?? context.binding?.threadId ?? "" };
          if (context.native?.turnId !== undefined) input.turnId = context.native.turnId;
          if (context.native?.itemId !== undefined) input.itemId = context.native.itemId;
          return input;
        },
        onDone: {
          target: "afterNative",
          actions: ["storeBindingMarked", { type: "logStep", params: { event: "thread binding marked after native compaction" } }],
        },
        onError: {
          target: "afterNative",
          actions: ["warnBindingMarkFailed", { type: "logStep", params: { event: "thread binding mark failed", level: "warn" } }],
        },
      },
    },
    afterNative: {
      always: [
        { guard: "isAborted", target: "aborted", actions: "recordAbort" },
        { guard: "ownsCompaction", target: "done" },
        { guard: "canMaintain", target: "maintain" },
        {
          target: "done",
          actions: ["markMaintenanceSkipped", { type: "logStep", params: { event: "engine maintenance skipped" } }],
        },
      ],
    },
    done: {
      type: "final",
      entry: { type: "enterState", params: { state: "done" } },
    },
    aborted: {
      type: "final",
      entry: { type: "enterState", params: { state: "aborted" } },
    },
  },
  output: ({ context }) =>
    settleCompaction({
      input: context.input,
      binding: context.binding,
      engineResult: context.engineResult,
      engineError: context.engineError,
      native: context.native,
      aborted: context.aborted,
      outcomes: context.outcomes,
      trace: context.trace,
      warnings: context.warnings,
    }),
});

export type CompactionMachine = typeof compactionMachine;
