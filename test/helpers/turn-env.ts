/**
 * Shared helpers for the turn integration and reliability suites: a temp session directory, a pino logger that
 * captures events into an array, transcript inspection (mirror keys, messages), and small waiting utilities.
 */
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { pino, type Logger } from "pino";
import type { CodexTurnParams } from "../../src/params.js";
import { readSessionTranscript, entryIdempotencyKey, parseMirrorKey } from "../../src/transcript/session-file.js";
import type { OfflineCodex } from "../../src/testing/index.js";

/** A log event as pino wrote it (parsed JSON line). */
export type LogEvent = Record<string, unknown> & { event?: string; level: number; msg?: string };

/** A debug-level pino logger whose lines land in `events` (parsed). */
export function captureLogger(): { logger: Logger; events: LogEvent[]; names(): string[] } {
  const events: LogEvent[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.trim().length === 0) continue;
        try {
          events.push(JSON.parse(line) as LogEvent);
        } catch {
          events.push({ level: 0, event: "unparsable log line" });
        }
      }
      cb();
    },
  });
  const logger = pino({ level: "debug" }, stream);
  return { logger, events, names: () => events.map((e) => String(e.event ?? e.msg ?? "")) };
}

/** A fresh temp directory for session files; `cleanup()` removes it. */
export function tempSessions(prefix = "turn-test-"): { dir: string; file(name?: string): string; cleanup(): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  let n = 0;
  return {
    dir,
    file: (name?: string) => path.join(dir, `${name ?? `s${++n}`}.jsonl`),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Mirror idempotency keys in the transcript, in file order. */
export async function mirrorKeys(sessionFile: string): Promise<string[]> {
  if (!existsSync(sessionFile)) return [];
  const t = await readSessionTranscript(sessionFile);
  return t.entries.map(entryIdempotencyKey).filter((k): k is string => typeof k === "string" && parseMirrorKey(k) !== null);
}

/** Keys per turn id; a key appearing twice would show as a duplicate count. */
export async function mirrorKeyCounts(sessionFile: string): Promise<{ byTurn: Map<string, number>; duplicates: string[] }> {
  const keys = await mirrorKeys(sessionFile);
  const byTurn = new Map<string, number>();
  const seen = new Set<string>();
  const duplicates: string[] = [];
  for (const k of keys) {
    if (seen.has(k)) duplicates.push(k);
    seen.add(k);
    const p = parseMirrorKey(k)!;
    byTurn.set(p.turnId, (byTurn.get(p.turnId) ?? 0) + 1);
  }
  return { byTurn, duplicates };
}

/** The raw text of the session file ('' when missing). */
export function sessionText(sessionFile: string): string {
  return existsSync(sessionFile) ? readFileSync(sessionFile, "utf8") : "";
}

/** Text content of a message (string content or text parts joined). */
export function messageText(message: object): string {
  const c = (message as { content?: unknown }).content;
  if (typeof c === "string") return c;
  if (Array.isArray(c)) {
    return c
      .map((p: { type?: string; text?: unknown }) => (p.type === "text" && typeof p.text === "string" ? p.text : ""))
      .join("");
  }
  return "";
}

/** A promise with its resolve/reject exposed. */
export function deferred<T = void>(): { promise: Promise<T>; resolve(v: T): void; reject(e: unknown): void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Poll until `cond` holds (bounded). */
export async function until(cond: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = "condition"): Promise<void> {
  const start = Date.now();
  while (!(await cond())) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** True when a process with this pid exists. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Base params for a turn against an offline Codex. */
export function turnParams(
  env: OfflineCodex,
  sessionFile: string,
  prompt: string,
  extra: Partial<CodexTurnParams> = {},
): CodexTurnParams {
  return { appServer: env.codex, sessionId: path.basename(sessionFile, ".jsonl"), sessionFile, prompt, ...extra };
}

/** The thread id a recorded model request belongs to (from `x-codex-turn-metadata`). */
export function requestThreadId(req: { turnMetadata: Record<string, unknown> | null; headers: Record<string, string> }): string {
  const t = req.turnMetadata?.thread_id;
  return typeof t === "string" ? t : (req.headers["thread-id"] ?? "");
}

/** Dispose an offline Codex and wait until its app-server process is gone (a leaked child fails the suite). */
export async function disposeChecked(env: OfflineCodex | undefined): Promise<void> {
  if (!env) return;
  const pid = env.codex.pid;
  await env.dispose();
  if (pid !== undefined) await until(() => !processAlive(pid), 5_000, `codex app-server ${pid} to exit`);
}
