/**
 * pi-coding-agent session JSONL (version 3): read, rebuild and append. This module only re-exports; the code lives in
 * one file per concept:
 * - `entries.ts`: the entry model, idempotency keys and entry ids;
 * - `context.ts`: the context rebuild (port of pi's `buildSessionContext`);
 * - `parse.ts`: line parsing, header and version checks, pi's in-memory migrations;
 * - `reader.ts`: whole-file reads (`readSessionTranscript`, `readSessionHistory`);
 * - `writer.ts` + `writer-index.ts`: appends and the per-file index that makes them O(appended);
 * - `repair.ts`: torn-last-line repair before an append;
 * - `history-cache.ts`: the incremental, frozen history read the session store uses.
 */
export * from "./entries.js";
export { buildSessionContextFromEntries } from "./context.js";
export { historyFromTranscript, readSessionHistory, readSessionTranscript } from "./reader.js";
export { openSessionFile } from "./writer.js";
export { invalidateSessionIndex } from "./writer-index.js";
