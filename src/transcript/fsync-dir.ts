/** The one directory-fsync helper of the transcript sidecars (transcript, binding, pending record, reset). */
import fs from "node:fs";
import { fsyncFd } from "./small-file.js";

/**
 * Best-effort fsync of a directory, so a file created, renamed or removed in it survives an OS crash. Some
 * filesystems refuse fsync on a directory; the rename or write itself is still atomic, so failures are ignored.
 * The open and close are synchronous (microseconds); the fsync runs on the thread pool.
 *
 * @example
 * ```ts
 * await fsp.rename(tmp, file);
 * await fsyncDirectory(path.dirname(file));
 * ```
 */
export async function fsyncDirectory(dir: string): Promise<void> {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, "r");
    await fsyncFd(fd);
  } catch {
    // Not supported everywhere (see above).
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}
