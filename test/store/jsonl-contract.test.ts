/**
 * The SessionStore contract suite (test/store/contract.ts) against the JSONL store: a pi session file and its
 * sidecars in a temporary directory, damaged from outside the way a torn write or another process would.
 */
import { promises as fsp } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createJsonlSessionStore, type SessionStore } from "../../src/store/session-store.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { describeSessionStoreContract } from "./contract.js";

describeSessionStoreContract("jsonl", async () => {
  const dir = await fsp.realpath(await fsp.mkdtemp(path.join(os.tmpdir(), "ctm-contract-")));
  const at = (sessionFile: string, sessionId: string): SessionStore => createJsonlSessionStore({ sessionFile, sessionId, cwd: dir, lockStaleMs: 2_000 });
  return {
    open: (sessionId) => at(path.join(dir, `${sessionId}.jsonl`), sessionId),
    reopen: (store, sessionId) => at(store.address, sessionId ?? store.sessionId),
    corruptBinding: (store) => fsp.writeFile(sessionSidecarPaths(store.address).binding, "{ not json\n"),
    corruptPending: (store) => fsp.writeFile(sessionSidecarPaths(store.address).pendingFinalize, "{ not json"),
    // Another process took the session over: its owner record (another token) replaces ours in the lock directory.
    loseLock: (store) =>
      fsp.writeFile(path.join(sessionSidecarPaths(store.address).lock, "owner.json"), JSON.stringify({ pid: process.pid, hostname: os.hostname(), token: "someone-else", acquiredAt: new Date().toISOString() })),
    // The holder beats every staleMs / 4 = 500 ms.
    lossNoticedWithinMs: 3_000,
    close: () => fsp.rm(dir, { recursive: true, force: true }),
  };
});
