/**
 * Reading a file a person named on the command line or in a config (a plugin config, an offline script, a plugin's
 * manifest): it must be a regular file of bounded size, checked before it is opened. Opening a FIFO blocks until a
 * writer comes (forever, for a typo'd `--plugin-config`), and `/dev/zero` would be read until memory runs out.
 */
import { constants } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";

/** The most a config-like file may hold (8 MiB): far above any real config, far below what hurts. */
export const MAX_CONFIG_FILE_BYTES = 8 * 1024 * 1024;

/** Why {@link readRegularTextFile} refused a file (its message is the reason, e.g. "not a regular file (a FIFO)"). */
export class IrregularFileError extends Error {
  readonly code: "NOT_REGULAR_FILE" | "FILE_TOO_LARGE";
  constructor(code: "NOT_REGULAR_FILE" | "FILE_TOO_LARGE", message: string) {
    super(message);
    this.name = "IrregularFileError";
    this.code = code;
  }
}

function kindOf(st: Awaited<ReturnType<FileHandle["stat"]>>): string {
  if (st.isDirectory()) return "a directory";
  if (st.isFIFO()) return "a FIFO";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  if (st.isSocket()) return "a socket";
  return "not a file";
}

/**
 * The UTF-8 text of `file` (symlinks followed), refused with {@link IrregularFileError} when it is not a regular file
 * or holds more than `maxBytes` (also when it grows past that while read). Other errors (ENOENT, EACCES) are the
 * file system's own.
 *
 * @example
 * ```ts
 * const text = await readRegularTextFile("./lossless.json"); // IrregularFileError for a FIFO or /dev/zero
 * ```
 */
export async function readRegularTextFile(file: string, maxBytes: number = MAX_CONFIG_FILE_BYTES): Promise<string> {
  // Non-blocking, so a FIFO opens at once (and is then refused by its fstat) instead of waiting for a writer; the
  // checks are on what was opened, so nothing can be swapped in between.
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new IrregularFileError("NOT_REGULAR_FILE", `not a regular file (${kindOf(st)})`);
    if (st.size > maxBytes) throw new IrregularFileError("FILE_TOO_LARGE", `larger than ${maxBytes} bytes (${st.size})`);
    const chunks: Buffer[] = [];
    let length = 0;
    for (;;) {
      const chunk = Buffer.alloc(64 * 1024);
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > maxBytes) throw new IrregularFileError("FILE_TOO_LARGE", `larger than ${maxBytes} bytes`);
      chunks.push(chunk.subarray(0, bytesRead));
    }
    return Buffer.concat(chunks, length).toString("utf8");
  } finally {
    await handle.close();
  }
}
