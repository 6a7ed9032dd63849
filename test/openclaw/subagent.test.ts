/**
 * `runtime.subagent` (src/openclaw/subagent.ts): OpenClaw's delegated runs as Codex turns on child sessions. The
 * delegator fixture delegates the way lossless-claw's `lcm_expand_query` does; the real `codex app-server` runs both
 * the parent turn and the child turn against the fake Responses API.
 */
import { readdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Logger } from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadContextEngine, type LoadedContextEngine } from "../../src/openclaw/index.js";
import { createCodexLlm, DEFAULT_LLM_POLICY } from "../../src/openclaw/llm.js";
import { childSessionFileName, createSubagentHost, SubagentRequestError, type HostSubagentRuntime } from "../../src/openclaw/subagent.js";
import { inputMessageTexts, lastUserText, startOfflineCodex, type OfflineCodex, type RecordedRequest } from "../../src/testing/index.js";
import { runCodexTurn } from "../../src/turn.js";
import { silentLogger } from "../../src/log/logger.js";
import { captureLogger } from "../transcript/helpers.js";
import { fixture } from "./helpers.js";
import { testTempDir } from "../helpers/temp-dir.js";
import { createMemoryStores } from "../helpers/memory-store.js";

const MARKER = "DELEGATED-SUBAGENT-7Q";
const RECORD = Symbol.for("ctm.fixture.delegator");

interface DelegatorRecord {
  api: { runtime: { subagent?: HostSubagentRuntime } };
  assembles: Array<{ sessionId: string; sessionKey: string | null }>;
  runs: Array<{ runId: string; sessionKey: string; callerSessionKey: string | null; childMessages: number }>;
  llmInputs: Array<{ runId: string; ctxRunId: string | null; sessionKey: string | null }>;
}
const record = () => (globalThis as Record<symbol, unknown>)[RECORD] as DelegatorRecord;

const isChild = (r: RecordedRequest) => JSON.stringify(r.body ?? {}).includes(MARKER);
const hasToolOutput = (r: RecordedRequest) => JSON.stringify(r.body?.input ?? []).includes("function_call_output");
/** The text of the function_call_output items a request carries. */
function toolOutputs(r: RecordedRequest): string[] {
  const input = (r.body?.input ?? []) as Array<Record<string, unknown>>;
  return input.filter((i) => i["type"] === "function_call_output").map((i) => String(i["output"]));
}

let offline: OfflineCodex;
const toClose: LoadedContextEngine[] = [];

beforeAll(async () => {
  offline = await startOfflineCodex();
}, 60_000);

afterAll(async () => {
  for (const l of toClose) await l.close();
  await offline?.dispose();
});

beforeEach(() => {
  delete (globalThis as Record<symbol, unknown>)[RECORD];
  offline.fake.setDefault((r) => (isChild(r) ? { text: `child answer to: ${lastUserText(r.body)}` } : { text: "parent reply" }));
});

async function load(subagentSessionDir?: string, logger?: Logger): Promise<LoadedContextEngine> {
  const loaded = await loadContextEngine(fixture("delegator"), {
    cwd: process.cwd(),
    appServer: offline.codex,
    ...(subagentSessionDir ? { subagentSessionDir } : {}),
    ...(logger ? { logger } : {}),
  });
  toClose.push(loaded);
  return loaded;
}

describe("runtime.subagent through a model's tool call", () => {
  it("runs the delegated question as a child Codex turn and hands its answer back to the parent turn", async () => {
    const dir = await testTempDir("ctm-subagent-");
    const childDir = path.join(dir, "children");
    const loaded = await load(childDir);
    offline.fake.setDefault((r) => {
      if (isChild(r)) return { text: "six times seven is 42" };
      if (hasToolOutput(r)) return { text: `final: ${toolOutputs(r).join(" | ")}` };
      return { functionCall: { name: "delegate_question", arguments: { question: "What is six times seven?" } } };
    });
    const before = offline.fake.requests.length;
    const result = await runCodexTurn({
      appServer: offline.codex,
      sessionId: "parent",
      sessionKey: "agent:main:parent",
      sessionFile: path.join(dir, "parent.jsonl"),
      prompt: "Ask the helper what six times seven is.",
      cwd: dir,
      contextEngine: loaded.engine,
      dynamicTools: loaded.dynamicTools,
      hooks: loaded.hooks,
      runtimeContext: loaded.runtimeContext,
    });
    expect(result.status).toBe("completed");
    expect(result.assistantText).toBe("final: delegated answer: six times seven is 42");

    const requests = offline.fake.requests.slice(before);
    const child = requests.filter(isChild);
    expect(child).toHaveLength(1);
    // The child turn got the delegated message as its prompt and extraSystemPrompt as developer instructions.
    expect(inputMessageTexts(child[0]!.body, "user")).toContain("What is six times seven?");
    expect(JSON.stringify(child[0]!.body)).toContain(`${MARKER}: answer in one line.`);
    // The parent's own requests never carried the child's instructions.
    expect(requests.filter((r) => !isChild(r)).length).toBe(2);

    // The child ran with the plugin's engine on its own session; the tool saw the parent's session as its caller.
    const childKey = record().runs[0]!.sessionKey;
    expect(childKey).toMatch(/^agent:main:subagent:/);
    expect(record().assembles.map((a) => a.sessionKey)).toEqual(["agent:main:parent", childKey]);
    expect(record().runs[0]).toMatchObject({ runId: "subagent-run-1", callerSessionKey: "agent:main:parent", childMessages: 2 });
    // The child turn's hooks carried the run id run() returned; the parent's its own run id.
    expect(record().llmInputs).toEqual([
      { runId: result.runId, ctxRunId: result.runId, sessionKey: "agent:main:parent" },
      { runId: "subagent-run-1", ctxRunId: "subagent-run-1", sessionKey: childKey },
    ]);
    // deleteSession removed the child's transcript and sidecars.
    expect(await readdir(childDir)).toEqual([]);
  }, 60_000);
});

