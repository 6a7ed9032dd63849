/**
 * Temporary directories this library makes for the life of an object (a hook relay's socket, a subagent host's child
 * sessions): removed by the object's close(), and by one process 'exit' hook when the host ends without closing it.
 * (Temporary CODEX_HOMEs have their own registry in src/codex/codex-home.ts: Codex must be stopped first.)
 */
import { rmSync } from "node:fs";

const open = new Set<string>();

function removeAllSync(): void {
  for (const dir of open) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      /* best effort while the process goes away */
    }
  }
  open.clear();
}

/**
 * Remove `dir` when the process exits unless the returned function ran first; that function stops tracking it (the
 * caller removes the directory itself, as close() does).
 *
 * @example
 * ```ts
 * const dir = mkdtempSync(path.join(os.tmpdir(), "x-"));
 * const untrack = removeOnExit(dir);
 * // ... at close():
 * untrack();
 * rmSync(dir, { recursive: true, force: true });
 * ```
 */
export function removeOnExit(dir: string): () => void {
  if (open.size === 0) process.on("exit", removeAllSync);
  open.add(dir);
  return () => {
    if (!open.delete(dir)) return;
    if (open.size === 0) process.off("exit", removeAllSync);
  };
}
