/**
 * The one error a plugin load ends with when something is wrong before the first turn: a bad manifest, a module that
 * cannot be found or imported, a `register(api)` that throws, no engine registered, an unknown engine id, or a host
 * requirement this host cannot meet. The CLI maps it to exit code 3; the message is one line.
 */

/** Why a plugin could not be loaded. */
export type PluginLoadErrorCode =
  | "PLUGIN_NOT_FOUND"
  | "MANIFEST_INVALID"
  | "ENTRY_INVALID"
  | "IMPORT_FAILED"
  | "REGISTER_FAILED"
  | "CONFIG_INVALID"
  | "NO_ENGINE"
  | "UNKNOWN_ENGINE_ID"
  | "ENGINE_INVALID"
  | "REQUIREMENT_UNMET";

/**
 * A plugin or engine module that cannot be used; `code` says why, `spec` is what was asked for.
 *
 * @example
 * ```ts
 * try { await loadContextEngine("./my-plugin", { cwd: process.cwd() }); }
 * catch (err) { if (err instanceof PluginLoadError) console.error(err.code, err.message); }
 * ```
 */
export class PluginLoadError extends Error {
  constructor(
    readonly code: PluginLoadErrorCode,
    readonly spec: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`plugin ${spec}: ${oneLine(detail)}`, options);
    this.name = "PluginLoadError";
  }
}

/** Collapse whitespace so a nested error (stack-less) stays on one line. */
export function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

/** The message of anything thrown, on one line. */
export function errorText(error: unknown): string {
  return oneLine(error instanceof Error ? error.message : String(error));
}
