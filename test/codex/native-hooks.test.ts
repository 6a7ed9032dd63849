/**
 * The native tool hook relay without Codex: the script Codex runs as its PreToolUse hook, talking to the host's relay
 * socket. It must allow only on the host's "allow" and block (exit 2, reason on stderr) on everything else, including
 * a host it cannot reach. The real-binary behaviour is in test/integration/codex-native-hooks.test.ts.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  computeRelayTrust,
  findRelayHooks,
  HOOK_RELAY_ENV,
  hookRelayCommand,
  hookRelayScript,
  nativeToolName,
  startHookRelay,
  withRelayHook,
  type HookRelay,
  type RelayedHook,
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

const stop = (active: boolean) =>
  JSON.stringify({ session_id: "thr", turn_id: "tu", hook_event_name: "Stop", stop_hook_active: active, last_assistant_message: "the answer" });
const call = (command: string) =>
  JSON.stringify({ session_id: "thr", turn_id: "tu", hook_event_name: "PreToolUse", tool_name: "Bash", tool_input: { command }, tool_use_id: "call_1" });

describe("native tool hook relay", () => {
  it("names native tools as the transcript does", () => {
    // As Codex 0.169.0's PreToolUse names them (observed: spawn_agent bare, the other sub-agent tools namespaced).
    expect(["Bash", "apply_patch", "mcp__echo__say", "mcp__my_server__a__b", "web_search", "spawn_agent", "multi_agent_v1wait_agent"].map(nativeToolName)).toEqual([
      "shell",
      "apply_patch",
      "mcp:echo/say",
      "mcp:my_server/a__b",
      "web_search",
      "spawn_agent",
      "wait_agent",
    ]);
  });

  it("adds its PreToolUse and Stop hooks after the user's own and trusts only its own keys", () => {
    const user = { model: "m", hooks: { PreToolUse: [{ hooks: [{ type: "command", command: "/usr/local/bin/guard" }] }] } };
    const config = withRelayHook(user, "node relay", [
      { key: "k1", hash: "sha256:ab" },
      { key: "k2", hash: "sha256:cd" },
    ]);
    const ours = { hooks: [{ type: "command", command: "node relay", timeout: 900, async: false }] };
    expect(config).toEqual({
      model: "m",
      hooks: {
        PreToolUse: [{ hooks: [{ type: "command", command: "/usr/local/bin/guard" }] }, ours],
        Stop: [ours],
        state: { k1: { trusted_hash: "sha256:ab" }, k2: { trusted_hash: "sha256:cd" } },
      },
    });
    expect(user.hooks.PreToolUse).toHaveLength(1); // the input is not changed
    expect(hookRelayCommand()).toBe(`'${process.execPath}' '${hookRelayScript()}'`);
  });

  it("computes its hooks' trust keys after the user's own session-flag groups, with hashes fixed by the command", () => {
    const none = computeRelayTrust({}, "node relay");
    expect(none.map((t) => t.key)).toEqual(["/<session-flags>/config.toml:pre_tool_use:0:0", "/<session-flags>/config.toml:stop:0:0"]);
    const user = computeRelayTrust({ hooks: { PreToolUse: [{ hooks: [] }, { hooks: [] }] } }, "node relay");
    expect(user.map((t) => t.key)).toEqual(["/<session-flags>/config.toml:pre_tool_use:2:0", "/<session-flags>/config.toml:stop:0:0"]);
    expect(user.map((t) => t.hash)).toEqual(none.map((t) => t.hash));
    for (const t of none) expect(t.hash).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(computeRelayTrust({}, "node other")[0]!.hash).not.toBe(none[0]!.hash);
    expect(none[0]!.hash).not.toBe(none[1]!.hash);
  });

  it("finds its hooks in a hooks/list answer by command, one per relayed event", () => {
    const hooks = [
      { key: "user:pre_tool_use:0:0", eventName: "preToolUse", command: "/usr/local/bin/guard", currentHash: "sha256:1", trustStatus: "trusted" },
      { key: "flags:pre_tool_use:1:0", eventName: "preToolUse", command: "node relay", currentHash: "sha256:2", trustStatus: "untrusted" },
      { key: "flags:stop:0:0", eventName: "stop", command: "node relay", currentHash: "sha256:3", trustStatus: "trusted" },
    ];
    expect(findRelayHooks({ data: [{ cwd: "/w", hooks }] }, "node relay")).toEqual([
      { key: "flags:pre_tool_use:1:0", hash: "sha256:2", trusted: false },
      { key: "flags:stop:0:0", hash: "sha256:3", trusted: true },
    ]);
    // Codex did not load one of them: not usable.
    expect(findRelayHooks({ data: [{ cwd: "/w", hooks: hooks.slice(0, 2) }] }, "node relay")).toBeUndefined();
    expect(findRelayHooks({ data: [{ cwd: "/w", hooks }] }, "other")).toBeUndefined();
    expect(findRelayHooks({ nope: true }, "node relay")).toBeUndefined();
  });

  it("the hook script allows on allow and blocks, with the host's reason, on block", async () => {
    const seen: RelayedHook[] = [];
    const relay = await startHookRelay(async (c) => {
      seen.push(c);
      if (c.hook_event_name === "Stop") return c.stop_hook_active ? { decision: "allow" } : { decision: "block", reason: "add a summary" };
      return String((c.tool_input as { command: string }).command).includes("rm") ? { decision: "block", reason: "no deleting" } : { decision: "allow" };
    });
    relays.push(relay);
    expect(await runHookScript(call("ls"), relay.socketPath)).toEqual({ code: 0, stdout: "", stderr: "" });
    expect(await runHookScript(call("rm -rf x"), relay.socketPath)).toEqual({ code: 2, stdout: "", stderr: "no deleting\n" });
    // A Stop: "block" asks for one more model pass (exit 2 with the reason), "allow" ends the turn.
    expect(await runHookScript(stop(false), relay.socketPath)).toEqual({ code: 2, stdout: "", stderr: "add a summary\n" });
    expect(await runHookScript(stop(true), relay.socketPath)).toEqual({ code: 0, stdout: "", stderr: "" });
    expect(seen.map((c) => [c.hook_event_name, c.session_id])).toEqual([
      ["PreToolUse", "thr"],
      ["PreToolUse", "thr"],
      ["Stop", "thr"],
      ["Stop", "thr"],
    ]);
  });

  it("a decision that throws still answers: the tool call is blocked, a Stop ends the turn", async () => {
    const relay = await startHookRelay(async () => {
      throw new Error("host bug");
    });
    relays.push(relay);
    expect(await runHookScript(call("ls"), relay.socketPath)).toEqual({ code: 2, stdout: "", stderr: "codex-turn: the host failed to decide\n" });
    expect((await runHookScript(stop(false), relay.socketPath)).code).toBe(0);
  });

  it("close() ends a hook still waiting for a decision (it then fails closed) instead of waiting for it", async () => {
    let asked!: () => void;
    const waiting = new Promise<void>((resolve) => (asked = resolve));
    const relay = await startHookRelay(() => {
      asked();
      return new Promise<never>(() => undefined); // a host that never decides
    });
    const pending = runHookScript(call("ls"), relay.socketPath);
    await waiting; // the script is connected and waits for the decision
    await relay.close(); // without ending that connection, close() would wait forever (the test times out)
    const r = await pending;
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("codex-turn hook relay:");
  });

  it("a host that exits without closing its relay leaves no socket directory behind", async () => {
    const src = path.join(import.meta.dirname, "../../src/codex/native-hooks.ts");
    const script = `const { startHookRelay } = await import(${JSON.stringify(src)});
      const relay = await startHookRelay(async () => ({ decision: "allow" }));
      console.log(relay.socketPath);
      process.exit(0);`;
    const socketPath = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { timeout: 20_000 }, (err, stdout) =>
        err ? reject(err) : resolve(stdout.trim()),
      ),
    );
    expect(path.basename(socketPath)).toBe("relay.sock");
    expect(existsSync(path.dirname(socketPath))).toBe(false);
  });

  it("fails closed: malformed input, an unreachable host or no socket configured block the call", async () => {
    const relay = await startHookRelay(async () => ({ decision: "allow" }));
    relays.push(relay);
    const malformed = await runHookScript("not json", relay.socketPath);
    expect([malformed.code, malformed.stderr]).toEqual([2, "codex-turn: malformed hook input\n"]);
    const missingField = await runHookScript(JSON.stringify({ session_id: "thr", tool_name: "Bash" }), relay.socketPath);
    expect(missingField.code).toBe(2);
    const unreachable = await runHookScript(call("ls"), `${relay.socketPath}.gone`);
    expect(unreachable.code).toBe(2);
    expect(unreachable.stderr).toMatch(/^codex-turn hook relay: the host is unreachable \(ENOENT\)/);
    const unset = await runHookScript(call("ls"), undefined);
    expect([unset.code, unset.stderr]).toEqual([2, "codex-turn hook relay: CODEX_TURN_HOOK_RELAY is not set\n"]);
    // A Stop the relay cannot settle ends the turn (blocking it would ask for model passes forever).
    expect((await runHookScript(stop(false), `${relay.socketPath}.gone`)).code).toBe(0);
    expect((await runHookScript(JSON.stringify({ hook_event_name: "Stop" }), relay.socketPath)).code).toBe(0);
  });
});
