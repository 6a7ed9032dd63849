/**
 * The sessions this process serves, by id, key and store address, so that storage-neutral readers find a session's
 * store from a target alone (OpenClaw's `openclaw/plugin-sdk/session-transcript-runtime`, which engines call with
 * `{ sessionId, sessionKey, storePath? }`). The turn host remembers each turn's store before its engine calls; the most
 * recent turn of a key or id wins. Bounded: least recently used sessions are forgotten first.
 */
import { createLruMap } from "../lru-map.js";
import type { SessionStore } from "./session-store.js";

/** A session as engines name it (OpenClaw's `ContextEngineSessionTarget`, the fields used here). */
export interface SessionTargetKeys {
  sessionId?: string | undefined;
  sessionKey?: string | undefined;
  /** The store's address (`SessionStore.address`, which is also its `sessionFile`). */
  storePath?: string | undefined;
}

const SESSIONS_KEPT = 256;
const byPath = createLruMap<string, SessionStore>(SESSIONS_KEPT);
const byKey = createLruMap<string, SessionStore>(SESSIONS_KEPT);
const byId = createLruMap<string, SessionStore>(SESSIONS_KEPT);

/**
 * Remember `store` as the session `target` names (its id, key and `store.sessionFile`).
 *
 * @example
 * ```ts
 * rememberSessionStore({ sessionId: "s1", sessionKey: "agent:main:s1" }, store);
 * findSessionStore({ sessionKey: "agent:main:s1" }) === store; // true
 * ```
 */
export function rememberSessionStore(target: SessionTargetKeys, store: SessionStore): void {
  byPath.set(target.storePath ?? store.address, store);
  if (target.sessionKey) byKey.set(target.sessionKey, store);
  if (target.sessionId) byId.set(target.sessionId, store);
}

/**
 * OpenClaw's session target of a session this process serves, its store remembered under it: the session id, its key
 * (the id when the session has none: OpenClaw's targets always carry one, and lossless-claw 1.x reads the transcript
 * only for a keyed target) and the store's address.
 *
 * @example
 * ```ts
 * sessionTargetOf({ sessionId: "s1" }, store); // { sessionId: "s1", sessionKey: "s1", storePath: store.sessionFile }
 * ```
 */
export function sessionTargetOf(ids: { sessionId: string; sessionKey?: string | undefined }, store: SessionStore): { sessionId: string; sessionKey: string; storePath: string } {
  const target = { sessionId: ids.sessionId, sessionKey: ids.sessionKey ?? ids.sessionId, storePath: store.address };
  rememberSessionStore(target, store);
  return target;
}

/**
 * The store of the session `target` names: by store address first, then key, then id; undefined when this process
 * serves no such session.
 *
 * @example
 * ```ts
 * findSessionStore({ sessionId: "s1", sessionKey: "s1" }); // the store of the last turn of s1, or undefined
 * ```
 */
export function findSessionStore(target: SessionTargetKeys): SessionStore | undefined {
  return (
    (target.storePath ? byPath.get(target.storePath) : undefined) ??
    (target.sessionKey ? byKey.get(target.sessionKey) : undefined) ??
    (target.sessionId ? byId.get(target.sessionId) : undefined)
  );
}

/**
 * Forget every remembered session (tests).
 *
 * @example
 * ```ts
 * forgetSessionStores(); // findSessionStore(...) is undefined for every target now
 * ```
 */
export function forgetSessionStores(): void {
  byPath.clear();
  byKey.clear();
  byId.clear();
}
