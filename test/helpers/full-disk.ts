/** A really full file system for the "nothing lost" tests: fill a (small tmpfs) directory to the last byte. */
import { promises as fsp } from "node:fs";
import path from "node:path";

/**
 * Fill the file system under `dir` with one filler file until ENOSPC, then give back `keepBytes` (room for small
 * writes, not for big ones). Returns the filler's path: unlink it to free the space.
 */
export async function fillDisk(dir: string, keepBytes = 0): Promise<string> {
  const filler = path.join(dir, "filler.bin");
  const fh = await fsp.open(filler, "w");
  try {
    for (const size of [16_384, 512, 1]) {
      for (;;) {
        try {
          await fh.write(Buffer.alloc(size, 0x61));
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === "ENOSPC") break;
          throw err;
        }
      }
    }
  } finally {
    await fh.close();
  }
  if (keepBytes > 0) await fsp.truncate(filler, Math.max(0, (await fsp.stat(filler)).size - keepBytes));
  return filler;
}
