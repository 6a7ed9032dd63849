/**
 * MCP servers that failed to start on a thread. Codex starts the configured MCP servers when a thread loads and reports
 * each one's state in `mcpServer/startupStatus/updated` (`starting`, then `ready` or `failed` with its error). A failed
 * server's tools are simply absent: the turn runs and completes without them and Codex says so nowhere else (observed
 * with 0.169: a server whose command does not exist, and one that exits before the MCP handshake). The client keeps
 * the failed ones per thread so that every turn on that thread reports them as a warning (`mcpServerFailed`).
 */
import { z } from "zod";

/** One `mcpServer/startupStatus/updated`, as read at the boundary. */
export interface McpStartupUpdate {
  /** The thread whose servers these are (null: not tied to a thread). */
  threadId: string | null;
  /** The server's name in the config (`mcp_servers.<name>`). */
  server: string;
  status: "starting" | "ready" | "failed" | "cancelled";
  /** Codex's error, for a failed server. */
  error: string | null;
}

const updateSchema = z.object({
  threadId: z.string().nullable(),
  name: z.string(),
  status: z.enum(["starting", "ready", "failed", "cancelled"]),
  error: z.string().nullish(),
});

/** The method of Codex's MCP startup updates. */
export const MCP_STARTUP_METHOD = "mcpServer/startupStatus/updated";

/**
 * The update a notification carries, or undefined when it is another method or malformed.
 *
 * @example
 * ```ts
 * mcpStartupOf({ method: "mcpServer/startupStatus/updated", params: { threadId: "t", name: "docs", status: "ready", error: null } });
 * // { threadId: "t", server: "docs", status: "ready", error: null }
 * ```
 */
export function mcpStartupOf(n: { method: string; params: unknown }): McpStartupUpdate | undefined {
  if (n.method !== MCP_STARTUP_METHOD) return undefined;
  const parsed = updateSchema.safeParse(n.params);
  if (!parsed.success) return undefined;
  const { threadId, name, status, error } = parsed.data;
  return { threadId, server: name, status, error: error ?? null };
}

/** Threads whose failed servers are kept at most (least recently updated first out); closed threads drop theirs. */
export const MAX_MCP_FAILURE_THREADS = 1_024;

/**
 * The failed MCP servers of each thread: {@link McpStartupFailures.note} returns true when a server has just failed
 * (the caller logs it once); a server that starts again or becomes ready is no longer failed.
 *
 * @example
 * ```ts
 * const failures = new McpStartupFailures();
 * failures.note({ threadId: "t", server: "docs", status: "failed", error: "no such file" }); // true
 * failures.of("t"); // [{ server: "docs", error: "no such file" }]
 * ```
 */
export class McpStartupFailures {
  private readonly byThread = new Map<string, Map<string, string>>();

  /** Apply one update; true when `server` has just failed on the thread. Updates without a thread are not kept. */
  note(u: McpStartupUpdate): boolean {
    if (u.threadId === null) return false;
    const failed = this.byThread.get(u.threadId);
    if (u.status !== "failed") {
      failed?.delete(u.server);
      if (failed?.size === 0) this.byThread.delete(u.threadId);
      return false;
    }
    const servers = failed ?? new Map<string, string>();
    const isNew = !servers.has(u.server);
    servers.set(u.server, u.error ?? "failed to start");
    // Newest last, so the bound drops the threads updated longest ago.
    this.byThread.delete(u.threadId);
    this.byThread.set(u.threadId, servers);
    while (this.byThread.size > MAX_MCP_FAILURE_THREADS) this.byThread.delete(this.byThread.keys().next().value as string);
    return isNew;
  }

  /** The servers currently failed on `threadId`, in the order they failed. */
  of(threadId: string): Array<{ server: string; error: string }> {
    return [...(this.byThread.get(threadId) ?? [])].map(([server, error]) => ({ server, error }));
  }

  /** The thread was unloaded: its servers stopped with it, and a reload starts them again. */
  forget(threadId: string): void {
    this.byThread.delete(threadId);
  }
}
