/**
 * Codex's own warnings about a thread reach the turn, against the real app-server. One Codex 0.169 gives offline: more
 * skills than its skills budget (2% of the model's context window) holds. It then drops every skill description and
 * leaves skills out of what the model sees, and says so once per thread in a `warning` notification during the first
 * turn (observed). The turn's result carries Codex's message, typed `codexWarning` on the client's own turn.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { disposeChecked, tempSessions, turnParams } from "../helpers/turn-env.js";

let env: OfflineCodex;
let home: string;
const sessions = tempSessions("thread-warnings-");
const BUDGET_WARNING = /^Exceeded skills context budget\. .*\d+ additional skills were not included/;

beforeAll(async () => {
  home = mkdtempSync(path.join(tmpdir(), "ctm-skills-home-"));
  for (let i = 0; i < 30; i++) {
    const dir = path.join(home, "skills", `skill-${i}`);
    mkdirSync(dir, { recursive: true });
    const description = "A long description of what this skill does and when to use it. ".repeat(8);
    writeFileSync(path.join(dir, "SKILL.md"), `---\nname: skill-${i}\ndescription: ${description}\n---\n\nBody ${i}\n`);
  }
  // An 8,000-token window: a 160-token skills budget that thirty skills overflow.
  env = await startOfflineCodex({ offline: { contextWindow: 8_000 }, codex: { codexHome: home } });
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
  rmSync(home, { recursive: true, force: true });
});

describe("Codex's warnings for a thread", () => {
  it("the skills-budget warning is in the first turn's warnings, once, and not repeated on the next turn", async () => {
    const file = sessions.file();
    const first = await runCodexTurn(turnParams(env, file, "first"));
    expect(first.status).toBe("completed");
    expect(first.warnings.filter((w) => BUDGET_WARNING.test(w))).toHaveLength(1);
    const second = await runCodexTurn(turnParams(env, file, "second"));
    expect(second.threadId).toBe(first.threadId);
    expect(second.warnings.filter((w) => BUDGET_WARNING.test(w))).toEqual([]);
  }, 60_000);

  it("on the client's own turn it is a typed codexWarning with the thread and turn", async () => {
    const { threadId } = await env.codex.startThread({ cwd: home });
    const turn = await env.codex.startTurn({ threadId, text: "typed" });
    await turn.completion;
    const warnings = turn.warnings.filter((w) => BUDGET_WARNING.test(w.message));
    expect(warnings).toEqual([{ code: "codexWarning", message: expect.stringMatching(BUDGET_WARNING), threadId, turnId: turn.turnId }]);
  }, 60_000);
});
