/**
 * The `SessionStore` contract as tests any store must pass (docs/storage.md "The contract"; the short form for store
 * authors is in the TSDoc of `src/store/session-store.ts`). A store's test file calls
 * {@link describeSessionStoreContract} once with a harness that opens its stores; `jsonl-contract.test.ts` runs it
 * against the JSONL store, and a database store's test runs the very same function against its own.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import type { SessionStore, SessionStoreLock } from "../../src/store/session-store.js";
import type { ThreadBinding as ThreadBindingForStore } from "../../src/transcript/binding.js";
import { SessionFileError } from "../../src/transcript/errors.js";
import { mirrorKeysForTurn } from "../../src/transcript/mirror.js";
import { turnMessages } from "../transcript/fixtures/turn-messages.js";

/** What a store's test supplies: how to open its stores and how to damage them from outside. */
export interface StoreContractHarness {
  /** A store of a NEW, empty session with this id (the suite uses a fresh id per test). */
  open(sessionId: string): SessionStore | Promise<SessionStore>;
  /**
   * Another store object for the same session (same `address`), as another process would build it; with `sessionId`,
   * one that checks that id (after a reset with `nextSessionId`).
   */
  reopen(store: SessionStore, sessionId?: string): SessionStore | Promise<SessionStore>;
  /** Make the stored binding of `store`'s session unreadable (as a torn or foreign write would). */
  corruptBinding(store: SessionStore): Promise<void>;
  /** Make the stored pending-finalize record set of `store`'s session unreadable. */
  corruptPending(store: SessionStore): Promise<void>;
  /** Take the lock `store` holds away from it without telling it (another holder took the session over). */
  loseLock(store: SessionStore): Promise<void>;
  /** How long after {@link loseLock} the holder's `signal` may take to abort (its heartbeat period, with slack). */
  lossNoticedWithinMs: number;
  /** Called once after the file's tests. */
  close?(): Promise<void>;
}

let sessions = 0;

async function codeOf(p: Promise<unknown> | (() => unknown)): Promise<string | undefined> {
  const err = await Promise.resolve()
    .then(() => (typeof p === "function" ? p() : p))
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(err, "expected a SessionFileError").toBeInstanceOf(SessionFileError);
  return (err as SessionFileError).code;
}

function binding(threadId: string, extra: Partial<ThreadBindingForStore> = {}): ThreadBindingForStore {
  return { version: 1, threadId, dynamicToolsFingerprint: "d", engineId: "e", policyFingerprint: "p", projectionMode: "auto", heldTurnIds: [], ledger: [], ...extra };
}

