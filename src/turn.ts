/** The turn entry points (the implementation lives in src/turn/). */
export { startCodexTurn, runCodexTurn, drainBackgroundWork, type CodexTurnHandle, type CodexTurnParams, type CodexTurnResult, type TurnStreamEvent } from "./turn/index.js";
