/**
 * Codex's warnings about its own setup: `configWarning` (a config or rules file it could not use, a missing sandbox
 * helper) and `deprecationNotice`. They belong to the process or to a thread's configuration, not to a turn, and they
 * matter: "Error parsing rules; custom rules not applied." means a user's exec-policy rules (e.g. a forbidden
 * `git push`) are silently off (observed with Codex 0.169, for a syntax error in `$CODEX_HOME/rules/default.rules`).
 * A `warning` that names no thread is about the process too, and joins them (a thread's warning goes to its turn).
 * The client keeps each distinct warning once, logs it and hands it to the host's `onConfigWarning`.
 */
import { z } from "zod";

/**
 * One of Codex's setup warnings, as {@link CodexAppServer.configWarnings} lists it.
 *
 * @example
 * ```ts
 * for (const w of server.configWarnings) console.error(`codex: ${w.summary}${w.path ? ` (${w.path})` : ""}`);
 * ```
 */
export interface CodexConfigWarning {
  /**
   * `config`: a `configWarning` notification; `deprecation`: a `deprecationNotice`; `process`: a `warning` notification
   * that names no thread.
   */
  kind: "config" | "deprecation" | "process";
  /** Codex's concise summary, e.g. "Error parsing rules; custom rules not applied.". */
  summary: string;
  /**
   * Codex's details (a parse error, migration steps). It may quote the offending file's lines, so it is never logged;
   * show it to the person who owns the file.
   */
  details?: string | undefined;
  /** The file that caused it, when Codex names one. */
  path?: string | undefined;
  /** Where in `path` (1-based line and column), when Codex says. */
  range?: { start: { line: number; column: number }; end: { line: number; column: number } } | undefined;
}

const position = z.object({ line: z.number(), column: z.number() });
const warningParams = z.object({
  summary: z.string(),
  details: z.string().nullish(),
  path: z.string().nullish(),
  range: z.object({ start: position, end: position }).nullish(),
});

/** The methods of Codex's setup warnings, and the kind each one is. */
export const CONFIG_WARNING_METHODS: Readonly<Record<string, CodexConfigWarning["kind"]>> = {
  configWarning: "config",
  deprecationNotice: "deprecation",
};

/** At most this many distinct warnings are kept (a process restarted in a loop repeats the same ones). */
export const MAX_CONFIG_WARNINGS = 32;

/**
 * The warning a notification carries, or undefined when it is not one of Codex's setup warnings (or is malformed).
 *
 * @example
 * ```ts
 * configWarningOf({ method: "configWarning", params: { summary: "Using defaults.", details: null } });
 * // { kind: "config", summary: "Using defaults." }
 * ```
 */
export function configWarningOf(n: { method: string; params: unknown }): CodexConfigWarning | undefined {
  if (n.method === "warning") return processWarningOf(n.params);
  // Own keys only: a method named like an Object.prototype member ("toString") is not a warning.
  const kind = Object.hasOwn(CONFIG_WARNING_METHODS, n.method) ? CONFIG_WARNING_METHODS[n.method] : undefined;
  if (!kind) return undefined;
  const parsed = warningParams.safeParse(n.params);
  if (!parsed.success) return undefined;
  const { summary, details, path, range } = parsed.data;
  return { kind, summary, ...(details ? { details } : {}), ...(path ? { path } : {}), ...(range ? { range } : {}) };
}

const processWarningParams = z.object({ threadId: z.null().optional(), message: z.string() });

/** A `warning` without a thread (one with a thread belongs to that thread's turn). */
function processWarningOf(params: unknown): CodexConfigWarning | undefined {
  const parsed = processWarningParams.safeParse(params);
  return parsed.success ? { kind: "process", summary: parsed.data.message } : undefined;
}

/**
 * The distinct warnings of one client: {@link ConfigWarnings.add} returns true for a warning not seen before (the
 * caller then logs it and tells the host), false for a repeat or once {@link MAX_CONFIG_WARNINGS} are kept.
 *
 * @example
 * ```ts
 * const warnings = new ConfigWarnings();
 * if (warnings.add(w)) logger.warn({ event: "codex.configWarning", summary: w.summary }, "codex config warning");
 * ```
 */
export class ConfigWarnings {
  private readonly seen = new Set<string>();
  private readonly kept: CodexConfigWarning[] = [];

  /** Keep `w` unless the same warning (kind, summary, path, details) is kept already. */
  add(w: CodexConfigWarning): boolean {
    const key = JSON.stringify([w.kind, w.summary, w.path ?? null, w.details ?? null]);
    if (this.seen.has(key) || this.kept.length >= MAX_CONFIG_WARNINGS) return false;
    this.seen.add(key);
    // Frozen: the same object goes to every host callback and into every list.
    this.kept.push(Object.freeze(w));
    return true;
  }

  /** The kept warnings, first seen first (a copy: the host may keep or sort it). */
  list(): readonly CodexConfigWarning[] {
    return [...this.kept];
  }
}
