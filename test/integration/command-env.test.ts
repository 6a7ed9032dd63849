/**
 * Codex's own environment stays out of the commands it runs for the model: with `passEnv` naming a provider key and a
 * service token (the README's example), a model that runs `env` or `printenv NAME` in a read-only sandbox, no approval
 * asked, gets none of them back, nor the offline fake's key, CODEX_HOME or the hook relay socket; a variable the host
 * names in `commandEnv` does reach the command. Real `codex app-server`, fake model on loopback.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { OFFLINE_KEY_ENV, OFFLINE_KEY_VALUE } from "../../src/codex/config.js";
import { HOOK_RELAY_ENV } from "../../src/codex/native-hooks.js";
import { execCommandCall, startOfflineCodex, toolOutputs, type OfflineCodex } from "../../src/testing/index.js";
import { disposeChecked, tempSessions, turnParams } from "../helpers/turn-env.js";

const SECRETS = {
  OPENAI_API_KEY: "sk-test-provider-key-0f3a",
  MY_SERVICE_TOKEN: "svc-token-7c1e",
  MY_PLAIN_SETTING: "plain-setting-41d2",
} as const;
const OPTED_IN = { MY_BUILD_FLAG: "build-flag-9b77" } as const;

let env: OfflineCodex;
let home: string;
const sessions = tempSessions("command-env-");
const saved = new Map<string, string | undefined>();

beforeAll(async () => {
  for (const [name, value] of Object.entries({ ...SECRETS, ...OPTED_IN })) {
    saved.set(name, process.env[name]);
    process.env[name] = value;
  }
  home = mkdtempSync(path.join(tmpdir(), "ctm-command-env-home-"));
  // nativeToolHooks: the hook relay's socket variable is in Codex's environment too.
  env = await startOfflineCodex({
    codex: { passEnv: [...Object.keys(SECRETS), ...Object.keys(OPTED_IN)], commandEnv: Object.keys(OPTED_IN), env: { HOME: home }, nativeToolHooks: true },
  });
});
afterAll(async () => {
  await disposeChecked(env);
  for (const [name, value] of saved) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  rmSync(home, { recursive: true, force: true });
  sessions.cleanup();
});

describe("the commands Codex runs for the model", () => {
  it("see none of passEnv's variables, the offline key, CODEX_HOME or the hook relay; commandEnv's names they see", async () => {
    const file = sessions.file();
    const printenv = ["OPENAI_API_KEY", "MY_SERVICE_TOKEN", OFFLINE_KEY_ENV, HOOK_RELAY_ENV, "CODEX_HOME", "MY_BUILD_FLAG"].map((n) => `printenv ${n}`).join("; ");
    env.fake.enqueue([
      { functionCall: execCommandCall("env", { workdir: home, callId: "call_env" }) },
      { functionCall: execCommandCall(`${printenv}; echo printed`, { workdir: home, callId: "call_printenv" }) },
      { text: "done" },
    ]);
    const result = await runCodexTurn({
      ...turnParams(env, file, "show me the environment"),
      cwd: home,
      sandbox: "read-only",
      approvalPolicy: "never",
      hooks: { beforeToolCall: () => undefined },
    });
    expect(result.status).toBe("completed");
    const outputs = toolOutputs(env.fake.requests.at(-1)!.body).map((o) => String(o.output));
    expect(outputs).toHaveLength(2);
    const [envOut, printenvOut] = outputs as [string, string];
    // The commands ran (PATH and HOME are there, and the opted-in variable).
    expect(envOut).toContain(`HOME=${home}`);
    expect(envOut).toMatch(/\nPATH=/);
    expect(envOut).toContain(`MY_BUILD_FLAG=${OPTED_IN.MY_BUILD_FLAG}`);
    expect(printenvOut).toContain(OPTED_IN.MY_BUILD_FLAG);
    expect(printenvOut).toContain("printed");
    // (CODEX_HOME's path itself shows in PATH: Codex puts its helper directory there.)
    const hidden = [...Object.values(SECRETS), OFFLINE_KEY_VALUE];
    for (const out of outputs) {
      for (const value of hidden) expect(out).not.toContain(value);
      for (const name of [...Object.keys(SECRETS), OFFLINE_KEY_ENV, HOOK_RELAY_ENV, "CODEX_HOME"]) expect(out).not.toContain(`${name}=`);
    }
    // Nor does the transcript's shell tool result keep them.
    const transcript = readFileSync(file, "utf8");
    expect(transcript).toContain("MY_BUILD_FLAG");
    for (const value of hidden) expect(transcript).not.toContain(value);
  });
});
