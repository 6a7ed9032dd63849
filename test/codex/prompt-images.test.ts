import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_PROMPT_IMAGE_BYTES, promptImagesSchema, sniffImageMimeType, toImagePart, toUserInput } from "../../src/codex/prompt-images.js";

/** A real 1x1 PNG and GIF. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
const GIF = "R0lGODlhAQABAIAAAP///wAAACwAAAAAAQABAAACAkQBADs=";

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "ctm-images-"));
  fs.writeFileSync(path.join(dir, "red.png"), Buffer.from(PNG, "base64"));
  fs.writeFileSync(path.join(dir, "notes.txt"), "not an image");
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The first issue as `path: message`. */
function issueOf(input: unknown): string {
  const r = promptImagesSchema.safeParse(input);
  if (r.success) throw new Error("expected a failure");
  const i = r.error.issues[0]!;
  return `${i.path.join(".")}: ${i.message}`;
}

describe("prompt images", () => {
  it("sniffs PNG, JPEG, GIF and WebP by their first bytes, and nothing else", () => {
    expect(sniffImageMimeType(Buffer.from(PNG, "base64"))).toBe("image/png");
    expect(sniffImageMimeType(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]))).toBe("image/jpeg");
    expect(sniffImageMimeType(Buffer.from(GIF, "base64"))).toBe("image/gif");
    expect(sniffImageMimeType(Buffer.from("RIFF\x24\0\0\0WEBPVP8 ", "latin1"))).toBe("image/webp");
    expect(sniffImageMimeType(Buffer.from("RIFF\x24\0\0\0WAVEfmt ", "latin1"))).toBeUndefined();
    expect(sniffImageMimeType(Buffer.from("%PDF-1.7"))).toBeUndefined();
    expect(sniffImageMimeType(Buffer.alloc(0))).toBeUndefined();
  });

  it("reads a file into bytes and keeps its path; takes base64 bytes as they are", () => {
    const file = path.join(dir, "red.png");
    expect(promptImagesSchema.parse([{ path: file }, { data: GIF, mimeType: "IMAGE/GIF" }])).toEqual([
      { data: PNG, mimeType: "image/png", path: file },
      { data: GIF, mimeType: "image/gif" },
    ]);
  });

  it("names the image and field of every kind of bad input", () => {
    expect(issueOf([{ path: "red.png" }])).toBe("0.path: must be an absolute path (got red.png)");
    expect(issueOf([{ path: path.join(dir, "red.png") }, { path: path.join(dir, "gone.png") }])).toBe(`1.path: cannot read ${path.join(dir, "gone.png")} (ENOENT)`);
    expect(issueOf([{ path: dir }])).toBe(`0.path: ${dir} is not a regular file`);
    expect(issueOf([{ path: path.join(dir, "notes.txt") }])).toBe(`0.path: ${path.join(dir, "notes.txt")} is not a PNG, JPEG, GIF or WebP image`);
    expect(issueOf([{ data: PNG, mimeType: "image/gif" }])).toBe("0.data: the bytes are image/png, not image/gif");
    expect(issueOf([{ data: Buffer.from("hello!").toString("base64"), mimeType: "image/png" }])).toBe("0.data: the bytes are not a supported image, not image/png");
    expect(issueOf([{ data: PNG, mimeType: "image/tiff" }])).toBe("0.mimeType: must be one of image/png, image/jpeg, image/gif, image/webp (got image/tiff)");
    expect(issueOf([{ data: `data:image/png;base64,${PNG}`, mimeType: "image/png" }])).toBe("0.data: must be the base64 payload alone, without a data: URL prefix");
    expect(issueOf([{ data: "not base64!", mimeType: "image/png" }])).toBe("0.data: is not base64");
    expect(issueOf([{ data: "", mimeType: "image/png" }])).toBe("0.data: is not base64");
    expect(issueOf([{ url: "red.png" }])).toMatch(/^0/);
    expect(issueOf("x.png")).toMatch(/expected array/);
  });

  it("refuses a file over the size limit without reading it", () => {
    const big = path.join(dir, "big.png");
    const fd = fs.openSync(big, "w");
    fs.writeSync(fd, Buffer.from(PNG, "base64"));
    fs.ftruncateSync(fd, MAX_PROMPT_IMAGE_BYTES + 1); // sparse: no 20 MiB written
    fs.closeSync(fd);
    expect(issueOf([{ path: big }])).toBe(`0.path: ${big} is ${MAX_PROMPT_IMAGE_BYTES + 1} bytes, over the ${MAX_PROMPT_IMAGE_BYTES}-byte limit`);
  });

  it("a file goes to Codex as localImage (the model sees its path), bytes as a data URL; the transcript part is OpenClaw's", () => {
    expect(toUserInput({ data: PNG, mimeType: "image/png", path: "/w/red.png" })).toEqual({ type: "localImage", path: "/w/red.png" });
    expect(toUserInput({ data: GIF, mimeType: "image/gif" })).toEqual({ type: "image", url: `data:image/gif;base64,${GIF}` });
    expect(toImagePart({ data: PNG, mimeType: "image/png", path: "/w/red.png" })).toEqual({ type: "image", data: PNG, mimeType: "image/png" });
  });
});
