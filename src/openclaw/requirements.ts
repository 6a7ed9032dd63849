/**
 * `info.hostRequirements`: an engine names the host capabilities it needs per operation (OpenClaw's
 * `ContextEngineHostCapability`). A requirement this host cannot meet is a load error, never a silent degradation.
 */

/** The capabilities OpenClaw defines. */
export const KNOWN_HOST_CAPABILITIES = [
  "bootstrap",
  "assemble-before-prompt",
  "after-turn",
  "maintain",
  "compact",
  "runtime-llm-complete",
  "thread-bootstrap-projection",
] as const;

/** Operations this host performs. It never spawns subagents, so `subagent-spawn` requirements do not apply. */
const HOST_OPERATIONS = new Set(["agent-run", "manual-compact"]);

/**
 * The capabilities this host provides: the full turn lifecycle (bootstrap, assemble before the prompt, afterTurn,
 * maintain, compact, `thread_bootstrap` projection) and, with an app-server, `runtime.llm.complete`.
 *
 * @example
 * ```ts
 * hostCapabilities({ llm: true }).has("runtime-llm-complete"); // true
 * ```
 */
export function hostCapabilities(opts: { llm: boolean }): ReadonlySet<string> {
  const caps = new Set<string>(KNOWN_HOST_CAPABILITIES);
  if (!opts.llm) caps.delete("runtime-llm-complete");
  return caps;
}

/** A requirement the host does not meet. */
export interface UnmetRequirement {
  operation: string;
  missing: string[];
  unsupportedMessage?: string | undefined;
}

/**
 * The unmet requirements of an engine's `info.hostRequirements` (empty when all are met or none are declared).
 *
 * @example
 * ```ts
 * unmetHostRequirements({ "agent-run": { requiredCapabilities: ["runtime-llm-complete"] } }, hostCapabilities({ llm: false }));
 * // [{ operation: "agent-run", missing: ["runtime-llm-complete"] }]
 * ```
 */
export function unmetHostRequirements(requirements: unknown, capabilities: ReadonlySet<string>): UnmetRequirement[] {
  if (typeof requirements !== "object" || requirements === null) return [];
  const unmet: UnmetRequirement[] = [];
  for (const [operation, raw] of Object.entries(requirements as Record<string, unknown>)) {
    if (!HOST_OPERATIONS.has(operation)) continue;
    const req = raw as { requiredCapabilities?: unknown; unsupportedMessage?: unknown } | undefined;
    const required = Array.isArray(req?.requiredCapabilities) ? req.requiredCapabilities.map(String) : [];
    const missing = required.filter((c) => !capabilities.has(c));
    if (missing.length > 0) {
      unmet.push({ operation, missing, ...(typeof req?.unsupportedMessage === "string" ? { unsupportedMessage: req.unsupportedMessage } : {}) });
    }
  }
  return unmet;
}

/** One line describing unmet requirements, with the engine's own guidance. */
export function describeUnmet(engineId: string, unmet: readonly UnmetRequirement[], why: Record<string, string> = {}): string {
  const parts = unmet.map((u) => {
    const missing = u.missing.map((c) => (why[c] ? `${c} (${why[c]})` : c)).join(", ");
    return `${u.operation} needs ${missing}${u.unsupportedMessage ? `: ${u.unsupportedMessage}` : ""}`;
  });
  return `engine ${engineId} requires host capabilities this host cannot provide: ${parts.join("; ")}`;
}
