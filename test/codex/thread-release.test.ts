/**
 * Unit: which loaded threads a client releases, and how the registry releases them (the real app-server is in
 * test/integration/thread-release.test.ts).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { describe, expect, it, vi } from "vitest";
import { CodexAppServerError } from "../../src/codex/errors.js";
import { resumeThreadSchema } from "../../src/codex/options.js";
import { releaseGraceMs, threadsToForget, threadsToRelease, type LoadedThread, type RememberedThread } from "../../src/codex/thread-release.js";
import { ThreadRegistry } from "../../src/codex/threads.js";

const t = (threadId: string, lastUsedMs: number, busy = false): LoadedThread => ({ threadId, lastUsedMs, busy });

describe("threadsToRelease", () => {
  const policy = { idleMs: 600_000, maxLoaded: 0, graceMs: 30_000 };

  it("releases every thread unused for idleMs, never a busy one", () => {
    const now = 1_000_000;
    const threads = [t("old", now - 600_000), t("older-busy", now - 900_000, true), t("recent", now - 599_999)];
    expect(threadsToRelease(threads, now, policy)).toEqual(["old"]);
  });

  it("idleMs 0 never releases for idleness", () => {
    expect(threadsToRelease([t("a", 0)], 10 ** 9, { ...policy, idleMs: 0 })).toEqual([]);
  });

  it("beyond maxLoaded, releases the least recently used idle threads past the grace, oldest first", () => {
    const now = 1_000_000;
    const threads = [t("c", now - 40_000), t("a", now - 90_000), t("busy", now - 500_000, true), t("fresh", now - 1_000), t("b", now - 60_000)];
    // Five loaded, at most two: three must go; "busy" and "fresh" cannot, so a, b, c (oldest first).
    expect(threadsToRelease(threads, now, { idleMs: 0, maxLoaded: 2, graceMs: 30_000 })).toEqual(["a", "b", "c"]);
    // At most four: only the oldest.
    expect(threadsToRelease(threads, now, { idleMs: 0, maxLoaded: 4, graceMs: 30_000 })).toEqual(["a"]);
    // Within the limit: nothing.
    expect(threadsToRelease(threads, now, { idleMs: 0, maxLoaded: 5, graceMs: 30_000 })).toEqual([]);
  });

  it("threads released for idleness count towards the limit", () => {
    const now = 1_000_000;
    const threads = [t("idle", now - 700_000), t("a", now - 50_000), t("b", now - 40_000)];
    expect(threadsToRelease(threads, now, { idleMs: 600_000, maxLoaded: 2, graceMs: 30_000 })).toEqual(["idle"]);
  });

  it("the grace is 30 s, or the idle time when shorter", () => {
    expect(releaseGraceMs(600_000)).toBe(30_000);
    expect(releaseGraceMs(200)).toBe(200);
    expect(releaseGraceMs(0)).toBe(30_000);
  });
});

describe("threadsToForget", () => {
  const r = (threadId: string, lastUsedMs: number, mayStillBeLoaded = false): RememberedThread => ({ threadId, lastUsedMs, mayStillBeLoaded });

  it("beyond maxRemembered, forgets the least recently used, oldest first", () => {
    const threads = [r("c", 30), r("a", 10), r("d", 40), r("b", 20)];
    expect(threadsToForget(threads, 2)).toEqual(["a", "b"]);
    expect(threadsToForget(threads, 3)).toEqual(["a"]);
    expect(threadsToForget(threads, 4)).toEqual([]);
  });

  it("never forgets a thread Codex may still hold; it counts towards the limit", () => {
    const threads = [r("released-just-now", 5, true), r("a", 10), r("b", 20)];
    // Three remembered, at most one: two must go, and the one Codex may hold is not among them.
    expect(threadsToForget(threads, 1)).toEqual(["a", "b"]);
    expect(threadsToForget([r("x", 1, true), r("y", 2, true)], 1)).toEqual([]);
  });

  it("maxRemembered 0 forgets nothing", () => {
    expect(threadsToForget([r("a", 1), r("b", 2)], 0)).toEqual([]);
  });
});

describe("ThreadRegistry.releaseIdle", () => {
  function registry() {
    const calls: Array<{ method: string; params: { threadId?: string } }> = [];
    let answerUnsubscribe: (() => void) | undefined;
    let holdUnsubscribe = false;
    let n = 0;
    const reg = new ThreadRegistry({
      logger: pino({ level: "silent" }),
      generation: () => 1,
      defaultCwd: () => "/tmp",
      ensureAlive: async () => undefined,
      rpcRequest: async (method, params) => {
        calls.push({ method, params: params as { threadId?: string } });
        if (method === "thread/unsubscribe") {
          if (holdUnsubscribe) await new Promise<void>((resolve) => (answerUnsubscribe = resolve));
          calls.push({ method: "(unsubscribe answered)", params: params as { threadId?: string } });
          return { status: "unsubscribed" };
        }
        const threadId = method === "thread/start" ? `thr-${++n}` : (params as { threadId: string }).threadId;
        return { thread: { id: threadId }, model: "m", modelProvider: "p" };
      },
    });
    return { reg, calls, hold: () => (holdUnsubscribe = true), answer: () => answerUnsubscribe?.() };
  }
  const everything = { idleMs: 1, maxLoaded: 0, graceMs: 1 };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it("unsubscribes the idle thread, not the busy one, and the next reuse really resumes it", async () => {
    const { reg, calls } = registry();
    const a = (await reg.start({ cwd: "/tmp" })).threadId;
    const b = (await reg.start({ cwd: "/tmp" })).threadId;
    await sleep(5);
    expect(reg.releaseIdle(everything, (id) => id === b)).toEqual([a]);
    await sleep(0);
    expect(calls.filter((c) => c.method === "thread/unsubscribe").map((c) => c.params.threadId)).toEqual([a]);
    // Loaded with the same settings, a reuse would send nothing; released, it sends thread/resume.
    const reusedB = await reg.resume({ threadId: b, cwd: "/tmp", reuseLoaded: true });
    expect(reusedB.reused).toBe(true);
    const resumedA = await reg.resume({ threadId: a, cwd: "/tmp", reuseLoaded: true });
    expect(resumedA.reused).toBeUndefined();
    expect(calls.at(-1)).toMatchObject({ method: "thread/resume", params: { threadId: a } });
  });

  it("a resume waits until Codex answered the release, so the new subscription is never undone by it", async () => {
    const { reg, calls, hold, answer } = registry();
    const a = (await reg.start({ cwd: "/tmp" })).threadId;
    await sleep(5);
    hold();
    reg.releaseIdle(everything, () => false);
    const resumed = reg.resume({ threadId: a, cwd: "/tmp", reuseLoaded: true });
    await sleep(10);
    expect(calls.map((c) => c.method)).toEqual(["thread/start", "thread/unsubscribe"]);
    answer();
    await resumed;
    expect(calls.map((c) => c.method)).toEqual(["thread/start", "thread/unsubscribe", "(unsubscribe answered)", "thread/resume"]);
  });

  it("a sub-agent's thread (never started by this client) is released once, however often it is asked", async () => {
    const { reg, calls, hold, answer } = registry();
    hold();
    reg.releaseUnrecorded("child-thread");
    reg.releaseUnrecorded("child-thread");
    await sleep(5);
    expect(calls.filter((c) => c.method === "thread/unsubscribe").map((c) => c.params.threadId)).toEqual(["child-thread"]);
    answer();
    await sleep(5);
    reg.releaseUnrecorded("child-thread");
    await sleep(5);
    expect(calls.filter((c) => c.method === "thread/unsubscribe")).toHaveLength(2);
  });

  it("a thread used since is not idle: touch() restarts its idle time", async () => {
    const { reg } = registry();
    const a = (await reg.start({ cwd: "/tmp" })).threadId;
    await sleep(30);
    reg.touch(a);
    expect(reg.releaseIdle({ idleMs: 25, maxLoaded: 0, graceMs: 25 }, () => false)).toEqual([]);
    await sleep(30);
    expect(reg.releaseIdle({ idleMs: 25, maxLoaded: 0, graceMs: 25 }, () => false)).toEqual([a]);
    // Released threads are not loaded: a second sweep finds nothing to release.
    expect(reg.releaseIdle({ idleMs: 25, maxLoaded: 0, graceMs: 25 }, () => false)).toEqual([]);
  });

  describe("tool handlers of a released thread", () => {
    const tool = (name: string) => ({ name, description: name, inputSchema: { type: "object" }, handler: () => name });
    const handlerNames = (reg: ThreadRegistry, threadId: string) => [...(reg.get(threadId)?.tools.keys() ?? [])];

    it("with dropToolsOnRelease they go with the release; the next resume brings its own", async () => {
      const { reg } = registry();
      const a = (await reg.start({ cwd: "/tmp", dynamicTools: [tool("lookup")], dropToolsOnRelease: true })).threadId;
      await sleep(5);
      reg.releaseIdle(everything, () => false);
      expect(handlerNames(reg, a)).toEqual([]);
      await reg.resume({ threadId: a, cwd: "/tmp", reuseLoaded: true, dynamicTools: [tool("search")], dropToolsOnRelease: true });
      expect(handlerNames(reg, a)).toEqual(["search"]);
    });

    it("without it (the default) they stay, so a turn started on the released thread still finds them", async () => {
      const { reg } = registry();
      const a = (await reg.start({ cwd: "/tmp", dynamicTools: [tool("lookup")] })).threadId;
      await sleep(5);
      reg.releaseIdle(everything, () => false);
      expect(handlerNames(reg, a)).toEqual(["lookup"]);
      // Re-attached (a turn on the released thread): resumed with the handlers it had.
      await reg.reattach(a);
      expect(handlerNames(reg, a)).toEqual(["lookup"]);
    });

    it("handlers given later without the flag (setTools, a resume reusing the loaded thread) are kept", async () => {
      const { reg } = registry();
      const a = (await reg.start({ cwd: "/tmp", dynamicTools: [tool("lookup")], dropToolsOnRelease: true })).threadId;
      reg.setTools(a, [tool("host")]);
      const b = (await reg.start({ cwd: "/tmp", dynamicTools: [tool("lookup")], dropToolsOnRelease: true })).threadId;
      await reg.resume({ threadId: b, cwd: "/tmp", reuseLoaded: true, dynamicTools: [tool("mine")] });
      await sleep(5);
      reg.releaseIdle(everything, () => false);
      expect(handlerNames(reg, a)).toEqual(["host"]);
      expect(handlerNames(reg, b)).toEqual(["mine"]);
    });

    it("a thread Codex unloads (thread/closed) lets them go too", async () => {
      const { reg } = registry();
      const a = (await reg.start({ cwd: "/tmp", dynamicTools: [tool("lookup")], dropToolsOnRelease: true })).threadId;
      reg.markUnloaded(a, 1);
      expect(handlerNames(reg, a)).toEqual([]);
      expect(reg.get(a)?.generation).toBe(-2);
    });
  });
});

describe("ThreadRegistry.forgetUnloaded", () => {
  function registry() {
    const calls: Array<{ method: string; params: { threadId?: string } }> = [];
    const gen = { current: 1 };
    let n = 0;
    const reg = new ThreadRegistry({
      logger: pino({ level: "silent" }),
      generation: () => gen.current,
      defaultCwd: () => "/tmp",
      ensureAlive: async () => undefined,
      rpcRequest: async (method, params) => {
        calls.push({ method, params: params as { threadId?: string } });
        if (method === "thread/unsubscribe") return { status: "unsubscribed" };
        const threadId = method === "thread/start" ? `thr-${++n}` : (params as { threadId: string }).threadId;
        return { thread: { id: threadId }, model: "m", modelProvider: "p" };
      },
    });
    return { reg, calls, gen };
  }
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /** Threads started one after another, so each was used later than the one before. */
  async function startMany(reg: ThreadRegistry, names: string[]): Promise<string[]> {
    const ids: string[] = [];
    for (const name of names) {
      ids.push((await reg.start({ cwd: "/tmp", developerInstructions: `DEV-${name}` })).threadId);
      await sleep(2);
    }
    return ids;
  }

  it("forgets the least recently used released threads beyond the limit, once Codex closed them", async () => {
    const { reg, calls } = registry();
    const [a, b, c] = await startMany(reg, ["A", "B", "C"]);
    reg.releaseIdle({ idleMs: 1, maxLoaded: 0, graceMs: 1 }, () => false);
    // Released, not closed yet: Codex may still hold them (a turn there would get no notifications), so all stay.
    expect(reg.forgetUnloaded(1)).toEqual([]);
    for (const id of [a, b, c]) reg.markUnloaded(id!, 1);
    expect(reg.forgetUnloaded(1)).toEqual([a, b]);
    expect(reg.get(a!)).toBeUndefined();
    expect(reg.get(b!)).toBeUndefined();
    // The one kept still re-attaches with the settings it had; a forgotten one is not resumed behind the host's back.
    await reg.reattach(c!);
    expect(calls.at(-1)?.method).toBe("thread/resume");
    expect(JSON.stringify(calls.at(-1)?.params)).toContain("DEV-C");
    const before = calls.length;
    await reg.reattach(a!);
    expect(calls.length).toBe(before);
  });

  it("threads loaded by an exited app-server process go first; loaded and handlers-only ones are never forgotten", async () => {
    const { reg, gen } = registry();
    const [a, b] = await startMany(reg, ["A", "B"]);
    reg.releaseIdle({ idleMs: 1, maxLoaded: 0, graceMs: 1 }, () => false); // released in process 1, never closed
    reg.setTools("host-thread", [{ name: "t", description: "t", inputSchema: { type: "object" }, handler: () => "t" }]);
    gen.current = 2; // the app-server process restarted: it holds none of them
    const [c] = await startMany(reg, ["C"]);
    expect(reg.forgetUnloaded(1)).toEqual([a]);
    expect(reg.forgetUnloaded(0)).toEqual([]);
    expect(reg.get(b!)).toBeDefined();
    expect(reg.get(c!)?.generation).toBe(2);
    expect(reg.get("host-thread")?.generation).toBe(-1);
  });

  it("a thread Codex closed on its own (never released) may be forgotten too", async () => {
    const { reg } = registry();
    const [a, b, c] = await startMany(reg, ["A", "B", "C"]);
    reg.markUnloaded(a!, 1);
    reg.markUnloaded(b!, 1);
    // Two remembered (c is loaded and does not count), at most one: the older goes.
    expect(reg.forgetUnloaded(1)).toEqual([a]);
    expect(reg.get(b!)?.generation).toBe(-2);
    expect(reg.get(c!)?.generation).toBe(1);
  });
  it("a compaction of a thread it does not know resumes it with no overrides and records nothing; the caller releases it", async () => {
    const { reg, calls } = registry();
    expect(await reg.loadForCompaction("elsewhere")).toBe(true);
    // Only the thread id: Codex loads it with the settings it keeps, none of a host's that this client does not have.
    expect(calls.at(-1)).toEqual({ method: "thread/resume", params: { threadId: "elsewhere", excludeTurns: true } });
    expect(reg.get("elsewhere")).toBeUndefined();
    reg.releaseUnrecorded("elsewhere");
    await sleep(0);
    expect(calls.filter((c) => c.method === "thread/unsubscribe").map((c) => c.params.threadId)).toEqual(["elsewhere"]);
    // A thread it knows is re-attached as for a turn, with its settings, and stays recorded (not released after).
    const [a] = await startMany(reg, ["A"]);
    reg.markUnloaded(a!, 1);
    expect(await reg.loadForCompaction(a!)).toBe(false);
    expect(JSON.stringify(calls.at(-1))).toContain("DEV-A");
    reg.releaseUnrecorded(a!);
    await sleep(0);
    expect(calls.filter((c) => c.method === "thread/unsubscribe")).toHaveLength(1);
  });
});

