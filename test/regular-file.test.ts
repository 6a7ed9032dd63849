/**
 * Config-like files named by a person (src/regular-file.ts): a FIFO is refused at once instead of blocking for a
 * writer, a device such as /dev/zero and a directory are refused without reading, an oversized file is refused.
 */
import { execFileSync } from "node:child_process";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { IrregularFileError, readRegularTextFile } from "../src/regular-file.js";
import { testTempDir } from "./helpers/temp-dir.js";

const refused = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as IrregularFileError);

describe("readRegularTextFile", () => {
  it("reads a regular file (symlinks followed)", async () => {
    const dir = await testTempDir("ctm-regular-file-");
    await writeFile(path.join(dir, "a.json"), '{"a":1}');
    expect(await readRegularTextFile(path.join(dir, "a.json"))).toBe('{"a":1}');
  });

  it("refuses a FIFO at once, a character device and a directory, naming the kind", async () => {
    const dir = await testTempDir("ctm-regular-file-");
    const fifo = path.join(dir, "fifo");
    execFileSync("mkfifo", [fifo]);
    const e = await refused(readRegularTextFile(fifo));
    expect(e).toBeInstanceOf(IrregularFileError);
    expect(e).toMatchObject({ code: "NOT_REGULAR_FILE", message: "not a regular file (a FIFO)" });
    expect(await refused(readRegularTextFile("/dev/zero"))).toMatchObject({ code: "NOT_REGULAR_FILE", message: "not a regular file (a character device)" });
    expect(await refused(readRegularTextFile(dir))).toMatchObject({ code: "NOT_REGULAR_FILE", message: "not a regular file (a directory)" });
  });

  it("refuses a file larger than the bound", async () => {
    const dir = await testTempDir("ctm-regular-file-");
    await writeFile(path.join(dir, "big"), "x".repeat(101));
    expect(await refused(readRegularTextFile(path.join(dir, "big"), 100))).toMatchObject({ code: "FILE_TOO_LARGE", message: "larger than 100 bytes (101)" });
    expect(await readRegularTextFile(path.join(dir, "big"), 101)).toHaveLength(101);
  });
});
