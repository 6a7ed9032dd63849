/**
 * What every turn actor may use, built once per attempt: the validated parameters, the app-server, the session
 * store, the engine and its facts, the logger and the observers. Actors are functions of their input and these
 * dependencies; what they share travels in the machine context (see machines/turn.machine.ts), never in closures.
 */
import type { Logger } from "pino";
import type { CodexAppServer } from "../codex/app-server.js";
import type { ContextEngine, ContextEngineRuntimeSettings } from "../context-engine/types.js";
import type { EngineFacts } from "../../machines/turn.contract.js";
import type { SessionStore, SessionStoreLock } from "../store/session-store.js";
import type { TurnHookIds } from "../hooks/types.js";
import type { ParsedTurnParams, TurnStreamEvent } from "../params.js";
import type { BindingKeeper } from "./binding-keeper.js";
import type { HookRunner } from "./hook-runner.js";
import type { ProjectionFingerprints } from "../projection/index.js";

/** The one dependencies object of a turn attempt. */
export interface TurnDeps {
  params: ParsedTurnParams;
  appServer: CodexAppServer;
  store: SessionStore;
  /** The active engine (undefined: no engine, or the legacy engine). */
  engine: ContextEngine | undefined;
  facts: EngineFacts;
  logger: Logger;
  /** ids for every log line (never content); `runId` is also in every hook event of the attempt. */
  ids: { sessionId: string; runId: string; engineId: string };
  /** What every hook event of the attempt carries: the session, its key when it has one, the run. */
  hookIds: TurnHookIds;
  engineCallMs: number;
  /** OpenClaw's `runtimeSettings` for this host and turn (the engine sees who frames the prompt, the model, the budget). */
  runtimeSettings: ContextEngineRuntimeSettings;
  /** Display stream: never throws into the turn. */
  emit(event: TurnStreamEvent): void;
  hooks: HookRunner;
  binding: BindingKeeper;
  /** The session lock once the `session.acquiringLock` state took it; released by the host when the machine is done. */
  lock: { handle?: SessionStoreLock | undefined; onLost?: (() => void) | undefined };
  /** Fingerprints of what decides thread compatibility (computed once per attempt). */
  fingerprints: ProjectionFingerprints;
  /** Host warnings that happen outside a machine transition (observer failures); appended to the result. */
  hostWarnings: string[];
  /** `performance.now()` when the attempt began (the `agentEnd` duration; never sent to the model). */
  startedAtMs: number;
}
