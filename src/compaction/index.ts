/** Compaction: explicit `/compact` (engine primary, Codex native secondary) and the accordion cadence. */
export * from "./accordion.js";
export * from "./compact-session.js";
export * from "./errors.js";
export * from "./session.js";
