/**
 * Records every fsync the harness makes, by path: the sidecars and the transcript open with `fs.openSync` / `fsp.open`
 * and fsync with `fs.fsync(fd)` (small-file.ts) or `FileHandle.sync()` (the transcript append). Install, run, read
 * `events`, then `restore()`.
 */
import fs, { promises as fsp } from "node:fs";

export interface FsyncEvent {
  /** "open" of a watched path, "fsync-start" / "fsync-end" of one. */
  kind: "open" | "fsync-start" | "fsync-end";
  file: string;
}

export async function trackFsyncs(watch: (file: string) => boolean, probeDir: string): Promise<{ events: FsyncEvent[]; restore(): void }> {
  const events: FsyncEvent[] = [];
  const fdPath = new Map<number, string>();
  const handlePath = new WeakMap<object, string>();
  const originalOpenSync = fs.openSync;
  const originalFsync = fs.fsync;
  const originalOpen = fsp.open;
  const probe = await fsp.open(`${probeDir}/.fsync-probe`, "w");
  const proto = Object.getPrototypeOf(probe) as { sync: (...a: unknown[]) => Promise<void> };
  await probe.close();
  const originalSync = proto.sync;
  fs.openSync = ((...args: Parameters<typeof fs.openSync>) => {
    const fd = originalOpenSync(...args);
    const file = String(args[0]);
    if (watch(file)) {
      fdPath.set(fd, file);
      events.push({ kind: "open", file });
    } else fdPath.delete(fd);
    return fd;
  }) as typeof fs.openSync;
  fs.fsync = ((fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
    const file = fdPath.get(fd);
    if (file) events.push({ kind: "fsync-start", file });
    return originalFsync(fd, (err) => {
      if (file) events.push({ kind: "fsync-end", file });
      cb(err);
    });
  }) as typeof fs.fsync;
  fsp.open = (async (...args: Parameters<typeof fsp.open>) => {
    const handle = await originalOpen(...args);
    const file = String(args[0]);
    if (watch(file)) {
      handlePath.set(handle, file);
      events.push({ kind: "open", file });
    }
    return handle;
  }) as typeof fsp.open;
  proto.sync = async function (this: object, ...a: unknown[]) {
    const file = handlePath.get(this);
    if (file) events.push({ kind: "fsync-start", file });
    try {
      return await originalSync.apply(this, a);
    } finally {
      if (file) events.push({ kind: "fsync-end", file });
    }
  };
  return {
    events,
    restore() {
      fs.openSync = originalOpenSync;
      fs.fsync = originalFsync;
      fsp.open = originalOpen;
      proto.sync = originalSync;
    },
  };
}
