import { existsSync } from "node:fs";
import path from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { CodexAppServer, codexHomeTempBase } from "../../src/codex/app-server.js";
import { INHERITED_ENV_VARS } from "../../src/codex/child-env.js";
import { CodexAppServerError } from "../../src/codex/errors.js";
import { processExists, waitFor } from "./helpers.js";

const FAKE = path.join(import.meta.dirname, "fixtures", "fake-app-server.mjs");
const servers: CodexAppServer[] = [];

async function spawnFake(mode: string, extra: Parameters<typeof CodexAppServer.spawn>[0] = {}): Promise<CodexAppServer> {
  const s = await CodexAppServer.spawn({ codexBin: FAKE, temporaryHome: true, ...extra, env: { FAKE_APP_SERVER_MODE: mode, ...(extra.env ?? {}) } });
  servers.push(s);
  return s;
}

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

describe("CodexAppServer against a scripted fake app-server process", () => {
  it("survives garbage, counts it, routes tool calls and declines approvals by default", async () => {
    const logLines: string[] = [];
    const logger = pino({ level: "debug" }, { write: (s: string) => void logLines.push(s) });
    const server = await spawnFake("normal", { maxLineBytes: 2048, logger });
    const { threadId } = await server.startThread({
      dynamicTools: [
        { name: "echo", description: "echo", inputSchema: { type: "object" }, handler: (args) => `echo:${JSON.stringify(args)}` },
        {
          name: "explode",
          description: "fails",
          inputSchema: { type: "object" },
          handler: async () => {
            throw new Error("kaboom");
          },
        },
      ],
    });
    const turn = await server.startTurn({ threadId, text: "hello fake" });
    const record = await turn.completion;
    expect(record.codexStatus).toBe("completed");
    const replies = JSON.parse(record.assistantText) as Record<string, unknown>;
    expect(replies.unknownTool).toEqual({ contentItems: [{ type: "inputText", text: "unknown tool: not_registered" }], success: false });
    expect(replies.knownTool).toEqual({ contentItems: [{ type: "inputText", text: 'echo:{"say":"hi"}' }], success: true });
    expect(replies.throwingTool).toEqual({ contentItems: [{ type: "inputText", text: "tool failed: kaboom" }], success: false });
    // Never allowed without a handler.
    expect(replies.commandApproval).toEqual({ decision: "decline" });
    expect(replies.fileApproval).toEqual({ decision: "decline" });
    expect(replies.execApproval).toEqual({ decision: { denied: { rejection: expect.any(String) } } });
    expect(replies.permissions).toEqual({ permissions: {}, scope: "turn" });
    expect(replies.userInput).toMatchObject({ error: { code: -32601 } });

    const stats = server.stats();
    expect(stats.malformedLines).toBe(1);
    expect(stats.unknownNotifications).toBe(1);
    expect(stats.invalidNotifications).toBe(1);
    expect(stats.oversizedLines).toBe(1);
    expect(stats.toolCalls).toBe(3);
    expect(stats.approvalsDeclined).toBe(4);
    expect(stats.unsupportedServerRequests).toBe(1);
    const log = logLines.join("");
    expect(log).toContain("future/unknownMethod");
    expect(log).not.toContain("SECRET");
    expect(log).not.toContain("hello fake");
  });

  it("lets a registered approval handler decide", async () => {
    const seen: string[] = [];
    const server = await spawnFake("normal", {
      approvalHandler: ({ method }) => {
        seen.push(method);
        return method === "item/fileChange/requestApproval" ? { decision: "accept" } : undefined;
      },
    });
    const { threadId } = await server.startThread();
    const record = await (await server.startTurn({ threadId, text: "x" })).completion;
    const replies = JSON.parse(record.assistantText) as Record<string, unknown>;
    expect(replies.fileApproval).toEqual({ decision: "accept" });
    expect(replies.commandApproval).toEqual({ decision: "decline" });
    expect(seen).toContain("item/commandExecution/requestApproval");
  });

  it("spawns with a minimal environment, -c overrides and its own CODEX_HOME, removed on close", async () => {
    process.env.CTM_TEST_SHOULD_NOT_LEAK = "leak";
    try {
      const server = await spawnFake("normal", {
        config: { model: "m", features: { plugins: false } },
        env: { FAKE_RESPONSES_API_KEY: "sk-fake-local" },
      });
      const info = (await server.request("test/introspect" as never, {} as never)) as {
        argv: string[];
        envKeys: string[];
        rustLog: string;
      };
      // Then the command environment policy: every variable of Codex's own environment but PATH, HOME, proxies and
      // certificates is kept out of the commands it runs for the model.
      const excluded = ["CODEX_HOME", "FAKE_APP_SERVER_MODE", "FAKE_RESPONSES_API_KEY", "RUST_LOG"].flatMap((n) => ["-c", `shell_environment_policy.filters.${n}="exclude"`]);
      expect(info.argv).toEqual(["app-server", "-c", 'model="m"', "-c", "features.plugins=false", ...excluded]);
      expect(info.envKeys).not.toContain("CTM_TEST_SHOULD_NOT_LEAK");
      expect(info.envKeys).toEqual(expect.arrayContaining(["CODEX_HOME", "FAKE_RESPONSES_API_KEY", "FAKE_APP_SERVER_MODE", "RUST_LOG"]));
      const allowed = [...INHERITED_ENV_VARS, "CODEX_HOME", "RUST_LOG", "FAKE_RESPONSES_API_KEY", "FAKE_APP_SERVER_MODE"];
      expect(info.envKeys.filter((k) => !allowed.includes(k))).toEqual([]);
      expect(info.rustLog).toBe("warn");
      const home = server.codexHome;
      expect(existsSync(home)).toBe(true);
      expect(path.dirname(home)).toBe(codexHomeTempBase());
      await server.close();
      expect(existsSync(home)).toBe(false);
    } finally {
      delete process.env.CTM_TEST_SHOULD_NOT_LEAK;
    }
  });

  it("reports a process that dies during startup as INITIALIZE_FAILED with its stderr", async () => {
    const err = (await spawnFake("exit-immediately").catch((e: unknown) => e)) as CodexAppServerError;
    expect(err).toBeInstanceOf(CodexAppServerError);
    expect(err.code).toBe("INITIALIZE_FAILED");
    expect(err.stderrTail).toContain("refuses to start");
  });

  it("reports a missing binary as SPAWN_FAILED", async () => {
    const err = (await CodexAppServer.spawn({ codexBin: "/nonexistent/codex-binary" }).catch((e: unknown) => e)) as CodexAppServerError;
    expect(err).toBeInstanceOf(CodexAppServerError);
    expect(err.code).toBe("SPAWN_FAILED");
  });

  it("restarts after a crash on the next call and trips the crash-loop guard", async () => {
    const server = await spawnFake("exit-after-init", { maxRestarts: 2, restartWindowMs: 60_000 });
    const firstPid = server.pid!;
    await waitFor(() => !server.alive, 5_000, "the first crash");
    expect(processExists(firstPid)).toBe(false);
    // Each call restarts (the fake dies again right after initialize).
    await server.ensureAlive();
    await waitFor(() => !server.alive, 5_000, "the second crash");
    await server.ensureAlive();
    await waitFor(() => !server.alive, 5_000, "the third crash");
    const err = (await server.startThread().catch((e: unknown) => e)) as CodexAppServerError;
    expect(err).toBeInstanceOf(CodexAppServerError);
    expect(err.code).toBe("CRASH_LOOP");
    expect(server.stats()).toMatchObject({ restarts: 2, processes: 3 });
  });

  it("does not restart when autoRestart is off, and refuses calls after close", async () => {
    const server = await spawnFake("exit-after-init", { autoRestart: false });
    await waitFor(() => !server.alive, 5_000, "the crash");
    await expect(server.startThread()).rejects.toMatchObject({ code: "PROCESS_EXITED" });
    await server.close();
    await expect(server.startThread()).rejects.toMatchObject({ code: "CLOSED" });
  });

  it("validates options with typed errors naming the field", async () => {
    await expect(CodexAppServer.spawn({ requestTimeoutMs: -1 })).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: expect.stringContaining("requestTimeoutMs"),
    });
    await expect(CodexAppServer.spawn({ releaseIdleThreadsAfterMs: -5 })).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: expect.stringContaining("releaseIdleThreadsAfterMs"),
    });
    await expect(CodexAppServer.spawn({ maxLoadedThreads: 1.5 })).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining("maxLoadedThreads") });
    await expect(CodexAppServer.spawn({ maxRememberedThreads: -1 })).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining("maxRememberedThreads") });
    const server = await spawnFake("normal");
    await expect(server.startTurn({ threadId: "t", text: "" })).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining("text") });
    await expect(
      server.startThread({ dynamicTools: [{ name: "bad name!", description: "", inputSchema: {}, handler: () => "" }] }),
    ).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining("dynamicTools.0.name") });
    // Codex itself would take any cwd; the turn's commands would then all fail.
    await expect(server.startThread({ cwd: "relative/dir" })).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining("cwd") });
    await expect(server.resumeThread({ threadId: "t", cwd: "/nonexistent/codex-turn-cwd" })).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: expect.stringContaining("/nonexistent/codex-turn-cwd does not exist"),
    });
    await expect(
      server.startTurn({ threadId: "t", text: "x", additionalContext: { k: { kind: "application", value: "v", name: "n" } } }),
    ).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
  });

  it("keeps Codex's setup warnings once each (config, deprecation, a warning naming no thread), logs them without details", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(l) });
    const heard: string[] = [];
    const s = await spawnFake("setup-warnings", { logger, onConfigWarning: (w) => heard.push(w.summary) });
    await waitFor(() => s.configWarnings.length >= 3);
    await new Promise((r) => setTimeout(r, 100));
    expect(s.configWarnings).toEqual([
      {
        kind: "config",
        summary: "Invalid configuration; using defaults.",
        details: "config.toml:2:6: key with no value",
        path: "/h/config.toml",
        range: { start: { line: 2, column: 6 }, end: { line: 2, column: 7 } },
      },
      { kind: "deprecation", summary: "`foo` is deprecated", details: "use `bar`" },
      { kind: "process", summary: "Exceeded skills context budget of 2%." },
    ]);
    expect(heard).toEqual(["Invalid configuration; using defaults.", "`foo` is deprecated", "Exceeded skills context budget of 2%."]);
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.event === "codex.configWarning");
    expect(logged.map((e) => [e.kind, e.summary, e.path ?? null, e.line ?? null])).toEqual([
      ["config", "Invalid configuration; using defaults.", "/h/config.toml", 2],
      ["deprecation", "`foo` is deprecated", null, null],
      ["process", "Exceeded skills context budget of 2%.", null, null],
    ]);
    expect(lines.join("\n")).not.toContain("key with no value");
  });
});
