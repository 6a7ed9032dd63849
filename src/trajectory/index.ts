/**
 * Trajectory files: JSONL of app-server notifications (plus our own turn-level request summaries) for debugging.
 * Content and secrets are redacted by default; full capture is opt-in.
 */
import { appendFileSync } from "node:fs";
import { z } from "zod";

/** Keys whose string values carry model/user content or secrets; redacted unless full capture was asked for. */
export const REDACTED_KEYS: ReadonlySet<string> = new Set([
  "text",
  "delta",
  "value",
  "developerInstructions",
  "input",
  "arguments",
  "output",
  "prompt",
  "content",
  "summary",
  "preview",
  "message",
  "apiKey",
  "api_key",
  "authorization",
  "token",
  "encrypted_content",
  "encryptedContent",
]);

/** A trajectory failure (bad options). */
export class TrajectoryError extends Error {
  readonly code = "INVALID_TRAJECTORY_OPTIONS";
}

const redactString = (s: string) => `[redacted ${s.length} chars]`;

/**
 * Copy `value`, replacing strings under content/secret keys (at any depth, including inside arrays) with
 * `[redacted N chars]`.
 *
 * @example
 * ```ts
 * redactTrajectoryValue({ method: "item/agentMessage/delta", params: { delta: "hello" } });
 * // { method: "item/agentMessage/delta", params: { delta: "[redacted 5 chars]" } }
 * ```
 */
export function redactTrajectoryValue(value: unknown, underRedactedKey = false): unknown {
  if (typeof value === "string") return underRedactedKey ? redactString(value) : value;
  if (Array.isArray(value)) return value.map((v) => redactTrajectoryValue(v, underRedactedKey));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = redactTrajectoryValue(v, underRedactedKey || REDACTED_KEYS.has(k));
    return out;
  }
  return value;
}

const optionsSchema = z.object({ file: z.string().min(1), full: z.boolean().default(false) }).strict();

/** One trajectory line. */
export interface TrajectoryRecord {
  seq: number;
  dir: "notification" | "request";
  method: string;
  params: unknown;
}

/** Writes trajectory records to a JSONL file (synchronously, so a crash keeps what was seen). */
export interface TrajectoryWriter {
  record(dir: TrajectoryRecord["dir"], method: string, params: unknown): void;
  /** Subscribe to an app-server's notifications; returns the unsubscribe function. */
  attach(server: { onNotification(l: (n: { method: string; params: unknown }) => void): () => void }): () => void;
}

/**
 * Create a trajectory writer.
 *
 * @example
 * ```ts
 * const traj = createTrajectoryWriter({ file: path.join(os.tmpdir(), "t.jsonl") });
 * const detach = traj.attach(codex);
 * ```
 */
export function createTrajectoryWriter(options: z.input<typeof optionsSchema>): TrajectoryWriter {
  const parsed = optionsSchema.safeParse(options);
  if (!parsed.success) throw new TrajectoryError(`invalid trajectory options: ${parsed.error.issues[0]?.message ?? "unknown"}`);
  const { file, full } = parsed.data;
  let seq = 0;
  const writer: TrajectoryWriter = {
    record(dir, method, params) {
      const rec: TrajectoryRecord = { seq: seq++, dir, method, params: full ? params : redactTrajectoryValue(params) };
      appendFileSync(file, `${JSON.stringify(rec)}\n`);
    },
    attach(server) {
      return server.onNotification((n) => writer.record("notification", n.method, n.params));
    },
  };
  return writer;
}
