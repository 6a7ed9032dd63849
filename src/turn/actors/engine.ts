/**
 * The context-engine steps of a turn: `bootstrap`, `compactBeforeTurn` (the accordion), `assemble`, `finalize.finalizing`
 * and `maintain`. Each is bounded by `timeouts.engineCallMs` (compaction by `timeouts.compactionMs`).
 */
import type {
  AssembleOutput,
  BootstrapOutput,
  CommitTurnInput,
  CommitTurnOutput,
  CompactBeforeTurnOutput,
  FinalizeInput,
  FinalizeOutput,
  HistoryOutput,
  LastUsageFacts,
  MaintainOutput,
  TurnRecord,
  TurnUsage,
} from "../../../machines/turn.contract.js";
import { runAccordionCompaction } from "../../compaction/accordion.js";
import type { AgentMessage, ContextEngine, ContextEngineRuntimeContext, ContextEngineSessionTarget } from "../../context-engine/types.js";
import {
  assembleHarnessContextEngine,
  bootstrapHarnessContextEngine,
  buildHarnessContextEngineRuntimeContext,
  finalizeHarnessContextEngineTurn,
  runHarnessContextEngineMaintenance,
} from "../../context-engine/lifecycle.js";
import { createTranscriptRewriter } from "../../context-engine/transcript-rewriter.js";
import { commitHarnessContextEngineTurn, durableTurnAdvancementKey } from "../../context-engine/durable-turns.js";
import { sessionTargetOf as sessionTargetOfStore } from "../../store/session-directory.js";
import type { TurnDeps } from "../deps.js";
import { toHistoryOutput } from "./history.js";

/**
 * The runtime context every engine call gets: budget and usage figures, plus the host's extra fields (provider, llm).
 * Calls after which the turn does not use history it read before (bootstrap and its maintenance, the accordion
 * compaction, finalize, maintenance; not assemble) also get `rewriteTranscriptEntries`, under the turn's lock
 * (`"held"`) or taking it per rewrite (`"acquire"`, background maintenance).
 */
export function runtimeContextFor(deps: TurnDeps, usage?: TurnUsage, rewrites?: "held" | "acquire"): ContextEngineRuntimeContext {
  return {
    ...(deps.params.runtimeContext ?? {}),
    sessionTarget: sessionTargetOf(deps),
    ...(deps.params.model !== undefined ? { model: deps.params.model } : {}),
    ...buildHarnessContextEngineRuntimeContext({ tokenBudget: deps.params.contextTokenBudget, usage }),
    ...(rewrites
      ? { rewriteTranscriptEntries: createTranscriptRewriter({ store: deps.store, logger: deps.logger, ids: deps.ids, lock: rewrites, lockTimeoutMs: deps.engineCallMs }) }
      : {}),
  } as ContextEngineRuntimeContext;
}

function activeEngine(deps: TurnDeps): ContextEngine {
  if (!deps.engine) throw new Error("no active context engine (the machine's guards should have skipped this step)");
  return deps.engine;
}

/**
 * OpenClaw's `sessionTarget` of the turn's session (`sessionTargetOf` in src/store/session-directory.ts): the store is
 * remembered under it, so `openclaw/plugin-sdk/session-transcript-runtime` can read the session's transcript.
 */
export function sessionTargetOf(deps: TurnDeps): ContextEngineSessionTarget {
  return sessionTargetOfStore(deps.params, deps.store);
}

const sessionIds = (deps: TurnDeps) => ({
  sessionId: deps.params.sessionId,
  ...(deps.params.sessionKey !== undefined ? { sessionKey: deps.params.sessionKey } : {}),
  sessionTarget: sessionTargetOf(deps),
  sessionFile: deps.params.sessionFile,
  runtimeSettings: deps.runtimeSettings,
});

/** Bootstrap the engine, then re-read the history (bootstrap may rewrite the transcript). */
export async function bootstrapEngine(deps: TurnDeps, signal: AbortSignal): Promise<BootstrapOutput> {
  const out = await bootstrapHarnessContextEngine({
    engine: activeEngine(deps),
    ...sessionIds(deps),
    readHistory: async () => toHistoryOutput(await deps.store.readHistory()),
    signal,
    timeoutMs: deps.engineCallMs,
    // Bootstrap and its maintenance may rewrite the transcript: the history is re-read after them.
    runtimeContext: runtimeContextFor(deps, undefined, "held"),
  });
  return out as BootstrapOutput;
}

