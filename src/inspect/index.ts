/**
 * Offline inspection: trace recording and statechart pages. The live Stately-inspector bridge (`./live.js`) and the
 * Chromium screenshot helper (`./screenshot.js`) are not re-exported here: they depend on dev-only packages/tools.
 *
 * @example
 * ```ts
 * import { createTraceRecorder, renderStatechartPage } from "./inspect/index.js";
 * ```
 */
export * from "./trace.js";
export * from "./viz.js";
export { machineToMermaid, mermaidStateId } from "./mermaid.js";
export {
  renderPageFromDiagrams,
  loadMermaidBundle,
  pathWithAncestors,
  type PageDiagram,
  type PageInput,
  type HighlightFrame,
} from "./page.js";
