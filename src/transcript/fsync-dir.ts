/** The one directory-fsync helper of the transcript sidecars (transcript, binding, pending record, reset). */
import { promises as fsp } from "node:fs";
import type { FileHandle } from "node:fs/promises";

/**
 * Best-effort fsync of a directory, so a file created, renamed or removed in it survives an OS crash. Some
 * filesystems refuse fsync on a directory; the rename or write itself is still atomic, so failures are ignored.
 *
 * @example
 * ```ts
 * await fsp.rename(tmp, file);
 * await fsyncDirectory(path.dirname(file));
 * ```
 */
export async function fsyncDirectory(dir: string): Promise<void> {
  let fh: FileHandle | undefined;
  try {
    fh = await fsp.open(dir, "r");
    await fh.sync();
  } catch {
    // Not supported everywhere (see above).
  } finally {
    await fh?.close().catch(() => undefined);
  }
}
