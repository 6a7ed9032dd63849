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

describe("fake model process", () => {
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