describe("ThreadRegistry.resume with reuseLoaded: the reuse decided on the options as given", () => {
  function registry() {
    const calls: string[] = [];
    let generation = 1;
    const reg = new ThreadRegistry({
      logger: pino({ level: "silent" }),
      generation: () => generation,
      defaultCwd: () => "/tmp",
      ensureAlive: async () => undefined,
      rpcRequest: async (method, params) => {
        calls.push(method);
        const threadId = method === "thread/start" ? "thr-1" : (params as { threadId: string }).threadId;
        return { thread: { id: threadId }, model: "m", modelProvider: "p" };
      },
    });
    return { reg, calls, restart: () => generation++ };
  }
  const withDir = async (fn: (dir: string) => Promise<void>) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ctm-reuse-"));
    try {
      await fn(dir);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };

  it("reuses a thread loaded with these settings without the schema's parse, the defaults as given or omitted", async () => {
    await withDir(async (cwd) => {
      const { reg, calls } = registry();
      const { threadId } = await reg.start({ cwd, developerInstructions: "D" });
      const parse = vi.spyOn(resumeThreadSchema, "safeParse");
      try {
        expect(await reg.resume({ threadId, cwd, developerInstructions: "D", reuseLoaded: true })).toMatchObject({ threadId, reused: true, model: "m" });
        expect(await reg.resume({ threadId, cwd, developerInstructions: "D", sandbox: "read-only", approvalPolicy: "never", reuseLoaded: true })).toMatchObject({ reused: true });
        expect(parse).not.toHaveBeenCalled();
        // Anything else goes through the schema, with the same outcome as before.
        expect(await reg.resume({ threadId, cwd, developerInstructions: "D", sandbox: undefined, reuseLoaded: true })).toMatchObject({ reused: true });
        expect(parse).toHaveBeenCalledTimes(1);
      } finally {
        parse.mockRestore();
      }
      expect(calls).toEqual(["thread/start"]);
    });
  });

  it("refuses what the schema refuses, even for a loaded thread: a cwd gone since, an unknown key", async () => {
    await withDir(async (root) => {
      const cwd = path.join(root, "work");
      fs.mkdirSync(cwd);
      const { reg, calls } = registry();
      const { threadId } = await reg.start({ cwd });
      await expect(reg.resume({ threadId, cwd, reuseLoaded: true, colour: "red" } as never)).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining("colour") });
      fs.rmdirSync(cwd);
      const gone = await reg.resume({ threadId, cwd, reuseLoaded: true }).catch((e: unknown) => e);
      expect(gone).toBeInstanceOf(CodexAppServerError);
      expect(gone).toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining("does not exist") });
      expect(calls).toEqual(["thread/start"]);
    });
  });

  it("resumes for real when the settings differ or the app-server restarted since the thread was loaded", async () => {
    await withDir(async (cwd) => {
      const { reg, calls, restart } = registry();
      const { threadId } = await reg.start({ cwd, developerInstructions: "D" });
      expect((await reg.resume({ threadId, cwd, developerInstructions: "E", reuseLoaded: true })).reused).toBeUndefined();
      expect(calls).toEqual(["thread/start", "thread/resume"]);
      restart();
      expect((await reg.resume({ threadId, cwd, developerInstructions: "E", reuseLoaded: true })).reused).toBeUndefined();
      expect(calls).toEqual(["thread/start", "thread/resume", "thread/resume"]);
      expect((await reg.resume({ threadId, cwd, developerInstructions: "E", reuseLoaded: true })).reused).toBe(true);
    });
  });
});
