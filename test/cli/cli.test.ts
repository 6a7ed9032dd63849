/**
 * The `codex-turn` CLI, spawned through bin/codex-turn.js exactly as a user runs it, against the offline fake model.
 * CODEX_TURN_FROM_SOURCE=1 makes the bin run src/ (through tsx) even when a dist/ build exists, so the tests always
 * exercise the current sources, never a stale build.
 */
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, runCli } from "../helpers/cli.js";
import { readBindingLog } from "../../src/transcript/binding-log.js";

const root = repoRoot;

const cli = (args: string[], input?: string) => runCli(args, input !== undefined ? { input } : {});

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-cli-"));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("codex-turn CLI", () => {
  it("prints help for the program and every command", async () => {
    const main = await cli(["--help"]);
    expect(main.code).toBe(0);
    expect(main.stdout).toContain("Exit codes");
    const cmds = ["demo", "run", "chat", "compact", "inspect-session", "export", "viz"];
    const results = await Promise.all(cmds.map((cmd) => cli([cmd, "--help"])));
    for (const [i, r] of results.entries()) {
      expect(r.code, cmds[i]).toBe(0);
      expect(r.stdout, cmds[i]).toContain(`codex-turn ${cmds[i]}`);
    }
  }, 240_000);

  it("usage errors exit 2 with a message", async () => {
    const unknown = await cli(["bogus"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'bogus'");
    const missing = await cli(["run", "hi"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--session");
    const badFlag = await cli(["viz", "--nope"]);
    expect(badFlag.code).toBe(2);
  }, 60_000);

  it("demo --json runs the scripted session; inspect-session, viz and compact work on its output", async () => {
    const out = path.join(dir, "demo");
    const demo = await cli(["demo", "--json", "--out", out]);
    expect(demo.stderr).toBe("");
    expect(demo.code).toBe(0);
    const summary = JSON.parse(demo.stdout.trim().split("\n").pop()!) as {
      turns: number;
      statuses: string[];
      engineCalls: Record<string, number>;
      modelRequests: Array<{ kind: string; inputBytes: number }>;
      compaction: { ok: boolean; compacted: boolean };
      transcript: string;
      trace: string;
    };
    expect(summary.turns).toBe(5);
    expect(summary.statuses.every((s) => s === "completed")).toBe(true);
    expect(summary.engineCalls.assemble).toBe(5);
    expect(summary.engineCalls.compact).toBe(1);
    expect(summary.modelRequests.some((r) => r.kind === "compaction")).toBe(true);
    expect(summary.modelRequests.every((r) => r.inputBytes > 0)).toBe(true);
    expect(summary.compaction).toMatchObject({ ok: true, compacted: true });
    expect((await stat(summary.transcript)).size).toBeGreaterThan(0);
    expect((await readFile(summary.trace, "utf8")).length).toBeGreaterThan(0);

    const inspect = await cli(["inspect-session", summary.transcript, "--json"]);
    expect(inspect.code).toBe(0);
    const s = JSON.parse(inspect.stdout) as { messages: number; byRole: Record<string, number>; binding: { threadId: string } | null; content?: unknown };
    expect(s.byRole.user).toBeGreaterThanOrEqual(5); // the steer is mirrored as its own user message
    expect(s.byRole.toolResult).toBe(1);
    expect(s.binding?.threadId).toBeTruthy();
    expect(s.content).toBeUndefined();
    // No message content without --show-content.
    expect(inspect.stdout).not.toContain("demo clock says noon");

    const html = path.join(dir, "viz.html");
    const viz = await cli(["viz", "--trace", summary.trace, "--out", html]);
    expect(viz.code).toBe(0);
    expect(await readFile(html, "utf8")).toContain("<html");

    const compact = await cli(["compact", "--session", summary.transcript, "--offline", "--json"]);
    expect(compact.code).toBe(0);
    expect(JSON.parse(compact.stdout)).toMatchObject({ ok: true });

    // A turn an attempt left in flight (the binding's marker) is shown, without its prompt.
    const bindingFile = `${summary.transcript}.codex-binding.json`;
    // The binding sidecar is a log (whole records and patches, docs/storage.md): read it as the store does.
    const log = readBindingLog(await readFile(bindingFile, "utf8"));
    if (!log.ok) throw new Error(`binding log unreadable: ${log.reason}`);
    const binding = log.json as Record<string, unknown>;
    await writeFile(bindingFile, JSON.stringify({ ...binding, turnInFlight: { turnId: "turn-cut-7", prompt: "secret cut prompt" } }));
    const cut = await cli(["inspect-session", summary.transcript]);
    expect(cut.code).toBe(0);
    expect(cut.stdout).toContain("turn cut short: turn-cut-7");
    expect(cut.stdout).not.toContain("secret cut prompt");
    const cutJson = JSON.parse((await cli(["inspect-session", summary.transcript, "--json"])).stdout) as { binding: { turnInFlight: string | null } };
    expect(cutJson.binding.turnInFlight).toBe("turn-cut-7");
  }, 180_000);

  it("run --offline runs one turn and reports it as JSON", async () => {
    const session = path.join(dir, "run.jsonl");
    const r = await cli(["run", "hello there", "--session", session, "--offline", "--json"]);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { status: string; assistantText: string; trace: string[] };
    expect(out.status).toBe("completed");
    expect(out.assistantText).toBe("offline reply");
    expect(out.trace.at(-1)).toBe("completed");
    // The fields a script needs besides the reply.
    for (const key of ["warnings", "projection", "usage", "engine", "followUps"]) expect(out, key).toHaveProperty(key);
    // The run id the turn's hooks and log lines carried (a fresh UUID per run).
    expect((out as { runId?: string }).runId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-/);
  }, 90_000);

  it("a second run --offline on the session gets a fresh thread (its own temporary home) and the first turn by projection", async () => {
    const session = path.join(dir, "two-runs.jsonl");
    const requests = path.join(dir, "two-runs.requests.jsonl");
    const first = await cli(["run", "FIRST-RUN-PROMPT", "--session", session, "--offline", "--json"]);
    expect(first.code).toBe(0);
    const second = await cli(["run", "second prompt", "--session", session, "--offline", "--json", "--offline-requests", requests]);
    expect(second.code).toBe(0);
    const [a, b] = [first, second].map(
      (r) => JSON.parse(r.stdout) as { threadId: string; warnings: string[]; projection: { reason: string; entriesSent: number; native?: { injectedItems: number } } },
    );
    expect(b!.threadId).not.toBe(a!.threadId);
    expect(b!.warnings).toContain("the bound Codex thread could not be resumed; re-projected for a fresh thread");
    // auto is the native sync: the fresh thread gets the engine's view injected as native items, not as entries.
    expect(b!.projection).toMatchObject({ mode: "native", reason: "noBinding:resumeFailed", entriesSent: 0 });
    expect(b!.projection.native?.injectedItems).toBeGreaterThan(0);
    // What the model got in the second run carries the first run's prompt, through the projection.
    expect(await readFile(requests, "utf8")).toContain("FIRST-RUN-PROMPT");
  }, 120_000);

  it("run prints a rerouted model: a warning line, and modelRerouted in --json", async () => {
    const script = path.join(dir, "reroute.script.json");
    await writeFile(script, JSON.stringify([{ text: "answered", answeredBy: "gpt-5.2-fallback" }]));
    const args = ["run", "hello", "--session", path.join(dir, "reroute.jsonl"), "--offline", "--offline-script", script];
    const [json, text] = await Promise.all([cli([...args, "--json"]), cli(["run", "hello", "--session", path.join(dir, "reroute-text.jsonl"), "--offline", "--offline-script", script])]);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout.trim().split("\n").at(-1)!)).toMatchObject({ modelRerouted: { fromModel: "fake-model", toModel: "gpt-5.2-fallback", reason: "highRiskCyberActivity" } });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain("warning: codex answered with gpt-5.2-fallback instead of fake-model (highRiskCyberActivity)");
  }, 90_000);

  it("compact runs the host-level compaction: the engine's summary lands in the transcript as a pi compaction entry", async () => {
    const session = path.join(dir, "compact-entry.jsonl");
    const engine = path.join(root, "test", "cli", "fixtures", "summary-compact-engine.ts");
    expect((await cli(["run", "hello", "--session", session, "--offline", "--engine", engine, "--json"])).code).toBe(0);
    expect((await cli(["run", "and again", "--session", session, "--offline", "--engine", engine, "--json"])).code).toBe(0);
    const r = await cli(["compact", "--session", session, "--offline", "--engine", engine, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, compacted: true, primary: "engine" });
    const entries = (await readFile(session, "utf8")).trim().split("\n").map((l) => JSON.parse(l) as { type: string; id: string; summary?: string; firstKeptEntryId?: string });
    const compaction = entries.at(-1)!;
    expect(compaction).toMatchObject({ type: "compaction", summary: "Summary by the test engine: the user said hello." });
    expect(compaction.firstKeptEntryId).toBe(entries.filter((e) => e.type === "message").at(-1)!.id);
  }, 180_000);

  it("--engine with a module that is not a context engine exits 3 with a clear message", async () => {
    const bad = path.join(dir, "bad-engine.mjs");
    await writeFile(bad, "export default { nope: 1 };\n");
    const r = await cli(["run", "hi", "--session", path.join(dir, "bad.jsonl"), "--offline", "--engine", bad]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("not a context engine");
    const missing = await cli(["run", "hi", "--session", path.join(dir, "bad.jsonl"), "--offline", "--engine", path.join(dir, "missing.mjs")]);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toContain("PLUGIN_NOT_FOUND");
  }, 90_000);
});

describe("codex-turn chat and trajectories", () => {
  it("chat runs one turn per piped line and exits 0 at end of input", async () => {
    const r = await cli(["chat", "--session", path.join(dir, "chat.jsonl"), "--offline"], "first line\nsecond line\n");
    expect(r.code).toBe(0);
    expect(r.stdout.match(/offline reply/g)?.length).toBe(2);
    const inspect = await cli(["inspect-session", path.join(dir, "chat.jsonl"), "--json"]);
    expect((JSON.parse(inspect.stdout) as { byRole: Record<string, number> }).byRole.user).toBe(2);
  }, 90_000);

  it("chat shows each turn warning once, not again on every turn that repeats it", async () => {
    const engine = path.join(repoRoot, "test", "cli", "fixtures", "failing-assemble-engine.ts");
    const r = await cli(["chat", "--session", path.join(dir, "chat-warn.jsonl"), "--offline", "--engine", engine], "first line\nsecond line\n");
    expect(r.code).toBe(0);
    expect(r.stdout.match(/offline reply/g)?.length).toBe(2);
    expect(r.stdout.match(/^\(warning: .*index unavailable.*\)$/gm)).toHaveLength(1);
  }, 90_000);

  it("run --trajectory writes notifications and the turn request with content redacted", async () => {
    const traj = path.join(dir, "traj.jsonl");
    const r = await cli(["run", "ZEBRA-PROMPT-77", "--session", path.join(dir, "traj-session.jsonl"), "--offline", "--trajectory", traj]);
    expect(r.code).toBe(0);
    const text = await readFile(traj, "utf8");
    const methods = text.trim().split("\n").map((l) => (JSON.parse(l) as { method: string }).method);
    expect(methods).toContain("codexTurn/run");
    expect(methods).toContain("turn/completed");
    expect(text).not.toContain("ZEBRA-PROMPT-77");
    expect(text).not.toContain("offline reply");
  }, 90_000);
});