/**
 * The prompt tokens the engine is told the session stands at: the last reported input, or after an overflow at least
 * the model's context window (the request that failed did not fit it; Codex then reports a last-call input of 0).
 */
function currentTokenCountFor(input: { lastUsage?: LastUsageFacts | undefined; contextOverflowed?: boolean | undefined }): { currentTokenCount?: number | undefined } {
  const reported = input.lastUsage?.inputTokens;
  const window = input.contextOverflowed ? input.lastUsage?.modelContextWindow : undefined;
  const count = window !== undefined ? Math.max(window, reported ?? 0) : reported;
  return count !== undefined ? { currentTokenCount: count } : {};
}

/**
 * The accordion: the engine compacts its view before Codex's own lossy compaction point. Compaction hooks fire around
 * it; what the engine reports (summary, first kept entry) is written to the transcript as a pi compaction entry.
 */
export async function compactEngine(
  deps: TurnDeps,
  input: { lastUsage?: LastUsageFacts | undefined; contextOverflowed?: boolean | undefined },
  signal: AbortSignal,
): Promise<CompactBeforeTurnOutput> {
  const engine = activeEngine(deps);
  // The session as it stands (cached by file identity: no re-parse), for the hooks' message count and messages.
  const session = deps.hooks.has("beforeCompaction") || deps.hooks.has("afterCompaction") ? await deps.store.readHistory() : undefined;
  const hookEvent = {
    ...deps.hookIds,
    backend: "context-engine" as const,
    trigger: "accordion" as const,
    ownsCompaction: deps.facts.ownsCompaction,
    sessionFile: deps.params.sessionFile,
    ...(session ? { messageCount: session.messages.length } : {}),
  };
  await deps.hooks.observe("beforeCompaction", { ...hookEvent, ...(session ? { messages: session.messages as AgentMessage[] } : {}) });
  const result = await runAccordionCompaction({
    engine,
    ...sessionIds(deps),
    ...(deps.params.contextTokenBudget !== undefined ? { tokenBudget: deps.params.contextTokenBudget } : {}),
    ...currentTokenCountFor(input),
    ...(input.contextOverflowed ? { trigger: "overflow" as const } : {}),
    config: deps.params.compaction ?? {},
    runtimeContext: runtimeContextFor(deps, undefined, "held"),
    timeoutMs: deps.params.timeouts?.compactionMs,
    signal,
    logger: deps.logger,
  });
  if (result.compacted && result.summary && result.firstKeptEntryId) {
    deps.lock.handle?.assertHeld();
    await deps.store.appendCompaction({ summary: result.summary, firstKeptEntryId: result.firstKeptEntryId, tokensBefore: result.tokensBefore });
  }
  await deps.hooks.observe("afterCompaction", { ...hookEvent, compacted: result.compacted });
  const failed = !result.compacted && (result.reason === "compactFailed" || result.reason === "compactResultInvalid");
  return { compacted: result.compacted, failed, ...(result.reason !== undefined ? { reason: result.reason } : {}) };
}

/** What the engine wants the model to see. */
export async function assembleContext(deps: TurnDeps, input: { history: HistoryOutput; prompt: string }, signal: AbortSignal): Promise<AssembleOutput> {
  return assembleHarnessContextEngine({
    engine: activeEngine(deps),
    sessionId: deps.params.sessionId,
    ...(deps.params.sessionKey !== undefined ? { sessionKey: deps.params.sessionKey } : {}),
    messages: input.history.messages,
    tokenBudget: deps.params.contextTokenBudget,
    availableTools: new Set((deps.params.dynamicTools ?? []).map((t) => t.name)),
    citationsMode: deps.params.citationsMode,
    model: deps.params.model,
    prompt: input.prompt,
    sessionTarget: sessionTargetOf(deps),
    signal,
    timeoutMs: deps.engineCallMs,
    runtimeContext: runtimeContextFor(deps),
    runtimeSettings: deps.runtimeSettings,
  } as Parameters<typeof assembleHarnessContextEngine>[0]) as Promise<AssembleOutput>;
}

