/** Builds the one dependencies object of a turn attempt (see `deps.ts`). */
import { randomUUID } from "node:crypto";
import type { CodexAppServer } from "../codex/app-server.js";
import { engineFacts, isLegacyEngine } from "../context-engine/contract.js";
import { buildHarnessContextEngineRuntimeSettings } from "../context-engine/lifecycle.js";
import { silentLogger } from "../log/logger.js";
import type { ParsedTurnParams } from "../params.js";
import { fingerprintDynamicTools, fingerprintPolicy } from "../projection/index.js";
import { createJsonlSessionStore } from "../store/jsonl-store.js";
import type { SessionStore } from "../store/session-store.js";
import { createBindingKeeper } from "./binding-keeper.js";
import type { TurnDeps } from "./deps.js";
import type { TurnEventStream } from "./event-stream.js";
import { createHookRunner } from "./hook-runner.js";

/**
 * Everything an attempt's actors use. `store` (else `params.store`) defaults to the pi-JSONL store of
 * `params.sessionFile`; a host (or a test) may pass another implementation of the seam.
 */
export function createTurnDeps(params: ParsedTurnParams, events: TurnEventStream, store?: SessionStore): TurnDeps {
  const logger = params.logger ?? silentLogger;
  const engine = params.contextEngine && !isLegacyEngine(params.contextEngine) ? params.contextEngine : undefined;
  const facts = engineFacts(params.contextEngine);
  const ids = { sessionId: params.sessionId, runId: params.runId ?? randomUUID(), engineId: facts.id };
  const hostWarnings: string[] = [];
  const sessionStore =
    store ??
    params.store ??
    createJsonlSessionStore({
      sessionFile: params.sessionFile,
      sessionId: params.sessionId,
      ...(params.sessionRoot !== undefined ? { sessionRoot: params.sessionRoot } : {}),
      ...(params.cwd !== undefined ? { cwd: params.cwd } : {}),
      logger,
      // What the store moves aside to keep the session going (a corrupt binding) is the turn's warning, not only a log line.
      onWarning: (warning) => hostWarnings.push(warning),
    });
  const projectionPolicy = {
    mode: params.projection?.mode ?? "auto",
    divergenceTokens: params.projection?.divergenceTokens,
    partCapChars: params.projection?.partCapChars,
    totalCapChars: params.projection?.totalCapChars,
  };
  const fingerprints = {
    dynamicTools: fingerprintDynamicTools((params.dynamicTools ?? []).map(({ name, inputSchema }) => ({ name, inputSchema }))),
    engineId: facts.id,
    policy: fingerprintPolicy(projectionPolicy),
    // Bindings written before the model left the policy (a model switch keeps the thread, as OpenClaw's runtime
    // contract says) stay valid: the policy with the turn's model is accepted too.
    ...(params.model !== undefined ? { legacyPolicy: fingerprintPolicy({ ...projectionPolicy, model: params.model }) } : {}),
  };
  const engineCallMs = params.timeouts?.engineCallMs ?? 60_000;
  return {
    params,
    appServer: params.appServer as CodexAppServer,
    store: sessionStore,
    engine,
    facts,
    logger,
    ids,
    hookIds: { sessionId: params.sessionId, runId: ids.runId, ...(params.sessionKey !== undefined ? { sessionKey: params.sessionKey } : {}) },
    engineCallMs,
    runtimeSettings: buildHarnessContextEngineRuntimeSettings({
      engineId: facts.id,
      ...(params.model !== undefined ? { model: params.model } : {}),
      provider: "codex",
      ...(params.contextTokenBudget !== undefined ? { tokenBudget: params.contextTokenBudget } : {}),
      selection: params.contextEngine ? "configured" : "default",
    }),
    emit: (event) => {
      events.push(event);
      try {
        params.onEvent?.(event);
      } catch {
        // A display callback must never break the turn.
      }
    },
    hooks: createHookRunner({ hooks: params.hooks, timeoutMs: engineCallMs, logger, ids, warn: (w) => hostWarnings.push(w) }),
    binding: createBindingKeeper({ store: sessionStore, logger, ids, fingerprints, ...(params.images ? { promptImages: params.images } : {}) }),
    lock: {},
    fingerprints,
    hostWarnings,
    startedAtMs: performance.now(),
  };
}
