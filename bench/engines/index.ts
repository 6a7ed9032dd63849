/** The realistic engine shapes of the growth benchmark (docs/projection.md). */
export { createRebuildingEngine, rebuildMessage } from "./rebuilding.js";
export { createSummarizingEngine, foldedUpTo, type SummarizingEngineOptions } from "./summarizing.js";
export { createRecallEngine, recalledNote, DEFAULT_NOTE_CHARS } from "./recall.js";
export { engineShape, viewTokens } from "./shared.js";
export { createRecallItemEngine } from "./recall.js";
export { createLosslessLikeEngine, LOSSLESS_POLICY } from "./lossless.js";
