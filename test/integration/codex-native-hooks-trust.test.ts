/**
 * The relay hooks' trust when Codex hashes hooks differently from what we compute (a future Codex): simulated by
 * making our computed trust wrong. The spawn must notice through `hooks/list`, learn the hash Codex reports, restart
 * once with it, and the hooks must then work; a later spawn in the process starts with the learned trust. Without
 * this, a relay Codex silently never calls would guard nothing.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { execCommandCall, startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { captureLogger, disposeChecked, tempSessions } from "../helpers/turn-env.js";

vi.mock("../../src/codex/native-hooks.js", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../src/codex/native-hooks.js")>();
  return {
    ...actual,
    // Right keys, wrong hashes: what a Codex that hashes hooks differently would make of our computation.
    computeRelayTrust: (config: Record<string, unknown>, command: string) =>
      actual.computeRelayTrust(config, command).map((t) => ({ key: t.key, hash: `sha256:${"0".repeat(64)}` })),
  };
});

const sessions = tempSessions("native-hooks-trust-");
const workspaces: string[] = [];
const envs: OfflineCodex[] = [];
afterAll(async () => {
  for (const env of envs) await disposeChecked(env);
  sessions.cleanup();
  for (const ws of workspaces) rmSync(ws, { recursive: true, force: true });
});

async function guardedTurn(env: OfflineCodex): Promise<boolean> {
  const ws = mkdtempSync(path.join(tmpdir(), "ctm-hooks-trust-ws-"));
  workspaces.push(ws);
  env.fake.enqueue([{ functionCall: execCommandCall("echo x > blocked.txt", { workdir: ws }) }, { text: "done" }]);
  const result = await runCodexTurn({
    appServer: env.codex,
    sessionId: "trust",
    sessionFile: sessions.file(),
    prompt: "go",
    cwd: ws,
    sandbox: "workspace-write",
    hooks: { beforeToolCall: () => ({ block: true, blockReason: "blocked" }) },
  });
  expect(result.status).toBe("completed");
  return !existsSync(path.join(ws, "blocked.txt"));
}

describe("relay hook trust when Codex hashes differently", () => {
  it("learns the hash from hooks/list, restarts once, and the hooks guard; the next spawn starts trusted", async () => {
    const first = captureLogger();
    const home = mkdtempSync(path.join(tmpdir(), "ctm-hooks-trust-home-"));
    workspaces.push(home);
    const a = await startOfflineCodex({ codex: { nativeToolHooks: true, env: { HOME: home }, logger: first.logger } });
    envs.push(a);
    expect(first.events.filter((e) => e.event === "codex.hooks.trusted")).toHaveLength(1);
    expect(first.events.filter((e) => e.event === "codex.spawned")).toHaveLength(2);
    expect(await guardedTurn(a)).toBe(true);

    const second = captureLogger();
    const b = await startOfflineCodex({ codex: { nativeToolHooks: true, env: { HOME: home }, logger: second.logger } });
    envs.push(b);
    expect(second.events.filter((e) => e.event === "codex.hooks.trusted")).toHaveLength(0);
    expect(second.events.filter((e) => e.event === "codex.spawned")).toHaveLength(1);
    expect(await guardedTurn(b)).toBe(true);
  }, 120_000);
});
