/**
 * Test helpers (package export `codex-turn-machine/testing`): a fake Responses API on loopback and a one-call
 * offline Codex app-server wired to it.
 */
export {
  contextEntryOutputs,
  defaultCompactionReply,
  defaultTurnReply,
  inputMessageTexts,
  lastUserText,
  startFakeResponsesServer,
  type FakeCustomToolCall,
  type FakeFunctionCall,
  type FakeReply,
  type FakeReplySource,
  type FakeRequestKind,
  type FakeResponsesServer,
  type FakeResponsesServerOptions,
  type FakeUsage,
  type FakeWebSearch,
  type RecordedRequest,
} from "./fake-responses-server.js";
export {
  applyPatchCall,
  applyPatchText,
  execCommandCall,
  toolOutputs,
  updatePlanCall,
  type ExecCommandOptions,
  type FakePlanStep,
  type PatchFileOp,
  type ToolOutput,
} from "./native-tool-calls.js";
export { startOfflineCodex, type OfflineCodex, type StartOfflineCodexOptions } from "./offline-codex.js";
