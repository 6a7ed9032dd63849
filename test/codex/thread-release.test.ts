/**
 * Unit: which loaded threads a client releases, and how the registry releases them (the real app-server is in
 * test/integration/thread-release.test.ts).
 */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { releaseGraceMs, threadsToRelease, type LoadedThread } from "../../src/codex/thread-release.js";
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
    reg.releaseSubAgent("child-thread");
    reg.releaseSubAgent("child-thread");
    await sleep(5);
    expect(calls.filter((c) => c.method === "thread/unsubscribe").map((c) => c.params.threadId)).toEqual(["child-thread"]);
    answer();
    await sleep(5);
    reg.releaseSubAgent("child-thread");
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
