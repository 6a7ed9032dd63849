import { describe, expect, it } from "vitest";
import { encodeRpcLine, replaceLoneSurrogates } from "../../src/codex/json-safe.js";

const roundTrip = (s: string) => JSON.parse(replaceLoneSurrogates(JSON.stringify({ s })).text) as { s: string };

describe("replaceLoneSurrogates", () => {
  it("replaces lone high and low surrogates with U+FFFD and counts them", () => {
    expect(replaceLoneSurrogates(JSON.stringify({ s: "a\ud800b\udc00c" }))).toEqual({ text: '{"s":"a\\ufffdb\\ufffdc"}', replaced: 2 });
    expect(roundTrip("end\udbff").s).toBe("end\ufffd");
  });

  it("keeps pairs, emoji, escaped backslashes and ordinary text byte-identical", () => {
    for (const s of ["ok 😀", "\\ud800 is text", "\\\\ud800", "plain", "\ud83d\ude00"]) {
      const json = JSON.stringify({ s });
      expect(replaceLoneSurrogates(json)).toEqual({ text: json, replaced: 0 });
    }
  });

  it("replaces the lone half next to a pair and leaves the pair", () => {
    expect(roundTrip("\ud800\ud83d\ude00").s).toBe("\ufffd😀");
    expect(roundTrip("\ud83d\ude00\udc00").s).toBe("😀\ufffd");
  });

  it("finds lone surrogates in keys too, and the line ends with a newline", () => {
    const { line, replaced } = encodeRpcLine({ id: 1, method: "m", params: { ["k\ud800"]: "v" } });
    expect(replaced).toBe(1);
    expect(line.endsWith("\n")).toBe(true);
    expect(JSON.parse(line)).toEqual({ id: 1, method: "m", params: { "k\ufffd": "v" } });
  });
});
