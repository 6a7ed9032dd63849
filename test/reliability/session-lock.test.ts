/**
 * The session lock across real processes: a long hold with refreshes while another process waits, a SIGKILLed
 * holder taken over. (The two-turn scenario of issue 13 is session-lock-turns.test.ts.)
 */
import { spawn } from "node:child_process";
import { promises as fsp } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { withSessionLock } from "../../src/transcript/lock.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { captureLogger } from "../transcript/helpers.js";
import { readLockLedger, startLockHolder, waitForLedger, type LockLedgerLine } from "./fixtures/lock-holder.js";

let dir: string;
let file: string;
let ledger: string;
beforeEach(async () => {
  dir = await fsp.realpath(await fsp.mkdtemp(path.join(os.tmpdir(), "ctm-session-lock-")));
  file = path.join(dir, "s.jsonl");
  ledger = path.join(dir, "ledger.jsonl");
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

const indexOf = (lines: LockLedgerLine[], ev: LockLedgerLine["ev"], pid: number) => lines.findIndex((l) => l.ev === ev && l.pid === pid);

describe("session lock across processes", () => {
  it("stays held for a 26 s hold (default staleMs, writes inside the lock dir); a process started 4 s later waits for it", async () => {
    const a = startLockHolder({ file, ledger, holdMs: 26_000 });
    await waitForLedger(ledger, (l) => l.ev === "acquired" && l.pid === a.pid);
    await new Promise((r) => setTimeout(r, 4000));
    const b = startLockHolder({ file, ledger, holdMs: 200 });
    const [ea, eb] = await Promise.all([a.exited, b.exited]);
    expect(ea).toMatchObject({ code: 0, stderr: "" });
    expect(eb).toMatchObject({ code: 0, stderr: "" });

    const lines = await readLockLedger(ledger);
    const aReleasing = lines.find((l): l is Extract<LockLedgerLine, { ev: "releasing" }> => l.ev === "releasing" && l.pid === a.pid);
    // A never lost it: its signal did not abort and its assertHeld at the start and at the end both passed.
    expect(aReleasing).toMatchObject({ aborted: false, assertFailures: 0, checks: 2 });
    // B was waiting before A let go, and got the lock only after A released it.
    expect(indexOf(lines, "waiting", b.pid)).toBeLessThan(indexOf(lines, "releasing", a.pid));
    expect(indexOf(lines, "acquired", b.pid)).toBeGreaterThan(indexOf(lines, "releasing", a.pid));
    // Nothing of the lock is left behind (no lock directory, no takeover guard).
    expect((await fsp.readdir(dir)).sort()).toEqual(["ledger.jsonl"]);
  }, 60_000);

  it("a SIGKILLed holder is taken over by a waiting process as soon as it is dead", async () => {
    const a = startLockHolder({ file, ledger, holdMs: 60_000, staleMs: 600_000 });
    await waitForLedger(ledger, (l) => l.ev === "acquired" && l.pid === a.pid);
    const b = startLockHolder({ file, ledger, holdMs: 100, staleMs: 600_000, timeoutMs: 20_000 });
    await waitForLedger(ledger, (l) => l.ev === "waiting" && l.pid === b.pid);
    a.kill();
    expect((await a.exited).signal).toBe("SIGKILL");
    // staleMs is ten minutes and B's timeout 20 s: only the dead-owner rule lets B in.
    expect(await b.exited).toMatchObject({ code: 0, stderr: "" });
    const lines = await readLockLedger(ledger);
    expect(indexOf(lines, "released", b.pid)).toBeGreaterThan(indexOf(lines, "acquired", b.pid));
    await expect(fsp.stat(sessionSidecarPaths(file).lock)).rejects.toMatchObject({ code: "ENOENT" });
  }, 60_000);

  it("a SIGKILLed holder whose pid looks alive (reused) is taken over after the stale time", async () => {
    const a = startLockHolder({ file, ledger, holdMs: 60_000, staleMs: 2000 });
    await waitForLedger(ledger, (l) => l.ev === "acquired" && l.pid === a.pid);
    a.kill();
    await a.exited;
    // Point the dead holder's record at a live process, keeping its last heartbeat time: the pid rule cannot help.
    const sleeper = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
    try {
      const ownerPath = path.join(sessionSidecarPaths(file).lock, "owner.json");
      const st = await fsp.stat(ownerPath);
      const owner = JSON.parse(await fsp.readFile(ownerPath, "utf8")) as { pid: number };
      await fsp.writeFile(ownerPath, JSON.stringify({ ...owner, pid: sleeper.pid }));
      await fsp.utimes(ownerPath, st.atime, st.mtime);
      const cap = captureLogger();
      expect(await withSessionLock(file, async () => "mine", { staleMs: 2000, timeoutMs: 15_000, logger: cap.logger })).toBe("mine");
      const takeover = cap.records.find((r) => r.event === "transcript.lock.stale_takeover");
      expect(takeover).toMatchObject({ ownerPid: sleeper.pid });
      expect(["heartbeatOld", "noProgress"]).toContain(takeover!.reason);
    } finally {
      sleeper.kill("SIGKILL");
    }
  }, 60_000);
});
