/**
 * Where the app-server's CODEX_HOME is: the user's own (resolved like Codex and its CLI do) or a temporary one this
 * client creates, tracks and removes, also when the host process exits or is stopped by SIGINT/SIGTERM/SIGHUP.
 * SIGKILL cannot be handled: a host killed with it leaves its temporary homes (`codex-turn-home-*`, ~1 MB each) in
 * {@link codexHomeTempBase}.
 */
import { accessSync, constants as fsConstants, rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

/**
 * The CODEX_HOME Codex itself would use: `$CODEX_HOME` when set and non-empty (Codex ignores an empty one too), else
 * `~/.codex`, so the user's `codex login` credentials and `config.toml` are used.
 *
 * @example
 * ```ts
 * resolveCodexHome({ env: {}, homedir: () => "/Users/me" }); // { home: "/Users/me/.codex", source: "default" }
 * ```
 */
export function resolveCodexHome(
  options: { env?: NodeJS.ProcessEnv; homedir?: () => string } = {},
): { home: string; source: "CODEX_HOME" | "default" } {
  const env = options.env ?? process.env;
  const fromEnv = env.CODEX_HOME;
  if (fromEnv !== undefined && fromEnv !== "") return { home: fromEnv, source: "CODEX_HOME" };
  return { home: path.join((options.homedir ?? os.homedir)(), ".codex"), source: "default" };
}

/**
 * Where a temporary CODEX_HOME goes: /var/tmp when it is writable, else `os.tmpdir()`. Under /tmp codex refuses to
 * create its helper aliases and warns on stderr (team notes, codex-app-server.md P13); /var/tmp avoids that. Tests and
 * benches that make their own CODEX_HOME use it too.
 *
 * @example
 * ```ts
 * const home = mkdtempSync(path.join(codexHomeTempBase(), "my-codex-home-"));
 * ```
 */
export function codexHomeTempBase(): string {
  for (const base of ["/var/tmp", os.tmpdir()]) {
    try {
      accessSync(base, fsConstants.W_OK);
      return base;
    } catch {
      /* try the next one */
    }
  }
  return os.tmpdir();
}

/** Prefix of the temporary homes this client creates (and removes). */
export const TEMP_HOME_PREFIX = "codex-turn-home-";

const openTempHomes = new Set<string>();
const CLEANUP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

function removeOpenTempHomesSync(): void {
  for (const home of openTempHomes) {
    try {
      rmSync(home, { recursive: true, force: true });
    } catch {
      /* best effort while the process goes away */
    }
  }
  openTempHomes.clear();
}

/**
 * Remove the temp homes, then let the signal do what it would have done. Only when ours is the sole listener: a
 * host that handles the signal itself decides whether the process ends (its own exit then runs the 'exit' hook).
 */
function onSignal(signal: NodeJS.Signals): void {
  removeOpenTempHomesSync();
  if (process.listenerCount(signal) === 1) {
    uninstallExitHooks();
    process.kill(process.pid, signal);
  }
}

let hooksInstalled = false;
function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on("exit", removeOpenTempHomesSync);
  for (const s of CLEANUP_SIGNALS) process.on(s, onSignal);
}

function uninstallExitHooks(): void {
  if (!hooksInstalled) return;
  hooksInstalled = false;
  process.off("exit", removeOpenTempHomesSync);
  for (const s of CLEANUP_SIGNALS) process.off(s, onSignal);
}

/**
 * Create a temporary CODEX_HOME and register it for removal on process exit and on SIGINT/SIGTERM/SIGHUP (the
 * signal handlers exist only while a temp home is open). Release it with {@link removeTempCodexHome}.
 *
 * @example
 * ```ts
 * const home = await createTempCodexHome();
 * try { ... } finally { await removeTempCodexHome(home); }
 * ```
 */
export async function createTempCodexHome(): Promise<string> {
  const home = await mkdtemp(path.join(codexHomeTempBase(), TEMP_HOME_PREFIX));
  openTempHomes.add(home);
  installExitHooks();
  return home;
}

/**
 * Remove a temporary home made by {@link createTempCodexHome} and stop tracking it.
 *
 * @example
 * ```ts
 * await removeTempCodexHome(home);
 * ```
 */
export async function removeTempCodexHome(home: string): Promise<void> {
  openTempHomes.delete(home);
  if (openTempHomes.size === 0) uninstallExitHooks();
  await rm(home, { recursive: true, force: true }).catch(() => undefined);
}

/** Temporary homes still open in this process (for tests and diagnostics). */
export function openTempCodexHomes(): string[] {
  return [...openTempHomes];
}
