/**
 * The `store` option end to end, against the real codex app-server and the fake Responses API: turns, the recovery
 * of a crashed attempt's pending finalize (in a turn and alone), an explicit compaction, a reset with archive and the
 * turn after it all run on a store that is not a file (test/helpers/memory-store.ts). Its address is the path a
 * session file would have, so anything that went past the seam to the file system would leave something there.
 */
import { promises as fsp } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { compactCodexSession } from "../../src/compaction/session.js";
import { createWindowEngine } from "../../src/context-engine/engines/index.js";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { recoverCodexSession } from "../../src/recovery.js";
import { createCodexSession } from "../../src/turn/session.js";
import { resetCodexSession } from "../../src/transcript/reset.js";
import { entryIdempotencyKey } from "../../src/transcript/entries.js";
import { runCodexTurn } from "../../src/turn.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { createMemoryStores } from "../helpers/memory-store.js";

let env: OfflineCodex;
let dir: string;

beforeAll(async () => {
  env = await startOfflineCodex({ offline: { lean: true } });
  dir = await fsp.realpath(await fsp.mkdtemp(path.join(os.tmpdir(), "ctm-store-option-")));
});
afterAll(async () => {
  await env?.dispose();
  if (dir) await fsp.rm(dir, { recursive: true, force: true });
});

const user = (text: string, timestamp: number) => ({ role: "user", content: text, timestamp }) as AgentMessage;
const assistant = (text: string, timestamp: number) => ({ role: "assistant", content: [{ type: "text", text }], timestamp }) as AgentMessage;

