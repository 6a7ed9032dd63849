/**
 * Repair of a session file's last line before appending: a torn line (crash mid-append) is moved to
 * `<file>.torn-<n>` and the file truncated to its last complete line; a complete entry lacking its newline is
 * terminated. Nothing else in a transcript is ever rewritten.
 */
import { promises as fsp } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "pino";
import { SessionFileError } from "./errors.js";
import { fsyncDirectory } from "./fsync-dir.js";
import { errCode } from "./resolve.js";

/** What the repair needs of the writer's index. */
export interface RepairTarget {
  real: string;
  /** Bytes covered by complete lines. */
  size: number;
}

async function nextFreeSideFile(base: string, suffix: (n: number) => string): Promise<{ path: string; fh: FileHandle }> {
  for (let n = 1; n < 100_000; n++) {
    const p = `${base}${suffix(n)}`;
    try {
      return { path: p, fh: await fsp.open(p, "wx") };
    } catch (err) {
      if (errCode(err) === "EEXIST") continue;
      throw err;
    }
  }
  throw new Error(`no free side-file name for ${base}`);
}

/** Move a torn tail aside and truncate the transcript to its last complete line. */
export async function repairTornTail(index: RepairTarget, torn: Buffer, reported: string, logger: Logger): Promise<void> {
  try {
    const side = await nextFreeSideFile(index.real, (n) => `.torn-${n}`);
    try {
      await side.fh.writeFile(torn);
      await side.fh.sync();
    } finally {
      await side.fh.close();
    }
    const fh = await fsp.open(index.real, "r+");
    try {
      await fh.truncate(index.size);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fsyncDirectory(path.dirname(index.real));
    logger.warn(
      { event: "transcript.torn_tail_repaired", sessionFile: reported, tornBytes: torn.length, keptBytes: index.size, sideFile: side.path },
      "torn last line moved aside and transcript truncated to its last complete line",
    );
  } catch (err) {
    throw new SessionFileError("SESSION_WRITE_FAILED", reported, `cannot repair torn last line of session file ${reported}: ${String(err)}`, {
      cause: err,
    });
  }
}

/** Terminate a last line that is complete JSON but lacks its newline (keeps the entry). */
export async function terminateLastLine(index: RepairTarget, reported: string, logger: Logger): Promise<void> {
  try {
    const fh = await fsp.open(index.real, "a");
    try {
      await fh.write("\n");
      await fh.sync();
    } finally {
      await fh.close();
    }
    logger.warn({ event: "transcript.last_line_terminated", sessionFile: reported }, "complete last line lacked its newline; terminated it");
  } catch (err) {
    throw new SessionFileError("SESSION_WRITE_FAILED", reported, `cannot terminate last line of session file ${reported}: ${String(err)}`, {
      cause: err,
    });
  }
}
