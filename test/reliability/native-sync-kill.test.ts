/**
 * A process killed (SIGKILL) in the middle of native mode's sync: a worker running real offline Codex turns in native
 * projection mode dies right after `thread/revert` or right after `thread/inject_items`, before the binding records
 * what Codex did; the next attempt (this process, a new app-server on the same CODEX_HOME) repairs the thread from the
 * binding's intent. The model input of that attempt is exactly the engine's view plus the prompt, each item once.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { startOfflineCodex } from "../../src/testing/index.js";
import { readThreadBinding } from "../../src/transcript/binding.js";
import type { FaultPointName } from "../../src/transcript/fault.js";
import { conversation, expected } from "../helpers/native-input.js";
import { disposeChecked, requestThreadId } from "../helpers/turn-env.js";
import { processAlive } from "./fixtures/turn-worker.js";
import { foldEngine, type NativeSyncJob } from "./fixtures/native-sync-worker.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const worker = path.join(root, "test", "reliability", "fixtures", "native-sync-worker.ts");
const dirs: string[] = [];
const strays: number[] = [];
afterEach(() => {
  // The dead worker's app-server normally exits with its stdin; never leave one running.
  for (const pid of strays.splice(0)) if (processAlive(pid)) process.kill(pid, "SIGKILL");
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function runWorker(job: NativeSyncJob): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", worker, JSON.stringify(job)], { cwd: root, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 150_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stderr });
    });
  });
}

describe("native sync killed with SIGKILL", () => {
  for (const point of ["native:after-revert", "native:after-inject"] as FaultPointName[]) {
    it(`killed at ${point}: the next attempt's model input is the view, each item once`, async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), "ctm-native-kill-"));
      dirs.push(dir);
      const job: NativeSyncJob = {
        file: path.join(dir, "session.jsonl"),
        codexHome: path.join(dir, "codex-home"),
        pidFile: path.join(dir, "codex.pid"),
        reachedFile: path.join(dir, "reached"),
        prompts: ["k1", "k2", "k3", "k4", "k5"],
        kill: { point, prompt: "k5" },
      };
      const exit = await runWorker(job);
      const codexPid = existsSync(job.pidFile) ? Number(readFileSync(job.pidFile, "utf8")) : 0;
      if (codexPid > 0) strays.push(codexPid);
      expect(exit.signal, exit.stderr).toBe("SIGKILL");
      // It died at the fault point, not by the parent's timer.
      expect(existsSync(job.reachedFile) ? readFileSync(job.reachedFile, "utf8") : "(never reached)").toBe(point);
      const left = await readThreadBinding(job.file);
      expect(left?.native?.intent, "the binding still says which step was running").toBeDefined();

      const env = await startOfflineCodex({ codex: { codexHome: job.codexHome } });
      try {
        const engine = foldEngine();
        env.fake.enqueue({ text: "answer to k5" });
        const result = await runCodexTurn({ appServer: env.codex, sessionId: "native-kill", sessionFile: job.file, prompt: "k5", contextEngine: engine, projection: { mode: "native" } });
        expect(result.status, JSON.stringify(result.error)).toBe("completed");
        expect(result.projection?.native?.decision).toBe("resync");
        const request = env.fake.requests.find((r) => r.requestKind === "turn")!;
        expect(requestThreadId(request)).toBe(left?.threadId);
        const lines = conversation(request);
        expect(lines).toEqual(expected(engine.last, "k5"));
        expect(new Set(lines).size).toBe(lines.length);
        expect((await readThreadBinding(job.file))?.native?.intent).toBeUndefined();
      } finally {
        await disposeChecked(env);
      }
    }, 240_000);
  }
});
