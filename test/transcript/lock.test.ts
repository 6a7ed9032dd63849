import { spawn, spawnSync } from "node:child_process";
import os from "node:os";
import { promises as fsp } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SessionFileError } from "../../src/transcript/errors.js";
import { isSessionLockHeld, withSessionLock } from "../../src/transcript/lock.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { captureLogger, tempDir } from "./helpers.js";

let dir: string;
let file: string;
beforeEach(async () => {
  dir = await tempDir();
  file = path.join(dir, "s.jsonl");
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SessionFileError);
  return (err as SessionFileError).code;
}

describe("withSessionLock", () => {
  it("serializes callers on one session, in arrival order", async () => {
    let active = 0;
    let maxActive = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        withSessionLock(file, async () => {
          active++;
          maxActive = Math.max(maxActive, active);
          order.push(i);
          await new Promise((r) => setTimeout(r, 5));
          active--;
        }),
      ),
    );
    expect(maxActive).toBe(1);
    expect(order).toEqual([0, 1, 2, 3, 4, 5]);
    await expect(fsp.stat(sessionSidecarPaths(file).lock)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("runs different sessions in parallel", async () => {
    const a = deferred();
    const b = deferred();
    // Each callback waits for the other to have started: this only finishes if both hold their locks at once.
    await Promise.all([
      withSessionLock(path.join(dir, "a.jsonl"), async () => {
        a.resolve();
        await b.promise;
      }, { timeoutMs: 5000 }),
      withSessionLock(path.join(dir, "b.jsonl"), async () => {
        b.resolve();
        await a.promise;
      }, { timeoutMs: 5000 }),
    ]);
  });

  it("is not re-entrant: a nested call for the same session throws instead of deadlocking", async () => {
    await withSessionLock(file, async (ctx) => {
      expect(ctx.lockPath).toBe(sessionSidecarPaths(file).lock);
      expect(await isSessionLockHeld(file)).toBe(true);
      expect(await codeOf(withSessionLock(file, async () => undefined))).toBe("SESSION_LOCK_REENTRANT");
      // Another session from inside is fine.
      await withSessionLock(path.join(dir, "other.jsonl"), async () => undefined);
    });
    expect(await isSessionLockHeld(file)).toBe(false);
  });

  it("times out, and a timed-out waiter does not wedge the queue", async () => {
    const release = deferred();
    const entered = deferred();
    const holder = withSessionLock(file, async () => {
      entered.resolve();
      await release.promise;
    });
    await entered.promise;
    expect(await codeOf(withSessionLock(file, async () => undefined, { timeoutMs: 50 }))).toBe("SESSION_LOCK_TIMEOUT");
    const next = withSessionLock(file, async () => "next", { timeoutMs: 5000 });
    release.resolve();
    await holder;
    expect(await next).toBe("next");
  });

  it("stops waiting when the signal aborts", async () => {
    const release = deferred();
    const entered = deferred();
    const holder = withSessionLock(file, async () => {
      entered.resolve();
      await release.promise;
    });
    await entered.promise;
    const ac = new AbortController();
    const waiting = withSessionLock(file, async () => undefined, { signal: ac.signal });
    ac.abort();
    expect(await codeOf(waiting)).toBe("SESSION_LOCK_ABORTED");
    release.resolve();
    await holder;
  });

  it("releases the lock when the callback throws", async () => {
    await expect(withSessionLock(file, async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(await withSessionLock(file, async () => 1, { timeoutMs: 1000 })).toBe(1);
  });

  it("writes owner.json while held and removes the lock directory on release, even with other files in it", async () => {
    const lockPath = sessionSidecarPaths(file).lock;
    await withSessionLock(file, async (ctx) => {
      expect(ctx.lockPath).toBe(lockPath);
      // The owner record is written while the callback runs; waiters use it to take over from a dead holder.
      await expect.poll(async () => JSON.parse(await fsp.readFile(path.join(lockPath, "owner.json"), "utf8")) as { pid: number }).toMatchObject({
        pid: process.pid,
      });
      await fsp.writeFile(path.join(lockPath, "stray"), "x");
    });
    await expect(fsp.stat(lockPath)).rejects.toMatchObject({ code: "ENOENT" });
    expect(await withSessionLock(file, async () => 2, { timeoutMs: 1000 })).toBe(2);
  });

  it("rejects invalid options", async () => {
    expect(await codeOf(withSessionLock(file, async () => undefined, { staleMs: 10 }))).toBe("SESSION_INVALID_ARGUMENT");
  });
});

describe("cross-process lock", () => {
  async function plantLock(pid: number): Promise<string> {
    const lockPath = sessionSidecarPaths(file).lock;
    await fsp.mkdir(lockPath);
    await fsp.writeFile(path.join(lockPath, "owner.json"), JSON.stringify({ pid, hostname: os.hostname(), token: "t0", acquiredAt: "x" }));
    return lockPath;
  }

  it("takes over at once from an owner process that is dead", async () => {
    const dead = spawnSync(process.execPath, ["-e", ""]);
    expect(dead.status).toBe(0);
    await plantLock(dead.pid!);
    const cap = captureLogger();
    // staleMs is large: only the dead-owner check can free the lock within the timeout.
    const out = await withSessionLock(file, async () => "mine", { timeoutMs: 5000, staleMs: 600_000, logger: cap.logger });
    expect(out).toBe("mine");
    expect(cap.records.find((r) => r.event === "transcript.lock.dead_owner_takeover")).toMatchObject({ deadPid: dead.pid, level: 40 });
  });

  it("waits for an owner process that is alive", async () => {
    const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 30000)"], { stdio: "ignore" });
    try {
      await plantLock(child.pid!);
      expect(await codeOf(withSessionLock(file, async () => undefined, { timeoutMs: 150, staleMs: 600_000 }))).toBe("SESSION_LOCK_TIMEOUT");
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("takes over a stale lock (no owner record, mtime older than staleMs)", async () => {
    const lockPath = sessionSidecarPaths(file).lock;
    await fsp.mkdir(lockPath);
    expect(await codeOf(withSessionLock(file, async () => undefined, { timeoutMs: 100, staleMs: 60_000 }))).toBe("SESSION_LOCK_TIMEOUT");
    const old = new Date(Date.now() - 120_000);
    await fsp.utimes(lockPath, old, old);
    expect(await withSessionLock(file, async () => "ok", { timeoutMs: 2000, staleMs: 60_000 })).toBe("ok");
  });
});
