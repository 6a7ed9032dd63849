import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { CodexAppServer } from "../../src/codex/app-server.js";
import { CodexAppServerError } from "../../src/codex/errors.js";
import { MAX_TIMER_MS } from "../../src/codex/timeouts.js";

const FAKE = path.join(import.meta.dirname, "fixtures", "fake-app-server.mjs");
const servers: CodexAppServer[] = [];

async function quietFake(): Promise<CodexAppServer> {
  const s = await CodexAppServer.spawn({ codexBin: FAKE, temporaryHome: true, env: { FAKE_APP_SERVER_MODE: "quiet-turn" } });
  servers.push(s);
  return s;
}

async function lastParams(server: CodexAppServer): Promise<Record<string, Record<string, unknown>>> {
  return (await server.request("test/lastParams" as never, {} as never)) as Record<string, Record<string, unknown>>;
}

async function rejection(p: Promise<unknown>): Promise<CodexAppServerError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CodexAppServerError);
  return err as CodexAppServerError;
}

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A working directory only sent on the wire (the scripted app-server never touches it). */
// A real directory: a thread's cwd must exist (the client refuses one that does not).
const WORKSPACE = mkdtempSync(path.join(os.tmpdir(), "ctm-thread-options-space-"));
afterAll(() => rmSync(WORKSPACE, { recursive: true, force: true }));

describe("thread options on the wire (scripted fake app-server)", () => {
  it("maps sandbox, writable roots, network, approvals, reasoning and service tier; personality is off", async () => {
    const server = await quietFake();
    const settings = {
      cwd: WORKSPACE,
      sandbox: "workspace-write" as const,
      writableRoots: ["/data/out"],
      networkAccess: true,
      approvalPolicy: "on-request" as const,
      reasoningEffort: "high",
      reasoningSummary: "concise" as const,
      serviceTier: "flex",
      config: { model_verbosity: "low" },
    };
    const { threadId } = await server.startThread(settings);
    const start = (await lastParams(server))["thread/start"]!;
    expect(start).toMatchObject({
      cwd: WORKSPACE,
      sandbox: "workspace-write",
      approvalPolicy: "on-request",
      serviceTier: "flex",
      personality: "none",
      config: {
        model_verbosity: "low",
        model_reasoning_effort: "high",
        model_reasoning_summary: "concise",
        sandbox_workspace_write: { writable_roots: ["/data/out"], network_access: true },
      },
    });
    // The sandbox details the mode cannot carry also go with each turn/start.
    await (await server.startTurn({ threadId, text: "go" })).completion;
    expect((await lastParams(server))["turn/start"]!.sandboxPolicy).toEqual({
      type: "workspaceWrite",
      writableRoots: ["/data/out"],
      networkAccess: true,
      excludeTmpdirEnvVar: false,
      excludeSlashTmp: false,
    });
    // Every real resume re-sends all of it.
    await server.resumeThread({ threadId, ...settings });
    const resume = (await lastParams(server))["thread/resume"]!;
    expect(resume).toMatchObject({ threadId, excludeTurns: true, personality: "none", sandbox: "workspace-write", approvalPolicy: "on-request" });
    expect(resume.config).toEqual(start.config);
  });

  it("defaults to read-only and approvals never, and sends no turn sandbox policy then", async () => {
    const server = await quietFake();
    const { threadId } = await server.startThread();
    const start = (await lastParams(server))["thread/start"]!;
    expect(start).toMatchObject({ sandbox: "read-only", approvalPolicy: "never", personality: "none" });
    expect(start.config).toBeUndefined();
    await (await server.startTurn({ threadId, text: "go" })).completion;
    expect((await lastParams(server))["turn/start"]!).not.toHaveProperty("sandboxPolicy");
  });

  it("names the bad field: values, unknown keys, combinations, duplicate tools", async () => {
    const server = await quietFake();
    const field = async (p: Promise<unknown>) => (await rejection(p)).field;
    expect(await field(server.startThread({ sandbox: "full" as never }))).toBe("sandbox");
    expect(await field(server.startThread({ sandboxx: "read-only" } as never))).toBe("sandboxx");
    expect(await field(server.startThread({ approvalPolicy: "sometimes" as never }))).toBe("approvalPolicy");
    expect(await field(server.startThread({ writableRoots: ["/x"] }))).toBe("writableRoots");
    expect(await field(server.startThread({ sandbox: "workspace-write", writableRoots: ["relative/dir"] }))).toBe("writableRoots.0");
    expect(await field(server.startThread({ sandbox: "danger-full-access", networkAccess: true }))).toBe("networkAccess");
    expect(await field(server.startThread({ reasoningSummary: "long" as never }))).toBe("reasoningSummary");
    expect(await field(server.resumeThread({ threadId: "t", reasoningEffort: "HIGH" }))).toBe("reasoningEffort");
    const tool = { name: "t", description: "", inputSchema: {}, handler: () => "" };
    expect(await field(server.startThread({ dynamicTools: [tool, tool] }))).toBe("dynamicTools.1.name");
  });

  it("rejects timeouts Node timers cannot hold (>= 2^31 ms), naming the option", async () => {
    const spawnErr = await rejection(CodexAppServer.spawn({ codexBin: FAKE, temporaryHome: true, turnIdleTimeoutMs: MAX_TIMER_MS + 1 }));
    expect(spawnErr).toMatchObject({ code: "INVALID_ARGUMENT", field: "turnIdleTimeoutMs" });
    const server = await quietFake();
    for (const key of ["toolCallTimeoutMs", "approvalTimeoutMs", "retryWithoutProgressMs", "idleTimeoutMs", "userInputTimeoutMs", "toolInterceptorTimeoutMs"]) {
      const err = await rejection(server.startTurn({ threadId: "t", text: "x", [key]: 2 ** 31 }));
      expect(err.field).toBe(key);
    }
    const compactErr = await rejection(server.compactThread({ threadId: "t", timeoutMs: 2 ** 31 }));
    expect(compactErr.field).toBe("timeoutMs");
    // The largest valid value is accepted.
    const { threadId } = await server.startThread();
    await expect((await server.startTurn({ threadId, text: "x", toolCallTimeoutMs: MAX_TIMER_MS })).completion).resolves.toMatchObject({ codexStatus: "completed" });
  });

  it("rejects temporaryHome together with codexHome", async () => {
    const err = await rejection(CodexAppServer.spawn({ codexBin: FAKE, codexHome: "/nonexistent", temporaryHome: true }));
    expect(err.field).toBe("temporaryHome");
  });
});
