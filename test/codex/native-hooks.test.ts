/**
 * The native tool hook relay without Codex: the script Codex runs as its PreToolUse hook, talking to the host's relay
 * socket. It must allow only on the host's "allow" and block (exit 2, reason on stderr) on everything else, including
 * a host it cannot reach. The real-binary behaviour is in test/integration/codex-native-hooks.test.ts.
 */
import { execFile } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import {
  findRelayHook,
  HOOK_RELAY_ENV,
  hookRelayCommand,
  hookRelayScript,
  nativeToolName,
  startHookRelay,
  withRelayHook,
  type HookRelay,
  type PreToolUse,
} from "../../src/codex/native-hooks.js";

const relays: HookRelay[] = [];
afterEach(async () => {
  await Promise.all(relays.splice(0).map((r) => r.close()));
});

/** Run the relay script as Codex does: the call on stdin, the socket in the environment. */
function runHookScript(stdin: string, socketPath: string | undefined): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const env = { ...process.env };
    if (socketPath === undefined) delete env[HOOK_RELAY_ENV];
    else env[HOOK_RELAY_ENV] = socketPath;
    const child = execFile(process.execPath, [hookRelayScript()], { env, timeout: 20_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? -1) : 0, stdout, stderr });
    });
    child.stdin?.end(stdin);
  });
}

const call = (command: string) =>
  JSON.stringify({ session_id: "thr", turn_id: "tu", hook_event_name: "PreToolUse", tool_name: "Bash", tool_input: { command }, tool_use_id: "call_1" });

describe("native tool hook relay", () => {
  it("names native tools as the transcript does", () => {
    expect(["Bash", "apply_patch", "mcp__echo__say", "mcp__my_server__a__b", "web_search"].map(nativeToolName)).toEqual([
      "shell",
      "apply_patch",
      "mcp:echo/say",
      "mcp:my_server/a__b",
      "web_search",
    ]);
  });

  it("adds its hook after the user's own and trusts only its own key", () => {
    const user = { model: "m", hooks: { PreToolUse: [{ hooks: [{ type: "command", command: "/usr/local/bin/guard" }] }] } };
    const config = withRelayHook(user, "node relay", { key: "k1", hash: "sha256:ab" });
    expect(config).toEqual({
      model: "m",
      hooks: {
        PreToolUse: [{ hooks: [{ type: "command", command: "/usr/local/bin/guard" }] }, { hooks: [{ type: "command", command: "node relay", timeout: 900 }] }],
        state: { k1: { trusted_hash: "sha256:ab" } },
      },
    });
    expect(user.hooks.PreToolUse).toHaveLength(1); // the input is not changed
    expect(hookRelayCommand()).toBe(`'${process.execPath}' '${hookRelayScript()}'`);
  });

  it("finds its hook in a hooks/list answer by command", () => {
    const listed = {
      data: [
        {
          cwd: "/w",
          hooks: [
            { key: "user:pre_tool_use:0:0", eventName: "preToolUse", command: "/usr/local/bin/guard", currentHash: "sha256:1", trustStatus: "trusted" },
            { key: "flags:pre_tool_use:1:0", eventName: "preToolUse", command: "node relay", currentHash: "sha256:2", trustStatus: "untrusted" },
          ],
        },
      ],
    };
    expect(findRelayHook(listed, "node relay")).toEqual({ key: "flags:pre_tool_use:1:0", hash: "sha256:2", trusted: false });
    expect(findRelayHook(listed, "other")).toBeUndefined();
    expect(findRelayHook({ nope: true }, "node relay")).toBeUndefined();
  });

  it("the hook script allows on allow and blocks, with the host's reason, on block", async () => {
    const seen: PreToolUse[] = [];
    const relay = await startHookRelay(async (c) => {
      seen.push(c);
      return String((c.tool_input as { command: string }).command).includes("rm") ? { decision: "block", reason: "no deleting" } : { decision: "allow" };
    });
    relays.push(relay);
    expect(await runHookScript(call("ls"), relay.socketPath)).toEqual({ code: 0, stdout: "", stderr: "" });
    expect(await runHookScript(call("rm -rf x"), relay.socketPath)).toEqual({ code: 2, stdout: "", stderr: "no deleting\n" });
    expect(seen.map((c) => [c.session_id, c.tool_name, c.tool_use_id])).toEqual([
      ["thr", "Bash", "call_1"],
      ["thr", "Bash", "call_1"],
    ]);
  });

  it("fails closed: malformed input, an unreachable host or no socket configured block the call", async () => {
    const relay = await startHookRelay(async () => ({ decision: "allow" }));
    relays.push(relay);
    const malformed = await runHookScript("not json", relay.socketPath);
    expect([malformed.code, malformed.stderr]).toEqual([2, "codex-turn: malformed PreToolUse hook input\n"]);
    const missingField = await runHookScript(JSON.stringify({ session_id: "thr", tool_name: "Bash" }), relay.socketPath);
    expect(missingField.code).toBe(2);
    const unreachable = await runHookScript(call("ls"), `${relay.socketPath}.gone`);
    expect(unreachable.code).toBe(2);
    expect(unreachable.stderr).toMatch(/^codex-turn hook relay: the host is unreachable \(ENOENT\)/);
    const unset = await runHookScript(call("ls"), undefined);
    expect([unset.code, unset.stderr]).toEqual([2, "codex-turn hook relay: CODEX_TURN_HOOK_RELAY is not set\n"]);
  });
});
