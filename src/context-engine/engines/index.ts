export { legacyEngine } from "./legacy.js";
export { createWindowEngine, messageTokens, type WindowEngineOptions } from "./window.js";
export { createRecordingEngine, type RecordedEngineCall } from "./recording.js";
