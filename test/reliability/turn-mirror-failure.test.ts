/**
 * Nothing lost (issue 13 item 2), end to end with the real app-server: a transcript we cannot extend fails the
 * attempt before the model is called, and a turn whose transcript write fails (a really full disk: a 256 KiB tmpfs)
 * is never reported as completed; it stays in the pending record, the engine is not finalized from it, and the next
 * attempt, once space is freed, writes it, finalizes it once, and only then runs the new turn.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { createRecordingEngine } from "../../src/context-engine/engines/index.js";
import { listPendingFinalize } from "../../src/transcript/pending.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { disposeChecked, messageText, tempSessions, turnParams } from "../helpers/turn-env.js";
import { fillDisk } from "../helpers/full-disk.js";

let env: OfflineCodex;
const sessions = tempSessions("turn-mirror-failure-");

beforeAll(async () => {
  env = await startOfflineCodex();
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

describe("a transcript we cannot extend", () => {
  for (const version of [1, 2, 4]) {
    it(`a pi v${version} header fails at loadHistory before the model is called, and the file is untouched`, async () => {
      const file = sessions.file();
      const header = JSON.stringify({ type: "session", version, id: path.basename(file, ".jsonl"), timestamp: "2026-01-01T00:00:00.000Z", cwd: "/" });
      writeFileSync(file, `${header}\n`);
      const before = readFileSync(file, "utf8");
      const requests = env.fake.requests.length;
      const r = await runCodexTurn(turnParams(env, file, "must not run", { contextEngine: createRecordingEngine() }));
      expect(r.status).toBe("failed");
      expect(r.error).toMatchObject({ phase: "loadHistory" });
      expect(r.error?.code).toMatch(/VERSION/);
      expect(env.fake.requests.length).toBe(requests);
      expect(readFileSync(file, "utf8")).toBe(before);
    });
  }
});

describe("a full disk while mirroring", () => {
  let dir: string;
  let mounted = false;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "turn-full-disk-"));
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", dir], { stdio: "ignore" });
    mounted = true;
  });
  afterAll(() => {
    if (mounted) execFileSync("umount", [dir], { stdio: "ignore" });
    rmSync(dir, { recursive: true, force: true });
  });

  it("the turn fails with phase mirror, stays in the pending record, and the next attempt completes it first", async () => {
    const file = path.join(dir, "s.jsonl");
    const engine = createRecordingEngine();
    const first = await runCodexTurn(turnParams(env, file, "first turn", { contextEngine: engine }));
    expect(first.status).toBe("completed");
    // A big reply and prompt that cannot fit; the pending record (written first, with the snapshot) goes to the same
    // file system, so leave just enough for it and not for the transcript append.
    const big = "x".repeat(6_000);
    const filler = await fillDisk(dir, 52_000);
    env.fake.enqueue({ text: `big reply ${big}${big}${big}` });
    const calls = engine.calls.length;
    const second = await runCodexTurn(turnParams(env, file, `second turn ${big}`, { contextEngine: engine }));
    expect(second.status).toBe("failed");
    expect(second.error?.phase).toBe("mirror");
    expect(second.engine.finalize).toBe("skipped:mirrorFailed");
    expect(engine.calls.slice(calls).map((c) => c.method)).not.toContain("afterTurn");
    expect((await readSessionHistory(file)).messages.map(messageText)).toEqual(["first turn", "reply to: first turn"]);
    const pending = await listPendingFinalize(file);
    expect(pending.map((p) => p.turnId)).toEqual([second.turnId]);
    expect(pending[0]!.messages?.length).toBe(second.messagesSnapshot.length);

    // Space is freed: the next attempt writes the kept turn, finalizes it once, then runs its own.
    unlinkSync(filler);
    const before = engine.calls.length;
    const third = await runCodexTurn(turnParams(env, file, "third turn", { contextEngine: engine }));
    expect(third.status).toBe("completed");
    const texts = (await readSessionHistory(file)).messages.map(messageText);
    expect(texts).toEqual(["first turn", "reply to: first turn", `second turn ${big}`, `big reply ${big}${big}${big}`, "third turn", "reply to: third turn"]);
    expect(engine.calls.slice(before).filter((c) => c.method === "afterTurn")).toHaveLength(2);
    expect(await listPendingFinalize(file)).toEqual([]);
    expect(existsSync(`${file}.lock`)).toBe(false);
  });
});
