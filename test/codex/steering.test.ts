import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { SteerBatcher } from "../../src/codex/steering.js";

type Outcome = { accepted: true } | { accepted: false; reason: string };

function recorder(outcomes: Outcome[] = []) {
  const sent: string[] = [];
  const send = async (text: string): Promise<Outcome> => {
    sent.push(text);
    return outcomes.shift() ?? { accepted: true };
  };
  return { sent, send };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("SteerBatcher", () => {
  it("batches texts that arrive within the quiet window into one send, in arrival order", async () => {
    const { sent, send } = recorder();
    const b = new SteerBatcher({ quietWindowMs: 50, send });
    const p1 = b.steer("one");
    await vi.advanceTimersByTimeAsync(30);
    const p2 = b.steer("two");
    await vi.advanceTimersByTimeAsync(30);
    const p3 = b.steer("three");
    expect(sent).toEqual([]);
    await vi.advanceTimersByTimeAsync(60);
    expect(await Promise.all([p1, p2, p3])).toEqual([{ accepted: true }, { accepted: true }, { accepted: true }]);
    expect(sent).toEqual(["one\n\ntwo\n\nthree"]);
    expect(b.sentBatches).toBe(1);
  });

  it("sends separate batches when the window passed, keeping order", async () => {
    const { sent, send } = recorder();
    const b = new SteerBatcher({ quietWindowMs: 20, send });
    const p1 = b.steer("a");
    await vi.advanceTimersByTimeAsync(25);
    const p2 = b.steer("b");
    await vi.advanceTimersByTimeAsync(25);
    await Promise.all([p1, p2]);
    expect(sent).toEqual(["a", "b"]);
  });

  it("caps how long a batch can be held open by a stream of texts", async () => {
    const { sent, send } = recorder();
    const b = new SteerBatcher({ quietWindowMs: 50, maxBatchDelayMs: 120, send });
    const all: Array<Promise<unknown>> = [];
    for (let i = 0; i < 10; i++) {
      all.push(b.steer(`t${i}`));
      await vi.advanceTimersByTimeAsync(40);
    }
    await vi.advanceTimersByTimeAsync(100);
    await Promise.all(all);
    expect(sent.length).toBeGreaterThan(1);
    expect(sent.join("\n\n")).toBe(Array.from({ length: 10 }, (_, i) => `t${i}`).join("\n\n"));
  });

  it("returns every text of a rejected batch as its caller's follow-up", async () => {
    const { sent, send } = recorder([{ accepted: false, reason: "no active turn to steer" }]);
    const b = new SteerBatcher({ quietWindowMs: 10, send });
    const p1 = b.steer("x");
    const p2 = b.steer("y");
    await vi.advanceTimersByTimeAsync(20);
    expect(await p1).toEqual({ accepted: false, followUp: ["x"], reason: "no active turn to steer" });
    expect(await p2).toEqual({ accepted: false, followUp: ["y"], reason: "no active turn to steer" });
    expect(sent).toEqual(["x\n\ny"]);
  });

  it("treats a throwing send as a rejection (texts are never lost)", async () => {
    const b = new SteerBatcher({
      quietWindowMs: 0,
      send: async () => {
        throw new Error("process exited");
      },
    });
    const p = b.steer("keep me");
    await vi.advanceTimersByTimeAsync(1);
    expect(await p).toEqual({ accepted: false, followUp: ["keep me"], reason: "process exited" });
  });

  it("after close, queued and later texts come back as follow-ups without sending", async () => {
    const { sent, send } = recorder();
    const b = new SteerBatcher({ quietWindowMs: 50, send });
    const queued = b.steer("queued");
    b.close("turn completed");
    expect(await queued).toEqual({ accepted: false, followUp: ["queued"], reason: "turn completed" });
    expect(await b.steer("later")).toEqual({ accepted: false, followUp: ["later"], reason: "turn completed" });
    await vi.advanceTimersByTimeAsync(100);
    expect(sent).toEqual([]);
    expect(b.closed).toBe(true);
  });

  it("does not send a batch that waited behind an in-flight send when the turn closed meanwhile", async () => {
    let release!: (o: Outcome) => void;
    const sent: string[] = [];
    const b = new SteerBatcher({
      quietWindowMs: 5,
      send: (text) => {
        sent.push(text);
        return new Promise<Outcome>((r) => (release = r));
      },
    });
    const first = b.steer("first");
    await vi.advanceTimersByTimeAsync(10);
    const second = b.steer("second");
    await vi.advanceTimersByTimeAsync(10);
    b.close();
    release({ accepted: true });
    expect(await first).toEqual({ accepted: true });
    expect(await second).toMatchObject({ accepted: false, followUp: ["second"] });
    expect(sent).toEqual(["first"]);
  });

  it("hands a batch's steers with their images to send, and gives a rejected or late steer its images back", async () => {
    const png = { data: "iVBORw0KGgo=", mimeType: "image/png" as const };
    const items: unknown[] = [];
    const outcomes: Outcome[] = [{ accepted: false, reason: "no active turn" }];
    const b = new SteerBatcher({
      quietWindowMs: 10,
      send: async (text, batch) => {
        items.push({ text, batch });
        return outcomes.shift() ?? { accepted: true };
      },
    });
    const p1 = b.steer("with image", [png]);
    const p2 = b.steer("text only");
    await vi.advanceTimersByTimeAsync(20);
    expect(items).toEqual([{ text: "with image\n\ntext only", batch: [{ text: "with image", images: [png] }, { text: "text only", images: [] }] }]);
    expect(await p1).toEqual({ accepted: false, followUp: ["with image"], images: [png], reason: "no active turn" });
    expect(await p2).toEqual({ accepted: false, followUp: ["text only"], reason: "no active turn" });
    const pending = b.steer("queued", [png]);
    b.close("turn ended");
    expect(await pending).toEqual({ accepted: false, followUp: ["queued"], images: [png], reason: "turn ended" });
    expect(await b.steer("late", [png])).toEqual({ accepted: false, followUp: ["late"], images: [png], reason: "turn ended" });
  });
});
