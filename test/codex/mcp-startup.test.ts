/**
 * MCP servers that failed to start, per thread (`mcpServer/startupStatus/updated`): read at the boundary, kept while
 * failed, dropped when the server starts again or the thread closes. The real binary: test/integration/mcp-startup.test.ts.
 */
import { describe, expect, it } from "vitest";
import { MAX_MCP_FAILURE_THREADS, McpStartupFailures, mcpStartupOf, type McpStartupUpdate } from "../../src/codex/mcp-startup.js";

const update = (threadId: string | null, server: string, status: McpStartupUpdate["status"], error: string | null = null): McpStartupUpdate => ({
  threadId,
  server,
  status,
  error,
});

describe("mcpStartupOf", () => {
  it("reads Codex's startup update and nothing else", () => {
    const params = { threadId: "t", name: "docs", status: "failed", error: "MCP client for `docs` failed to start", failureReason: null };
    expect(mcpStartupOf({ method: "mcpServer/startupStatus/updated", params })).toEqual(update("t", "docs", "failed", "MCP client for `docs` failed to start"));
    expect(mcpStartupOf({ method: "mcpServer/startupStatus/updated", params: { threadId: null, name: "d", status: "ready" } })).toEqual(update(null, "d", "ready"));
    expect(mcpStartupOf({ method: "configWarning", params })).toBeUndefined();
    expect(mcpStartupOf({ method: "mcpServer/startupStatus/updated", params: { ...params, status: "exploded" } })).toBeUndefined();
    expect(mcpStartupOf({ method: "mcpServer/startupStatus/updated", params: { threadId: "t", status: "failed" } })).toBeUndefined();
  });
});

describe("McpStartupFailures", () => {
  it("keeps a failed server per thread until it starts again, is ready, or the thread closes", () => {
    const f = new McpStartupFailures();
    expect(f.note(update("t", "a", "starting"))).toBe(false);
    expect(f.note(update("t", "a", "failed", "boom"))).toBe(true);
    expect(f.note(update("t", "a", "failed", "boom again"))).toBe(false);
    expect(f.note(update("t", "b", "failed"))).toBe(true);
    expect(f.note(update("u", "a", "failed", "other thread"))).toBe(true);
    expect(f.of("t")).toEqual([
      { server: "a", error: "boom again" },
      { server: "b", error: "failed to start" },
    ]);
    f.note(update("t", "a", "starting"));
    expect(f.of("t").map((x) => x.server)).toEqual(["b"]);
    f.note(update("t", "b", "ready"));
    expect(f.of("t")).toEqual([]);
    f.forget("u");
    expect(f.of("u")).toEqual([]);
    expect(f.note(update(null, "a", "failed"))).toBe(false);
  });

  it(`keeps the failures of at most ${MAX_MCP_FAILURE_THREADS} threads, the least recently updated first out`, () => {
    const f = new McpStartupFailures();
    for (let i = 0; i <= MAX_MCP_FAILURE_THREADS; i++) f.note(update(`t${i}`, "a", "failed"));
    expect(f.of("t0")).toEqual([]);
    expect(f.of("t1")).toHaveLength(1);
    expect(f.of(`t${MAX_MCP_FAILURE_THREADS}`)).toHaveLength(1);
  });
});
