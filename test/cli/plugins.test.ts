/**
 * OpenClaw plugins through the CLI (issue 17): `run --offline --engine` with a plugin directory that exports the full
 * plugin object, with an installed package (by name, resolved from the working directory) that exports `register`
 * alone, and plugins that cannot be loaded (a bad manifest, an unmet host requirement): exit 3 with one line.
 */
import { existsSync } from "node:fs";
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, runCli } from "../helpers/cli.js";

const root = repoRoot;
const fixture = (name: string) => path.join(root, "test", "fixtures", "openclaw-plugins", name);

const cli = (args: string[], cwd: string) => runCli(args, { cwd, timeoutMs: 180_000 });

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-cli-plugins-"));
  // An installed plugin package, found by name from this working directory.
  await mkdir(path.join(dir, "node_modules"), { recursive: true });
  await cp(fixture("register-only"), path.join(dir, "node_modules", "ctm-register-only-plugin"), { recursive: true });
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("codex-turn with OpenClaw plugins", () => {
  it("runs a turn with a plugin directory (full plugin object) and with an installed package by name (register alone)", async () => {
    const [byPath, byName] = await Promise.all([
      cli(["run", "hello plugin", "--session", path.join(dir, "a.jsonl"), "--offline", "--engine", fixture("summarizer"), "--budget", "1200", "--json"], dir),
      cli(["run", "hello package", "--session", path.join(dir, "b.jsonl"), "--offline", "--engine", "ctm-register-only-plugin", "--json"], dir),
    ]);
    for (const r of [byPath, byName]) {
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!)).toMatchObject({ status: "completed" });
    }
  }, 240_000);

  it("compact --engine hands the plugin's compact() the plugin host's runtime context and the transcript rewrite helper", async () => {
    const session = path.join(dir, "compact.jsonl");
    const run = await cli(["run", "a first turn", "--session", session, "--offline", "--engine", fixture("summarizer"), "--json"], dir);
    expect(run.code, run.stderr).toBe(0);
    const r = await cli(["compact", "--session", session, "--offline", "--engine", fixture("summarizer"), "--json"], dir);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { primary: string; result: { details: { runtimeContext: unknown } } };
    expect(out.primary).toBe("engine");
    expect(out.result.details.runtimeContext).toEqual({ provider: "codex", hasLlm: true, hasRewrite: true });
  }, 240_000);

  it("with --native-tool-hooks a plugin blocks Codex's own shell command and gets its final-answer revision; without, neither", async () => {
    for (const guarded of [true, false]) {
      const ws = await mkdtemp(path.join(dir, `guard-${guarded}-`));
      const script = path.join(ws, "script.json");
      const exec = (file: string) => ({ functionCall: { name: "exec_command", arguments: { cmd: `echo x > ${file}`, workdir: ws } } });
      await writeFile(script, JSON.stringify([exec("allowed.txt"), exec("forbidden.txt"), { text: "done" }, { text: "done. Summary: one file written" }]));
      const args = ["run", "write both", "--session", path.join(ws, "s.jsonl"), "--offline", "--offline-script", script, "--engine", fixture("tool-guard")];
      const r = await runCli([...args, "--cwd", ws, "--sandbox", "workspace-write", ...(guarded ? ["--native-tool-hooks"] : []), "--json"], { cwd: dir, env: { HOME: ws } });
      expect(r.code, r.stderr).toBe(0);
      const expected = guarded ? "done. Summary: one file written" : "done";
      expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!)).toMatchObject({ status: "completed", assistantText: expected });
      expect(existsSync(path.join(ws, "allowed.txt"))).toBe(true);
      expect(existsSync(path.join(ws, "forbidden.txt"))).toBe(!guarded);
    }
  }, 240_000);

  it("--plugin loads a memory plugin beside the engine (--plugins-config by id): turn 1's memory is recalled into turn 2", async () => {
    const ws = await mkdtemp(path.join(dir, "memory-"));
    const db = path.join(ws, "memories.json");
    const configs = path.join(ws, "plugins.json");
    await writeFile(configs, JSON.stringify({ "recall-memory": { dbPath: db }, summarizer: { tokenBudget: 50_000 } }));
    const session = path.join(ws, "s.jsonl");
    const trajectory = path.join(ws, "t.jsonl");
    const base = ["--session", session, "--offline", "--engine", fixture("summarizer"), "--plugin", fixture("recall-memory"), "--plugins-config", configs, "--json"];
    const first = await cli(["run", "Remember that I prefer tabs over spaces.", ...base], ws);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(await readFile(db, "utf8")).memories.map((m: { text: string }) => m.text)).toEqual(["Remember that I prefer tabs over spaces."]);
    // The new session file's first turn announced the session to the plugins (session_start), once.
    expect(JSON.parse(await readFile(db, "utf8")).sessions).toHaveLength(1);
    const second = await cli(["run", "Do I prefer tabs or spaces?", ...base, "--trajectory", trajectory, "--trajectory-full"], ws);
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(await readFile(db, "utf8")).sessions).toHaveLength(1);
    // The prompt Codex was given (its user message item) carries the recalled memory ahead of the question.
    expect(await readFile(trajectory, "utf8")).toContain("1. [preference] Remember that I prefer tabs over spaces.\\n</relevant-memories>\\n\\nDo I prefer tabs or spaces?");
    // A memory plugin alone: the default engine runs the turn, with the plugin's hooks and tools.
    const aloneConfig = path.join(ws, "alone.json");
    const aloneArgs = ["run", "Remember that my editor is vim.", "--session", path.join(ws, "alone.jsonl"), "--offline", "--plugin", fixture("recall-memory"), "--plugins-config", aloneConfig, "--json"];
    const missing = await cli(aloneArgs, ws);
    expect(missing.code).toBe(3);
    expect(missing.stdout + missing.stderr).toContain(`--plugins-config ${aloneConfig}: cannot read`);
    await writeFile(aloneConfig, JSON.stringify({ "recall-memory": { dbPath: db } }));
    const ok = await cli(aloneArgs, ws);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(await readFile(db, "utf8")).memories).toHaveLength(2);
    // A configuration for a plugin that is not loaded is refused in one line (a misspelt id would leave one unconfigured).
    const stray = await cli(["run", "never runs", "--session", path.join(ws, "stray.jsonl"), "--offline", "--plugin", fixture("recall-memory"), "--plugins-config", configs], ws);
    expect(stray.code).toBe(3);
    expect(stray.stderr.trim()).toMatch(/^codex-turn: --plugin \S+recall-memory \(CONFIG_INVALID\): plugin \S+: pluginConfigs names no loaded plugin: summarizer \(loaded: recall-memory\)$/);
  }, 240_000);

  it("a gate plugin (before_agent_run) refuses a turn: run prints the refusal and exits 4, chat shows it and goes on", async () => {
    const ws = await mkdtemp(path.join(dir, "gate-"));
    const configs = path.join(ws, "plugins.json");
    await writeFile(configs, JSON.stringify({ "input-gate": { logPath: path.join(ws, "gate.jsonl") } }));
    const session = path.join(ws, "s.jsonl");
    const base = ["--session", session, "--offline", "--plugin", fixture("input-gate"), "--plugins-config", configs];
    const refused = await cli(["run", "What is the admin secret?", ...base], ws);
    expect(refused.code, refused.stderr).toBe(4);
    expect(refused.stdout.trim().split("\n")[0]).toBe("Your message could not be sent: requests for secrets are not allowed (blocked by input-gate)");
    expect(refused.stdout).toContain("status: blocked");
    const json = await cli(["run", "Another secret, please.", ...base, "--json"], ws);
    expect(json.code).toBe(4);
    const record = JSON.parse(json.stdout.trim().split("\n").at(-1)!) as { trace: string[] };
    expect(record).toMatchObject({
      status: "blocked",
      blocked: { blockedBy: "input-gate", message: "Your message could not be sent: requests for secrets are not allowed (blocked by input-gate)" },
    });
    expect(record.trace.slice(-2)).toEqual(["hooks", "blocked"]);
    const passed = await cli(["run", "Say hello.", ...base], ws);
    expect(passed.code, passed.stderr).toBe(0);
    expect(passed.stdout).toContain("offline reply");
    // The session holds the two refusals (never the refused prompts) and the admitted turn.
    const transcript = await readFile(session, "utf8");
    expect(transcript).not.toContain("admin secret");
    expect(transcript.match(/blocked by input-gate/g)).toHaveLength(2);
    const chat = await runCli(["chat", ...base], { cwd: ws, timeoutMs: 180_000, input: "Tell me a secret.\nSay hi.\n" });
    expect(chat.code, chat.stderr).toBe(0);
    expect(chat.stdout).toContain("Your message could not be sent: requests for secrets are not allowed (blocked by input-gate)");
    expect(chat.stdout).toContain("(turn blocked by input-gate)");
    expect(chat.stdout).toContain("offline reply");
  }, 240_000);

  it("/new and /reset start a fresh session on the same file: before_reset, archive, session_end, session_start (chat and run)", async () => {
    const ws = await mkdtemp(path.join(dir, "reset-"));
    const log = path.join(ws, "gate.jsonl");
    const configs = path.join(ws, "plugins.json");
    await writeFile(configs, JSON.stringify({ "input-gate": { logPath: log } }));
    const session = path.join(ws, "s.jsonl");
    const base = ["--session", session, "--offline", "--plugin", fixture("input-gate"), "--plugins-config", configs, "--session-key", "agent:main:s"];
    const chat = await runCli(["chat", ...base], { cwd: ws, timeoutMs: 180_000, input: "Say hello.\n/reset Say hi again.\n" });
    expect(chat.code, chat.stderr).toBe(0);
    expect(chat.stdout).toContain(`(new session; the previous transcript is at ${session}.archived-1.jsonl)`);
    // The first turn went with the archived transcript; the fresh one holds only what came after the reset.
    expect(await readFile(`${session}.archived-1.jsonl`, "utf8")).toContain("Say hello.");
    const fresh = await readFile(session, "utf8");
    expect(fresh).toContain("Say hi again.");
    expect(fresh).not.toContain("Say hello.");
    const events = (await readFile(log, "utf8")).trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => ["before_reset", "session_end", "session_start"].includes(String(e.hook)));
    // The fresh session has a new id, as OpenClaw gives one; the fresh transcript's header names it.
    const nextId = (JSON.parse(fresh.split("\n")[0]!) as { id: string }).id;
    expect(nextId).toMatch(/^s-[0-9a-f-]{36}$/);
    expect(events).toEqual([
      { hook: "session_start", sessionId: "s", sessionKey: "agent:main:s" },
      { hook: "before_reset", reason: "reset", messages: 2, sessionFile: session, sessionId: "s", sessionKey: "agent:main:s" },
      { hook: "session_end", reason: "reset", sessionId: "s", messageCount: 2, sessionFile: `${session}.archived-1.jsonl`, transcriptArchived: true, nextSessionId: nextId },
      { hook: "session_start", sessionId: nextId, sessionKey: "agent:main:s" },
    ]);
    // run "/new": the reset alone, no turn (exit 0); the session file is archived again, and a fresh transcript holds
    // only the header with the next id, which the next run picks up.
    const run = await cli(["run", "/new", ...base], ws);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(`(new session; the previous transcript is at ${session}.archived-2.jsonl)`);
    const header = (await readFile(session, "utf8")).trim().split("\n");
    expect(header).toHaveLength(1);
    const third = (JSON.parse(header[0]!) as { type: string; id: string });
    expect(third.type).toBe("session");
    expect(third.id).toMatch(/^s-[0-9a-f-]{36}$/);
    expect(third.id).not.toBe(nextId);
    const after = await cli(["run", "Hello again.", ...base], ws);
    expect(after.code, after.stderr).toBe(0);
    const lastStart = (await readFile(log, "utf8")).trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.hook === "session_start").at(-1);
    expect(lastStart).toMatchObject({ sessionId: third.id });
  }, 240_000);

  it("--openclaw-config configures the loaded plugins from an OpenClaw config: entries' config and hook policy", async () => {
    const ws = await mkdtemp(path.join(dir, "openclaw-config-"));
    const db = path.join(ws, "memories.json");
    const config = path.join(ws, "openclaw.json");
    // Written as users write openclaw.json: JSON5 with comments, an $include, a path from the environment.
    await writeFile(path.join(ws, "memory.json5"), `{ config: { dbPath: "\${CTM_MEMORY_DB}" }, hooks: { allowConversationAccess: false, }, }`);
    await writeFile(
      config,
      `// OpenClaw config\n{\n  plugins: {\n    entries: { 'recall-memory': { $include: "./memory.json5" } },\n    slots: { contextEngine: "legacy" }, // no engine\n  },\n}\n`,
    );
    const args = ["run", "Remember that I prefer tabs.", "--session", path.join(ws, "s.jsonl"), "--offline", "--plugin", fixture("recall-memory"), "--openclaw-config", config, "--json"];
    const unset = await runCli(args, { cwd: ws, timeoutMs: 180_000, env: { CTM_MEMORY_DB: "" } });
    expect(unset.code).toBe(3);
    expect(unset.stdout).toContain("--openclaw-config plugins.entries.recall-memory.config.dbPath: environment variable CTM_MEMORY_DB is not set");
    const r = await runCli(args, { cwd: ws, timeoutMs: 180_000, env: { CTM_MEMORY_DB: db } });
    expect(r.code, r.stderr).toBe(0);
    // Its agent_end (conversation access) was refused: nothing captured; session_start still ran.
    const store = JSON.parse(await readFile(db, "utf8")) as { memories: unknown[]; sessions: string[] };
    expect(store).toEqual({ next: 1, memories: [], sessions: ["s"] });
  }, 240_000);

  it("a plugin command is answered by the plugin without a turn, in run and between chat turns; continueAgent runs the turn too", async () => {
    const ws = await mkdtemp(path.join(dir, "commands-"));
    const session = path.join(ws, "s.jsonl");
    const base = ["--session", session, "--offline", "--engine", fixture("summarizer"), "--session-key", "main"];
    const status = await cli(["run", "/summary", ...base, "--json"], ws);
    expect(status.code, status.stderr).toBe(0);
    const sessionId = path.basename(session, ".jsonl");
    expect(status.stdout.trim().split("\n").map((l) => JSON.parse(l))).toEqual([
      { command: "summary", text: `summaries=0 session=${sessionId} key=main channel=cli owner=true args= llm=true`, media: [], isError: false, continueAgent: false },
    ]);
    expect(existsSync(session)).toBe(false); // no turn ran
    const failed = await cli(["run", "/summary fail", ...base], ws);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toContain("(command /summary failed: summary store unavailable)");
    const both = await cli(["run", "/summary then ask", ...base, "--json"], ws);
    expect(both.code, both.stderr).toBe(0);
    const lines = both.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => l.command ?? l.status)).toEqual(["summary", "completed"]);
    // chat: a command line between two prompts is answered in order; typed during no turn, it never reaches the model.
    const chat = await runCli(["chat", ...base, "--json"], { cwd: ws, input: "first prompt\n/summary now\nsecond prompt\n" });
    expect(chat.code, chat.stderr).toBe(0);
    const records = chat.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(records.map((r) => r.command ?? r.status)).toEqual(["completed", "summary", "completed"]);
    expect(records[1]!.text).toBe(`summaries=0 session=${sessionId} key=main channel=cli owner=true args=now llm=true`);
  }, 240_000);

  it("Codex's approval requests go to the plugins' before_tool_call first (no relay needed): a block declines, a plugin approval is not asked twice", async () => {
    const ws = await mkdtemp(path.join(dir, "approval-policy-"));
    const script = path.join(ws, "script.json");
    const exec = (file: string) => ({ functionCall: { name: "exec_command", arguments: { cmd: `echo x > ${file}`, workdir: ws } } });
    await writeFile(script, JSON.stringify([exec("guarded.txt"), exec("forbidden.txt"), exec("allowed.txt"), { text: "done. Summary: tried three" }]));
    const args = ["run", "write three", "--session", path.join(ws, "s.jsonl"), "--offline", "--offline-script", script, "--engine", fixture("tool-guard")];
    // Every approval is approved by the CLI's answer; the plugin's policy comes first.
    const r = await runCli([...args, "--cwd", ws, "--sandbox", "workspace-write", "--approval-policy", "untrusted", "--approve", "approve"], { cwd: dir, env: { HOME: ws } });
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(path.join(ws, "forbidden.txt"))).toBe(false);
    expect(existsSync(path.join(ws, "guarded.txt"))).toBe(true);
    expect(existsSync(path.join(ws, "allowed.txt"))).toBe(true);
    const lines = r.stdout.split("\n");
    // The plugin's own approval question, once; Codex's approval of that command is granted by it, not asked again.
    expect(lines.filter((l) => l.startsWith("codex-turn: plugin tool-guard asks approval for exec"))).toHaveLength(1);
    const asked = lines.filter((l) => l.startsWith("codex-turn: approval commandExecution"));
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("allowed.txt");
  }, 240_000);

  it("a plugin's requireApproval for Codex's own command is put to --approve: deny blocks it, approve lets it run", async () => {
    for (const approve of ["deny", "approve"] as const) {
      const ws = await mkdtemp(path.join(dir, `approval-${approve}-`));
      const script = path.join(ws, "script.json");
      await writeFile(script, JSON.stringify([{ functionCall: { name: "exec_command", arguments: { cmd: "echo x > guarded.txt", workdir: ws } } }, { text: "done. Summary: tried" }]));
      const args = ["run", "write it", "--session", path.join(ws, "s.jsonl"), "--offline", "--offline-script", script, "--engine", fixture("tool-guard")];
      const r = await runCli([...args, "--cwd", ws, "--sandbox", "workspace-write", "--native-tool-hooks", "--approve", approve], { cwd: dir, env: { HOME: ws } });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`codex-turn: plugin tool-guard asks approval for exec: Write a guarded file (the command writes a file the guard protects) -> ${approve === "deny" ? "deny" : "allow-once"}`);
      expect(existsSync(path.join(ws, "guarded.txt"))).toBe(approve === "approve");
    }
  }, 240_000);

  it("a bad manifest and an unmet host requirement exit 3 with a one-line error", async () => {
    const results = await Promise.all(
      ["bad-manifest", "unmet-requirement"].map((name) =>
        cli(["run", "never runs", "--session", path.join(dir, `${name}.jsonl`), "--offline", "--engine", fixture(name)], dir),
      ),
    );
    for (const r of results) {
      expect(r.code).toBe(3);
      const lines = r.stderr.trim().split("\n").filter((l) => l.trim().length > 0);
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).not.toMatch(/^\s+at /);
    }
  }, 240_000);
});
