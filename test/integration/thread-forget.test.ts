/**
 * Real binary: a client remembers at most `maxRememberedThreads` threads it no longer holds loaded. The most recently
 * used ones still re-attach by themselves (a direct `startTurn` resumes them with their settings); a turn on a forgotten
 * one is refused by Codex until the host resumes it, and then has its whole history; a compaction of one still runs. The rule itself is unit-tested in
 * test/codex/thread-release.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CodexAppServerError } from "../../src/codex/errors.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";

let env: OfflineCodex;

beforeAll(async () => {
  env = await startOfflineCodex({ codex: { maxRememberedThreads: 1 } });
});
afterAll(async () => {
  await env?.dispose();
});

/** The text of the model request, to look for markers in. */
const requestText = (i: number) => JSON.stringify(env.fake.requests[i]?.body ?? null);

describe("threads the client no longer holds (maxRememberedThreads)", () => {
  it("after a restart only the most recently used re-attaches by itself; a forgotten one is refused until resumed, history intact", async () => {
    const { codex, fake } = env;
    const ids: Record<string, string> = {};
    for (const name of ["A", "B", "C"]) {
      ids[name] = (await codex.startThread({ developerInstructions: `DEV-${name}` })).threadId;
      const first = await (await codex.startTurn({ threadId: ids[name]!, text: `first turn ${name}` })).completion;
      expect(first.codexStatus).toBe("completed");
    }
    // The new process holds none of the three: all are remembered, over the limit of one, until the sweep.
    await codex.restart();
    codex.releaseIdleThreads();

    // C, used last, is still remembered: a turn on it resumes it with the instructions it had.
    let before = fake.requests.length;
    const c = await (await codex.startTurn({ threadId: ids.C!, text: "second turn C" })).completion;
    expect(c.codexStatus).toBe("completed");
    expect(requestText(before)).toContain("DEV-C");
    expect(requestText(before)).toContain("first turn C");

    // A was forgotten: nothing resumes it behind the host's back, and Codex refuses a turn on a thread it does not hold.
    const refused = await codex.startTurn({ threadId: ids.A!, text: "second turn A" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(CodexAppServerError);
    expect((refused as CodexAppServerError).code).toBe("TURN_START_REJECTED");
    // A native compaction needs no record: B, forgotten too, is resumed with no overrides for it (and released after).
    const compaction = await codex.compactThread({ threadId: ids.B!, timeoutMs: 15_000 });
    expect(compaction).toMatchObject({ ok: true, threadId: ids.B });

    // Resumed by the host (as runCodexTurn always does), it has its whole history.
    await codex.resumeThread({ threadId: ids.A!, developerInstructions: "DEV-A" });
    before = fake.requests.length;
    const a = await (await codex.startTurn({ threadId: ids.A!, text: "second turn A" })).completion;
    expect(a.codexStatus).toBe("completed");
    expect(requestText(before)).toContain("first turn A");
    expect(requestText(before)).toContain("DEV-A");
  });
});
