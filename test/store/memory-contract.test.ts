/**
 * The SessionStore contract suite against the in-memory test store (test/helpers/memory-store.ts): the suite is not
 * tied to files, and the store the integration tests use to prove the turn stays behind the seam keeps the contract.
 */
import { createMemoryStores } from "../helpers/memory-store.js";
import { describeSessionStoreContract } from "./contract.js";

describeSessionStoreContract("memory", async () => {
  const memory = createMemoryStores();
  const session = (address: string) => memory.session(address)!;
  return {
    open: (sessionId) => memory.store(sessionId),
    reopen: (store, sessionId) => memory.store(store.sessionId, { address: store.address, checkId: sessionId ?? store.sessionId }),
    corruptBinding: async (store) => void (session(store.address).binding = "{ not json"),
    corruptPending: async (store) => void (session(store.address).pending = "{ not json"),
    loseLock: async (store) => memory.stealLock(store.address),
    lossNoticedWithinMs: 1_000,
  };
});
