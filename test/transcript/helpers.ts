import { promises as fsp } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pino, type Logger } from "pino";

/** A fresh temp directory (realpath'd, so comparisons with canonical paths hold on systems where /tmp is a link). */
export async function tempDir(prefix = "ctm-transcript-"): Promise<string> {
  return fsp.realpath(await fsp.mkdtemp(path.join(os.tmpdir(), prefix)));
}

export interface CapturedLogger {
  logger: Logger;
  records: Array<Record<string, unknown>>;
  events(): string[];
}

/** A pino logger that keeps every record in memory. */
export function captureLogger(): CapturedLogger {
  const records: Array<Record<string, unknown>> = [];
  const logger = pino({ level: "debug" }, { write: (s: string) => void records.push(JSON.parse(s) as Record<string, unknown>) });
  return { logger, records, events: () => records.map((r) => String(r.event)) };
}

export async function readLines(file: string): Promise<string[]> {
  const text = await fsp.readFile(file, "utf8");
  return text.split("\n").filter((l) => l.length > 0);
}
