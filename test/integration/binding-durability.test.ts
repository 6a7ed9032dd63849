/**
 * The thread binding is written without fsync when Codex accepts the turn (an fsync there holds up Codex's own writes
 * during the turn), so the turn must end with a durable binding write before its result is reported: the usage write,
 * or, when the turn reported no usage, a final write at settle. Tracked by recording, in order, every binding temp
 * file opened and every FileHandle.sync on it.
 */
import { promises as fsp } from "node:fs";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { readThreadBinding } from "../../src/transcript/binding.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
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

type Op = { op: "open" | "sync"; file: string };
let restore: (() => void) | undefined;
afterEach(() => restore?.());

/** Record opens and syncs of files whose name starts with `prefix` (the binding's temp files). */
async function trackBindingWrites(prefix: string): Promise<Op[]> {
  const ops: Op[] = [];
  const probe = await fsp.open(path.join(sessions.dir, "probe"), "w");
  const proto = Object.getPrototypeOf(probe) as { sync: (...a: unknown[]) => Promise<void> };
  await probe.close();
  const handles = new WeakMap<object, string>();
  const originalOpen = fsp.open;
  const originalSync = proto.sync;
  fsp.open = (async (...args: Parameters<typeof fsp.open>) => {
    const handle = await originalOpen(...args);
    const file = String(args[0]);
    if (file.startsWith(prefix)) {
      handles.set(handle, file);
      ops.push({ op: "open", file });
    }
    return handle;
  }) as typeof fsp.open;
  proto.sync = async function (this: object, ...a: unknown[]) {
    const file = handles.get(this);
    if (file) ops.push({ op: "sync", file });
    return originalSync.apply(this, a);
  };
  restore = () => {
    fsp.open = originalOpen;
    proto.sync = originalSync;
  };
  return ops;
}

/** Per binding write (temp file), in order: whether it was fsynced. */
function writes(ops: Op[]): boolean[] {
  const order: string[] = [];
  for (const o of ops) if (o.op === "open" && !order.includes(o.file)) order.push(o.file);
  return order.map((file) => ops.some((o) => o.op === "sync" && o.file === file));
}

describe("thread binding durability", () => {
  it("writes the accept-time binding without fsync and ends with a durable write (completed turn, usage reported)", async () => {
    const file = sessions.file();
    const ops = await trackBindingWrites(`${sessionSidecarPaths(file).binding}.tmp-`);
    const r = await runCodexTurn(turnParams(env, file, "durable binding please"));
    expect(r.status).toBe("completed");
    const w = writes(ops);
    expect(w[0]).toBe(false);
    expect(w.at(-1)).toBe(true);
    expect((await readThreadBinding(file))?.threadId).toBe(r.threadId);
  });

  it("makes the binding durable at settle when the turn reported no usage", async () => {
    const file = sessions.file();
    env.fake.enqueue({ httpStatus: 400, body: JSON.stringify({ error: { message: "bad request", type: "invalid_request_error" } }) });
    const ops = await trackBindingWrites(`${sessionSidecarPaths(file).binding}.tmp-`);
    const r = await runCodexTurn(turnParams(env, file, "this turn fails"));
    expect(r.status).toBe("failed");
    const w = writes(ops);
    expect(w.length).toBeGreaterThanOrEqual(2);
    expect(w[0]).toBe(false);
    expect(w.at(-1)).toBe(true);
    expect((await readThreadBinding(file))?.threadId).toBe(r.threadId);
  });
});
