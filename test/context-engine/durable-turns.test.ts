import { describe, expect, it } from "vitest";
import {
  DURABLE_TURN_KEY_PREFIX,
  DurableTurnAnchorError,
  commitHarnessContextEngineTurn,
  durableTurnAdvancementKey,
  turnCommitFromEntries,
} from "../../src/context-engine/durable-turns.js";
import { declaresDurableTurns, engineFacts } from "../../src/context-engine/contract.js";
import type { ContextEngine } from "../../src/context-engine/types.js";
import type { VisibleTranscriptEntry } from "../../src/store/session-store.js";
import { mirrorKey } from "../../src/transcript/entries.js";

const SEMANTICS = { currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1" } as const;

function entry(i: number, role: string, key?: string): VisibleTranscriptEntry {
  return {
    entryId: `e${i}`,
    parentId: i === 0 ? null : `e${i - 1}`,
    seq: i + 1,
    role,
    message: { role, content: `m${i}`, timestamp: i } as never,
    ...(key ? { idempotencyKey: key } : {}),
  };
}

// An earlier turn, then this turn (prompt, tool call, result, answer), then nothing else.
const entries = [
  entry(0, "user", mirrorKey("thr", "t0", "prompt")),
  entry(1, "assistant", mirrorKey("thr", "t0", "assistant")),
  entry(2, "user", mirrorKey("thr", "t1", "prompt")),
  entry(3, "assistant", mirrorKey("thr", "t1", "tool-call-c1")),
  entry(4, "toolResult", mirrorKey("thr", "t1", "tool-result-c1")),
  entry(5, "assistant", mirrorKey("thr", "t1", "assistant")),
];

describe("durable turn advancement keys", () => {
  it("are derived from session, thread and turn only: stable, distinct per turn, no random part", () => {
    const k = durableTurnAdvancementKey({ sessionId: "s1", threadId: "thr", turnId: "t1" });
    expect(k.startsWith(DURABLE_TURN_KEY_PREFIX)).toBe(true);
    expect(durableTurnAdvancementKey({ sessionId: "s1", threadId: "thr", turnId: "t1" })).toBe(k);
    expect(durableTurnAdvancementKey({ sessionId: "s1", threadId: "thr", turnId: "t2" })).not.toBe(k);
    expect(durableTurnAdvancementKey({ sessionId: "s2", threadId: "thr", turnId: "t1" })).not.toBe(k);
  });
});

describe("turnCommitFromEntries", () => {
  it("anchors the turn's user entry and its last entry (entry id, sequence, parent, position) and spans the messages between", () => {
    const p = turnCommitFromEntries(entries, { sessionId: "s1", storePath: "/d/s1.jsonl" }, { threadId: "thr", turnId: "t1", advancementKey: "K" });
    expect(p.admission).toEqual({
      agentId: "codex-turn", sessionId: "s1", sessionKey: "s1", storePath: "/d/s1.jsonl", generation: "0",
      entryId: "e2", rawSeq: 3, effectiveParentId: "e1", activeMessagePosition: 2, idempotencyKey: mirrorKey("thr", "t1", "prompt"),
      logicalTurnId: "K", role: "user",
    });
    expect(p.terminal).toMatchObject({ entryId: "e5", rawSeq: 6, effectiveParentId: "e4", activeMessagePosition: 5 });
    // lossless-claw's check: one message per position from the admission through the terminal.
    expect(p.messages).toHaveLength(p.terminal.activeMessagePosition - p.admission.activeMessagePosition + 1);
    expect(p.messages.map((m) => (m as { content: string }).content)).toEqual(["m2", "m3", "m4", "m5"]);
  });

  it("a turn with no user entry in the transcript cannot be anchored (typed error naming the turn)", () => {
    expect(() => turnCommitFromEntries(entries.slice(3), { sessionId: "s1", storePath: "/x" }, { threadId: "thr", turnId: "t1", advancementKey: "K" })).toThrow(DurableTurnAnchorError);
    expect(() => turnCommitFromEntries(entries, { sessionId: "s1", storePath: "/x" }, { threadId: "thr", turnId: "t9", advancementKey: "K" })).toThrow(/durable turn t9 cannot be committed/);
  });
});

describe("commitHarnessContextEngineTurn", () => {
  const engine = (status: unknown, calls: unknown[] = []): ContextEngine => ({
    info: { id: "d", name: "D", transcriptSemantics: SEMANTICS },
    ingest: async () => ({ ingested: true }),
    assemble: async ({ messages }) => ({ messages, estimatedTokens: 0 }),
    compact: async () => ({ ok: true, compacted: false }),
    commitTurn: async (p) => {
      calls.push(p);
      return status as never;
    },
  });

  it("hands the engine the key, the anchors and the messages; duplicate is success; anything else is an invalid result", async () => {
    const calls: Array<Record<string, unknown>> = [];
    const base = { entries, session: { sessionId: "s1", sessionKey: "k1", storePath: "/d/s1.jsonl" }, threadId: "thr", turnId: "t1", advancementKey: "K" };
    const r = await commitHarnessContextEngineTurn({ ...base, engine: engine({ status: "committed" }, calls) });
    expect(r).toEqual({ status: "committed", advancementKey: "K", messages: 4, admissionEntryId: "e2", terminalEntryId: "e5", admissionSeq: 3, terminalSeq: 6 });
    expect(calls[0]).toMatchObject({ advancementKey: "K", sessionId: "s1", sessionKey: "k1", admission: { logicalTurnId: "K", sessionKey: "k1" } });
    expect((await commitHarnessContextEngineTurn({ ...base, engine: engine({ status: "duplicate" }) })).status).toBe("duplicate");
    await expect(commitHarnessContextEngineTurn({ ...base, engine: engine({ status: "ok" }) })).rejects.toMatchObject({ code: "ENGINE_RESULT_INVALID" });
  });

  it("an engine takes durable turns only with both declarations and commitTurn (else it is finalized the legacy way)", () => {
    const e = engine({ status: "committed" });
    expect(declaresDurableTurns(e)).toBe(true);
    expect(engineFacts(e).durableTurns).toBe(true);
    expect(declaresDurableTurns({ ...e, info: { ...e.info, transcriptSemantics: { currentTurnFence: SEMANTICS.currentTurnFence } } })).toBe(false);
    expect(declaresDurableTurns({ ...e, info: { ...e.info, transcriptSemantics: { turnAdvancementIdempotency: SEMANTICS.turnAdvancementIdempotency } } })).toBe(false);
    const { commitTurn: _dropped, ...noCommit } = e;
    expect(declaresDurableTurns(noCommit)).toBe(false);
  });
});
