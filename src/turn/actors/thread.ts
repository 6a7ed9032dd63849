/** `threadStart.resuming` and `threadStart.starting`: the Codex thread this turn runs on. */
import type { ThreadPlan, ThreadStartOutput } from "../../../machines/turn.contract.js";
import { RESUME_FAILED_CODE } from "../../../machines/rules.js";
import type { DynamicToolContext } from "../../codex/dynamic-tools.js";
import { errorLabel } from "../../log/error-label.js";
import type { TurnDeps } from "../deps.js";

/** Raised when Codex refuses to resume the bound thread; the machine then projects again for a fresh thread. */
export class ThreadResumeFailedError extends Error {
  readonly code = RESUME_FAILED_CODE;
  constructor(readonly threadId: string, cause: unknown) {
    super(`codex could not resume thread ${threadId}: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = "ThreadResumeFailedError";
  }
}

/**
 * The turn's dynamic tools, each handler told which session made the call: a thread's handlers are replaced on every
 * start and resume, so a call always carries the session of the turn that runs (plugin tools bind to it).
 */
function toolsOfSession(p: TurnDeps["params"]): TurnDeps["params"]["dynamicTools"] {
  if (!p.dynamicTools) return undefined;
  const session = { sessionId: p.sessionId, ...(p.sessionKey !== undefined ? { sessionKey: p.sessionKey } : {}) };
  return p.dynamicTools.map((tool) => ({ ...tool, handler: (args: unknown, ctx: DynamicToolContext) => tool.handler(args, { ...ctx, ...session }) }));
}

/** The thread settings sent on start and on every real resume (the runtime contract re-sends them). */
function threadOptions(deps: TurnDeps, developerInstructions: string | undefined) {
  const p = deps.params;
  return {
    ...(p.cwd !== undefined ? { cwd: p.cwd } : {}),
    ...(developerInstructions !== undefined ? { developerInstructions } : {}),
    ...(p.model !== undefined ? { model: p.model } : {}),
    // Passed again on every start and resume, so a released thread need not keep them (nor the session they hold).
    ...(p.dynamicTools ? { dynamicTools: toolsOfSession(p), dropToolsOnRelease: true } : {}),
    ...(p.sandbox !== undefined ? { sandbox: p.sandbox } : {}),
    ...(p.writableRoots !== undefined ? { writableRoots: p.writableRoots } : {}),
    ...(p.networkAccess !== undefined ? { networkAccess: p.networkAccess } : {}),
    ...(p.approvalPolicy !== undefined ? { approvalPolicy: p.approvalPolicy } : {}),
    ...(p.reasoningEffort !== undefined ? { reasoningEffort: p.reasoningEffort } : {}),
    ...(p.reasoningSummary !== undefined ? { reasoningSummary: p.reasoningSummary } : {}),
    ...(p.serviceTier !== undefined ? { serviceTier: p.serviceTier } : {}),
  };
}

/**
 * Resume the bound thread (developer instructions travel on every real resume; a thread this process already holds
 * with the same settings needs no resume RPC). Any refusal becomes {@link ThreadResumeFailedError}.
 */
export async function resumeThread(deps: TurnDeps, input: { plan: ThreadPlan; developerInstructions?: string | undefined }): Promise<ThreadStartOutput> {
  const threadId = input.plan.threadId!;
  try {
    const resumed = await deps.appServer.resumeThread({ threadId, ...threadOptions(deps, input.developerInstructions), reuseLoaded: true } as never);
    deps.logger.info({ ...deps.ids, event: "thread resumed", threadId: resumed.threadId, reusedLoaded: resumed.reused === true }, "codex thread resumed");
    return { threadId: resumed.threadId, resumed: true };
  } catch (error) {
    deps.logger.warn({ ...deps.ids, event: "thread resume failed", threadId, err: errorLabel(error) }, "codex thread resume failed");
    throw new ThreadResumeFailedError(threadId, error);
  }
}

/** Start a fresh thread. */
export async function startThread(deps: TurnDeps, input: { plan: ThreadPlan; developerInstructions?: string | undefined }): Promise<ThreadStartOutput> {
  const started = await deps.appServer.startThread(threadOptions(deps, input.developerInstructions) as never);
  deps.logger.info({ ...deps.ids, event: "thread started", threadId: started.threadId, reason: input.plan.reason }, "codex thread started");
  return { threadId: started.threadId, resumed: false };
}
