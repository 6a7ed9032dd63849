#!/usr/bin/env node
// Codex runs this as its PreToolUse hook command when the host spawned the app-server with `nativeToolHooks: true`
// (src/codex/native-hooks.ts). It forwards the hook's stdin JSON to the host over the Unix socket named by
// CODEX_TURN_HOOK_RELAY and turns the host's answer into Codex's hook protocol: allow = exit 0 with no output; block
// = exit 2 with the reason on stderr (Codex tells the model "blocked by PreToolUse hook: <reason>").
// Fails closed: a host that cannot be reached or does not answer blocks the call; the host owns the policy.
import net from "node:net";

const socketPath = process.env.CODEX_TURN_HOOK_RELAY;

function block(reason) {
  process.stderr.write(`${reason}\n`);
  process.exit(2);
}

if (!socketPath) block("codex-turn hook relay: CODEX_TURN_HOOK_RELAY is not set");

const chunks = [];
process.stdin.on("data", (c) => chunks.push(c));
process.stdin.on("end", () => {
  const request = Buffer.concat(chunks).toString("utf8").trim();
  let answer = "";
  const socket = net.createConnection(socketPath);
  socket.setEncoding("utf8");
  socket.on("connect", () => socket.write(`${JSON.stringify({ hook: request })}\n`));
  socket.on("data", (d) => (answer += d));
  socket.on("error", (err) => block(`codex-turn hook relay: the host is unreachable (${err.code ?? err.message})`));
  socket.on("end", () => {
    let reply;
    try {
      reply = JSON.parse(answer);
    } catch {
      block("codex-turn hook relay: the host sent no decision");
    }
    if (reply.decision === "block") block(reply.reason || "blocked by the host");
    process.exit(0);
  });
});
