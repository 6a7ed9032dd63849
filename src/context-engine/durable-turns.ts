/**
 * Durable turns (OpenClaw 2026.8.1+, `ContextEngine.commitTurn`): an engine that declares
 * `info.transcriptSemantics` (`currentTurnFence: "before-current-turn-entry-v1"`, `turnAdvancementIdempotency:
 * "atomic-idempotent-v1"`) gets each accepted turn once, as the transcript holds it, with a stable advancement key and
 * the anchors of its first (user) and last entries; the host retries the same key after a crash.
 *
 * Where OpenClaw (src/agents/harness/context-engine-turn-outbox.ts) keys a turn by a random `logicalTurnId` it stores in
 * an outbox row before dispatch, the key here is derived from the session and the Codex turn
 * ({@link durableTurnAdvancementKey}): the same turn always gets the same key, and the pending-finalize record keeps it
 * for the retry. The messages and anchors are read back from the session store (its visible entries) both on the turn's
 * own commit and on a retry, so a retry hands the engine byte-identical parameters (lossless-claw compares a hash of
 * them and refuses a key whose payload changed).
 */
import { createHash } from "node:crypto";
import type { CommitTurnOutput } from "../../machines/turn.contract.js";
import type { VisibleTranscriptEntry } from "../store/session-store.js";
import { parseMirrorKey } from "../transcript/entries.js";
import { callEngine } from "./lifecycle.js";
import { commitTurnResultSchema, validateEngineResult } from "./contract.js";
import {
  DURABLE_TURN_AGENT_ID,
  type AgentMessage,
  type ContextEngine,
  type ContextEngineRuntimeContext,
  type ContextEngineRuntimeSettings,
  type ContextEngineSessionTarget,
  type TranscriptEntryAnchor,
  type TranscriptTurnAdmission,
} from "./types.js";

/** Prefix of the advancement keys this host issues (versioned: a new derivation gets a new prefix). */
export const DURABLE_TURN_KEY_PREFIX = "codex-turn:v1:";

/** The anchors' `generation`: the JSONL store has one generation per transcript (it never changes under a turn). */
export const DURABLE_TURN_GENERATION = "0";

/**
 * The advancement key of one Codex turn of one session: `codex-turn:v1:` + the first 32 hex digits of
 * SHA-256(session id, thread id, turn id). Deterministic (no random ids): the turn's own commit, its pending record and
 * every retry after a crash carry the same key.
 *
 * @example
 * ```ts
 * durableTurnAdvancementKey({ sessionId: "s1", threadId: "thr_1", turnId: "turn_1" }); // "codex-turn:v1:5c0f..." (always the same)
 * ```
 */
export function durableTurnAdvancementKey(ids: { sessionId: string; threadId: string; turnId: string }): string {
  const digest = createHash("sha256").update(JSON.stringify([ids.sessionId, ids.threadId, ids.turnId])).digest("hex");
  return `${DURABLE_TURN_KEY_PREFIX}${digest.slice(0, 32)}`;
}

/** The transcript holds no entry of the turn to commit (or none from a user message): nothing can anchor it. */
export class DurableTurnAnchorError extends Error {
  readonly code = "DURABLE_TURN_UNANCHORED";
  constructor(
    readonly turnId: string,
    reason: string,
  ) {
    super(`durable turn ${turnId} cannot be committed: ${reason}`);
    this.name = "DurableTurnAnchorError";
  }
}

/** What a durable turn hands the engine: the anchors and the messages from the admission through the terminal. */
export interface TurnCommitPayload {
  admission: TranscriptTurnAdmission;
  terminal: TranscriptEntryAnchor;
  messages: AgentMessage[];
}

/** Who the anchors name: the session, its key (the id when it has none, as the session target), the store's address. */
export interface DurableTurnSession {
  sessionId: string;
  sessionKey?: string | undefined;
  storePath: string;
  generation?: string | undefined;
}

/**
 * The admission, terminal and messages of one turn from the store's visible entries: the turn's entries are those the
 * mirror keyed with its thread and turn; the admission is the first of them from a user message (the prompt), the
 * terminal the last; the messages run from one to the other, so `messages.length` equals `terminal.activeMessagePosition
 * - admission.activeMessagePosition + 1`. Throws {@link DurableTurnAnchorError} when the transcript holds no user entry
 * of the turn (e.g. a `beforeMessageWrite` hook kept the prompt out).
 *
 * @example
 * ```ts
 * const { admission, terminal, messages } = turnCommitFromEntries(await store.readVisibleEntries(),
 *   { sessionId: "s1", storePath: store.sessionFile }, { threadId, turnId, advancementKey });
 * ```
 */
