/**
 * Local check, not part of CI (lossless-claw is not on npm and needs Node >= 22.5 for node:sqlite): the real
 * lossless-claw gets a turn an attempt left in flight, once that turn is recovered from Codex's thread.
 *
 *   LCM_DIR=/path/to/built/lossless-claw /path/to/node24 --import tsx scripts/lossless-claw-cut-turn-check.ts
 *
 * Loads the plugin through the OpenClaw plugin host, runs a turn with it, then stands in for an attempt that died while
 * Codex ran its turn: a turn on the session's thread run by the client alone (a shell command and an answer; nothing
 * mirrored, no pending record) and the binding's `turnInFlight` marker the dead attempt's accept left. The next
 * `runCodexTurn` must recover that turn first (`result.cutTurnRecovered`), and lossless-claw's own store must then hold
 * it, in order, between the turns before and after: its `assemble` (rebuilt from its SQLite database) is checked.
 * Exits 1 otherwise.
 */
import path from "node:path";
import { pino } from "pino";
import { LLM_COMPLETE_INSTRUCTIONS } from "../src/openclaw/llm.js";
import { loadContextEngine } from "../src/openclaw/index.js";
import { execCommandCall } from "../src/testing/index.js";
import { readThreadBinding, writeThreadBinding } from "../src/transcript/binding.js";
import { readSessionHistory } from "../src/transcript/session-file.js";
import { runCodexTurn } from "../src/turn.js";
import { runLosslessClawCheck } from "./lossless-claw-check.js";

// A HOME of its own keeps the machine's shell startup files out of the command's output.
process.exitCode = await runLosslessClawCheck("cut-turn", (dir) => ({ codex: { env: { HOME: dir } } }), async ({ lcmDir, dir, offline }) => {
  const sessionFile = path.join(dir, "session.jsonl");
  const sessionId = "lcm-cut-turn-check";
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino({ level: "debug" }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  offline.fake.setDefault((request) =>
    JSON.stringify(request.body?.input ?? "").includes(LLM_COMPLETE_INSTRUCTIONS.slice(0, 60)) ? { text: "Summary: earlier turns." } : { text: "ok" },
  );
  const loaded = await loadContextEngine(lcmDir, { cwd: dir, appServer: offline.codex, tokenBudget: 16_000, logger, pluginConfig: { databasePath: path.join(dir, "lcm.db") } });
  try {
    const base = {
      appServer: offline.codex,
      sessionId,
      sessionFile,
      cwd: dir,
      sandbox: "workspace-write" as const,
      approvalPolicy: "never" as const,
      contextEngine: loaded.engine,
      contextTokenBudget: 16_000,
      runtimeContext: loaded.runtimeContext,
      hooks: loaded.hooks,
      dynamicTools: loaded.dynamicTools,
      logger,
    };
    offline.fake.enqueue({ text: "first answer" });
    const first = await runCodexTurn({ ...base, prompt: "first question" });
    console.log(`turn 1: ${first.status} (engine ${JSON.stringify(first.engine)})`);

    // The attempt that died: Codex ran the turn, nothing recorded it but the marker.
    const binding = await readThreadBinding(sessionFile);
    if (!binding) throw new Error("no binding after the first turn");
    offline.fake.enqueue([{ text: "running it", functionCall: execCommandCall("echo CUT-MARKER-42", { workdir: dir }) }, { text: "cut answer" }]);
    const cut = await offline.codex.startTurn({ threadId: binding.threadId, text: "the cut prompt" });
    const cutRecord = await cut.completion;
    await writeThreadBinding(sessionFile, { ...binding, heldTurnIds: [...binding.heldTurnIds, cut.turnId], turnInFlight: { turnId: cut.turnId, prompt: "the cut prompt" } });
    console.log(`cut turn ${cut.turnId}: ${cutRecord.codexStatus} in Codex, not in the transcript`);

    offline.fake.enqueue({ text: "third answer" });
    const third = await runCodexTurn({ ...base, prompt: "third question" });
    console.log(`turn 3: ${third.status}; cutTurnRecovered ${JSON.stringify(third.cutTurnRecovered)}; warnings ${JSON.stringify(third.warnings)}`);

    const history = await readSessionHistory(sessionFile, { sessionId });
    const assembled = await loaded.engine.assemble({ sessionId, sessionKey: sessionId, messages: history.messages as never, tokenBudget: 16_000, prompt: "next", runtimeContext: loaded.runtimeContext } as never);
    const text = JSON.stringify(assembled.messages);
    const at = (s: string) => text.indexOf(s);
    console.log(`lossless-claw assembles ${assembled.messages.length} messages; positions: first ${at("first question")}, cut ${at("the cut prompt")}, command output ${at("CUT-MARKER-42")}, cut answer ${at("cut answer")}, third ${at("third question")}`);
    const recovered = logs.filter((l) => l.event === "cut turn recovered").length;
    // Our lines and the plugin's own (api.logger goes to the same logger), at debug level: no content in any of them.
    const logText = JSON.stringify(logs);
    const contents = ["first question", "first answer", "the cut prompt", "CUT-MARKER-42", "cut answer", "third question", "third answer", "Summary: earlier turns."];
    const leaked = contents.filter((c) => logText.includes(c));
    console.log(`${logs.length} log lines at debug level; content strings in them: ${leaked.length === 0 ? "none" : leaked.join(", ")}`);
    const ok =
      first.status === "completed" &&
      third.status === "completed" &&
      third.cutTurnRecovered?.turnId === cut.turnId &&
      recovered === 1 &&
      leaked.length === 0 &&
      at("first question") >= 0 &&
      at("first question") < at("the cut prompt") &&
      at("the cut prompt") < at("CUT-MARKER-42") &&
      at("CUT-MARKER-42") < at("cut answer") &&
      at("cut answer") < at("third question");
    return ok;
  } finally {
    await loaded.close();
  }
});
