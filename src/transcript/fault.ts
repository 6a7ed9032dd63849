/**
 * Crash-injection points for the kill tests. Production code calls {@link faultPoint} at the moments where a crash is
 * interesting (between write and fsync, between a temp write and its rename, ...); nothing happens unless a test
 * process installed a hook. A child process in the kill tests installs a hook that SIGKILLs itself at one named point.
 */

/** Names of the injection points, in the order a mirror + pending record passes them. */
export type FaultPointName =
  | "transcript:before-write"
  /** Half of the batch has been written (the crash leaves a torn last line). */
  | "transcript:mid-write"
  /** The whole batch was written, fsync has not returned. */
  | "transcript:after-write"
  | "transcript:after-fsync"
  | "pending:before-rename"
  | "pending:after-rename"
  /** A transcript rewrite's temp file is complete and fsynced; the rename over the transcript has not happened. */
  | "rewrite:before-rename"
  /** Half of a thread binding record has been appended to the binding log. */
  | "binding:mid-append"
  /** Native sync: the revert's intent is in the binding, `thread/revert` not sent yet. */
  | "native:before-revert"
  /** Native sync: Codex reverted the thread, the binding still says "revert in progress". */
  | "native:after-revert"
  /** Native sync: the injection's intent is in the binding, `thread/inject_items` not sent yet. */
  | "native:before-inject"
  /** Native sync: Codex took the items, the binding does not record them yet. */
  | "native:after-inject";

type FaultHook = (point: FaultPointName) => void;

let hook: FaultHook | undefined;

/**
 * Install (or clear, with `undefined`) the process-wide fault hook. Test-only.
 *
 * @example
 * ```ts
 * setTranscriptFaultHook((p) => { if (p === "transcript:after-write") process.kill(process.pid, "SIGKILL"); });
 * ```
 */
export function setTranscriptFaultHook(fn: FaultHook | undefined): void {
  hook = fn;
}

/** Call the installed hook, if any. */
export function faultPoint(point: FaultPointName): void {
  if (hook) hook(point);
}

/** Whether a hook is installed (lets the writer split a batch in two so a mid-write crash can be simulated). */
export function faultsEnabled(): boolean {
  return hook !== undefined;
}