export function turnCommitFromEntries(
  entries: readonly VisibleTranscriptEntry[],
  session: DurableTurnSession,
  turn: { threadId: string; turnId: string; advancementKey: string },
): TurnCommitPayload {
  const mine = (e: VisibleTranscriptEntry) => {
    const key = e.idempotencyKey !== undefined ? parseMirrorKey(e.idempotencyKey) : null;
    return key !== null && key.threadId === turn.threadId && key.turnId === turn.turnId;
  };
  const first = entries.findIndex((e) => mine(e) && e.role === "user");
  if (first < 0) throw new DurableTurnAnchorError(turn.turnId, "the transcript holds no user entry of the turn");
  let last = first;
  for (let i = entries.length - 1; i > first; i--) {
    if (mine(entries[i]!)) {
      last = i;
      break;
    }
  }
  const anchor = (i: number): TranscriptEntryAnchor => {
    const e = entries[i]!;
    return {
      agentId: DURABLE_TURN_AGENT_ID,
      sessionId: session.sessionId,
      sessionKey: session.sessionKey ?? session.sessionId,
      storePath: session.storePath,
      generation: session.generation ?? DURABLE_TURN_GENERATION,
      entryId: e.entryId,
      rawSeq: e.seq,
      effectiveParentId: e.parentId,
      activeMessagePosition: i,
      ...(e.idempotencyKey !== undefined ? { idempotencyKey: e.idempotencyKey } : {}),
    };
  };
  return {
    admission: { ...anchor(first), logicalTurnId: turn.advancementKey, role: "user" },
    terminal: anchor(last),
    messages: entries.slice(first, last + 1).map((e) => e.message),
  };
}

/** Parameters of {@link commitHarnessContextEngineTurn}. */
export interface CommitTurnParams {
  engine: ContextEngine;
  /** The session's visible entries, read after the turn was mirrored (`SessionStore.readVisibleEntries`). */
  entries: readonly VisibleTranscriptEntry[];
  session: DurableTurnSession;
  threadId: string;
  turnId: string;
  advancementKey: string;
  sessionTarget?: ContextEngineSessionTarget | undefined;
  runtimeSettings?: ContextEngineRuntimeSettings | undefined;
  runtimeContext?: ContextEngineRuntimeContext | undefined;
  timeoutMs?: number | undefined;
}

/** What {@link commitHarnessContextEngineTurn} did (ids and counts only). */
export type CommitTurnResult = CommitTurnOutput;

/**
 * Commit one turn in a durable engine: `commitTurn` with the key, the anchors and the messages from the store, bounded
 * by `timeoutMs`; its answer is validated (`committed` or `duplicate`, else `ENGINE_RESULT_INVALID`).
 *
 * @example
 * ```ts
 * const r = await commitHarnessContextEngineTurn({ engine, entries: await store.readVisibleEntries(),
 *   session: { sessionId: "s1", storePath: store.sessionFile }, threadId, turnId,
 *   advancementKey: durableTurnAdvancementKey({ sessionId: "s1", threadId, turnId }) });
 * r.status; // "committed", or "duplicate" on a retry
 * ```
 */
export async function commitHarnessContextEngineTurn(p: CommitTurnParams): Promise<CommitTurnResult> {
  const payload = turnCommitFromEntries(p.entries, p.session, { threadId: p.threadId, turnId: p.turnId, advancementKey: p.advancementKey });
  const raw = await callEngine(
    "commitTurn",
    () =>
      p.engine.commitTurn!({
        advancementKey: p.advancementKey,
        admission: payload.admission,
        terminal: payload.terminal,
        messages: payload.messages,
        sessionId: p.session.sessionId,
        ...(p.session.sessionKey !== undefined ? { sessionKey: p.session.sessionKey } : {}),
        ...(p.sessionTarget ? { sessionTarget: p.sessionTarget } : {}),
        ...(p.runtimeSettings ? { runtimeSettings: p.runtimeSettings } : {}),
        ...(p.runtimeContext ? { runtimeContext: p.runtimeContext } : {}),
      }),
    { timeoutMs: p.timeoutMs },
  );
  const { status } = validateEngineResult("commitTurn", commitTurnResultSchema, raw);
  return {
    status,
    advancementKey: p.advancementKey,
    messages: payload.messages.length,
    admissionEntryId: payload.admission.entryId,
    terminalEntryId: payload.terminal.entryId,
    admissionSeq: payload.admission.rawSeq,
    terminalSeq: payload.terminal.rawSeq,
  };
}
