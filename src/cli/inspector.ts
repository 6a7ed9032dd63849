/**
 * `--inspect` for the CLI: start the live inspector before anything else (so a missing optional package fails before
 * an app-server exists), and keep it serving after the work ends until Ctrl-C or `--inspect-wait` seconds.
 */
import type { InspectionEvent } from "xstate";
import { envError } from "./errors.js";
import { importOptional, isMissingPackageError, missingPackageError } from "./optional.js";
import type { Out } from "./output.js";
import { watchSignals } from "./signals.js";

/** The part of the live inspector the CLI uses. */
export interface CliInspector {
  url: string;
  /** Forward one inspection event (never throws). */
  send(event: InspectionEvent): void;
  close(): Promise<void>;
}

/**
 * Starts the live inspector when `enabled`, printing its URL as a note.
 *
 * @example
 * ```ts
 * const inspector = await startInspector(opts.inspect === true, out);
 * ```
 */
export async function startInspector(enabled: boolean, out: Out, uiUrl?: string): Promise<CliInspector | undefined> {
  if (!enabled) return undefined;
  const { createLiveInspector } = await importOptional("@statelyai/inspect", "--inspect", () => import("../inspect/live.js"));
  const fallbackPage = await offlineViewRenderer();
  try {
    const live = await createLiveInspector({ fallbackPage, ...(uiUrl !== undefined ? { inspectorUrl: uiUrl } : {}) });
    out.note(`inspector: ${live.url}`);
    return {
      url: live.url,
      send: (event) => {
        try {
          live.inspect.next?.(event);
        } catch {
          // An inspector problem must never affect the turn.
        }
      },
      close: () => live.close(),
    };
  } catch (err) {
    // `ws` is resolved through @statelyai/inspect (its dependency) when the relay starts.
    if (isMissingPackageError(err, "@statelyai/inspect") || isMissingPackageError(err, "ws")) {
      throw missingPackageError("@statelyai/inspect", "--inspect");
    }
    throw envError(`--inspect: live inspector unavailable: ${(err as Error).message}`);
  }
}

/** Our own live view of the turn and compaction machines (the bridge page falls back to it when offline). */
async function offlineViewRenderer(): Promise<(wsUrl: string) => string> {
  const { renderStatechartPage } = await import("../inspect/viz.js");
  const { turnMachine } = await import("../../machines/turn.machine.js");
  const { compactionMachine } = await import("../../machines/compaction.machine.js");
  return (wsUrl) =>
    renderStatechartPage({
      title: "codex-turn-machine (live, offline view)",
      machines: [
        { id: "turn", title: "Turn", machine: turnMachine },
        { id: "compaction", title: "Compaction", machine: compactionMachine },
      ],
      live: { wsUrl },
    });
}

/**
 * Keeps the inspector serving after the work ended: until SIGINT/SIGTERM, or `waitSeconds` when given. Skipped when
 * the work itself was stopped by a signal (the person already asked to leave).
 *
 * @example
 * ```ts
 * await holdInspector(inspector, opts.inspectWait, out);
 * ```
 */
export async function holdInspector(inspector: CliInspector | undefined, waitSeconds: number | undefined, out: Out): Promise<void> {
  if (!inspector || waitSeconds === 0) return;
  const watch = watchSignals();
  let timer: NodeJS.Timeout | undefined;
  try {
    out.note(
      waitSeconds === undefined
        ? `inspector: still serving ${inspector.url} (Ctrl-C to exit)`
        : `inspector: still serving ${inspector.url} for ${waitSeconds} s (Ctrl-C to exit sooner)`,
    );
    const waits: Promise<unknown>[] = [watch.first];
    if (waitSeconds !== undefined) waits.push(new Promise((r) => (timer = setTimeout(r, waitSeconds * 1000))));
    await Promise.race(waits);
  } finally {
    clearTimeout(timer);
    watch.dispose();
  }
}