describe("the store option (a session that is not a file)", () => {
  it("turns, pending-finalize recovery, compaction and reset go through the store, and nothing is written at its path", async () => {
    const memory = createMemoryStores();
    const address = path.join(dir, "s1.jsonl");
    const store = memory.store("s1", { address });
    const engine = createWindowEngine({ ownsCompaction: true, threadBootstrap: true });
    const afterTurn = vi.fn(async (_p: { sessionFile: string; messages: AgentMessage[]; prePromptMessageCount: number }) => undefined);
    engine.afterTurn = afterTurn as never;
    const session = createCodexSession({ appServer: env.codex, store, contextEngine: engine, contextTokenBudget: 16_000 });
    expect([session.sessionId, session.sessionFile]).toEqual(["s1", address]);

    env.fake.enqueue({ text: "first answer" });
    const first = await session.run("first prompt");
    expect(first.status).toBe("completed");
    const s = memory.session(address)!;
    expect(s.entries.map((e) => entryIdempotencyKey(e)?.split(":").at(-1))).toEqual(["prompt", "assistant"]);
    const threadId = JSON.parse(s.binding!).threadId as string;
    expect(threadId).toBe(first.threadId);
    expect(s.calls.get("acquireLock")).toBe(1);
    expect(s.calls.get("recordPending")).toBe(1);
    expect(s.calls.get("completePending")).toBe(1);
    expect(afterTurn).toHaveBeenCalledTimes(1);
    expect(afterTurn.mock.calls[0]![0].sessionFile).toBe(address);

    // A crashed attempt recorded its turn and died before the mirror: the next turn mirrors and finalizes it first.
    const crashed = [user("crashed prompt", 10), assistant("crashed answer", 11)];
    const other = memory.store("s1", { address });
    const lock = await other.acquireLock();
    await other.recordPending({ threadId, turnId: "crashed-turn", prePromptMessageCount: 2, messageCount: 2, status: "completed", messages: crashed });
    await lock.release();
    env.fake.enqueue({ text: "second answer" });
    const second = await session.run("second prompt");
    expect(second.status).toBe("completed");
    const keys = s.entries.map((e) => entryIdempotencyKey(e));
    expect(keys.slice(2, 4)).toEqual([`codex-app-server:${threadId}:crashed-turn:prompt`, `codex-app-server:${threadId}:crashed-turn:assistant`]);
    expect(keys).toHaveLength(6);
    expect(s.pending).toBeUndefined();
    expect(afterTurn).toHaveBeenCalledTimes(3);
    expect(afterTurn.mock.calls[1]![0].messages.slice(afterTurn.mock.calls[1]![0].prePromptMessageCount)).toEqual(crashed);

    // Recovery alone: a turn mirrored but never finalized, and an unreadable record set aside, all in the store.
    const lock2 = await other.acquireLock();
    await other.recordPending({ threadId, turnId: "second-crash", prePromptMessageCount: 6, messageCount: 2, status: "completed", messages: [user("p3", 20), assistant("a3", 21)] });
    await other.appendTurn({ threadId, turnId: "second-crash", messages: [user("p3", 20), assistant("a3", 21)] });
    await lock2.release();
    const recovered = await recoverCodexSession({ sessionId: "s1", store, contextEngine: engine, appServer: env.codex });
    expect(recovered).toMatchObject({ pending: 1, mirroredMessages: 0, finalized: 1, dropped: 0 });
    expect(afterTurn).toHaveBeenCalledTimes(4);
    s.pending = "{ torn";
    const setAside = await recoverCodexSession({ sessionId: "s1", store });
    expect(setAside).toMatchObject({ pending: 0, finalized: 0 });
    expect(s.pending).toBeUndefined();
    expect([...s.aside.keys()].some((k) => k.includes("pending-aside"))).toBe(true);

    // An explicit compaction: the engine compacts, Codex compacts natively, the store's binding is marked.
    const compacted = await compactCodexSession({ appServer: env.codex, sessionId: "s1", store, contextEngine: engine, contextTokenBudget: 16_000, trigger: "manual", nativeTimeoutMs: 15_000 });
    expect(compacted.ok).toBe(true);
    expect(compacted.result?.details.codexNativeCompaction).toMatchObject({ ok: true, threadId });
    expect(JSON.parse(s.binding!)).toMatchObject({ threadId, ledger: [], heldTurnIds: [], updatedBy: "compaction" });

    // Reset with archive and a new id: the binding goes, the transcript is archived in the store, the next turn of the
    // new id starts a fresh thread on an empty transcript.
    const reset = await resetCodexSession({ store, archiveTranscript: true, nextSessionId: "s1-next" });
    expect(reset).toMatchObject({ bindingCleared: true, pendingFinalize: 0, sessionId: "s1-next" });
    expect(reset.archivedTo).toContain("#archive-");
    expect(s.header?.id).toBe("s1-next");
    expect(s.entries).toEqual([]);
    env.fake.enqueue({ text: "fresh answer" });
    const fresh = await runCodexTurn({ appServer: env.codex, sessionId: "s1-next", store: memory.store("s1-next", { address }), prompt: "after the reset", contextEngine: engine, contextTokenBudget: 16_000 });
    expect(fresh.status).toBe("completed");
    expect(fresh.threadId).not.toBe(threadId);
    expect(s.entries).toHaveLength(2);

    // Nothing at the path the store's address names, nor beside it: no transcript, sidecar or lock directory.
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it("a store and a sessionFile that name different sessions are refused before anything runs", async () => {
    const memory = createMemoryStores();
    const store = memory.store("s2", { address: path.join(dir, "s2.jsonl") });
    const r = runCodexTurn({ appServer: env.codex, sessionId: "s2", store, sessionFile: path.join(dir, "other.jsonl"), prompt: "x" });
    await expect(r).rejects.toMatchObject({ name: "CodexTurnParamsError", field: "sessionFile" });
    await expect(runCodexTurn({ appServer: env.codex, sessionId: "s2", prompt: "x" } as never)).rejects.toMatchObject({ field: "sessionFile" });
    expect(memory.session(store.address)?.calls.size ?? 0).toBe(0);
    expect(await fsp.readdir(dir)).toEqual([]);
  });
});
