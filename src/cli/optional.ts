/**
 * Optional packages (devDependencies such as `mermaid` and `@statelyai/inspect`): a missing one becomes a clear exit-3
 * error naming it, never a stack trace.
 */
import { CliError, envError } from "./errors.js";

/** Whether `err` says that the package `pkg` (or a file inside it) could not be found. */
export function isMissingPackageError(err: unknown, pkg: string): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  const message = (err as { message?: unknown } | null)?.message;
  if (typeof message !== "string" || !message.includes(pkg)) return false;
  return code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND" || /cannot find (package|module)/i.test(message);
}

/** The CLI error for a command that needs an optional package (a devDependency) that is not installed. */
export function missingPackageError(pkg: string, feature: string): CliError {
  return envError(
    `${feature} needs the package "${pkg}", which is not installed (it is a devDependency of codex-turn-machine): ` +
      `run \`npm install ${pkg}\``,
  );
}

/**
 * Import a module that needs the optional package `pkg`: a missing package becomes {@link missingPackageError}, any
 * other load failure an environment error naming `feature`; never a stack trace.
 *
 * @example
 * ```ts
 * const live = await importOptional("@statelyai/inspect", "--inspect", () => import("../inspect/live.js"));
 * ```
 */
export async function importOptional<T>(pkg: string, feature: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    if (isMissingPackageError(err, pkg)) throw missingPackageError(pkg, feature);
    throw envError(`${feature}: cannot load ${pkg}: ${(err as Error)?.message ?? String(err)}`);
  }
}
