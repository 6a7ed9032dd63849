/**
 * The thread binding is a description of the Codex thread, not the record of the turn: no binding write of a turn is
 * fsynced (each is atomic: temp file + rename, so a process crash never leaves a torn one), and the binding is current
 * on disk when the result is reported, for a completed and for a failed turn. The transcript append is the turn's
 * durable write (fsynced before the result). Tracked by recording every fsync the harness makes, by path.
 */
import { promises as fsp } from "node:fs";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { readThreadBinding } from "../../src/transcript/binding.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { trackFsyncs } from "../helpers/fsync-tracker.js";
import { disposeChecked, tempSessions, turnParams } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("binding-durability-");
beforeAll(async () => {
  env = await startOfflineCodex();
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

let restore: (() => void) | undefined;
afterEach(() => restore?.());

async function track(file: string) {
  const t = await trackFsyncs((f) => f.startsWith(file) || f === path.dirname(file), sessions.dir);
  restore = t.restore;
  return t.events;
}

const fsynced = (events: Array<{ kind: string; file: string }>, pred: (f: string) => boolean) => events.filter((e) => e.kind === "fsync-end" && pred(e.file)).length;

describe("thread binding durability", () => {
  it("never fsyncs a binding write; the transcript is fsynced; the binding is current when the result is reported", async () => {
    const file = sessions.file();
    const events = await track(file);
    const r = await runCodexTurn(turnParams(env, file, "durable binding please"));
    expect(r.status).toBe("completed");
    const binding = sessionSidecarPaths(file).binding;
    expect(events.some((e) => e.kind === "open" && e.file.startsWith(`${binding}.tmp-`))).toBe(true);
    expect(fsynced(events, (f) => f.startsWith(binding))).toBe(0);
    expect(fsynced(events, (f) => f === file)).toBeGreaterThanOrEqual(1);
    const onDisk = await readThreadBinding(file);
    expect(onDisk?.threadId).toBe(r.threadId);
    expect(onDisk?.heldTurnIds).toContain(r.turnId);
    expect(onDisk?.lastUsage).toBeDefined();
    const left = (await fsp.readdir(path.dirname(file))).filter((n) => n.includes(".tmp-"));
    expect(left).toEqual([]);
  });

  it("a failed turn (no usage) also leaves the current binding, unfsynced", async () => {
    const file = sessions.file();
    env.fake.enqueue({ httpStatus: 400, body: JSON.stringify({ error: { message: "bad request", type: "invalid_request_error" } }) });
    const events = await track(file);
    const r = await runCodexTurn(turnParams(env, file, "this turn fails"));
    expect(r.status).toBe("failed");
    expect(fsynced(events, (f) => f.startsWith(sessionSidecarPaths(file).binding))).toBe(0);
    expect((await readThreadBinding(file))?.threadId).toBe(r.threadId);
  });
});
