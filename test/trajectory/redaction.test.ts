import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTrajectoryWriter, redactTrajectoryValue, TrajectoryError } from "../../src/trajectory/index.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-traj-"));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("trajectory redaction", () => {
  it("redacts content fields at any depth and keeps structure and ids", () => {
    const v = redactTrajectoryValue({
      threadId: "t1",
      delta: "secret words",
      item: { type: "agentMessage", id: "i1", content: [{ type: "text", text: "hello" }] },
      input: [{ type: "text", text: "my prompt" }],
      call: { name: "lookup", arguments: '{"q":"x"}' },
      usage: { totalTokens: 12 },
    });
    expect(v).toEqual({
      threadId: "t1",
      delta: "[redacted 12 chars]",
      item: { type: "agentMessage", id: "i1", content: [{ type: "[redacted 4 chars]", text: "[redacted 5 chars]" }] },
      input: [{ type: "[redacted 4 chars]", text: "[redacted 9 chars]" }],
      call: { name: "lookup", arguments: "[redacted 9 chars]" },
      usage: { totalTokens: 12 },
    });
    expect(JSON.stringify(v)).not.toContain("my prompt");
  });

  it("writes redacted JSONL by default and full content only when asked", async () => {
    const red = path.join(dir, "red.jsonl");
    const w = createTrajectoryWriter({ file: red });
    w.record("notification", "item/agentMessage/delta", { delta: "TOP-SECRET" });
    w.record("request", "turn/start", { developerInstructions: "be nice", threadId: "t" });
    const text = await readFile(red, "utf8");
    expect(text).not.toContain("TOP-SECRET");
    expect(text).not.toContain("be nice");
    const lines = text.trim().split("\n").map((l) => JSON.parse(l) as { seq: number; method: string });
    expect(lines.map((l) => [l.seq, l.method])).toEqual([
      [0, "item/agentMessage/delta"],
      [1, "turn/start"],
    ]);

    const fullFile = path.join(dir, "full.jsonl");
    createTrajectoryWriter({ file: fullFile, full: true }).record("notification", "x", { delta: "TOP-SECRET" });
    expect(await readFile(fullFile, "utf8")).toContain("TOP-SECRET");
  });

  it("rejects bad options with a typed error", () => {
    expect(() => createTrajectoryWriter({ file: "" })).toThrow(TrajectoryError);
  });
});
