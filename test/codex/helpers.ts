import { readFileSync, readdirSync, readlinkSync } from "node:fs";

/** Decode a /proc/net/tcp{,6} hex address ("0100007F:1F90") to "127.0.0.1". */
export function decodeProcAddress(hex: string): string {
  const [addr = ""] = hex.split(":");
  if (addr.length === 8) {
    const bytes = addr.match(/../g)!.map((b) => parseInt(b, 16));
    return bytes.reverse().join(".");
  }
  // IPv6: four little-endian 32-bit words.
  const words = addr.match(/.{8}/g)!.map((w) => w.match(/../g)!.reverse().join(""));
  const v6 = words.join("").match(/.{4}/g)!.join(":").toLowerCase();
  if (v6 === "0000:0000:0000:0000:0000:0000:0000:0001") return "::1";
  const mapped = /^0000:0000:0000:0000:0000:ffff:(..)(..):(..)(..)$/.exec(v6);
  if (mapped) return mapped.slice(1).map((h) => parseInt(h, 16)).join(".");
  return v6;
}

/** Remote addresses of the TCP sockets a process holds (its fd table matched against /proc/net/tcp{,6}). */
export function tcpRemoteAddresses(pid: number): Array<{ remote: string; state: string }> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      /* fd closed meanwhile */
    }
  }
  const out: Array<{ remote: string; state: string }> = [];
  for (const table of ["tcp", "tcp6"]) {
    let text = "";
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      if (inodes.has(cols[9]!)) out.push({ remote: decodeProcAddress(cols[2]!), state: cols[3]! });
    }
  }
  return out;
}

/** True when a process with this pid exists. */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Poll `cond` every 10 ms until true or `timeoutMs` passed. */
export async function waitFor(cond: () => boolean, timeoutMs = 5_000, what = "condition"): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}
