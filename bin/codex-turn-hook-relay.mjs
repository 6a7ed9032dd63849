#!/usr/bin/env node
// Codex runs this as its PreToolUse hook command when the host spawned the app-server with `nativeToolHooks: true`
// (src/codex/native-hooks.ts). It forwards the hook's stdin JSON to the host over the Unix socket named by
// CODEX_TURN_HOOK_RELAY and turns the host's answer into Codex's hook protocol: allow = exit 0 with no output; block
// = exit 2 with the reason on stderr (Codex tells the model "blocked by PreToolUse hook: <reason>").
// For Codex's Stop hook (the agent's final answer) the same answer means: allow = the turn ends; block = one more model
// pass with the reason as its prompt.
// Fails closed for a tool call: a host that cannot be reached or does not answer blocks it; the host owns the policy.
// A Stop it cannot settle ends the turn instead (blocking a Stop would loop).
import net from "node:net";

const socketPath = process.env.CODEX_TURN_HOOK_RELAY;
let isStop = false;

function fail(reason) {
  process.stderr.write(`${reason}\n`);
  process.exit(isStop ? 0 : 2);
}

const chunks = [];
process.stdin.on("data", (c) => chunks.push(c));
process.stdin.on("end", () => {
  const request = Buffer.concat(chunks).toString("utf8").trim();
  try {
    isStop = JSON.parse(request).hook_event_name === "Stop";
  } catch {
    isStop = false;
  }
  if (!socketPath) fail("codex-turn hook relay: CODEX_TURN_HOOK_RELAY is not set");
  let answer = "";
  const socket = net.createConnection(socketPath);
  socket.setEncoding("utf8");
  socket.on("connect", () => socket.write(`${JSON.stringify({ hook: request })}\n`));
  socket.on("data", (d) => (answer += d));
  socket.on("error", (err) => fail(`codex-turn hook relay: the host is unreachable (${err.code ?? err.message})`));
  socket.on("end", () => {
    let reply;
    try {
      reply = JSON.parse(answer);
    } catch {
      fail("codex-turn hook relay: the host sent no decision");
    }
    if (reply.decision === "block") {
      process.stderr.write(`${reply.reason || "blocked by the host"}\n`);
      process.exit(2);
    }
    process.exit(0);
  });
});