/**
 * Hand the finished turn to the engine with the snapshot the machine chose, then clear the pending record. Ingest
 * progress is kept in the pending record, so a replay after a crash skips the messages the engine already took.
 */
export async function finalizeEngine(deps: TurnDeps, input: FinalizeInput): Promise<FinalizeOutput> {
  const { record } = input;
  deps.logger.info(
    { ...deps.ids, event: "finalize snapshot", turnId: record.turnId, source: input.source, messageCount: input.messages.length },
    "finalize snapshot",
  );
  const usedFallback = input.source === "fallback";
  if (!deps.engine) {
    await deps.store.completePending(record.turnId).catch(() => undefined);
    return { mode: "skipped:noEngine", usedFallback };
  }
  const mode = await finalizeHarnessContextEngineTurn({
    engine: deps.engine,
    ...sessionIds(deps),
    messages: input.messages,
    prePromptMessageCount: input.prePromptMessageCount,
    tokenBudget: deps.params.contextTokenBudget,
    runtimeContext: runtimeContextFor(deps, record.usage, "held"),
    turnId: record.turnId,
    threadId: record.threadId,
    timeoutMs: deps.engineCallMs,
    ...ingestProgress(deps, record),
  } as Parameters<typeof finalizeHarnessContextEngineTurn>[0]);
  await deps.store.completePending(record.turnId);
  return { mode, usedFallback };
}

/**
 * Commit the durable turn (`finalize.committing`): `commitTurn` with the turn's advancement key (the one its pending
 * record holds) and the anchors and messages read back from the store, then clear the pending record. A crash before
 * the record is cleared leaves it for recovery, which retries the same key.
 */
export async function commitEngineTurn(deps: TurnDeps, input: CommitTurnInput): Promise<CommitTurnOutput> {
  const { record } = input;
  const engine = activeEngine(deps);
  const advancementKey = durableTurnAdvancementKey({ sessionId: deps.params.sessionId, threadId: record.threadId, turnId: record.turnId });
  const out = await commitHarnessContextEngineTurn({
    engine,
    entries: await deps.store.readVisibleEntries(),
    session: { sessionId: deps.params.sessionId, sessionKey: deps.params.sessionKey, storePath: deps.store.sessionFile },
    threadId: record.threadId,
    turnId: record.turnId,
    advancementKey,
    sessionTarget: sessionTargetOf(deps),
    runtimeSettings: deps.runtimeSettings,
    runtimeContext: runtimeContextFor(deps, record.usage, "held"),
    timeoutMs: deps.engineCallMs,
  });
  await deps.store.completePending(record.turnId);
  return out;
}

/** `finalize.skippingCommit`: a durable engine's turn that is not committed; only its pending record goes. */
export async function clearPendingRecord(deps: TurnDeps, input: { turnId: string }): Promise<void> {
  await deps.store.completePending(input.turnId);
}

/**
 * How to record each message the engine took. Only per-message `ingest` needs it (a replay then skips what was taken);
 * `afterTurn` and `ingestBatch` take the turn in one call, after which the pending record is cleared anyway, so
 * recording their keys would only cost durable sidecar rewrites.
 */
function ingestProgress(deps: TurnDeps, record: TurnRecord) {
  if (deps.engine?.afterTurn || deps.engine?.ingestBatch) return {};
  return { onIngested: (key: string) => deps.store.markPendingIngested(record.turnId, [key]) };
}

/** Foreground maintenance after a successful turn. */
export async function maintainEngine(deps: TurnDeps, input: { record?: TurnRecord | undefined }, signal: AbortSignal): Promise<MaintainOutput> {
  const out = await runHarnessContextEngineMaintenance({
    engine: activeEngine(deps),
    ...sessionIds(deps),
    reason: "turn",
    background: false,
    runtimeContext: runtimeContextFor(deps, input.record?.usage, "held"),
    signal,
    timeoutMs: deps.engineCallMs,
  });
  return { changed: Boolean(out?.changed) };
}
