/**
 * Trajectories record every JSON-RPC message we send (requests, replies to Codex's requests) beside Codex's
 * notifications, content redacted unless asked: from the library (`trajectory` on the turn) and from the CLI
 * (`run --trajectory`), against the real app-server and the offline model.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import type { TrajectoryRecord } from "../../src/trajectory/index.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { runCli } from "../helpers/cli.js";
import { testTempDir } from "../helpers/temp-dir.js";
import { disposeChecked, turnParams } from "../helpers/turn-env.js";

let env: OfflineCodex;
beforeAll(async () => {
  env = await startOfflineCodex({ offline: { lean: true } });
}, 60_000);
afterAll(() => disposeChecked(env));

const records = (file: string) => readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l) as TrajectoryRecord);
const PROMPT = "the secret prompt PROMPT-7731";

describe("turn trajectories", () => {
  it("the library's trajectory option records the turn request, every message sent, and the notifications, redacted", async () => {
    const dir = await testTempDir("ctm-trajectory-");
    const file = path.join(dir, "t.jsonl");
    env.fake.enqueue({ text: "the secret answer ANSWER-19" });
    const tool = { name: "lookup", description: "looks up", inputSchema: { type: "object", properties: {} }, handler: async () => "TOOL-OUTPUT-55" };
    env.fake.enqueue([{ text: "calling", functionCall: { name: "lookup", arguments: {} } }, { text: "done" }]);
    const first = await runCodexTurn(turnParams(env, path.join(dir, "s.jsonl"), PROMPT, { trajectory: { file }, developerInstructions: "SECRET-INSTRUCTIONS" }));
    expect(first.status).toBe("completed");
    const second = await runCodexTurn(turnParams(env, path.join(dir, "s.jsonl"), "use the tool", { trajectory: { file }, dynamicTools: [tool] }));
    expect(second.status).toBe("completed");
    const recs = records(file);
    const sent = recs.filter((r) => r.dir === "sent");
    expect(recs[0]).toMatchObject({ dir: "request", method: "codexTurn/run" });
    expect(sent.map((r) => r.method)).toEqual(expect.arrayContaining(["thread/start", "turn/start", "reply"]));
    // Every request sent carries its JSON-RPC id; the reply answers Codex's tool-call request.
    for (const r of sent.filter((x) => x.method !== "reply")) expect(typeof r.id).toBe("number");
    expect(sent.find((r) => r.method === "reply")).toMatchObject({ params: { result: expect.anything() } });
    expect(recs.some((r) => r.dir === "notification" && r.method === "turn/completed")).toBe(true);
    const text = readFileSync(file, "utf8");
    for (const secret of ["PROMPT-7731", "ANSWER-19", "SECRET-INSTRUCTIONS", "TOOL-OUTPUT-55"]) expect(text).not.toContain(secret);
    // Each turn stops recording when it settles: nothing after the second turn's own traffic.
    const turnStarts = sent.filter((r) => r.method === "turn/start").length;
    await runCodexTurn(turnParams(env, path.join(dir, "other.jsonl"), "not recorded"));
    expect(records(file).filter((r) => r.dir === "sent" && r.method === "turn/start")).toHaveLength(turnStarts);
  });

  it("full keeps content", async () => {
    const dir = await testTempDir("ctm-trajectory-");
    const file = path.join(dir, "t.jsonl");
    const r = await runCodexTurn(turnParams(env, path.join(dir, "s.jsonl"), PROMPT, { trajectory: { file, full: true } }));
    expect(r.status).toBe("completed");
    const start = records(file).find((x) => x.dir === "sent" && x.method === "turn/start");
    expect(JSON.stringify(start?.params)).toContain("PROMPT-7731");
  });

  it("a malformed trajectory option is rejected before anything runs, naming it", async () => {
    const dir = await testTempDir("ctm-trajectory-");
    await expect(runCodexTurn(turnParams(env, path.join(dir, "s.jsonl"), "x", { trajectory: { path: "nope" } as never }))).rejects.toThrow(/trajectory/);
  });

  it("the CLI's --trajectory records the messages sent too", async () => {
    const dir = await testTempDir("ctm-trajectory-cli-");
    const file = path.join(dir, "t.jsonl");
    const r = await runCli(["run", PROMPT, "--session", path.join(dir, "s.jsonl"), "--offline", "--trajectory", file], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    const recs = records(file);
    expect(recs.filter((x) => x.dir === "sent").map((x) => x.method)).toEqual(expect.arrayContaining(["thread/start", "turn/start"]));
    expect(readFileSync(file, "utf8")).not.toContain("PROMPT-7731");
  }, 60_000);
});
