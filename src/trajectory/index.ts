/**
 * Trajectory files: JSONL of the app-server traffic for debugging: Codex's notifications, every JSON-RPC message this
 * client sends (requests, notifications, replies to Codex's requests), and our own turn-level request summaries.
 * Content and secrets are redacted by default; full capture is opt-in. From the CLI (`--trajectory FILE`) or the
 * library (`runCodexTurn({ ..., trajectory: { file } })`, or a writer of one's own attached to the app-server).
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

/**
 * One trajectory line. `dir`: `"notification"` (from Codex), `"sent"` (a JSON-RPC message this client wrote: `method`
 * is the request's or notification's, `"reply"` for a reply to Codex's request `id`, whose `params` are `{ result }` or
 * `{ error }`), `"request"` (our own summary of a turn request).
 */
export interface TrajectoryRecord {
  seq: number;
  dir: "notification" | "sent" | "request";
  method: string;
  /** The JSON-RPC id of a sent request or reply. */
  id?: string | number | undefined;
  params: unknown;
}

/** What {@link TrajectoryWriter.attach} subscribes to (a `CodexAppServer`). */
export interface TrajectorySource {
  onNotification(l: (n: { method: string; params: unknown }) => void): () => void;
  onOutgoing?(l: (m: { id?: string | number | undefined; method?: string | undefined; params?: unknown; result?: unknown; error?: unknown }) => void): () => void;
}

/** Writes trajectory records to a JSONL file (synchronously, so a crash keeps what was seen). */
export interface TrajectoryWriter {
  record(dir: TrajectoryRecord["dir"], method: string, params: unknown, id?: string | number | undefined): void;
  /** Subscribe to an app-server's notifications and the messages it sends; returns the unsubscribe function. */
  attach(server: TrajectorySource): () => void;
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
    record(dir, method, params, id) {
      const rec: TrajectoryRecord = { seq: seq++, dir, method, ...(id !== undefined ? { id } : {}), params: full ? params : redactTrajectoryValue(params) };
      appendFileSync(file, `${JSON.stringify(rec)}\n`);
    },
    attach(server) {
      const offNotifications = server.onNotification((n) => writer.record("notification", n.method, n.params));
      const offSent = server.onOutgoing?.((m) => {
        if (m.method !== undefined) writer.record("sent", m.method, m.params, m.id);
        else writer.record("sent", "reply", m.error !== undefined ? { error: m.error } : { result: m.result }, m.id);
      });
      return () => {
        offNotifications();
        offSent?.();
      };
    },
  };
  return writer;
}

/** A turn's `trajectory` parameter: where to write (`{ file, full? }`) or a writer of the host's own. */
export type TurnTrajectoryOption = z.input<typeof optionsSchema> | TrajectoryWriter;

/**
 * Record one turn attempt's traffic: `record("request", "codexTurn/run", ...)` (session file, prompt, engine id;
 * redacted as the rest), then every notification and sent message until the returned function is called. The
 * app-server is shared: another session's traffic in the same moments is recorded too.
 *
 * @example
 * ```ts
 * const stop = startTurnTrajectory({ file: "/tmp/t.jsonl" }, appServer, { sessionFile, prompt, engineId: "lcm" });
 * try { await work(); } finally { stop(); }
 * ```
 */
export function startTurnTrajectory(option: TurnTrajectoryOption, server: TrajectorySource, turn: { sessionFile: string; prompt: string; engineId?: string | undefined }): () => void {
  const writer = "record" in option ? option : createTrajectoryWriter(option);
  writer.record("request", "codexTurn/run", { sessionFile: turn.sessionFile, prompt: turn.prompt, ...(turn.engineId !== undefined ? { engineId: turn.engineId } : {}) });
  return writer.attach(server);
}
