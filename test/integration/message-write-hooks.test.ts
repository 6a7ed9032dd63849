/**
 * Message write hooks (`hooks.beforeMessageWrite`; OpenClaw's `tool_result_persist` and `before_message_write`) against
 * the real `codex app-server` and the fake model: what the plugin made of the turn is what the transcript, the engine's
 * finalize and the result's snapshot hold (keys redacted, a long tool result shortened, a marked message kept out),
 * while the user still gets the model's answer; a wrongly async handler's result is ignored, with a warning.
 */
import { readdirSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWindowEngine } from "../../src/context-engine/engines/index.js";
import type { AgentMessage, ContextEngine } from "../../src/context-engine/types.js";
import { loadOpenClawPlugins } from "../../src/openclaw/index.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { runCodexTurn } from "../../src/turn.js";
import { fixture } from "../openclaw/helpers.js";
import { disposeChecked, tempSessions } from "../helpers/turn-env.js";

let env: OfflineCodex;
const sessions = tempSessions("ctm-message-write-");

beforeAll(async () => {
  env = await startOfflineCodex();
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

const USER_KEY = "sk-AAAAAAAAAAAAAAAAAAAAAAAA";
const TOOL_KEY = "sk-BBBBBBBBBBBBBBBBBBBBBBBB";

describe("message write hooks on the real app-server", () => {
  it("an OpenClaw redaction plugin: the transcript and the engine get the redacted turn, the user gets the answer", async () => {
    const file = sessions.file("redacted.jsonl");
    const loaded = await loadOpenClawPlugins([{ spec: fixture("redactor"), config: { maxToolResultChars: 120 } }], { cwd: sessions.dir, appServer: env.codex });
    // A window engine that keeps what finalize handed it.
    const finalized: AgentMessage[][] = [];
    const window = createWindowEngine({ tokenBudget: 100_000 });
    const engine: ContextEngine = {
      ...window,
      info: { ...window.info, id: "capturing-window" },
      async afterTurn(p) {
        finalized.push([...p.messages.slice(p.prePromptMessageCount)]);
        return window.afterTurn ? window.afterTurn(p) : undefined;
      },
    };
    try {
      env.fake.enqueue([
        { functionCall: { name: "read_config", arguments: {}, callId: "call_cfg" } },
        { text: `Stored. Your key ${USER_KEY} is saved.` },
      ]);
      const result = await runCodexTurn({
        appServer: env.codex,
        sessionId: "redacted",
        sessionFile: file,
        prompt: `My API key is ${USER_KEY}; store the config.`,
        cwd: sessions.dir,
        contextEngine: engine,
        contextTokenBudget: 100_000,
        hooks: loaded.hooks,
        dynamicTools: [{ name: "read_config", description: "Reads the config.", inputSchema: { type: "object", properties: {} }, handler: () => `config: token=${TOOL_KEY}\n${"x".repeat(400)}` }],
      });
      expect(result.status).toBe("completed");
      // The user gets the model's answer as it was.
      expect(result.assistantText).toContain(USER_KEY);
      // Nothing stored holds either key, and the tool result is shortened.
      const transcript = readFileSync(file, "utf8");
      expect(transcript).not.toContain("sk-AAAA");
      expect(transcript).not.toContain("sk-BBBB");
      expect(transcript).toContain("My API key is [REDACTED]; store the config.");
      expect(transcript).toContain("…[truncated by redactor: read_config]");
      expect(transcript).toContain("Stored. Your key [REDACTED] is saved.");
      expect(readdirSync(sessions.dir).filter((f) => f.startsWith("redacted.jsonl."))).not.toContain("redacted.jsonl.pending.json");
      const stored = JSON.stringify(result.messagesSnapshot);
      expect(stored).not.toContain("sk-AAAA");
      expect(stored).toContain("[REDACTED]");
      // The engine's finalize got the same redacted turn.
      expect(finalized).toHaveLength(1);
      expect(JSON.stringify(finalized[0])).not.toMatch(/sk-[AB]{4}/);
      expect(finalized[0]).toEqual(result.messagesSnapshot);
      // The async handler (it would block everything) was ignored: one warning per message, naming the plugin.
      expect(result.warnings.length).toBeGreaterThan(0);
      expect(new Set(result.warnings)).toEqual(new Set(["beforeMessageWrite hook: plugin redactor before_message_write handler returned a Promise; this hook is synchronous and the result was ignored"]));

      // A message marked [[do-not-persist]] is kept out; the rest of the turn is stored.
      env.fake.enqueue({ text: "Here is a one-time code 1234 [[do-not-persist]]" });
      const second = await runCodexTurn({ appServer: env.codex, sessionId: "redacted", sessionFile: file, prompt: "Give me a one-time code.", cwd: sessions.dir, contextEngine: engine, contextTokenBudget: 100_000, hooks: loaded.hooks });
      expect(second.status).toBe("completed");
      expect(second.assistantText).toContain("1234");
      expect(readFileSync(file, "utf8")).not.toContain("one-time code 1234");
      expect(readFileSync(file, "utf8")).toContain("Give me a one-time code.");
      expect(second.messagesSnapshot.map((m) => m.role)).toEqual(["user"]);
      expect(finalized[1]).toEqual(second.messagesSnapshot);
    } finally {
      await loaded.close();
    }
  }, 120_000);
});
