/**
 * A `SessionStore` that keeps every session in this process's memory: no file is ever read or written. Tests only: it
 * shows that the turn host, recovery, compaction, reset and the sub-agent host use nothing past the seam, and it
 * passes the same contract suite as the JSONL store (test/store/memory-contract.test.ts). The transcript is kept as
 * pi entry objects and rebuilt with the same context port the JSONL store uses; the binding and the pending records
 * as JSON text (so a test can corrupt them); the lock as a lease with a token, checked by every write.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { AgentMessage } from "../../src/context-engine/types.js";
import type {
  AppendTurnInput,
  AppendTurnResult,
  PendingFinalizeInput,
  PendingFinalizeRecord,
  SessionHistory,
  SessionStore,
  SessionStoreLock,
  StoreResetOptions,
  VisibleTranscriptEntry,
} from "../../src/store/session-store.js";
import { threadBindingSchema, type ThreadBinding } from "../../src/transcript/binding.js";
import { buildSessionContextFromEntries } from "../../src/transcript/context.js";
import { deriveEntryId, entryIdempotencyKey, entryOrigin, type SessionEntry } from "../../src/transcript/entries.js";
import { SessionFileError } from "../../src/transcript/errors.js";
import { deepFreeze } from "../../src/transcript/freeze.js";
import { mirrorEntryFor, mirrorKeysForTurn } from "../../src/transcript/mirror.js";
import { parseTranscriptRewriteRequest, planTranscriptRewrite, type TranscriptLine } from "../../src/transcript/rewrite.js";

/** One session as the memory holds it (tests may look, and damage it). */
export interface MemorySession {
  header: { id: string; cwd: string } | undefined;
  entries: SessionEntry[];
  /** The binding as stored text (undefined: none). */
  binding: string | undefined;
  /** The pending records as stored text: a JSON array (undefined: none). */
  pending: string | undefined;
  /** What was set aside or archived, by label. */
  aside: Map<string, string>;
  lease: { token: string } | undefined;
  /** Called when the lease is released (waiters retry). */
  wake: Set<() => void>;
  /** Every store call on the session, by method name (the test's proof that turns went through the store). */
  calls: Map<string, number>;
}

/** A memory of sessions; `store(id)` builds store objects on it (two objects for one id share the session). */
export interface MemoryStores {
  store(sessionId: string, opts?: { address?: string | undefined; checkId?: string | undefined }): SessionStore;
  session(address: string): MemorySession | undefined;
  /** Take the lease from whoever holds it (as another host would, after the holder's lease ran out). */
  stealLock(address: string): void;
}

/**
 * A request a turn ran as (issue 65's durable turns, `SessionStore.findRequest` on the durable-turns branch): kept
 * structurally equal to its `RecordedRequest`, so this store compiles with and without that member in the interface.
 */
interface MemoryRecordedRequest {
  id: string;
  status: "completed" | "failed" | "aborted" | "yieldAborted";
  cut?: boolean | undefined;
  threadId: string;
  turnId: string;
  entryId: string;
  messages: AgentMessage[];
}

const held = new AsyncLocalStorage<ReadonlySet<string>>();
let tokens = 0;

function fail(code: ConstructorParameters<typeof SessionFileError>[0], address: string, message: string): SessionFileError {
  return new SessionFileError(code, address, `${message} (session ${address})`);
}

/**
 * A fresh memory of sessions.
 *
 * @example
 * ```ts
 * const memory = createMemoryStores();
 * const result = await runCodexTurn({ appServer, sessionId: "s1", store: memory.store("s1"), prompt: "hello" });
 * memory.session("memory://s1")?.entries.length; // the mirrored turn
 * ```
 */
export function createMemoryStores(): MemoryStores {
  const sessions = new Map<string, MemorySession>();
  const sessionAt = (address: string): MemorySession => {
    let s = sessions.get(address);
    if (!s) sessions.set(address, (s = { header: undefined, entries: [], binding: undefined, pending: undefined, aside: new Map(), lease: undefined, wake: new Set(), calls: new Map() }));
    return s;
  };
  return {
    store: (sessionId, o = {}) => memoryStore(sessionAt(o.address ?? `memory://${sessionId}`), o.address ?? `memory://${sessionId}`, o.checkId ?? sessionId),
    session: (address) => sessions.get(address),
    stealLock: (address) => {
      sessionAt(address).lease = { token: `stolen-${++tokens}` };
    },
  };
}

