/** `codex-turn run --events`: the turn's stream events as JSON lines on stdout, then the result line, for scripts. */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../helpers/cli.js";
import { testTempDir } from "../helpers/temp-dir.js";

describe("run --events", () => {
  it("writes one JSON event per line, the reply's deltas in order, then the result", async () => {
    const dir = await testTempDir("ctm-run-events-");
    const r = await runCli(["run", "hello", "--session", path.join(dir, "s.jsonl"), "--offline", "--events"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n").filter((l) => l !== "");
    const events = lines.map((l) => JSON.parse(l) as { type: string; state?: string; delta?: string; status?: string; assistantText?: string });
    const types = new Set(events.map((e) => e.type));
    expect(types.has("state")).toBe(true);
    expect(types.has("agentMessageDelta")).toBe(true);
    // States in lifecycle order, the turn among them.
    const states = events.filter((e) => e.type === "state").map((e) => e.state);
    expect(states).toContain("turnRunning");
    expect(states.indexOf("threadStart")).toBeLessThan(states.indexOf("turnRunning"));
    expect(states.at(-1)).toBe("completed");
    // The reply's deltas come while the turn runs, before the transcript is written.
    const firstDelta = events.findIndex((e) => e.type === "agentMessageDelta");
    expect(firstDelta).toBeGreaterThan(events.findIndex((e) => e.state === "turnRunning"));
    expect(firstDelta).toBeLessThan(events.findIndex((e) => e.state === "mirror"));
    const result = events.at(-1)!;
    expect(result.type).toBe("result");
    expect(result.status).toBe("completed");
    expect(events.filter((e) => e.type === "result")).toHaveLength(1);
    const deltas = events.filter((e) => e.type === "agentMessageDelta").map((e) => e.delta).join("");
    expect(deltas).toBe(result.assistantText);
    expect(deltas).toBe("offline reply");
  });
});
