/**
 * The CLI on the PostgreSQL store: `inspect-session --pg URL --session ID` reads the session from the database,
 * `export` writes it as a pi session JSONL file (the same bytes the store exports; also from a session file), and
 * CODEX_TURN_PG_URL stands in for --pg. Bad combinations are usage errors (exit 2), a missing session exit 3.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { main } from "../../src/cli/main.js";
import { createPostgresSessionStores, type PostgresSessionStores } from "../../src/postgres/index.js";
import { readSessionTranscript } from "../../src/transcript/session-file.js";
import { createTestDatabase, type TestDatabase } from "../helpers/postgres.js";
import { turnMessages } from "../transcript/fixtures/turn-messages.js";

/** The CLI in this process (spawning it through tsx costs seconds per call), its output captured. */
async function runCli(args: string[], opts: { env?: Record<string, string> } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const out = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => ((stdout += String(chunk)), true));
  const err = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => ((stderr += String(chunk)), true));
  const saved = { ...process.env };
  Object.assign(process.env, opts.env ?? {});
  try {
    const code = await main(args);
    return { code, stdout, stderr };
  } finally {
    process.env = saved;
    out.mockRestore();
    err.mockRestore();
  }
}

/** Run them one after another (they share this process's stdout). */
type Run = { code: number; stdout: string; stderr: string };
async function serial(runs: Array<() => Promise<Run>>): Promise<Run[] & Record<0 | 1 | 2 | 3, Run>> {
  const results: Run[] = [];
  for (const r of runs) results.push(await r());
  return results as Run[] & Record<0 | 1 | 2 | 3, Run>;
}

let db: TestDatabase;
let stores: PostgresSessionStores;
let dir: string;

beforeAll(async () => {
  db = await createTestDatabase();
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-cli-pg-"));
  stores = createPostgresSessionStores({ connectionString: db.url });
  const store = stores.session("chat-1", { cwd: "/work" });
  const lock = await store.acquireLock();
  await store.appendTurn({ threadId: "thr_1", turnId: "turn_1", messages: turnMessages("thr_1", "turn_1") });
  await store.appendTurn({ threadId: "thr_1", turnId: "turn_2", messages: turnMessages("thr_1", "turn_2") });
  await store.writeBinding(
    { version: 1, threadId: "thr_1", dynamicToolsFingerprint: "d", engineId: "window", policyFingerprint: "p", projectionMode: "auto", heldTurnIds: [], ledger: [] },
    { durable: true },
  );
  await lock.release();
});

afterAll(async () => {
  await stores?.close();
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("codex-turn with --pg", () => {
  it("inspect-session and export read the session from PostgreSQL; the export is a pi transcript with the same history", async () => {
    const out = path.join(dir, "chat-1.jsonl");
    const [inspect, exported, viaEnv] = await serial([
      () => runCli(["inspect-session", "--pg", db.url, "--session", "chat-1", "--json"]),
      () => runCli(["export", "--pg", db.url, "--session", "chat-1", "--out", out]),
      () => runCli(["export", "--session", "chat-1"], { env: { CODEX_TURN_PG_URL: db.url } }),
    ]);
    expect(inspect.code, inspect.stderr).toBe(0);
    const summary = JSON.parse(inspect.stdout) as { file: string; messages: number; binding: { threadId: string } | null; pendingFinalize: unknown[] };
    const history = await stores.session("chat-1").readHistory();
    expect(summary.messages).toBe(history.messages.length);
    expect(summary.binding?.threadId).toBe("thr_1");
    expect(summary.file).toContain("#codex_turn/chat-1");
    expect(summary.file).not.toContain("postgres@");

    expect(exported.code, exported.stderr).toBe(0);
    const text = await readFile(out, "utf8");
    expect(text).toBe(await stores.session("chat-1").exportJsonl());
    expect(viaEnv.code, viaEnv.stderr).toBe(0);
    expect(viaEnv.stdout).toBe(text);
    // pi's format: the file store reads it back as the same history.
    const t = await readSessionTranscript(out);
    expect(t.header?.id).toBe("chat-1");
    expect(t.buildContext().messages).toEqual(history.messages);

    // And the file store's side: inspect-session and export of the exported file agree.
    const again = path.join(dir, "again.jsonl");
    const [fileInspect, fileExport] = await serial([() => runCli(["inspect-session", out, "--json"]), () => runCli(["export", out, "--out", again])]);
    expect(JSON.parse(fileInspect.stdout).messages).toBe(summary.messages);
    expect(fileExport.code, fileExport.stderr).toBe(0);
    expect(await readFile(again, "utf8")).toBe(text);
  }, 60_000);

  it("run --offline --pg: turns continue one session in the database; compact --pg works on it", async () => {
    const [first, second] = await serial([
      () => runCli(["run", "first prompt", "--session", "chat-run", "--pg", db.url, "--offline", "--json"]),
      () => runCli(["run", "second prompt", "--session", "chat-run", "--offline", "--json"], { env: { CODEX_TURN_PG_URL: db.url } }),
    ]);
    expect(first.code, first.stderr).toBe(0);
    expect(second.code, second.stderr).toBe(0);
    const store = stores.session("chat-run");
    const users = (await store.readHistory()).messages.filter((m) => m.role === "user").map((m) => (m as { content: unknown }).content);
    expect(users).toEqual(["first prompt", "second prompt"]);
    expect((await store.readBinding())?.threadId).toMatch(/./);
    const [compact] = await serial([() => runCli(["compact", "--session", "chat-run", "--pg", db.url, "--offline", "--json"])]);
    expect(compact.code, compact.stderr).toBe(0);
    expect(JSON.parse(compact.stdout.trim().split("\n").at(-1)!).measured.before.messages).toBe(4);
    const missing = await runCli(["compact", "--session", "nobody", "--pg", db.url, "--offline"]);
    expect(missing.code).toBe(3);
  }, 90_000);

  it("a missing session exits 3; --pg without --session, or with a file, exits 2; --out never overwrites", async () => {
    const taken = path.join(dir, "taken.jsonl");
    await writeFile(taken, "keep me\n");
    const [missing, noSession, withFile, overwrite] = await serial([
      () => runCli(["inspect-session", "--pg", db.url, "--session", "nobody"]),
      () => runCli(["export", "--pg", db.url]),
      () => runCli(["export", "x.jsonl", "--pg", db.url, "--session", "chat-1"]),
      () => runCli(["export", "--pg", db.url, "--session", "chat-1", "--out", taken]),
    ]);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toContain("no session");
    expect(noSession.code).toBe(2);
    expect(noSession.stderr).toContain("--session");
    expect(withFile.code).toBe(2);
    expect(overwrite.code).toBe(3);
    expect(await readFile(taken, "utf8")).toBe("keep me\n");
  }, 60_000);
});
