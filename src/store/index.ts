/** The session storage seam and its pi-JSONL implementation (see docs/storage.md). */
export * from "./session-store.js";
