/**
 * Local check, not part of CI (lossless-claw is not on npm and needs Node >= 22.5 for node:sqlite): the real
 * lossless-claw's transcript GC rewrites a session transcript through this host's `rewriteTranscriptEntries`.
 *
 *   LCM_DIR=/path/to/built/lossless-claw /path/to/node24 --import tsx scripts/lossless-claw-gc-check.ts
 *
 * Writes 10 turns with large tool results (tool_result blocks, the shape lossless-claw's GC selects), loads the plugin
 * with `transcriptGcEnabled`, bootstraps it, forces a compaction (its summaries come from the offline fake model through
 * `runtime.llm.complete`), then runs host-approved maintenance three times with the helper in `"acquire"` mode, as
 * background maintenance gets it. Prints what changed; exits 1 unless the first maintenance rewrote entries, the file
 * shrank, the repeats changed nothing, and pi's SessionManager rebuilds the same context.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { SessionManager } from "@mariozechner/pi-coding-agent";
import { pino } from "pino";
import type { AgentMessage } from "../src/context-engine/types.js";
import { createTranscriptRewriter } from "../src/context-engine/transcript-rewriter.js";
import { LLM_COMPLETE_INSTRUCTIONS } from "../src/openclaw/llm.js";
import { loadContextEngine } from "../src/openclaw/index.js";
import { createJsonlSessionStore } from "../src/store/session-store.js";
import { readSessionHistory } from "../src/transcript/session-file.js";
import { runLosslessClawCheck } from "./lossless-claw-check.js";

process.exitCode = await runLosslessClawCheck("gc", () => ({}), async ({ lcmDir, dir, offline }) => {
  const sessionFile = path.join(dir, "session.jsonl");
  const sessionId = "lcm-gc-check";
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino({ level: "info" }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  let summaries = 0;
  offline.fake.setDefault((request) =>
    JSON.stringify(request.body?.input ?? "").includes(LLM_COMPLETE_INSTRUCTIONS.slice(0, 60))
      ? { text: `Summary ${++summaries}: worker logs were read; every upload completed.` }
      : { text: "ok" },
  );
  const store = createJsonlSessionStore({ sessionFile, sessionId, cwd: dir, logger });
  const lock = await store.acquireLock();
  const t0 = 1_764_000_000_000;
  for (let i = 1; i <= 10; i++) {
    const log = Array.from({ length: 80 }, (_, k) => `worker-${i} step ${k} uploaded chunk ${k * 7}`).join("\n");
    const at = t0 + i * 10;
    const messages = [
      { role: "user", content: `check log ${i}`, timestamp: at },
      { role: "assistant", content: [{ type: "toolCall", id: `call_${i}`, name: "exec", arguments: { n: i } }], timestamp: at + 1 },
      {
        role: "toolResult",
        toolCallId: `call_${i}`,
        toolName: "exec",
        content: [{ type: "tool_result", tool_use_id: `call_${i}`, name: "exec", content: [{ type: "text", text: log }] }],
        isError: false,
        timestamp: at + 2,
      },
      { role: "assistant", content: [{ type: "text", text: `log ${i} is fine` }], timestamp: at + 3 },
    ] as AgentMessage[];
    await store.appendTurn({ threadId: "thread-1", turnId: `turn-${i}`, messages });
  }
  await lock.release();
  const bytesBefore = readFileSync(sessionFile).length;

  const loaded = await loadContextEngine(lcmDir, {
    cwd: dir,
    appServer: offline.codex,
    tokenBudget: 3000,
    logger,
    pluginConfig: { databasePath: path.join(dir, "lcm.db"), transcriptGcEnabled: true, largeFileTokenThreshold: 20, freshTailCount: 4, leafChunkTokens: 800, contextThreshold: 0.5 },
  });
  try {
    const engine = loaded.engine;
    const runtimeContext = { ...loaded.runtimeContext, tokenBudget: 3000 };
    const boot = await engine.bootstrap?.({ sessionId, sessionFile, runtimeContext });
    const compacted = await engine.compact({ sessionId, sessionKey: sessionId, sessionFile, tokenBudget: 3000, force: true, runtimeContext });
    console.log(`bootstrap ${JSON.stringify(boot)}; compact ${JSON.stringify({ ok: compacted.ok, compacted: compacted.compacted })}; summaries ${summaries}`);
    const rewriteTranscriptEntries = createTranscriptRewriter({ store, logger, ids: { sessionId }, lock: "acquire" });
    const results = [];
    for (let k = 0; k < 3; k++) {
      const r = await engine.maintain?.({ sessionId, sessionFile, runtimeContext: { ...runtimeContext, allowDeferredCompactionExecution: true, rewriteTranscriptEntries } });
      results.push(r);
      console.log(`maintain ${k + 1}: ${JSON.stringify(r)}`);
    }
    const bytesAfter = readFileSync(sessionFile).length;
    const history = await readSessionHistory(sessionFile, { sessionId });
    const piMessages = SessionManager.open(sessionFile, dir).buildSessionContext().messages;
    console.log(`transcript ${bytesBefore} -> ${bytesAfter} bytes; context messages: ours ${history.messages.length}, pi ${piMessages.length}`);
    const ok =
      results[0]?.changed === true &&
      (results[0]?.rewrittenEntries ?? 0) > 0 &&
      bytesAfter < bytesBefore &&
      results.slice(1).every((r) => r?.changed === false) &&
      JSON.stringify(history.messages) === JSON.stringify(piMessages);
    return ok;
  } finally {
    await loaded.close();
  }
});
