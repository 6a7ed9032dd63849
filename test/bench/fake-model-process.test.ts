/**
 * The overhead benchmark's fake model runs in its own process (bench/fake-model-process.ts): it must answer on
 * loopback with the configured reply and must not outlive `close()`.
 */
import { describe, expect, it } from "vitest";
import { startFakeModelProcess } from "../../bench/lib.js";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** POST one streaming turn request; resolves with the time to the first body byte, the whole time and the body. */
async function timedTurn(baseUrl: string): Promise<{ firstByteMs: number; totalMs: number; body: string }> {
  const t0 = performance.now();
  const res = await fetch(`${baseUrl}/responses`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", stream: true, input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] }] }),
  });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  let body = "";
  let firstByteMs: number | undefined;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    firstByteMs ??= performance.now() - t0;
    body += Buffer.from(value).toString("utf8");
  }
  return { firstByteMs: firstByteMs ?? Number.NaN, totalMs: performance.now() - t0, body };
}

describe("fake model process", () => {
  it("paces its events when given a delay (section 3b's streaming model)", async () => {
    const model = await startFakeModelProcess("one two three", { delayMsPerEvent: 60 });
    try {
      const { firstByteMs, totalMs, body } = await timedTurn(model.baseUrl);
      const events = body.split("\n\n").filter((e) => e.startsWith("event:")).length;
      expect(body).toContain("three");
      expect(events).toBeGreaterThan(5);
      // Every event waits its delay: the first arrives after one, the stream takes one per event.
      expect(firstByteMs).toBeGreaterThanOrEqual(55);
      expect(totalMs).toBeGreaterThanOrEqual(events * 60 - 10);
    } finally {
      await model.close();
    }
  }, 30_000);

  it("serves the reply on 127.0.0.1 and exits on close", async () => {
    const model = await startFakeModelProcess("reply from the other process");
    try {
      expect(new URL(model.baseUrl).hostname).toBe("127.0.0.1");
      const res = await fetch(`${model.baseUrl}/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", stream: true, input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] }] }),
      });
      expect(res.status).toBe(200);
      expect(await res.text()).toContain("reply from the other process");
      expect(alive(model.pid)).toBe(true);
    } finally {
      await model.close();
    }
    expect(alive(model.pid)).toBe(false);
  }, 30_000);
});