describe("runtime.subagent called directly", () => {
  it("run, waitForRun, getSessionMessages, deleteSession; an idempotency key runs once", async () => {
    const childDir = await testTempDir("ctm-subagent-direct-");
    const captured = captureLogger();
    await load(childDir, captured.logger);
    const sub = record().api.runtime.subagent!;
    const before = offline.fake.requests.length;
    const params = { sessionKey: "agent:main:subagent:a", message: "Name a prime.", extraSystemPrompt: MARKER, idempotencyKey: "k1" };
    const first = await sub.run(params);
    const again = await sub.run(params);
    expect(again.runId).toBe(first.runId);
    expect(await sub.waitForRun({ runId: first.runId })).toEqual({ status: "ok" });
    expect(offline.fake.requests.slice(before).filter(isChild)).toHaveLength(1);

    const { messages } = await sub.getSessionMessages({ sessionKey: params.sessionKey });
    expect(messages.map((m) => (m as { role: string }).role)).toEqual(["user", "assistant"]);
    const last = await sub.getSessionMessages({ sessionKey: params.sessionKey, limit: 1 });
    expect(JSON.stringify(last.messages)).toContain("child answer to: Name a prime.");
    // The plugin gets copies it may change; the host's transcript cache is not touched.
    (last.messages[0] as { role: string }).role = "changed";
    expect((await sub.getSessionMessages({ sessionKey: params.sessionKey, limit: 1 })).messages[0]).toMatchObject({ role: "assistant" });

    expect((await readdir(childDir)).some((f) => f.startsWith(childSessionFileName(params.sessionKey)))).toBe(true);
    await sub.deleteSession({ sessionKey: params.sessionKey });
    expect(await readdir(childDir)).toEqual([]);
    expect(await sub.getSessionMessages({ sessionKey: params.sessionKey })).toEqual({ messages: [] });
    expect(await sub.waitForRun({ runId: "subagent-run-99" })).toEqual({ status: "error", error: "unknown runId subagent-run-99" });

    // One event per step, with ids and counts; never the message, the instructions, the reply or the session key.
    expect(captured.events()).toEqual(expect.arrayContaining(["openclaw.subagent.run", "openclaw.subagent.ended", "openclaw.subagent.sessionDeleted"]));
    const logged = JSON.stringify(captured.records);
    for (const secret of ["Name a prime", MARKER, "child answer to", params.sessionKey]) expect(logged).not.toContain(secret);
  }, 60_000);

  it("with subagentStore a child session lives in that store: its run, messages and deletion go through it, no file", async () => {
    const childDir = await testTempDir("ctm-subagent-store-");
    const memory = createMemoryStores();
    const addressOf = (sessionId: string) => path.join(childDir, `${sessionId}.jsonl`);
    const asked = new Set<string>();
    const loaded = await loadContextEngine(fixture("delegator"), {
      cwd: process.cwd(),
      appServer: offline.codex,
      subagentSessionDir: childDir,
      subagentStore: (child) => {
        asked.add(`${child.sessionKey} ${child.sessionId}`);
        return memory.store(child.sessionId, { address: addressOf(child.sessionId) });
      },
    });
    toClose.push(loaded);
    const sub = record().api.runtime.subagent!;
    const { runId } = await sub.run({ sessionKey: "agent:main:subagent:mem", message: "Name a colour.", extraSystemPrompt: MARKER });
    expect(await sub.waitForRun({ runId })).toEqual({ status: "ok" });
    const { messages } = await sub.getSessionMessages({ sessionKey: "agent:main:subagent:mem" });
    expect(JSON.stringify(messages)).toContain("child answer to: Name a colour.");
    expect(asked.size).toBe(1);
    const [, childId] = [...asked][0]!.split(" ");
    expect([...asked][0]).toMatch(/^agent:main:subagent:mem subagent-[0-9a-f]{12}$/);
    const session = memory.session(addressOf(childId!))!;
    expect(session.entries).toHaveLength(2);
    expect(session.calls.get("appendTurn")).toBe(1);
    await sub.deleteSession({ sessionKey: "agent:main:subagent:mem" });
    expect(session.entries).toEqual([]);
    expect(session.calls.get("deleteSession")).toBe(1);
    expect(await sub.getSessionMessages({ sessionKey: "agent:main:subagent:mem" })).toEqual({ messages: [] });
    expect(await readdir(childDir)).toEqual([]);
  }, 60_000);

  it("waitForRun times out on a slow child; deleteSession aborts it and its run ends in an error", async () => {
    await load(await testTempDir("ctm-subagent-slow-"));
    const sub = record().api.runtime.subagent!;
    offline.fake.setDefault((r) => (isChild(r) ? { text: "a slow answer arriving word by word", delayMs: 400 } : { text: "parent reply" }));
    const { runId } = await sub.run({ sessionKey: "agent:main:subagent:slow", message: "Take your time.", extraSystemPrompt: MARKER });
    expect(await sub.waitForRun({ runId, timeoutMs: 50 })).toEqual({ status: "timeout" });
    await sub.deleteSession({ sessionKey: "agent:main:subagent:slow" });
    const ended = await sub.waitForRun({ runId, timeoutMs: 20_000 });
    expect(ended.status).toBe("error");
  }, 60_000);

  it("honours run's cwd, disableTools and assertCurrent; complete() is one tool-free completion", async () => {
    const childDir = await testTempDir("ctm-subagent-opts-");
    const workDir = await testTempDir("ctm-subagent-cwd-");
    await load(childDir);
    const sub = record().api.runtime.subagent!;
    const before = offline.fake.requests.length;
    const { runId, sessionKey } = await sub.run({ sessionKey: "agent:main:subagent:opts", message: "Where are you?", extraSystemPrompt: MARKER, cwd: workDir, disableTools: true });
    expect(sessionKey).toBe("agent:main:subagent:opts");
    expect(await sub.waitForRun({ runId })).toEqual({ status: "ok" });
    const child = offline.fake.requests.slice(before).filter(isChild);
    expect(child).toHaveLength(1);
    expect(JSON.stringify(child[0]!.body)).toContain(workDir);
    expect(JSON.stringify(child[0]!.body?.tools ?? [])).not.toContain("delegate_question");

    // With tools, the child is told about the plugin's tool.
    const withTools = await sub.run({ sessionKey: "agent:main:subagent:tools", message: "Hello.", extraSystemPrompt: MARKER });
    expect(await sub.waitForRun({ runId: withTools.runId })).toEqual({ status: "ok" });
    expect(JSON.stringify(offline.fake.requests.at(-1)!.body?.tools ?? [])).toContain("delegate_question");

    const refused = await sub
      .run({ sessionKey: "agent:main:subagent:late", message: "x", assertCurrent: () => { throw new Error("authority revoked"); } })
      .then(() => undefined, (e: unknown) => e);
    expect(refused).toBeInstanceOf(SubagentRequestError);
    expect((refused as Error).message).toMatch(/assertCurrent refused the run: authority revoked/);

    offline.fake.setDefault((r) => (inputMessageTexts(r.body, "user").some((t) => t.includes("Say ok.")) ? { text: "ok, done" } : { text: "other" }));
    const requestsBefore = offline.fake.requests.length;
    expect(await sub.complete({ agentId: "main", message: "Say ok.", extraSystemPrompt: "Be brief." })).toEqual({ text: "ok, done" });
    expect(offline.fake.requests.length).toBe(requestsBefore + 1);
    expect(JSON.stringify(offline.fake.requests.at(-1)!.body)).toContain("Be brief.");
  }, 60_000);

  it("close() removes the temporary directory the default child sessions used", async () => {
    const loaded = await load();
    const sub = record().api.runtime.subagent!;
    const { runId } = await sub.run({ sessionKey: "agent:main:subagent:tmp", message: "Hello.", extraSystemPrompt: MARKER });
    expect(await sub.waitForRun({ runId })).toEqual({ status: "ok" });
    // Ours is the temporary directory holding this child's transcript (other test files may make their own).
    const candidates = (await readdir(os.tmpdir())).filter((d) => d.startsWith("codex-turn-subagents-")).map((d) => path.join(os.tmpdir(), d));
    const holds = async (d: string) => (await readdir(d).catch(() => [] as string[])).includes(childSessionFileName("agent:main:subagent:tmp"));
    const ours = (await Promise.all(candidates.map(async (d) => ((await holds(d)) ? d : undefined)))).filter((d) => d !== undefined);
    expect(ours).toHaveLength(1);
    await loaded.close();
    await expect(readdir(ours[0]!)).rejects.toMatchObject({ code: "ENOENT" });
  }, 60_000);
});

