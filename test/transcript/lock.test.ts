import { spawn, spawnSync } from "node:child_process";
import os from "node:os";
import fs, { promises as fsp } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { drainDiscards } from "../../src/transcript/discard.js";
import { SessionFileError } from "../../src/transcript/errors.js";
import { acquireSessionLock, isSessionLockHeld, withSessionLock, withSessionLockUnlessHeld } from "../../src/transcript/lock.js";
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

describe("acquireSessionLock (handle)", () => {
  const lockOf = () => sessionSidecarPaths(file).lock;

  it("holds until release; release is idempotent and removes the lock; assertHeld throws after it", async () => {
    const lock = await acquireSessionLock(file);
    expect(lock.lockPath).toBe(lockOf());
    expect(lock.signal.aborted).toBe(false);
    lock.assertHeld();
    expect((await fsp.readdir(lockOf())).sort()).toEqual(["owner.json"]);
    await Promise.all([lock.release(), lock.release()]);
    await lock.release();
    await expect(fsp.stat(lockOf())).rejects.toMatchObject({ code: "ENOENT" });
    // The lock directory was renamed away at once; its removal finishes in the background.
    await drainDiscards();
    expect(await fsp.readdir(dir)).toEqual([]);
    expect(() => lock.assertHeld()).toThrow(expect.objectContaining({ code: "SESSION_LOCK_COMPROMISED" }) as Error);
    // The queue moved on.
    expect(await withSessionLock(file, async () => 3, { timeoutMs: 1000 })).toBe(3);
  });

  it("queues a second in-process caller until release", async () => {
    const first = await acquireSessionLock(file);
    let secondGot = false;
    const second = acquireSessionLock(file, { timeoutMs: 5000 }).then((h) => {
      secondGot = true;
      return h;
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(secondGot).toBe(false);
    await first.release();
    const h = await second;
    h.assertHeld();
    await h.release();
  });

  it("runHeld makes nested helpers see the lock as held (no self-wait), and a nested acquire is re-entrant", async () => {
    const lock = await acquireSessionLock(file);
    try {
      expect(await isSessionLockHeld(file)).toBe(false);
      await lock.runHeld(async () => {
        expect(await isSessionLockHeld(file)).toBe(true);
        expect(await withSessionLockUnlessHeld(file, async () => "inner", { timeoutMs: 200 })).toBe("inner");
        expect(await codeOf(acquireSessionLock(file))).toBe("SESSION_LOCK_REENTRANT");
      });
    } finally {
      await lock.release();
    }
  });

  it("withSessionLock hands the callback the handle", async () => {
    await withSessionLock(file, async (lock) => {
      lock.assertHeld();
      expect(lock.signal.aborted).toBe(false);
    });
  });

  it("writes inside the lock directory and holds longer than staleMs do not lose it; a waiter sees it alive", async () => {
    // A second spelling of the session (through a symlinked directory) skips the in-process queue, so it judges the
    // lock directory exactly as another process would.
    const alias = path.join(dir, "alias");
    await fsp.symlink(dir, alias);
    const cap = captureLogger();
    const lock = await acquireSessionLock(file, { staleMs: 2000, logger: cap.logger });
    const ownerPath = path.join(lock.lockPath, "owner.json");
    const firstBeat = (await fsp.stat(ownerPath)).mtimeMs;
    await fsp.writeFile(path.join(lock.lockPath, "scratch"), "x");
    expect(await codeOf(withSessionLock(path.join(alias, "s.jsonl"), async () => undefined, { staleMs: 2000, timeoutMs: 5000 }))).toBe(
      "SESSION_LOCK_TIMEOUT",
    );
    expect(lock.signal.aborted).toBe(false);
    lock.assertHeld();
    expect((await fsp.stat(ownerPath)).mtimeMs).toBeGreaterThan(firstBeat);
    expect(cap.events()).not.toContain("transcript.lock.compromised");
    await lock.release();
    await expect(fsp.stat(lock.lockPath)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("a removed lock aborts signal with SESSION_LOCK_COMPROMISED and makes assertHeld throw", async () => {
    const cap = captureLogger();
    const lock = await acquireSessionLock(file, { staleMs: 2000, logger: cap.logger });
    await fsp.rm(lock.lockPath, { recursive: true });
    // The heartbeat notices on its own (every staleMs / 4).
    await expect.poll(() => lock.signal.aborted, { timeout: 3000 }).toBe(true);
    expect(lock.signal.reason).toBeInstanceOf(SessionFileError);
    expect((lock.signal.reason as SessionFileError).code).toBe("SESSION_LOCK_COMPROMISED");
    expect(() => lock.assertHeld()).toThrow(expect.objectContaining({ code: "SESSION_LOCK_COMPROMISED" }) as Error);
    expect(cap.events()).toContain("transcript.lock.compromised");
    await lock.release();
  });

  it("a replaced lock makes assertHeld throw at once, and release leaves the new holder's lock alone", async () => {
    const lock = await acquireSessionLock(file, { staleMs: 60_000 });
    await fsp.rm(lock.lockPath, { recursive: true });
    await fsp.mkdir(lock.lockPath);
    const theirs = JSON.stringify({ pid: process.pid, hostname: os.hostname(), token: "someone-else" });
    await fsp.writeFile(path.join(lock.lockPath, "owner.json"), theirs);
    expect(lock.signal.aborted).toBe(false); // the next beat is 15 s away: assertHeld must not wait for it
    expect(() => lock.assertHeld()).toThrow(expect.objectContaining({ code: "SESSION_LOCK_COMPROMISED" }) as Error);
    expect(lock.signal.aborted).toBe(true);
    await lock.release();
    expect(await fsp.readFile(path.join(lock.lockPath, "owner.json"), "utf8")).toBe(theirs);
  });

  for (const how of ["rewritten in place", "removed and re-created"] as const) {
    it(`an owner record ${how} after assertHeld passed makes the next assertHeld throw (its fast path is one stat)`, async () => {
      const lock = await acquireSessionLock(file, { staleMs: 60_000 });
      const ownerPath = path.join(lock.lockPath, "owner.json");
      lock.assertHeld();
      lock.assertHeld(); // verified: the second call takes the one-stat path
      const theirs = JSON.stringify({ pid: process.pid, hostname: os.hostname(), token: "someone-else" });
      if (how === "removed and re-created") await fsp.rm(ownerPath);
      await fsp.writeFile(ownerPath, theirs);
      expect(() => lock.assertHeld()).toThrow(expect.objectContaining({ code: "SESSION_LOCK_COMPROMISED" }) as Error);
      expect(lock.signal.aborted).toBe(true);
      await lock.release();
      expect(await fsp.readFile(ownerPath, "utf8")).toBe(theirs);
    });
  }

  // The record is verified when it is created (O_EXCL, our token, its fstat), and release removes it unread while it is
  // still that file: both shortcuts must still notice another holder's record.
  for (const how of ["rewritten in place", "removed and re-created"] as const) {
    it(`an owner record ${how} before any assertHeld is noticed by assertHeld, and release leaves it alone`, async () => {
      const lock = await acquireSessionLock(file, { staleMs: 60_000 });
      const ownerPath = path.join(lock.lockPath, "owner.json");
      const theirs = JSON.stringify({ pid: process.pid, hostname: os.hostname(), token: "someone-else" });
      if (how === "removed and re-created") await fsp.rm(ownerPath);
      await fsp.writeFile(ownerPath, theirs);
      expect(() => lock.assertHeld()).toThrow(expect.objectContaining({ code: "SESSION_LOCK_COMPROMISED" }) as Error);
      await lock.release();
      expect(await fsp.readFile(ownerPath, "utf8")).toBe(theirs);
    });

    it(`an owner record ${how} before release (no assertHeld in between) is left alone`, async () => {
      const lock = await acquireSessionLock(file, { staleMs: 60_000 });
      const ownerPath = path.join(lock.lockPath, "owner.json");
      const theirs = JSON.stringify({ pid: process.pid, hostname: os.hostname(), token: "someone-else" });
      if (how === "removed and re-created") await fsp.rm(ownerPath);
      await fsp.writeFile(ownerPath, theirs);
      await lock.release();
      expect(await fsp.readFile(ownerPath, "utf8")).toBe(theirs);
    });
  }

  it("assertHeld and release of our own unchanged lock never read the owner record back (one stat each)", async () => {
    const lock = await acquireSessionLock(file, { staleMs: 60_000 });
    const ownerPath = path.join(lock.lockPath, "owner.json");
    const reads = vi.spyOn(fs, "readFileSync");
    try {
      lock.assertHeld();
      await lock.release();
      expect(reads.mock.calls.filter(([p]) => String(p) === ownerPath)).toEqual([]);
    } finally {
      reads.mockRestore();
    }
    await expect(fsp.stat(lock.lockPath)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("a replaced owner record is noticed by the heartbeat", async () => {
    const lock = await acquireSessionLock(file, { staleMs: 2000 });
    const ownerPath = path.join(lock.lockPath, "owner.json");
    await fsp.rm(ownerPath);
    await fsp.writeFile(ownerPath, JSON.stringify({ pid: process.pid, hostname: os.hostname(), token: "other" }));
    await expect.poll(() => lock.signal.aborted, { timeout: 3000 }).toBe(true);
    await lock.release();
    expect(JSON.parse(await fsp.readFile(ownerPath, "utf8"))).toMatchObject({ token: "other" });
  });
});

describe("stale locks and disagreeing clocks", () => {
  const lockOf = () => sessionSidecarPaths(file).lock;

  async function plant(owner: Record<string, unknown> | null, mtime: Date): Promise<string> {
    const lockPath = lockOf();
    await fsp.mkdir(lockPath);
    if (owner) {
      await fsp.writeFile(path.join(lockPath, "owner.json"), JSON.stringify(owner));
      await fsp.utimes(path.join(lockPath, "owner.json"), mtime, mtime);
    }
    await fsp.utimes(lockPath, mtime, mtime);
    return lockPath;
  }

  const hourAhead = () => new Date(Date.now() + 3_600_000);

  it("takes over a lock dated an hour in the future once its heartbeat has not moved for staleMs (not the full timeout)", async () => {
    await plant({ pid: 1, hostname: "some-other-host", token: "t-future" }, hourAhead());
    const cap = captureLogger();
    // The timeout is far below the hour and well above staleMs: only the observed-progress rule can free it in time.
    expect(await withSessionLock(file, async () => "mine", { staleMs: 2000, timeoutMs: 8000, logger: cap.logger })).toBe("mine");
    expect(cap.records.find((r) => r.event === "transcript.lock.stale_takeover")).toMatchObject({ reason: "noProgress" });
  });

  it("takes over a future-dated lock without an owner record the same way", async () => {
    await plant(null, hourAhead());
    expect(await withSessionLock(file, async () => "mine", { staleMs: 2000, timeoutMs: 8000 })).toBe("mine");
  });

  it("takes over a future-dated lock whose same-host pid is alive but whose heartbeat does not move (pid reused)", async () => {
    const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 30000)"], { stdio: "ignore" });
    try {
      await plant({ pid: child.pid, hostname: os.hostname(), token: "t-reused" }, hourAhead());
      expect(await withSessionLock(file, async () => "mine", { staleMs: 2000, timeoutMs: 8000 })).toBe("mine");
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("does not judge another host's lock by its mtime (clocks may disagree), only by its heartbeat not moving", async () => {
    await plant({ pid: 1, hostname: "some-other-host", token: "t-old" }, new Date(Date.now() - 3_600_000));
    expect(await codeOf(withSessionLock(file, async () => undefined, { staleMs: 2000, timeoutMs: 800 }))).toBe("SESSION_LOCK_TIMEOUT");
    expect(await withSessionLock(file, async () => "mine", { staleMs: 2000, timeoutMs: 8000 })).toBe("mine");
  });

  it("takes over at once a lock of this very process whose token it does not hold (left behind)", async () => {
    await plant({ pid: process.pid, hostname: os.hostname(), token: "t-leftover" }, new Date());
    const cap = captureLogger();
    expect(await withSessionLock(file, async () => "mine", { staleMs: 600_000, timeoutMs: 2000, logger: cap.logger })).toBe("mine");
    expect(cap.events()).toContain("transcript.lock.dead_owner_takeover");
  });

  it("clears an abandoned takeover guard", async () => {
    const dead = spawnSync(process.execPath, ["-e", ""]);
    await plant({ pid: dead.pid, hostname: os.hostname(), token: "t-dead" }, new Date());
    const guard = `${lockOf()}.takeover`;
    await fsp.mkdir(guard);
    const old = new Date(Date.now() - 60_000);
    await fsp.utimes(guard, old, old);
    expect(await withSessionLock(file, async () => "mine", { staleMs: 600_000, timeoutMs: 3000 })).toBe("mine");
    await expect(fsp.stat(guard)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("does not take over a lock whose heartbeat moves, even one dated in the future", async () => {
    const lockPath = await plant({ pid: 1, hostname: "some-other-host", token: "t-alive" }, hourAhead());
    const ownerPath = path.join(lockPath, "owner.json");
    // A foreign holder whose clock runs an hour ahead, beating every 300 ms.
    let t = hourAhead().getTime();
    const beat = setInterval(() => {
      t += 300;
      void fsp.utimes(ownerPath, new Date(t), new Date(t)).catch(() => undefined);
    }, 300);
    try {
      expect(await codeOf(withSessionLock(file, async () => undefined, { staleMs: 2000, timeoutMs: 4000 }))).toBe("SESSION_LOCK_TIMEOUT");
    } finally {
      clearInterval(beat);
    }
  });
});
