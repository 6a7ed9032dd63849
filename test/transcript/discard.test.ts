import { execFile } from "node:child_process";
import fs, { promises as fsp } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { discardedName, discardPath, drainDiscards } from "../../src/transcript/discard.js";
import { tempDir } from "./helpers.js";

let dir: string;
beforeEach(async () => {
  dir = await tempDir("ctm-discard-");
});
afterEach(async () => {
  await drainDiscards();
  await fsp.rm(dir, { recursive: true, force: true });
});

const failInPlace = () => {
  throw new Error("removeInPlace must not be called");
};

describe("discardPath", () => {
  it("makes a file disappear at once and removes its renamed copy in the background", async () => {
    const file = path.join(dir, "s.jsonl.codex-pending.json");
    fs.writeFileSync(file, "{}");
    expect(discardPath(file, failInPlace)).toBe(true);
    expect(fs.existsSync(file)).toBe(false);
    await drainDiscards();
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it("removes a directory with files in it (the session lock)", async () => {
    const lock = path.join(dir, "s.jsonl.lock");
    fs.mkdirSync(lock);
    fs.writeFileSync(path.join(lock, "owner.json"), "{}");
    expect(discardPath(lock, failInPlace)).toBe(true);
    expect(fs.existsSync(lock)).toBe(false);
    await drainDiscards();
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it("removes a path laid out as declared with just its syscalls: a file, a directory with its known files", async () => {
    const file = path.join(dir, "s.jsonl.codex-pending.json");
    fs.writeFileSync(file, "{}");
    const lock = path.join(dir, "s.jsonl.lock");
    fs.mkdirSync(lock);
    fs.writeFileSync(path.join(lock, "owner.json"), "{}");
    const rm = vi.spyOn(fs.promises, "rm");
    try {
      expect(discardPath(file, failInPlace, { file: true })).toBe(true);
      expect(discardPath(lock, failInPlace, { files: ["owner.json"] })).toBe(true);
      expect(fs.existsSync(file) || fs.existsSync(lock)).toBe(false);
      await drainDiscards();
      // unlink / rmdir only: the recursive rm (lstat, readdir, ...) was not needed.
      expect(rm).not.toHaveBeenCalled();
    } finally {
      rm.mockRestore();
    }
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it("starts the background removal only once the current work is done (not inside the step that discards)", async () => {
    const file = path.join(dir, "s.jsonl.codex-pending.json");
    fs.writeFileSync(file, "{}");
    const unlink = vi.spyOn(fs.promises, "unlink");
    try {
      expect(discardPath(file, failInPlace, { file: true })).toBe(true);
      // What runs right after the discard (the rest of the turn, its result, the caller's continuation) runs first.
      for (let i = 0; i < 10; i++) await Promise.resolve();
      expect(unlink).not.toHaveBeenCalled();
      expect(fs.existsSync(discardedName(file))).toBe(true);
      await drainDiscards();
      expect(unlink).toHaveBeenCalledTimes(1);
    } finally {
      unlink.mockRestore();
    }
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it("removes recursively what does not match its declared layout", async () => {
    // A directory declared as a file, and one holding more than its declared files (or its file is a directory).
    const notAFile = path.join(dir, "a");
    fs.mkdirSync(path.join(notAFile, "deep"), { recursive: true });
    fs.writeFileSync(path.join(notAFile, "deep", "x"), "x");
    const moreFiles = path.join(dir, "b.lock");
    fs.mkdirSync(moreFiles);
    fs.writeFileSync(path.join(moreFiles, "owner.json"), "{}");
    fs.writeFileSync(path.join(moreFiles, "stray"), "x");
    const ownerIsDir = path.join(dir, "c.lock");
    fs.mkdirSync(path.join(ownerIsDir, "owner.json"), { recursive: true });
    const rm = vi.spyOn(fs.promises, "rm");
    try {
      expect(discardPath(notAFile, failInPlace, { file: true })).toBe(true);
      expect(discardPath(moreFiles, failInPlace, { files: ["owner.json"] })).toBe(true);
      expect(discardPath(ownerIsDir, failInPlace, { files: ["owner.json"] })).toBe(true);
      await drainDiscards();
      // Each one fell back to the recursive removal.
      expect(rm).toHaveBeenCalledTimes(3);
    } finally {
      rm.mockRestore();
    }
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it("reports a missing path as not removed, and does not fall back", async () => {
    expect(discardPath(path.join(dir, "nothing"), failInPlace)).toBe(false);
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it("replaces a file a crash left under the discarded name", async () => {
    const file = path.join(dir, "record.json");
    fs.writeFileSync(discardedName(file), "left by a crash");
    fs.writeFileSync(file, "{}");
    expect(discardPath(file, failInPlace)).toBe(true);
    await drainDiscards();
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it("removes in place when the discarded name holds a directory that is not empty", async () => {
    const lock = path.join(dir, "s.jsonl.lock");
    fs.mkdirSync(discardedName(lock));
    fs.writeFileSync(path.join(discardedName(lock), "owner.json"), "left by a crash");
    fs.mkdirSync(lock);
    fs.writeFileSync(path.join(lock, "owner.json"), "{}");
    let inPlace = 0;
    expect(discardPath(lock, () => {
      inPlace++;
      fs.rmSync(lock, { recursive: true });
    })).toBe(true);
    expect(inPlace).toBe(1);
    expect(fs.existsSync(lock)).toBe(false);
    // The leftover goes in the background, so the next discard of the lock is a rename again.
    await drainDiscards();
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it("propagates what the in-place removal throws", () => {
    const lock = path.join(dir, "s.jsonl.lock");
    fs.mkdirSync(discardedName(lock));
    fs.writeFileSync(path.join(discardedName(lock), "x"), "");
    fs.mkdirSync(lock);
    expect(() => discardPath(lock, () => {
      throw Object.assign(new Error("EACCES"), { code: "EACCES" });
    })).toThrow("EACCES");
  });

  it("leaves nothing behind when the process exits right after the discard", async () => {
    const file = path.join(dir, "record.json");
    fs.writeFileSync(file, "x".repeat(10_000));
    const module = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src/transcript/discard.ts");
    // The background removal cannot run: the process exits in the same tick; the exit hook removes it synchronously.
    const script = `import { discardPath } from ${JSON.stringify(module)}; discardPath(${JSON.stringify(file)}, () => { throw new Error("in place"); }); process.exit(0);`;
    await new Promise<void>((resolve, reject) =>
      execFile(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { timeout: 20_000 }, (err) => (err ? reject(err) : resolve())),
    );
    expect(await fsp.readdir(dir)).toEqual([]);
  });
});