describe("runtime.subagent requests the host refuses", () => {
  // A refused request never reaches the session directory: the run's leak check fails if one makes it.
  const host = (policy = DEFAULT_LLM_POLICY, wired = true, sessionDir = path.join(os.tmpdir(), "ctm-subagent-never-used")) =>
    createSubagentHost({
      appServer: offline.codex,
      llm: createCodexLlm({ appServer: offline.codex, policy }),
      cwd: process.cwd(),
      sessionDir,
      policy,
      pluginId: "delegator",
      logger: silentLogger,
      wiring: () => (wired ? { engine: {} as never, dynamicTools: [], hooks: {}, runtimeContext: {} } : undefined),
    }).runtime;

  it("names the bad parameter with a typed error", async () => {
    const sub = host();
    const bad: Array<[() => Promise<unknown>, RegExp]> = [
      [() => sub.run({ sessionKey: "", message: "x" }), /run: sessionKey: must be a non-empty string/],
      [() => sub.run({ sessionKey: "k", message: "   " }), /run: message: must be a non-empty string/],
      [() => sub.run({ sessionKey: "k", message: "x", deliver: "no" } as never), /run: deliver:/],
      [() => sub.run(undefined as never), /run: \(params\)/],
      [() => sub.waitForRun({ runId: "r", timeoutMs: -1 }), /waitForRun: timeoutMs:/],
      [() => sub.getSessionMessages({ sessionKey: "k", limit: 0 }), /getSessionMessages: limit:/],
      [() => sub.deleteSession({ sessionKey: 7 } as never), /deleteSession: sessionKey:/],
    ];
    for (const [call, pattern] of bad) {
      const error = await call().then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(SubagentRequestError);
      expect((error as SubagentRequestError).code).toBe("SUBAGENT_REQUEST_INVALID");
      expect((error as Error).message).toMatch(pattern);
    }
  });

  it("refuses a model the llm policy does not allow, and a run before the plugin finished loading", async () => {
    const strict = host({ allowModelOverride: true, allowedModels: ["codex/gpt-5"] });
    await expect(strict.run({ sessionKey: "k", message: "x", provider: "openai", model: "o3" })).rejects.toThrow(
      /model openai\/o3 is not in allowedModels \(codex\/gpt-5\).*plugins\.entries\.delegator\.llm/,
    );
    await expect(host(DEFAULT_LLM_POLICY, false).run({ sessionKey: "k", message: "x" })).rejects.toThrow(/still loading/);
  });

  it("a long-lived host forgets the outcomes of old ended runs, not of recent ones", async () => {
    const sub = host(DEFAULT_LLM_POLICY, true, await testTempDir("ctm-subagent-runs-"));
    // The stand-in wiring's engine is not an engine: each child turn ends at once in an error.
    const ids: string[] = [];
    for (let i = 0; i < 300; i++) {
      const { runId } = await sub.run({ sessionKey: `k${i}`, message: "x", idempotencyKey: `i${i}` });
      ids.push(runId);
      await sub.waitForRun({ runId });
    }
    expect(ids[299]).toBe("subagent-run-300");
    expect(await sub.waitForRun({ runId: ids[0]! })).toEqual({ status: "error", error: "unknown runId subagent-run-1" });
    expect((await sub.waitForRun({ runId: ids[299]! })).status).toBe("error");
    expect((await sub.waitForRun({ runId: ids[299]! })).error).not.toMatch(/unknown runId/);
    // A forgotten run's idempotency key starts a new run; a kept one's returns the same run.
    expect((await sub.run({ sessionKey: "k0", message: "x", idempotencyKey: "i0" })).runId).toBe("subagent-run-301");
    expect((await sub.run({ sessionKey: "k299", message: "x", idempotencyKey: "i299" })).runId).toBe("subagent-run-300");
  });

  it("a host without an app-server gives plugins no runtime.subagent", async () => {
    const loaded = await loadContextEngine(fixture("delegator"), { cwd: process.cwd() });
    toClose.push(loaded);
    expect(record().api.runtime.subagent).toBeUndefined();
  });
});
