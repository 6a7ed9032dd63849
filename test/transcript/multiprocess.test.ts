import { spawn } from "node:child_process";
import { promises as fsp } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { FaultPointName } from "../../src/transcript/fault.js";
import { mirrorTurnToTranscript } from "../../src/transcript/mirror.js";
import { withSessionLock } from "../../src/transcript/lock.js";
import { rewriteTranscriptEntriesInFile } from "../../src/transcript/rewrite.js";
import { listPendingFinalize, recordPendingFinalize } from "../../src/transcript/pending.js";
import { invalidateSessionIndex, readSessionHistory, readSessionTranscript } from "../../src/transcript/session-file.js";
import { captureLogger, readLines, tempDir } from "./helpers.js";
import { turnMessages } from "./fixtures/turn-messages.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const worker = path.join(here, "fixtures", "mirror-worker.ts");
const projectRoot = path.resolve(here, "..", "..");

interface WorkerResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function runWorker(job: Record<string, unknown>): Promise<WorkerResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", worker, JSON.stringify(job)], {
      cwd: projectRoot,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 25_000);
    child.on("error", reject);
    // "close" fires after the process was reaped, so its pid is really gone when we look at the lock.
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

let dir: string;
let file: string;
beforeEach(async () => {
  dir = await tempDir();
  file = path.join(dir, "s.jsonl");
  invalidateSessionIndex();
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

/** Every turn exactly once, complete, contiguous, in one linear chain, and the file clean. */
async function expectTurnsOnce(turns: string[]): Promise<void> {
  const t = await readSessionTranscript(file);
  expect(t.damage).toEqual({ corruptLines: [], tornTailBytes: 0 });
  t.entries.forEach((e, i) => expect(e.parentId).toBe(i === 0 ? null : t.entries[i - 1]!.id));
  const keys = t.entries.map((e) => e.idempotencyKey);
  expect(new Set(keys).size).toBe(keys.length);
  const h = await readSessionHistory(file);
  expect(h.messages).toHaveLength(turns.length * 5);
  const seen: string[] = [];
  for (let i = 0; i < h.origins.length; i += 5) {
    const turnId = h.origins[i]!.turnId;
    seen.push(turnId);
    expect(h.origins.slice(i, i + 5)).toEqual(Array(5).fill({ threadId: "thr", turnId }));
    expect(h.messages.slice(i, i + 5)).toEqual(turnMessages("thr", turnId));
  }
  expect([...seen].sort()).toEqual([...turns].sort());
}

describe("several processes mirroring into one session", () => {
  it("serialize: no interleaved or lost lines, each turn once (including turns two processes both mirror)", async () => {
    const shared = ["s0", "s1", "s2"];
    const jobs = [
      { turns: ["a0", "a1", "a2", "a3", "a4", "a5", ...shared] },
      { turns: ["b0", "b1", "b2", "b3", "b4", "b5", ...shared] },
      { turns: ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"] },
      { turns: [...shared, "d0", "d1", "d2", "d3", "d4"] },
    ];
    const startAt = Date.now() + 3000;
    const results = await Promise.all(jobs.map((j) => runWorker({ file, sessionId: "s", threadId: "thr", startAt, ...j })));
    for (const r of results) {
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      expect(r.stdout).toBe("done\n");
    }
    const all = [...new Set(jobs.flatMap((j) => j.turns))];
    await expectTurnsOnce(all);
    expect(await readLines(file)).toHaveLength(1 + all.length * 5);
  });
});

describe("a mirroring process SIGKILLed part-way", () => {
  const turns = ["k0", "k1", "k2"];
  const cases: Array<{ at: FaultPointName; pending: string[]; tornSideFile: boolean }> = [
    { at: "transcript:before-write", pending: ["k0", "k1"], tornSideFile: false },
    { at: "transcript:mid-write", pending: ["k0", "k1"], tornSideFile: true },
    { at: "transcript:after-write", pending: ["k0", "k1"], tornSideFile: false },
    { at: "pending:before-rename", pending: ["k0"], tornSideFile: false },
    { at: "pending:after-rename", pending: ["k0", "k1"], tornSideFile: false },
  ];

  for (const c of cases) {
    it(`recovers with every turn exactly once (killed at ${c.at} of the second turn)`, async () => {
      const r = await runWorker({ file, sessionId: "s", threadId: "thr", turns, recordPending: true, killAt: c.at, killOnTurn: 1 });
      expect(r.signal).toBe("SIGKILL");
      expect(r.stdout).toBe("");

      // The dead process still "holds" the lock directory; the next attempt must take it over, not wait it out.
      const cap = captureLogger();
      for (const turnId of turns) {
        await mirrorTurnToTranscript({
          sessionFile: file,
          sessionId: "s",
          threadId: "thr",
          turnId,
          messages: turnMessages("thr", turnId),
          logger: cap.logger,
          lock: { timeoutMs: 8000, staleMs: 600_000 },
        });
      }
      expect(cap.events()).toContain("transcript.lock.dead_owner_takeover");
      expect(cap.events().includes("transcript.torn_tail_repaired")).toBe(c.tornSideFile);
      if (c.tornSideFile) {
        const torn = await fsp.readFile(`${file}.torn-1`, "utf8");
        expect(torn.length).toBeGreaterThan(0);
        expect(torn.endsWith("\n")).toBe(false);
      }
      await expectTurnsOnce(turns);
      // The durable pending records the worker wrote survive exactly as far as it got.
      expect((await listPendingFinalize(file)).map((p) => p.turnId)).toEqual(c.pending);
      // The next pending update works and leaves no temp file from the crash behind.
      await recordPendingFinalize(file, { threadId: "thr", turnId: "k2", prePromptMessageCount: 10, messageCount: 5, status: "completed" });
      expect((await listPendingFinalize(file)).map((p) => p.turnId)).toEqual([...c.pending, "k2"]);
      expect((await fsp.readdir(dir)).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    });
  }
});

describe("a rewriting process SIGKILLed before its rename", () => {
  it("leaves the transcript exactly as it was; the next rewrite takes the lock over and clears the dead one's temp file", async () => {
    const first = await runWorker({ file, sessionId: "s", threadId: "thr", turns: ["r0", "r1"] });
    expect(first.stdout).toBe("done\n");
    const before = await fsp.readFile(file, "utf8");
    const target = (await readSessionTranscript(file)).entries[5]!.id; // r1's prompt
    const r = await runWorker({ file, sessionId: "s", threadId: "thr", turns: [], rewriteEntryIds: [target], killAt: "rewrite:before-rename", killOnTurn: 0 });
    expect(r.signal).toBe("SIGKILL");
    expect(await fsp.readFile(file, "utf8")).toBe(before);
    // The dead rewrite's temp file is complete (fsynced) but was never renamed.
    expect((await fsp.readdir(dir)).filter((n) => n.endsWith(".tmp"))).toHaveLength(1);

    const cap = captureLogger();
    const result = await withSessionLock(
      file,
      () => rewriteTranscriptEntriesInFile(file, { replacements: [{ entryId: target, message: { role: "user", content: "[rewritten]" } }] }, { sessionId: "s", logger: cap.logger }),
      { timeoutMs: 8000, staleMs: 600_000, logger: cap.logger },
    );
    expect(result).toMatchObject({ changed: true, rewrittenEntries: 1 });
    expect(cap.events()).toContain("transcript.lock.dead_owner_takeover");
    expect((await fsp.readdir(dir)).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    const history = await readSessionHistory(file, { sessionId: "s" });
    expect(history.messages).toHaveLength(10);
    expect(history.messages[5]).toEqual({ role: "user", content: "[rewritten]" });
  });
});