function memoryStore(s: MemorySession, address: string, sessionId: string): SessionStore {
  /** The lease this store object took last (undefined: never took one). */
  let mine: { token: string; released: boolean; controller: AbortController } | undefined;
  const count = (name: string) => s.calls.set(name, (s.calls.get(name) ?? 0) + 1);
  const heldNow = () => mine !== undefined && !mine.released && s.lease?.token === mine.token;
  /** Every write: a store object that took the lock writes only while it still holds it (the fencing check). */
  const guard = (name: string): void => {
    count(name);
    if (mine !== undefined && !heldNow()) throw fail("SESSION_LOCK_COMPROMISED", address, `the lock is not held any more; ${name} refused`);
  };
  const checkId = (): void => {
    if (s.header && s.header.id !== sessionId) throw fail("SESSION_ID_MISMATCH", address, `the transcript names session ${s.header.id}, not ${sessionId}`);
  };
  const ensureHeader = (cwd: string | undefined) => {
    checkId();
    s.header ??= { id: sessionId, cwd: cwd ?? "/" };
  };
  const byKey = (key: string) => s.entries.find((e) => entryIdempotencyKey(e) === key);
  const ids = () => new Set(s.entries.map((e) => e.id));
  const push = (body: Record<string, unknown>, key: string | undefined): SessionEntry => {
    const entry = { ...body, id: key ? deriveEntryId(key, ids()) : deriveEntryId(`memory:${s.entries.length}:${Math.random()}`, ids()), parentId: s.entries.at(-1)?.id ?? null } as SessionEntry;
    entry.timestamp ??= new Date().toISOString();
    s.entries.push(structuredClone(entry));
    return entry;
  };
  const records = (readOnly: boolean): PendingFinalizeRecord[] => {
    if (s.pending === undefined) return [];
    try {
      const parsed = JSON.parse(s.pending) as unknown;
      if (!Array.isArray(parsed)) throw new Error("not an array");
      return parsed as PendingFinalizeRecord[];
    } catch {
      if (readOnly) throw fail("SESSION_PENDING_INVALID", address, "the pending-finalize records cannot be read");
      setAside("pending");
      return [];
    }
  };
  const setAside = (what: "binding" | "pending"): string | undefined => {
    const text = what === "binding" ? s.binding : s.pending;
    if (text === undefined) return undefined;
    const label = `${address}#${what}-aside-${s.aside.size + 1}`;
    s.aside.set(label, text);
    if (what === "binding") s.binding = undefined;
    else s.pending = undefined;
    return label;
  };
  const history = (): SessionHistory => {
    checkId();
    const { messages, sources } = buildSessionContextFromEntries(s.entries);
    return deepFreeze({
      messages: structuredClone(messages),
      origins: sources.map((e) => entryOrigin(e)),
      entryCount: s.entries.length,
      lastEntryId: s.entries.at(-1)?.id,
      skippedEntries: 0,
      warnings: [],
      exists: s.header !== undefined,
    });
  };
  const writePending = (list: PendingFinalizeRecord[]) => {
    s.pending = list.length === 0 ? undefined : JSON.stringify(list);
  };

  const store: SessionStore & { findRequest(requestId: string): Promise<MemoryRecordedRequest | undefined> } = {
    address,
    sessionFile: address,
    sessionId,
    readHistory: async () => (count("readHistory"), history()),
    readVisibleEntries: async () => {
      count("readVisibleEntries");
      checkId();
      const { messages, sources } = buildSessionContextFromEntries(s.entries);
      const out: VisibleTranscriptEntry[] = [];
      sources.forEach((entry, i) => {
        if (entry.type === "compaction") return;
        const key = entryIdempotencyKey(entry);
        out.push({
          entryId: entry.id,
          parentId: entry.parentId ?? null,
          seq: s.entries.indexOf(entry),
          message: structuredClone(messages[i]!),
          role: String((messages[i] as { role?: unknown }).role),
          createdAt: entry.timestamp,
          ...(key !== undefined ? { idempotencyKey: key } : {}),
        });
      });
      return out;
    },
    appendTurn: async (turn: AppendTurnInput): Promise<AppendTurnResult> => {
      guard("appendTurn");
      ensureHeader(turn.cwd);
      const keys = mirrorKeysForTurn(turn.threadId, turn.turnId, turn.messages);
      // The durable-turns branch's request mark, on the prompt's entry when it is first written.
      const request = (turn as { request?: { id: string; status: string; cut?: boolean | undefined } }).request;
      let appended = 0;
      const entryIds = turn.messages.map((m, i) => {
        const existing = byKey(keys[i]!);
        if (existing) return existing.id;
        appended++;
        return push({ ...mirrorEntryFor(m, keys[i]!), ...(i === 0 && request ? { request: structuredClone(request) } : {}) }, keys[i]).id;
      });
      return { appended, skipped: turn.messages.length - appended, entryIds, lastEntryId: s.entries.at(-1)?.id, entryCount: s.entries.length };
    },
    appendMessage: async (input) => {
      guard("appendMessage");
      const m = input.message as { role?: unknown; content?: unknown };
      if (typeof m?.role !== "string" || !(typeof m.content === "string" || Array.isArray(m.content)) || !input.idempotencyKey) {
        throw fail("SESSION_INVALID_ARGUMENT", address, "invalid message: role and content are required, and an idempotency key");
      }
      ensureHeader(input.cwd);
      const existing = byKey(input.idempotencyKey);
      if (existing) return { entryId: existing.id, appended: false };
      const message = { ...input.message, idempotencyKey: input.idempotencyKey } as AgentMessage;
      return { entryId: push({ type: "message", idempotencyKey: input.idempotencyKey, message }, input.idempotencyKey).id, appended: true };
    },
    appendCompaction: async (entry) => {
      guard("appendCompaction");
      checkId();
      if (!s.entries.some((e) => e.id === entry.firstKeptEntryId)) throw fail("SESSION_INVALID_ARGUMENT", address, `firstKeptEntryId ${entry.firstKeptEntryId} is not an entry`);
      return push({ type: "compaction", summary: entry.summary, firstKeptEntryId: entry.firstKeptEntryId, tokensBefore: entry.tokensBefore, ...(entry.details ? { details: entry.details } : {}) }, undefined).id;
    },
    rewriteEntries: async (request) => {
      guard("rewriteEntries");
      checkId();
      const { replacements } = parseTranscriptRewriteRequest(request, address);
      const lines: TranscriptLine[] = [{ text: JSON.stringify({ type: "session", ...s.header }) }, ...s.entries.map((e) => ({ text: JSON.stringify(e), entry: structuredClone(e) }))];
      const plan = planTranscriptRewrite(lines, replacements);
      if (plan.lines) s.entries = plan.lines.slice(1).map((l) => JSON.parse(l) as SessionEntry);
      return plan.result;
    },
    readBinding: async (o) => {
      count("readBinding");
      if (s.binding === undefined) return undefined;
      let parsed: ReturnType<typeof threadBindingSchema.safeParse> | undefined;
      try {
        parsed = threadBindingSchema.safeParse(JSON.parse(s.binding));
      } catch {
        parsed = undefined;
      }
      if (parsed?.success) return deepFreeze(parsed.data);
      if (!o?.readOnly) {
        guard("setAsideBinding");
        setAside("binding");
      }
      return undefined;
    },
    writeBinding: async (binding: ThreadBinding) => {
      guard("writeBinding");
      s.binding = JSON.stringify(binding);
    },
    setAsideBinding: async () => (guard("setAsideBinding"), setAside("binding")),
    recordPending: async (record: PendingFinalizeInput) => {
      guard("recordPending");
      writePending([...records(false).filter((r) => r.turnId !== record.turnId), { ...structuredClone(record), recordedAt: new Date().toISOString() } as PendingFinalizeRecord]);
    },
    markPendingIngested: async (turnId, keys) => {
      guard("markPendingIngested");
      writePending(records(false).map((r) => (r.turnId === turnId ? { ...r, ingestedKeys: [...new Set([...(r.ingestedKeys ?? []), ...keys])] } : r)));
    },
    completePending: async (turnId) => {
      guard("completePending");
      const before = records(false);
      writePending(before.filter((r) => r.turnId !== turnId));
      return before.some((r) => r.turnId === turnId);
    },
    findRequest: async (requestId) => {
      count("findRequest");
      checkId();
      const index = s.entries.findLastIndex((e) => (e["request"] as { id?: unknown } | undefined)?.id === requestId);
      const prompt = s.entries[index];
      const origin = prompt ? entryOrigin(prompt) : null;
      if (!prompt || !origin) return undefined;
      const mark = prompt["request"] as { id: string; status: MemoryRecordedRequest["status"]; cut?: boolean };
      const messages = s.entries
        .slice(index)
        .filter((e) => entryOrigin(e)?.threadId === origin.threadId && entryOrigin(e)?.turnId === origin.turnId)
        .flatMap((e) => (e.type === "message" ? [structuredClone(e["message"] as AgentMessage)] : []));
      return { id: mark.id, status: mark.status, ...(mark.cut === true ? { cut: true } : {}), ...origin, entryId: prompt.id, messages };
    },
    listPending: async (o) => (count("listPending"), structuredClone(records(o?.readOnly === true))),
    hasPending: async () => (count("hasPending"), s.pending !== undefined),
    setAsidePending: async () => (guard("setAsidePending"), setAside("pending")),
    reset: async (o: StoreResetOptions = {}) => {
      const known = new Set(["archiveTranscript", "nextSessionId", "cwd"]);
      const unknown = Object.keys(o).find((k) => !known.has(k));
      if (unknown) throw fail("SESSION_INVALID_ARGUMENT", address, `unknown reset option ${unknown}`);
      guard("reset");
      const bindingCleared = s.binding !== undefined;
      s.binding = undefined;
      let archivedTo: string | undefined;
      let next: string | undefined;
      if (o.archiveTranscript && s.header) {
        archivedTo = `${address}#archive-${s.aside.size + 1}`;
        s.aside.set(archivedTo, JSON.stringify({ header: s.header, entries: s.entries }));
        s.entries = [];
        s.header = o.nextSessionId ? { id: o.nextSessionId, cwd: o.cwd ?? s.header.cwd } : undefined;
        next = o.nextSessionId;
      }
      return { bindingCleared, ...(archivedTo ? { archivedTo } : {}), pendingFinalize: records(true).length, ...(next ? { sessionId: next } : {}) };
    },
    deleteSession: async () => {
      guard("deleteSession");
      s.header = undefined;
      s.entries = [];
      s.binding = undefined;
      s.pending = undefined;
    },
    acquireLock: async (o = {}) => {
      count("acquireLock");
      if (held.getStore()?.has(address)) throw fail("SESSION_LOCK_REENTRANT", address, "the lock is already held by this call chain");
      const deadline = Date.now() + (o.timeoutMs ?? 600_000);
      while (s.lease !== undefined) {
        if (o.signal?.aborted) throw fail("SESSION_LOCK_ABORTED", address, "waiting for the lock was aborted");
        if (Date.now() >= deadline) throw fail("SESSION_LOCK_TIMEOUT", address, `the lock was not free within ${o.timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            o.signal?.removeEventListener("abort", done);
            s.wake.delete(done);
            resolve();
          };
          const timer = setTimeout(done, Math.min(50, Math.max(0, deadline - Date.now())));
          o.signal?.addEventListener("abort", done, { once: true });
          s.wake.add(done);
        });
      }
      const token = `lease-${++tokens}`;
      s.lease = { token };
      const lease = { token, released: false, controller: new AbortController() };
      mine = lease;
      // The heartbeat: a lease taken over by someone else is noticed within 50 ms.
      const beat = setInterval(() => {
        if (s.lease?.token === token) return;
        clearInterval(beat);
        if (!lease.released) lease.controller.abort(fail("SESSION_LOCK_COMPROMISED", address, "the lock was taken over"));
      }, 50);
      const handle: SessionStoreLock = {
        signal: lease.controller.signal,
        assertHeld: () => {
          if (lease.released || s.lease?.token !== token) throw fail("SESSION_LOCK_COMPROMISED", address, "the lock is not held");
        },
        runHeld: (fn) => held.run(new Set([...(held.getStore() ?? []), address]), fn),
        release: async () => {
          if (lease.released) return;
          lease.released = true;
          clearInterval(beat);
          if (s.lease?.token === token) s.lease = undefined;
          for (const w of [...s.wake]) w();
        },
      };
      return handle;
    },
  };
  return store;
}
