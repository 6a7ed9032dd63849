/**
 * Synchronous I/O for the small sidecar files (thread binding, pending-finalize record, lock owner record).
 *
 * Why synchronous: each `fs.promises` call is a thread-pool round trip plus a `FileHandle` object; a `readFile` is four
 * of them (open, fstat, read, close). Measured on the overhead benchmark's 2-core VM, one such call took 0.2–0.9 ms of
 * wall time during a turn, against 10–50 µs for the same syscall made synchronously, and the sidecar traffic of one
 * turn was about a third of the harness's whole per-turn overhead. These files are a few KB, so the synchronous calls
 * block the event loop for microseconds. `fsync` is the exception: it can take milliseconds, so it stays on the thread
 * pool (`fsyncFd`), and so do the transcript's reads and appends, which can be large.
 */
import fs from "node:fs";
import path from "node:path";

/** The file's text, or undefined when it does not exist (other errors throw). */
export function readSmallFile(file: string): string | undefined {
  // A missing file is the common case for the pending record: a stat is cheaper than a thrown ENOENT.
  if (!fs.existsSync(file)) return undefined;
  try {
    return fs.readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** fsync a descriptor on the thread pool (never blocks the event loop). */
export function fsyncFd(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fsync(fd, (err) => (err ? reject(err) : resolve())));
}

/**
 * Write `text` to `tmp`, optionally fsync it, and rename it over `file` (atomic replace). On a failed rename the temp
 * file is removed and the error rethrown. `beforeRename` runs between the write and the rename (fault injection).
 */
export async function replaceSmallFile(file: string, tmp: string, text: string, opts: { durable: boolean; beforeRename?: (() => void) | undefined }): Promise<void> {
  const fd = fs.openSync(tmp, "w");
  try {
    fs.writeSync(fd, text);
    if (opts.durable) await fsyncFd(fd);
  } finally {
    fs.closeSync(fd);
  }
  opts.beforeRename?.();
  try {
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

/**
 * Create `file` with `text` if it does not exist (O_EXCL), optionally fsynced with its directory. Returns false,
 * writing nothing, when it exists. A failed write removes the half-created file and rethrows.
 */
export async function createSmallFile(file: string, text: string, opts: { durable: boolean }): Promise<boolean> {
  let fd: number;
  try {
    fd = fs.openSync(file, "wx");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
  try {
    fs.writeSync(fd, text);
    if (opts.durable) await Promise.all([fsyncFd(fd), fsyncDirectory(path.dirname(file))]);
  } catch (err) {
    fs.closeSync(fd);
    fs.rmSync(file, { force: true });
    throw err;
  }
  fs.closeSync(fd);
  return true;
}

/**
 * Best-effort fsync of a directory, so a file created, renamed or removed in it survives an OS crash. Some
 * filesystems refuse fsync on a directory; the rename or write itself is still atomic, so failures are ignored.
 * The open and close are synchronous (microseconds); the fsync runs on the thread pool.
 *
 * @example
 * ```ts
 * fs.renameSync(tmp, file);
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
