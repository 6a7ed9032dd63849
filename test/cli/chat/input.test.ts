/**
 * Chat input: a bracketed paste is one prompt, a trailing backslash continues a line, otherwise a line is a prompt.
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { createPromptReader } from "../../../src/cli/chat/input.js";

function reader(tty: boolean) {
  const input = Object.assign(new PassThrough(), { isTTY: tty, setRawMode: () => undefined });
  const output = new PassThrough();
  output.resume();
  const prompts: string[] = [];
  let closed = false;
  const r = createPromptReader(input, output, {
    onPrompt: (t) => prompts.push(t),
    onInterrupt: () => undefined,
    onClose: () => (closed = true),
  });
  return { input, prompts, r, isClosed: () => closed };
}

const tick = () => new Promise((r) => setTimeout(r, 20));

describe("createPromptReader", () => {
  it("pipe: one prompt per line; a line ending in a backslash continues", async () => {
    const { input, prompts, isClosed } = reader(false);
    input.end("first\nsecond \\\ncontinued\n\nlast");
    await tick();
    expect(prompts).toEqual(["first", "second \ncontinued", "last"]);
    expect(isClosed()).toBe(true);
  });

  it("terminal: a bracketed paste of several lines is one prompt, sent with Enter", async () => {
    const { input, prompts, r } = reader(true);
    input.write("\x1b[200~line one\rline two\x1b[201~");
    await tick();
    expect(prompts).toEqual([]); // nothing sent until Enter
    input.write("\r");
    await tick();
    expect(prompts).toEqual(["line one\nline two"]);
    input.write("next\r");
    await tick();
    expect(prompts).toEqual(["line one\nline two", "next"]);
    r.close();
  });
});
