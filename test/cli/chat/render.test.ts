/**
 * Chat display: text streams at once on a terminal and in whole lines into a pipe; notes never glue onto text.
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { createTurnRenderer } from "../../../src/cli/chat/render.js";

function sink() {
  const out = new PassThrough();
  let text = "";
  out.on("data", (c: Buffer) => (text += c.toString()));
  return { out, text: () => text };
}

describe("createTurnRenderer", () => {
  it("pipe: writes whole lines as they complete and the rest at the end", () => {
    const s = sink();
    const view = createTurnRenderer(s.out, false);
    view.onEvent({ type: "state", state: "turnRunning" });
    view.onEvent({ type: "agentMessageDelta", delta: "hel" });
    expect(s.text()).toBe("");
    view.onEvent({ type: "agentMessageDelta", delta: "lo\nwor" });
    expect(s.text()).toBe("hello\n");
    view.onEvent({ type: "agentMessageDelta", delta: "ld" });
    view.finish("hello\nworld");
    expect(s.text()).toBe("hello\nworld\n");
  });

  it("terminal: writes each delta at once; a note starts on its own line", () => {
    const s = sink();
    const view = createTurnRenderer(s.out, true);
    view.onEvent({ type: "agentMessageDelta", delta: "partial" });
    expect(s.text().endsWith("partial")).toBe(true);
    view.note("(steer sent)");
    expect(s.text().endsWith("partial\n(steer sent)\n")).toBe(true);
    view.finish("partial");
  });

  it("prints the final text when nothing streamed", () => {
    const s = sink();
    const view = createTurnRenderer(s.out, false);
    view.finish("only at the end");
    expect(s.text()).toBe("only at the end\n");
  });
});
