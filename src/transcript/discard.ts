/**
 * Removing a sidecar off the turn's critical path.
 *
 * Why: removing a file or directory whose blocks are already on disk makes the remover wait for the file system. On the
 * overhead benchmark's ext4 volume (mounted with `discard`) an `unlink` of an fsynced file or an `rmdir` of a committed
 * directory took 0.2–0.3 ms each (up to 0.6 ms while another fsync was in flight), against 0.03 ms for renaming the same
 * file or directory to a new name. A turn removes its pending-finalize record and its session lock after the transcript
 * commit, one after the other, right before the result is reported.
 *
 * So a removal is a rename to `<path>.discarded` (atomic: the path is gone for every reader at once, exactly as with an
 * unlink), and the renamed entry is removed on the thread pool afterwards. There is one such name per path, so what a
 * crash leaves between the two steps is at most one entry, replaced or removed by the next discard of that path.
 */
import fs, { promises as fsp } from "node:fs";
import path from "node:path";

/** The name a discarded path is renamed to before its removal. */
export function discardedName(target: string): string {
  return `${target}.discarded`;
}

const inFlight = new Set<Promise<void>>();
const pendingPaths = new Set<string>();
let exitHooked = false;

/**
 * Make `target` (a file, or a directory with files in it) disappear at once and free its blocks in the background.
 * Returns false when `target` did not exist. `layout` (what `target` holds, when known) makes the background removal
 * the few syscalls it needs. When the rename is refused (a leftover `.discarded` directory that is not
 * empty, for example), `removeInPlace` removes the target as before, and what it throws propagates.
 *
 * @example
 * ```ts
 * const record = "/data/s1.jsonl.codex-pending.json";
 * discardPath(record, () => fs.unlinkSync(record), { file: true }); // gone for every reader; freed off the event loop
 * await drainDiscards(); // e.g. before checking a directory's contents
 * ```
 */
export function discardPath(target: string, removeInPlace: () => void, layout?: DiscardLayout): boolean {
  const aside = discardedName(target);
  try {
    fs.renameSync(target, aside);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return false;
    // ENOTEMPTY / EEXIST / EISDIR / ENOTDIR: the aside name holds something of another kind, or a directory with files
    // in it (a crash between the rename and the removal). Remove the target as before, and the leftover in the
    // background, so the next discard of this path takes the fast path again.
    removeInPlace();
    scheduleRemoval(aside);
    return true;
  }
  scheduleRemoval(aside, layout);
  return true;
}

/**
 * What a discarded path is known to hold, so that its removal is just the syscalls it needs: a file, or a directory
 * with these files in it. Without it, or when the path holds something else, the removal is a recursive `rm`, which
 * first looks at what it removes (lstat, readdir), one promise round trip per step.
 */
export type DiscardLayout = { file: true } | { files: readonly string[] };

function scheduleRemoval(aside: string, layout?: DiscardLayout): void {
  hookExit();
  pendingPaths.add(aside);
  const removeAll = () => fsp.rm(aside, { recursive: true, force: true });
  // Started once the event loop is free (after the turn's result has been handed over), not inside the step that
  // discards: dispatching a removal to the thread pool wakes a worker, and on a small VM the waking thread is often
  // descheduled while the worker frees the blocks (0.15-0.2 ms of the step's own time, measured in a CPU profile).
  const done: Promise<void> = afterCurrentWork()
    .then(() => (layout ? removeAsLaidOut(aside, layout).catch(removeAll) : removeAll()))
    .catch(() => undefined) // best effort: the next discard of the same path replaces or removes it
    .finally(() => {
      pendingPaths.delete(aside);
      inFlight.delete(done);
    });
  inFlight.add(done);
}

function afterCurrentWork(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Remove `aside` as `layout` says it is laid out; rejects when it is not (the caller then removes it recursively). */
async function removeAsLaidOut(aside: string, layout: DiscardLayout): Promise<void> {
  if ("file" in layout) return fsp.unlink(aside);
  for (const name of layout.files) {
    await fsp.unlink(path.join(aside, name)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "ENOENT") throw err;
    });
  }
  await fsp.rmdir(aside);
}

/**
 * Wait until every background removal started so far has finished.
 *
 * @example
 * ```ts
 * await drainDiscards();
 * ```
 */
export async function drainDiscards(): Promise<void> {
  while (inFlight.size > 0) await Promise.all([...inFlight]);
}

/** A process that exits right after a turn still leaves no `.discarded` entry behind (synchronously, at exit). */
function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.once("exit", () => {
    for (const p of pendingPaths) {
      try {
        fs.rmSync(p, { recursive: true, force: true });
      } catch {
        // Best effort (see the module comment).
      }
    }
  });
}
