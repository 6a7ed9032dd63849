/**
 * Issue 13's done-when, with real processes, real `codex app-server`s and the loopback fake model: process A runs a
 * ~26 s turn, process B starts a turn on the same session 4 s into it. B waits for the session lock; the transcript
 * holds A's turn then B's; each engine finalize (afterTurn/ingest) sees only its own turn; no lock directory is left.
 * (With the proper-lockfile lock, A lost its lock at its first refresh and B ran inside A's turn: order B, A, and A's
 * afterTurn received B's prompt and answer.)
 */
import { promises as fsp } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { codexHomeTempBase } from "../../src/codex/app-server.js";
import { invalidateSessionIndex, readSessionHistory } from "../../src/transcript/session-file.js";
import { processAlive } from "./fixtures/turn-worker.js";
import {
  messageText,
  readLockTurnLedger,
  startLockTurnWorker,
  waitForTurnLedger,
  type LockTurnLedgerLine,
} from "./fixtures/lock-turn-worker.js";

let dir: string;
const codexPids: number[] = [];
beforeEach(async () => {
  dir = await fsp.mkdtemp(path.join(codexHomeTempBase(), "ctm-lock-turns-"));
});
afterEach(async () => {
  for (const pid of codexPids.splice(0)) if (processAlive(pid)) process.kill(pid, "SIGKILL");
  await fsp.rm(dir, { recursive: true, force: true });
});

type Line<K extends LockTurnLedgerLine["kind"]> = Extract<LockTurnLedgerLine, { kind: K }>;
const find = <K extends LockTurnLedgerLine["kind"]>(lines: LockTurnLedgerLine[], kind: K, pid: number) =>
  lines.findIndex((l) => l.kind === kind && l.pid === pid);
const all = <K extends LockTurnLedgerLine["kind"]>(lines: LockTurnLedgerLine[], kind: K, pid: number) =>
  lines.filter((l): l is Line<K> => l.kind === kind && l.pid === pid);

describe("two processes, a 26 s turn and a turn started 4 s into it", () => {
  it("the second waits: transcript A then B, each finalize sees only its own turn, no lock directory left", async () => {
    const file = path.join(dir, "s.jsonl");
    const ledger = path.join(dir, "ledger.jsonl");
    const common = { file, sessionId: "s-lock", codexHome: path.join(dir, "codex-home"), ledger };
    const promptA = "prompt of turn A";
    const promptB = "prompt of turn B";
    // About 10 SSE events per reply: 2.6 s before each makes A's model answer take about 26 s.
    const a = startLockTurnWorker({ ...common, prompt: promptA, delayMs: 2600 });
    await waitForTurnLedger(ledger, (l) => l.kind === "accepted" && l.pid === a.pid);
    await new Promise((r) => setTimeout(r, 4000));
    const b = startLockTurnWorker({ ...common, prompt: promptB });
    const [ea, eb] = await Promise.all([a.exited, b.exited]);
    const lines = await readLockTurnLedger(ledger);
    for (const l of lines) if (l.kind === "spawned" && l.codexPid !== undefined) codexPids.push(l.codexPid);
    expect(ea).toMatchObject({ code: 0, stderr: "" });
    expect(eb).toMatchObject({ code: 0, stderr: "" });

    // Both completed, without a lock warning (a lost lock would show here).
    const [resultA] = all(lines, "result", a.pid);
    const [resultB] = all(lines, "result", b.pid);
    expect(resultA).toMatchObject({ status: "completed" });
    expect(resultB).toMatchObject({ status: "completed" });
    expect([...resultA!.warnings, ...resultB!.warnings].filter((w) => /lock/i.test(w))).toEqual([]);

    // B started its turn while A's was running, and Codex got B's turn only after A's settled.
    expect(find(lines, "started", b.pid)).toBeLessThan(find(lines, "result", a.pid));
    expect(find(lines, "accepted", b.pid)).toBeGreaterThan(find(lines, "result", a.pid));

    // Transcript order: A's prompt and reply, then B's.
    invalidateSessionIndex();
    const history = await readSessionHistory(file);
    expect(history.messages.map((m) => [m.role, messageText(m)])).toEqual([
      ["user", promptA],
      ["assistant", `reply to: ${promptA}`],
      ["user", promptB],
      ["assistant", `reply to: ${promptB}`],
    ]);

    // Each finalize saw only its own turn's messages.
    const finA = all(lines, "finalize", a.pid);
    const finB = all(lines, "finalize", b.pid);
    expect(finA.map((f) => [f.userTexts, f.assistantTexts])).toEqual([[[promptA], [`reply to: ${promptA}`]]]);
    expect(finB.map((f) => [f.userTexts, f.assistantTexts])).toEqual([[[promptB], [`reply to: ${promptB}`]]]);
    // A's assemble never saw B's prompt; B's saw A's finished turn (it ran after A was mirrored).
    expect(all(lines, "assemble", a.pid).flatMap((l) => l.userTexts)).not.toContain(promptB);
    expect(all(lines, "assemble", b.pid).map((l) => l.userTexts)).toEqual([[promptA]]);

    // No lock directory (nor takeover guard) is left next to the transcript.
    expect((await fsp.readdir(dir)).filter((n) => n.includes(".lock"))).toEqual([]);
  }, 150_000);
});
