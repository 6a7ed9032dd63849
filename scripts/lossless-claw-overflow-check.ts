/**
 * Local check, not part of CI (lossless-claw is not on npm and needs Node >= 22.5 for node:sqlite): after a turn whose
 * input no longer fit the model's context window, the real lossless-claw compacts before the next turn, and that turn
 * runs on a fresh thread from its view instead of Codex compacting the old thread natively.
 *
 *   LCM_DIR=/path/to/built/lossless-claw /path/to/node24 --import tsx scripts/lossless-claw-overflow-check.ts
 *
 * Loads the plugin through the OpenClaw plugin host (it owns compaction, so the accordion is on), runs six turns that
 * give it something to summarize, then one the fake model refuses as the Responses API does (HTTP 400
 * `context_length_exceeded`), then one more. Exits 1 unless the refused turn failed with `contextWindowExceeded`, the
 * last turn compacted in the engine first (`compactBeforeTurn`, lossless-claw's `compact` asked with `force` and a
 * `currentTokenCount` of at least the window), ran on a new thread, completed, and the fake model saw no Codex
 * compaction request.
 */
import path from "node:path";
import { pino } from "pino";
import type { ContextEngine } from "../src/context-engine/types.js";
import { LLM_COMPLETE_INSTRUCTIONS } from "../src/openclaw/llm.js";
import { loadContextEngine } from "../src/openclaw/index.js";
import { runCodexTurn } from "../src/turn.js";
import { runLosslessClawCheck } from "./lossless-claw-check.js";

const TOO_LONG = {
  httpStatus: 400,
  body: JSON.stringify({ error: { message: "Your input exceeds the context window of this model.", type: "invalid_request_error", param: "input", code: "context_length_exceeded" } }),
};

process.exitCode = await runLosslessClawCheck("overflow", () => ({ offline: { lean: true } }), async ({ lcmDir, dir, offline }) => {
  const sessionFile = path.join(dir, "session.jsonl");
  const sessionId = "lcm-overflow-check";
  const logger = pino({ level: "silent" });
  let summaries = 0;
  offline.fake.setDefault((request) =>
    JSON.stringify(request.body?.input ?? "").includes(LLM_COMPLETE_INSTRUCTIONS.slice(0, 60))
      ? { text: `Summary ${++summaries}: the user asked about the worker logs; all uploads completed.` }
      : { text: `ok: ${"the logs show every upload completed. ".repeat(20)}` },
  );
  const pluginConfig = { databasePath: path.join(dir, "lcm.db"), freshTailCount: 2, leafChunkTokens: 400 };
  const loaded = await loadContextEngine(lcmDir, { cwd: dir, appServer: offline.codex, tokenBudget: 4_000, logger, pluginConfig });
  try {
    const compacts: Array<{ force?: boolean | undefined; currentTokenCount?: number | undefined }> = [];
    // The plugin's engine is a class instance: a proxy records compact() and leaves every other member as it is.
    const engine = new Proxy(loaded.engine, {
      get(target, key, receiver) {
        if (key === "compact") {
          return (p: Parameters<ContextEngine["compact"]>[0]) => {
            compacts.push({ force: p.force, currentTokenCount: p.currentTokenCount });
            return target.compact(p);
          };
        }
        const value: unknown = Reflect.get(target, key, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const base = { appServer: offline.codex, sessionId, sessionFile, cwd: dir, contextEngine: engine, contextTokenBudget: 4_000, runtimeContext: loaded.runtimeContext, hooks: loaded.hooks, dynamicTools: loaded.dynamicTools, logger };
    console.log(`engine ${engine.info.id} ownsCompaction=${engine.info.ownsCompaction}`);
    let threadId: string | undefined;
    let window = 0;
    for (let i = 1; i <= 6; i++) {
      const r = await runCodexTurn({ ...base, prompt: `question ${i}: ${"please check the worker logs again. ".repeat(20)}` });
      threadId = r.threadId;
      window = r.usage?.modelContextWindow ?? 0;
      if (r.status !== "completed") throw new Error(`turn ${i}: ${r.status} ${JSON.stringify(r.error)}`);
    }
    const compactsBefore = compacts.length;
    offline.fake.enqueue(TOO_LONG);
    const overflowed = await runCodexTurn({ ...base, prompt: "one question too many" });
    console.log(`overflowed turn: ${overflowed.status} ${JSON.stringify(overflowed.error)}`);
    const nativeBefore = offline.fake.requests.filter((r) => r.requestKind === "compaction").length;
    const next = await runCodexTurn({ ...base, prompt: "and now?" });
    const native = offline.fake.requests.filter((r) => r.requestKind === "compaction").length - nativeBefore;
    const asked = compacts.slice(compactsBefore);
    console.log(`next turn: ${next.status}; trace ${next.trace.join(">")}; compact asked ${JSON.stringify(asked)}; new thread ${next.threadId !== threadId}; native compaction requests ${native}; summaries ${summaries}; warnings ${JSON.stringify(next.warnings)}`);
    const ok =
      overflowed.status === "failed" &&
      overflowed.error?.code === "contextWindowExceeded" &&
      next.status === "completed" &&
      next.trace.includes("compactBeforeTurn") &&
      asked.length === 1 &&
      asked[0]?.force === true &&
      // Told the session stands at least at the window (Codex reports the failed call's input as 0).
      window > 0 &&
      (asked[0]?.currentTokenCount ?? 0) >= window &&
      next.threadId !== threadId &&
      native === 0;
    return ok;
  } finally {
    await loaded.close();
  }
});
