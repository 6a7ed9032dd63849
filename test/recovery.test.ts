/**
 * `recoverCutTurn` (src/recovery.ts) with a real JSONL store and a fake `thread/read`: what the binding and the
 * transcript hold afterwards, for outcomes the real binary does not produce on demand (a native compaction inside the
 * cut turn, a steer, an unreadable thread). The real-binary paths are in test/integration/cut-turn-recovery.test.ts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../src/log/logger.js";
import { recoverCutTurn, type RecoveryAppServer } from "../src/recovery.js";
import { CUT_TURN_NOTICE } from "../src/codex/thread-turn.js";
import type { CodexTurn } from "../src/codex/app-server.js";
import type { TurnRecordCore } from "../src/codex/turn-projector.js";
import { createJsonlSessionStore } from "../src/store/jsonl-store.js";
import type { ThreadBinding } from "../src/transcript/binding.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const binding: ThreadBinding = {
  version: 1,
  threadId: "thread-1",
  dynamicToolsFingerprint: "t",
  engineId: "legacy",
  policyFingerprint: "p",
  projectionMode: "delta",
  heldTurnIds: ["turn-0", "turn-1"],
  ledger: ["abc:12"],
  turnInFlight: { turnId: "turn-1", prompt: "the cut prompt" },
};
const user = (id: string, text: string, at: number) => ({ type: "userMessage", id, content: [{ type: "text", text, text_elements: [] }], startedAtMs: at, completedAtMs: at });
const agent = (id: string, text: string, at: number) => ({ type: "agentMessage", id, text, phase: null, startedAtMs: at, completedAtMs: at + 1 });

async function session(items: unknown[] | Error, appServerOverride?: RecoveryAppServer) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "cut-turn-unit-"));
  dirs.push(dir);
  const sessionFile = path.join(dir, "s.jsonl");
  const store = createJsonlSessionStore({ sessionFile, sessionId: "s", cwd: dir });
  const lock = await store.acquireLock();
  await store.writeBinding(binding, { durable: false });
  const appServer = appServerOverride ?? {
    request: async () => {
      if (items instanceof Error) throw items;
      return { thread: { id: "thread-1", model: "m", modelProvider: "p", turns: [{ id: "turn-1", status: "interrupted", items }] } };
    },
  };
  const recover = () => recoverCutTurn({ params: { sessionId: "s", sessionFile, contextTokenBudget: undefined, timeouts: undefined } as never, store, engine: undefined, appServer }, silentLogger);
  return { store, lock, recover };
}

const texts = (messages: readonly unknown[]) =>
  messages.map((m) => {
    const c = (m as { role: string; content: unknown }).content;
    return `${(m as { role: string }).role}:${typeof c === "string" ? c : (c as Array<{ text?: string }>).map((p) => p.text ?? "").join("")}`;
  });

describe("recoverCutTurn", () => {
  it("a steer Codex took during the cut turn is recorded in order, as a live turn records it", async () => {
    const s = await session([user("u1", "[projected] the cut prompt", 10), agent("a1", "first part", 20), user("u2", "also check the docs", 30), agent("a2", "docs checked", 40)]);
    const out = await s.recover();
    expect(out).toMatchObject({ turnId: "turn-1", outcome: "recovered", codexStatus: "interrupted", messages: 4, mirroredMessages: 4 });
    expect(texts((await s.store.readHistory()).messages)).toEqual(["user:the cut prompt", "assistant:first part", "user:also check the docs", `assistant:docs checked${CUT_TURN_NOTICE}`]);
    expect((await s.store.readBinding())?.turnInFlight).toBeUndefined();
    await s.lock.release();
  });

  it("a native compaction inside the cut turn clears what the binding says the thread holds (the next projection re-sends it)", async () => {
    const s = await session([user("u1", "the cut prompt", 10), { type: "contextCompaction", id: "c1", startedAtMs: 15, completedAtMs: 16 }, agent("a1", "after compacting", 20)]);
    await s.recover();
    const after = await s.store.readBinding();
    expect(after).toMatchObject({ ledger: [], heldTurnIds: [], nativeCompactions: 1 });
    expect(after?.turnInFlight).toBeUndefined();
    await s.lock.release();
  });

  it("without a compaction the binding keeps what the thread holds, and only the marker goes", async () => {
    const s = await session([user("u1", "the cut prompt", 10), agent("a1", "answer", 20)]);
    await s.recover();
    const after = await s.store.readBinding();
    expect(after).toMatchObject({ ledger: ["abc:12"], heldTurnIds: ["turn-0", "turn-1"] });
    expect(after?.nativeCompactions).toBeUndefined();
    expect(after?.turnInFlight).toBeUndefined();
    await s.lock.release();
  });

  it("a turn this client still streams is stopped through its own handle before the thread is read, whatever Codex's thread says of it", async () => {
    // Codex 0.171.0 under load: a turn started right after the thread's previous one ended reads as "interrupted" on an
    // idle thread while it runs. Only the read after the live turn's end holds the model's answer.
    const calls: string[] = [];
    let ended = false;
    let endLive: (r: TurnRecordCore) => void = () => {};
    const live = {
      threadId: "thread-1",
      turnId: "turn-1",
      interrupt: async (options?: { graceMs?: number | undefined }) => {
        calls.push(`interrupt grace ${options?.graceMs}`);
        ended = true;
        endLive({ codexStatus: "interrupted" } as TurnRecordCore);
      },
      completion: new Promise<TurnRecordCore>((resolve) => (endLive = resolve)),
      done: false,
      warnings: [],
      steer: async () => ({ accepted: false as const, reason: "unused" }),
    } as unknown as CodexTurn;
    const appServer: RecoveryAppServer = {
      request: (async (method: string) => {
        calls.push(method);
        const items = ended ? [user("u1", "the cut prompt", 10), agent("a1", "the whole answer", 20)] : [user("u1", "the cut prompt", 10)];
        return { thread: { id: "thread-1", status: { type: "idle" }, turns: [{ id: "turn-1", status: "interrupted", items }] } };
      }) as RecoveryAppServer["request"],
      runningTurn: (threadId, turnId) => (threadId === "thread-1" && turnId === "turn-1" && !ended ? live : undefined),
    };
    const s = await session([], appServer);
    expect(await s.recover()).toMatchObject({ turnId: "turn-1", outcome: "recovered", codexStatus: "interrupted", messages: 2 });
    expect(calls).toEqual(["interrupt grace 5000", "thread/read"]);
    expect(texts((await s.store.readHistory()).messages)).toEqual(["user:the cut prompt", `assistant:the whole answer${CUT_TURN_NOTICE}`]);
    expect((await s.store.readBinding())?.turnInFlight).toBeUndefined();
    await s.lock.release();
  });

  it("a turn another client streams is interrupted again while Codex refuses, and read once it stopped", async () => {
    // Codex 0.171.0 refuses turn/interrupt ("no active turn") for a moment after accepting a turn that starts right
    // after the thread's previous one ended. Sent once, the turn ran on and was mirrored cut when the wait ran out.
    const calls: string[] = [];
    let refusals = 2;
    let stopped = false;
    const appServer: RecoveryAppServer = {
      request: (async (method: string) => {
        calls.push(method);
        if (method === "turn/interrupt") {
          if (refusals-- > 0) throw new Error("no active turn to interrupt");
          stopped = true;
          return {};
        }
        const items = stopped ? [user("u1", "the cut prompt", 10), agent("a1", "the whole answer", 20)] : [user("u1", "the cut prompt", 10)];
        return { thread: { id: "thread-1", status: { type: stopped ? "idle" : "active" }, turns: [{ id: "turn-1", status: stopped ? "interrupted" : "inProgress", items }] } };
      }) as RecoveryAppServer["request"],
    };
    const s = await session([], appServer);
    expect(await s.recover()).toMatchObject({ turnId: "turn-1", outcome: "recovered", codexStatus: "interrupted", messages: 2 });
    expect(calls).toEqual(["thread/read", "turn/interrupt", "turn/interrupt", "thread/read", "turn/interrupt", "thread/read"]);
    expect(texts((await s.store.readHistory()).messages)).toEqual(["user:the cut prompt", `assistant:the whole answer${CUT_TURN_NOTICE}`]);
    await s.lock.release();
  });

  it("a thread Codex cannot read drops the marker and writes nothing to the transcript", async () => {
    const s = await session(new Error("app-server gone"));
    expect(await s.recover()).toEqual({ turnId: "turn-1", outcome: "unreadable" });
    expect((await s.store.readHistory()).messages).toEqual([]);
    expect(await s.store.readBinding()).toMatchObject({ heldTurnIds: ["turn-0", "turn-1"], ledger: ["abc:12"] });
    expect((await s.store.readBinding())?.turnInFlight).toBeUndefined();
    await s.lock.release();
  });
});
