/**
 * A throwaway PostgreSQL cluster for tests and benchmarks: initdb as the `postgres` user (PostgreSQL refuses root) with
 * trust auth and no fsync at init, in a temp directory, listening on 127.0.0.1 on a free port with its socket in the
 * data directory. `stop()` stops it and removes the directory. Used when CODEX_TURN_TEST_PG_URL is not set.
 */
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

/** The newest installed PostgreSQL's bin directory (Debian layout), or undefined. */
export function postgresBinDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? path.join(root, versions[0], "bin") : undefined;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export interface TempCluster {
  url: string;
  port: number;
  dataDir: string;
  bin: string;
  /** `pg_ctl stop -m fast` (the directory stays; `start()` brings it back on the same port). */
  stopServer(): void;
  startServer(): void;
  /** Stop and remove everything. */
  stop(): void;
}

function asPostgres(cmd: string, args: string[], opts: { timeout?: number } = {}): string {
  const isRoot = process.getuid?.() === 0;
  const [file, argv] = isRoot ? ["runuser", ["-u", "postgres", "--", cmd, ...args]] : [cmd, args];
  return execFileSync(file, argv, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: opts.timeout ?? 60_000 });
}

/** initdb + start a cluster (1–2 s). Throws when PostgreSQL is not installed. */
export async function startTempCluster(opts: { parentDir?: string } = {}): Promise<TempCluster> {
  const bin = postgresBinDir();
  if (!bin) throw new Error("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb)");
  const base = mkdtempSync(path.join(opts.parentDir ?? "/tmp", "ctm-pg-cluster-"));
  const dataDir = path.join(base, "data");
  if (process.getuid?.() === 0) chownSync(base, Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim()), Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim()));
  asPostgres(path.join(bin, "initdb"), ["-D", dataDir, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--no-instructions"]);
  const port = await freePort();
  const pgctl = path.join(bin, "pg_ctl");
  const startServer = (): void => {
    asPostgres(pgctl, ["-D", dataDir, "-w", "-l", path.join(base, "server.log"), "-o", `-c listen_addresses=127.0.0.1 -p ${port} -k ${dataDir} -c fsync=off -c max_connections=200`, "start"]);
  };
  const stopServer = (): void => {
    asPostgres(pgctl, ["-D", dataDir, "-w", "-m", "fast", "stop"]);
  };
  startServer();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    bin,
    startServer,
    stopServer,
    stop: () => {
      try {
        stopServer();
      } catch {
        // already stopped
      }
      rmSync(base, { recursive: true, force: true });
    },
  };
}
