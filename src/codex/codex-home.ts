/**
 * Where the app-server's CODEX_HOME is: the user's own (resolved like Codex and its CLI do) or a temporary one this
 * client creates, tracks and removes, also when the host process exits without `close()` or is ended by
 * SIGINT/SIGTERM/SIGHUP (a signal the host handles itself does not end it: the homes stay until it closes or exits).
 * SIGKILL cannot be handled: a host killed with it leaves its temporary homes (`codex-turn-home-*`, ~1 MB each) in
 * {@link codexHomeTempBase}.
 */
import { accessSync, existsSync, constants as fsConstants, readFileSync, rmSync } from "node:fs";
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
  options: { env?: NodeJS.ProcessEnv | undefined; homedir?: (() => string) | undefined } = {},
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

/**
 * The open temporary homes, each with the pid of the Codex process using it now (the supervisor may have restarted
 * it), when one is attached.
 */
const openTempHomes = new Map<string, { currentPid?: (() => number | undefined) | undefined }>();
const CLEANUP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
/** How long the exit path waits, synchronously, for a killed Codex child to be gone before removing its home. */
const CHILD_GONE_WAIT_MS = 1_000;

/** Sleep the thread (the exit path is synchronous: no timers run there). */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Whether `pid` still runs. A killed child stays a zombie until its parent (this process, which is exiting) reaps it;
 * on Linux /proc tells a zombie apart, elsewhere the bounded wait in {@link stopChildSync} ends the loop.
 */
function stillRuns(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/s.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT" && existsSync("/proc/self/stat")) return false;
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * SIGKILL the Codex child using a home and wait (bounded) until it is gone. Codex left to exit on its own (stdin EOF
 * when this process is gone) writes into its home on the way out (0.169 recreates `thread-writer-locks/`), after the
 * home was removed: a leak. Killing it first is safe because the home, its rollouts included, is being thrown away.
 */
function stopChildSync(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    return; // already gone
  }
  const until = Date.now() + CHILD_GONE_WAIT_MS;
  while (stillRuns(pid) && Date.now() < until) sleepSync(5);
}

function removeOpenTempHomesSync(): void {
  for (const [home, { currentPid }] of openTempHomes) {
    try {
      const pid = currentPid?.();
      if (pid !== undefined) stopChildSync(pid);
      rmSync(home, { recursive: true, force: true, maxRetries: 3, retryDelay: 20 });
    } catch {
      /* best effort while the process goes away */
    }
  }
  openTempHomes.clear();
}

/**
 * At a signal that would end the process (ours is its only listener): remove the temp homes, then let the signal do
 * what it would have done. A host that handles the signal itself decides whether and when the process ends, and
 * Codex may still be working in the home (a CLI aborting its turn cleanly): the homes stay until its `close()`, or
 * the 'exit' hook when it ends the process.
 */
function onSignal(signal: NodeJS.Signals): void {
  if (process.listenerCount(signal) !== 1) return;
  removeOpenTempHomesSync();
  uninstallExitHooks();
  process.kill(process.pid, signal);
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
  openTempHomes.set(home, {});
  installExitHooks();
  return home;
}

/**
 * Tell the exit path which process uses a temporary home (`currentPid` returns its pid now, or undefined when none
 * runs), so a host ending without `close()` stops it before the home is removed. No effect on a home not open.
 *
 * @example
 * ```ts
 * attachTempCodexHomeProcess(home, () => child.pid);
 * ```
 */
export function attachTempCodexHomeProcess(home: string, currentPid: () => number | undefined): void {
  const entry = openTempHomes.get(home);
  if (entry) entry.currentPid = currentPid;
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
  return [...openTempHomes.keys()];
}