function pending(threadId: string, turnId: string, messages: AgentMessage[] = turnMessages(threadId, turnId)) {
  return { threadId, turnId, prePromptMessageCount: 0, messageCount: messages.length, status: "completed" as const, messages };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Register the contract tests for one store implementation.
 *
 * @example
 * ```ts
 * describeSessionStoreContract("jsonl", async () => ({ open, reopen, corruptBinding, corruptPending, loseLock, lossNoticedWithinMs: 3000 }));
 * ```
 */
export function describeSessionStoreContract(name: string, makeHarness: () => Promise<StoreContractHarness>): void {
  describe(`SessionStore contract: ${name}`, () => {
    let h: StoreContractHarness;
    beforeAll(async () => {
      h = await makeHarness();
    });
    afterAll(async () => {
      await h?.close?.();
    });
    /** A fresh session's store, its lock held (writes need it). */
    const fresh = async (): Promise<{ store: SessionStore; lock: SessionStoreLock; id: string }> => {
      const id = `contract-${name}-${++sessions}-${process.pid}`;
      const store = await h.open(id);
      const lock = await store.acquireLock({ timeoutMs: 10_000 });
      return { store, lock, id };
    };

    describe("identity and history", () => {
      it("a new session: its address names it, nothing is stored, and reading creates nothing", async () => {
        const { store, lock, id } = await fresh();
        expect(store.address.length).toBeGreaterThan(0);
        expect(store.sessionFile).toBe(store.address);
        expect(store.sessionId).toBe(id);
        const history = await store.readHistory();
        expect(history).toMatchObject({ messages: [], origins: [], entryCount: 0, lastEntryId: undefined, skippedEntries: 0, exists: false });
        expect(await store.readVisibleEntries()).toEqual([]);
        expect(await store.readBinding()).toBeUndefined();
        expect(await store.hasPending()).toBe(false);
        expect(await store.listPending()).toEqual([]);
        expect((await (await h.reopen(store)).readHistory()).exists).toBe(false);
        await lock.release();
      });

      it("appendTurn mirrors a turn once (idempotent by mirror key), and every store object of the session reads it, frozen", async () => {
        const { store, lock } = await fresh();
        const t1 = turnMessages("thr", "t1");
        const first = await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1 });
        expect(first).toMatchObject({ appended: 5, skipped: 0, entryCount: 5 });
        expect(first.entryIds).toHaveLength(5);
        expect(new Set(first.entryIds).size).toBe(5);
        expect(first.lastEntryId).toBe(first.entryIds[4]);
        const again = await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1 });
        expect(again).toMatchObject({ appended: 0, skipped: 5, entryIds: first.entryIds, entryCount: 5, lastEntryId: first.lastEntryId });
        // Part of a turn already stored (a crash cut the mirror): only the rest is appended.
        const t2 = turnMessages("thr", "t2");
        expect((await store.appendTurn({ threadId: "thr", turnId: "t2", messages: t2.slice(0, 2) })).appended).toBe(2);
        const rest = await store.appendTurn({ threadId: "thr", turnId: "t2", messages: t2 });
        expect(rest).toMatchObject({ appended: 3, skipped: 2, entryCount: 10 });

        for (const reader of [store, await h.reopen(store)]) {
          const history = await reader.readHistory();
          expect(history.messages).toEqual([...t1, ...t2]);
          expect(history.origins).toEqual([...t1.map(() => ({ threadId: "thr", turnId: "t1" })), ...t2.map(() => ({ threadId: "thr", turnId: "t2" }))]);
          expect(history).toMatchObject({ entryCount: 10, lastEntryId: rest.lastEntryId, exists: true, skippedEntries: 0 });
          expect(Object.isFrozen(history.messages)).toBe(true);
          expect(Object.isFrozen(history.messages[0])).toBe(true);
        }
        await lock.release();
      });

      it("readVisibleEntries: entry ids, the parent chain, seq, role and the mirror key of each message, as copies", async () => {
        const { store, lock } = await fresh();
        const t1 = turnMessages("thr", "t1");
        const out = await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1 });
        const visible = await store.readVisibleEntries();
        expect(visible.map((v) => v.entryId)).toEqual(out.entryIds);
        expect(visible.map((v) => v.parentId)).toEqual([null, ...out.entryIds.slice(0, 4)]);
        expect(visible.map((v) => v.role)).toEqual(t1.map((m) => m.role));
        expect(visible.map((v) => v.idempotencyKey)).toEqual(mirrorKeysForTurn("thr", "t1", t1));
        for (let i = 1; i < visible.length; i++) expect(visible[i]!.seq).toBeGreaterThan(visible[i - 1]!.seq);
        expect(visible.map((v) => v.message)).toEqual(t1);
        (visible[0]!.message as { content: unknown }).content = "changed by a reader";
        expect((await store.readHistory()).messages[0]).toEqual(t1[0]);
        await lock.release();
      });

      it("findRequest: the turn a request ran as (its mark on the prompt entry), seen by every store object; none for an unknown id", async () => {
        const { store, lock } = await fresh();
        await store.appendTurn({ threadId: "thr", turnId: "t0", messages: turnMessages("thr", "t0") });
        const t1 = turnMessages("thr", "t1");
        const out = await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1, request: { id: "req-1", status: "completed" } });
        expect(await store.findRequest("req-2")).toBeUndefined();
        for (const s of [store, await h.reopen(store)]) {
          const found = await s.findRequest("req-1");
          expect(found).toMatchObject({ id: "req-1", status: "completed", threadId: "thr", turnId: "t1", entryId: out.entryIds[0] });
          expect(found?.messages).toEqual(t1);
        }
        // A re-mirror of the same turn (a retry) appends nothing and leaves the first mark.
        expect((await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1, request: { id: "req-1", status: "failed" } })).appended).toBe(0);
        expect((await store.findRequest("req-1"))?.status).toBe("completed");
        await lock.release();
      });

      it("appendMessage is idempotent by key, stores the key on the message, and rejects a malformed message", async () => {
        const { store, lock } = await fresh();
        const message = { role: "user", content: "[refused by the admission gate]", timestamp: 1 } as AgentMessage;
        const first = await store.appendMessage({ message, idempotencyKey: "gate:run-1" });
        expect(first.appended).toBe(true);
        const again = await store.appendMessage({ message, idempotencyKey: "gate:run-1" });
        expect(again).toEqual({ entryId: first.entryId, appended: false });
        const history = await store.readHistory();
        expect(history.messages).toHaveLength(1);
        expect(history.messages[0]).toMatchObject({ role: "user", content: message.content, idempotencyKey: "gate:run-1" });
        expect(history.lastEntryId).toBe(first.entryId);
        expect((await store.readVisibleEntries())[0]).toMatchObject({ entryId: first.entryId, idempotencyKey: "gate:run-1" });
        expect(await codeOf(store.appendMessage({ message: { content: "no role" } as unknown as AgentMessage, idempotencyKey: "k2" }))).toBe("SESSION_INVALID_ARGUMENT");
        expect((await store.readHistory()).messages).toHaveLength(1);
        await lock.release();
      });

      it("appendCompaction: the next history starts with the summary, then the kept entries; an unknown kept entry is refused", async () => {
        const { store, lock } = await fresh();
        await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
        const t2 = turnMessages("thr", "t2");
        const second = await store.appendTurn({ threadId: "thr", turnId: "t2", messages: t2 });
        expect(await codeOf(store.appendCompaction({ summary: "S", firstKeptEntryId: "no-such-entry", tokensBefore: 10 }))).toBe("SESSION_INVALID_ARGUMENT");
        const id = await store.appendCompaction({ summary: "the first turn, summarized", firstKeptEntryId: second.entryIds[0]!, tokensBefore: 1234 });
        expect(typeof id).toBe("string");
        const history = await store.readHistory();
        expect(history.messages).toHaveLength(1 + t2.length);
        expect(JSON.stringify(history.messages[0])).toContain("the first turn, summarized");
        expect(history.messages.slice(1)).toEqual(t2);
        expect(history.origins[0]).toBeNull();
        expect(history.lastEntryId).toBe(id);
        expect((await store.readVisibleEntries()).map((v) => v.entryId)).toEqual(second.entryIds);
        // The turns stay known to the mirror: the compacted turn is not appended again.
        expect((await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") })).appended).toBe(0);
        await lock.release();
      });

      it("rewriteEntries: new messages for entries on the branch (atomic, keys kept); nothing matching is changed: false; a bad request is typed", async () => {
        const { store, lock } = await fresh();
        const t1 = turnMessages("thr", "t1");
        const out = await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1 });
        const stub = { ...t1[3]!, content: [{ type: "text", text: "[tool output summarized]" }] } as AgentMessage;
        const result = await store.rewriteEntries({ replacements: [{ entryId: out.entryIds[3]!, message: stub }] });
        expect(result.changed).toBe(true);
        expect(result.rewrittenEntries).toBeGreaterThanOrEqual(1);
        const history = await store.readHistory();
        expect(history.messages).toEqual([...t1.slice(0, 3), stub, t1[4]]);
        expect(history.origins).toEqual(t1.map(() => ({ threadId: "thr", turnId: "t1" })));
        expect((await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1 })).appended).toBe(0);
        const none = await store.rewriteEntries({ replacements: [{ entryId: "no-such-entry", message: stub }] });
        expect(none.changed).toBe(false);
        expect(typeof none.reason).toBe("string");
        expect(await codeOf(store.rewriteEntries({ replacements: [{ entryId: out.entryIds[0]! }] } as never))).toBe("SESSION_INVALID_ARGUMENT");
        expect((await store.readHistory()).messages).toEqual(history.messages);
        await lock.release();
      });
    });

    describe("binding", () => {
      it("writeBinding / readBinding: the whole binding, durable or not, seen by every store object of the session", async () => {
        const { store, lock } = await fresh();
        await store.writeBinding(binding("thr_1", { heldTurnIds: ["t1"], ledger: ["u1:10"] }), { durable: false });
        expect(await store.readBinding()).toEqual(binding("thr_1", { heldTurnIds: ["t1"], ledger: ["u1:10"] }));
        await store.writeBinding(binding("thr_1", { heldTurnIds: ["t1", "t2"], ledger: [], lastUsage: { inputTokens: 5, totalTokens: 9 } }), { durable: true });
        const other = await h.reopen(store);
        expect(await other.readBinding()).toEqual(binding("thr_1", { heldTurnIds: ["t1", "t2"], ledger: [], lastUsage: { inputTokens: 5, totalTokens: 9 } }));
        await store.writeBinding(binding("thr_2"), { durable: false });
        expect((await other.readBinding())?.threadId).toBe("thr_2");
        await lock.release();
      });

      it("a corrupt binding: readOnly reports it and leaves it; a plain read sets it aside and reads undefined", async () => {
        const { store, lock } = await fresh();
        await store.writeBinding(binding("thr_1"), { durable: true });
        await h.corruptBinding(store);
        expect(await store.readBinding({ readOnly: true })).toBeUndefined();
        expect(await (await h.reopen(store)).readBinding({ readOnly: true })).toBeUndefined();
        // Left in place: a set-aside still finds it.
        expect(typeof (await store.setAsideBinding())).toBe("string");
        await h.corruptBinding(store);
        expect(await store.readBinding()).toBeUndefined();
        // Moved by the plain read: nothing is left to set aside.
        expect(await store.setAsideBinding()).toBeUndefined();
        await store.writeBinding(binding("thr_new"), { durable: true });
        expect((await store.readBinding())?.threadId).toBe("thr_new");
        await lock.release();
      });

      it("setAsideBinding moves the binding aside (a label of where), then there is none", async () => {
        const { store, lock } = await fresh();
        expect(await store.setAsideBinding()).toBeUndefined();
        await store.writeBinding(binding("thr_1"), { durable: true });
        const label = await store.setAsideBinding();
        expect(typeof label).toBe("string");
        expect(label!.length).toBeGreaterThan(0);
        expect(await store.readBinding()).toBeUndefined();
        expect(await (await h.reopen(store)).readBinding()).toBeUndefined();
        expect(await store.setAsideBinding()).toBeUndefined();
        await lock.release();
      });
    });

    describe("pending-finalize records", () => {
      it("record, mark ingested, complete: oldest first, replaced by turn id, seen by every store object", async () => {
        const { store, lock } = await fresh();
        await store.recordPending(pending("thr", "t1"));
        await store.recordPending(pending("thr", "t2"));
        expect(await store.hasPending()).toBe(true);
        const listed = await store.listPending();
        expect(listed.map((r) => r.turnId)).toEqual(["t1", "t2"]);
        expect(listed[0]).toMatchObject({ threadId: "thr", prePromptMessageCount: 0, messageCount: 5, status: "completed", messages: turnMessages("thr", "t1") });
        expect(typeof listed[0]!.recordedAt).toBe("string");
        const keys = mirrorKeysForTurn("thr", "t1", turnMessages("thr", "t1"));
        await store.markPendingIngested("t1", [keys[0]!]);
        await store.markPendingIngested("t1", [keys[1]!, keys[0]!]);
        expect((await store.listPending())[0]!.ingestedKeys?.slice().sort()).toEqual([keys[0], keys[1]].sort());
        await store.recordPending({ ...pending("thr", "t2"), prePromptMessageCount: 5 });
        expect((await store.listPending()).filter((r) => r.turnId === "t2").map((r) => r.prePromptMessageCount)).toEqual([5]);
        const other = await h.reopen(store);
        expect((await other.listPending({ readOnly: true })).map((r) => r.turnId).sort()).toEqual(["t1", "t2"]);
        expect(await store.completePending("t1")).toBe(true);
        expect(await store.completePending("t1")).toBe(false);
        expect((await store.listPending()).map((r) => r.turnId)).toEqual(["t2"]);
        expect(await store.completePending("t2")).toBe(true);
        expect(await store.hasPending()).toBe(false);
        expect(await other.hasPending()).toBe(false);
        await lock.release();
      });

      it("a corrupt record set: readOnly throws SESSION_PENDING_INVALID and moves nothing; a plain list sets it aside and is []", async () => {
        const { store, lock } = await fresh();
        await store.recordPending(pending("thr", "t1"));
        await h.corruptPending(store);
        expect(await store.hasPending()).toBe(true);
        expect(await codeOf(store.listPending({ readOnly: true }))).toBe("SESSION_PENDING_INVALID");
        expect(await store.hasPending()).toBe(true);
        expect(await store.listPending()).toEqual([]);
        expect(await store.hasPending()).toBe(false);
        await store.recordPending(pending("thr", "t2"));
        expect((await store.listPending()).map((r) => r.turnId)).toEqual(["t2"]);
        await lock.release();
      });

      it("setAsidePending moves every record aside, readable or not (a label of where), then there are none", async () => {
        const { store, lock } = await fresh();
        expect(await store.setAsidePending()).toBeUndefined();
        await store.recordPending(pending("thr", "t1"));
        await store.recordPending(pending("thr", "t2"));
        const label = await store.setAsidePending();
        expect(typeof label).toBe("string");
        expect(await store.hasPending()).toBe(false);
        expect(await store.listPending({ readOnly: true })).toEqual([]);
        await store.recordPending(pending("thr", "t3"));
        await h.corruptPending(store);
        expect(typeof (await store.setAsidePending())).toBe("string");
        expect(await store.hasPending()).toBe(false);
        expect(await (await h.reopen(store)).hasPending()).toBe(false);
        await lock.release();
      });
    });

    describe("reset, archive and delete", () => {
      it("reset clears the binding and keeps the transcript and the pending records", async () => {
        const { store, lock } = await fresh();
        const t1 = turnMessages("thr", "t1");
        await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1 });
        await store.writeBinding(binding("thr"), { durable: true });
        await store.recordPending(pending("thr", "t1"));
        expect(await store.reset()).toEqual({ bindingCleared: true, pendingFinalize: 1 });
        expect(await store.readBinding()).toBeUndefined();
        expect((await store.readHistory()).messages).toEqual(t1);
        expect((await store.listPending()).map((r) => r.turnId)).toEqual(["t1"]);
        expect(await store.reset()).toEqual({ bindingCleared: false, pendingFinalize: 1 });
        expect(await codeOf(store.reset({ archive: true } as never))).toBe("SESSION_INVALID_ARGUMENT");
        await lock.release();
      });

      it("reset with archiveTranscript: the transcript is kept aside and the session starts empty", async () => {
        const { store, lock } = await fresh();
        await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
        await store.writeBinding(binding("thr"), { durable: true });
        const r = await store.reset({ archiveTranscript: true });
        expect(r).toMatchObject({ bindingCleared: true, pendingFinalize: 0 });
        expect(typeof r.archivedTo).toBe("string");
        expect(r.archivedTo).not.toBe(store.address);
        expect(r.sessionId).toBeUndefined();
        for (const reader of [store, await h.reopen(store)]) {
          expect(await reader.readHistory()).toMatchObject({ messages: [], entryCount: 0, exists: false });
          expect(await reader.readVisibleEntries()).toEqual([]);
        }
        // The session goes on: the same turn can be mirrored again into the fresh transcript.
        expect((await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") })).appended).toBe(5);
        await lock.release();
      });

      it("reset with archiveTranscript and nextSessionId: a fresh transcript that names the new id", async () => {
        const { store, lock, id } = await fresh();
        await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
        const r = await store.reset({ archiveTranscript: true, nextSessionId: `${id}-next` });
        expect(r).toMatchObject({ bindingCleared: false, sessionId: `${id}-next`, pendingFinalize: 0 });
        expect(typeof r.archivedTo).toBe("string");
        await lock.release();
        const next = await h.reopen(store, `${id}-next`);
        expect(next.address).toBe(store.address);
        expect(await next.readHistory()).toMatchObject({ messages: [], entryCount: 0, exists: true });
        expect(await codeOf((await h.reopen(store)).readHistory())).toBe("SESSION_ID_MISMATCH");
        const nextLock = await next.acquireLock({ timeoutMs: 10_000 });
        expect((await next.appendTurn({ threadId: "thr2", turnId: "t1", messages: turnMessages("thr2", "t1") })).appended).toBe(5);
        await nextLock.release();
      });

      it("deleteSession removes transcript, binding and pending records; deleting nothing is fine", async () => {
        const { store, lock } = await fresh();
        await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") });
        await store.writeBinding(binding("thr"), { durable: true });
        await store.recordPending(pending("thr", "t2"));
        await lock.release();
        // As the sub-agent host does it: from a store object that does not hold the lock, nothing running.
        await (await h.reopen(store)).deleteSession();
        const other = await h.reopen(store);
        expect(await other.readHistory()).toMatchObject({ messages: [], entryCount: 0, exists: false });
        expect(await other.readBinding()).toBeUndefined();
        expect(await other.hasPending()).toBe(false);
        await other.deleteSession();
        const empty = await h.open(`contract-${name}-${++sessions}-${process.pid}-never-written`);
        await empty.deleteSession();
        expect((await empty.readHistory()).exists).toBe(false);
      });
    });

    describe("the lock", () => {
      it("one holder at a time across store objects: a waiter times out (SESSION_LOCK_TIMEOUT), then gets it after the release", async () => {
        const { store, lock } = await fresh();
        const other = await h.reopen(store);
        const started = Date.now();
        expect(await codeOf(other.acquireLock({ timeoutMs: 300 }))).toBe("SESSION_LOCK_TIMEOUT");
        expect(Date.now() - started).toBeGreaterThanOrEqual(250);
        let got = false;
        const waiting = other.acquireLock({ timeoutMs: 10_000 }).then((l) => {
          got = true;
          return l;
        });
        await sleep(150);
        expect(got).toBe(false);
        await lock.release();
        const second = await waiting;
        expect(got).toBe(true);
        second.assertHeld();
        expect(await codeOf(store.acquireLock({ timeoutMs: 200 }))).toBe("SESSION_LOCK_TIMEOUT");
        await second.release();
      });

      it("a waiter's signal stops the wait (SESSION_LOCK_ABORTED), also when it was aborted before", async () => {
        const { store, lock } = await fresh();
        const other = await h.reopen(store);
        const controller = new AbortController();
        const waiting = codeOf(other.acquireLock({ signal: controller.signal, timeoutMs: 10_000 }));
        await sleep(100);
        controller.abort();
        expect(await waiting).toBe("SESSION_LOCK_ABORTED");
        expect(await codeOf(other.acquireLock({ signal: AbortSignal.abort(), timeoutMs: 10_000 }))).toBe("SESSION_LOCK_ABORTED");
        // The holder kept it all along.
        lock.assertHeld();
        await store.appendMessage({ message: { role: "user", content: "still mine", timestamp: 1 } as AgentMessage, idempotencyKey: "k" });
        await lock.release();
      });

      it("after release the store refuses writes (SESSION_LOCK_COMPROMISED) until it takes the lock again; release is idempotent", async () => {
        const { store, lock } = await fresh();
        await lock.release();
        await lock.release();
        expect(await codeOf(() => lock.assertHeld())).toBe("SESSION_LOCK_COMPROMISED");
        expect(await codeOf(store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") }))).toBe("SESSION_LOCK_COMPROMISED");
        expect(await codeOf(store.writeBinding(binding("thr"), { durable: false }))).toBe("SESSION_LOCK_COMPROMISED");
        expect((await store.readHistory()).exists).toBe(false);
        expect(await store.readBinding()).toBeUndefined();
        const again = await store.acquireLock({ timeoutMs: 10_000 });
        expect((await store.appendTurn({ threadId: "thr", turnId: "t1", messages: turnMessages("thr", "t1") })).appended).toBe(5);
        await again.release();
      });

      it("a lost lock: every write is refused with SESSION_LOCK_COMPROMISED and writes nothing, and the signal aborts", async () => {
        const { store, lock } = await fresh();
        const t1 = turnMessages("thr", "t1");
        const out = await store.appendTurn({ threadId: "thr", turnId: "t1", messages: t1 });
        await store.writeBinding(binding("thr"), { durable: true });
        await store.recordPending(pending("thr", "t1"));
        await h.loseLock(store);
        const writes: Array<[string, () => Promise<unknown>]> = [
          ["appendTurn", () => store.appendTurn({ threadId: "thr", turnId: "t2", messages: turnMessages("thr", "t2") })],
          ["appendMessage", () => store.appendMessage({ message: { role: "user", content: "late", timestamp: 1 } as AgentMessage, idempotencyKey: "late" })],
          ["appendCompaction", () => store.appendCompaction({ summary: "S", firstKeptEntryId: out.entryIds[0]!, tokensBefore: 1 })],
          ["rewriteEntries", () => store.rewriteEntries({ replacements: [{ entryId: out.entryIds[0]!, message: { role: "user", content: "x", timestamp: 1 } as AgentMessage }] })],
          ["writeBinding", () => store.writeBinding(binding("thr_late"), { durable: true })],
          ["recordPending", () => store.recordPending(pending("thr", "t9"))],
          ["markPendingIngested", () => store.markPendingIngested("t1", ["k"])],
          ["completePending", () => store.completePending("t1")],
          ["setAsideBinding", () => store.setAsideBinding()],
          ["setAsidePending", () => store.setAsidePending()],
          ["reset", () => store.reset({ archiveTranscript: true })],
          ["deleteSession", () => store.deleteSession()],
        ];
        for (const [what, write] of writes) expect([what, await codeOf(write)]).toEqual([what, "SESSION_LOCK_COMPROMISED"]);
        expect(await codeOf(() => lock.assertHeld())).toBe("SESSION_LOCK_COMPROMISED");
        const other = await h.reopen(store);
        const history = await other.readHistory();
        expect(history.messages).toEqual(t1);
        expect(history.lastEntryId).toBe(out.lastEntryId);
        expect(await other.readBinding()).toEqual(binding("thr"));
        expect((await other.listPending({ readOnly: true })).map((r) => [r.turnId, r.ingestedKeys])).toEqual([["t1", undefined]]);
        const deadline = Date.now() + h.lossNoticedWithinMs;
        while (!lock.signal.aborted && Date.now() < deadline) await sleep(25);
        expect(lock.signal.aborted).toBe(true);
        expect((lock.signal.reason as SessionFileError | undefined)?.code).toBe("SESSION_LOCK_COMPROMISED");
        await lock.release();
      });
    });
  });
}
