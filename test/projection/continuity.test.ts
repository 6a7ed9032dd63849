/**
 * History continuity without an engine (src/projection/index.ts): a fresh thread gets the newest history as context
 * entries within OpenClaw's continuity budget; a resumed thread, or a turn with an engine, gets none. And the binding
 * compatibility that decides fresh vs resumed: the model is not part of the policy, a legacy fingerprint still matches.
 */
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import type { ProjectionOutput } from "../../machines/turn.contract.js";
import {
  continuityBudgetChars,
  continuityOmittedNote,
  isBindingCompatible,
  projectAssembledContext,
  QUOTED_DATA_LABEL,
  renderMessageBlock,
  type ProjectAssembledContextParams,
} from "../../src/projection/index.js";
import type { BindingUpdate, ThreadBinding } from "../../src/transcript/binding.js";
import { createTurnDeps } from "../../src/turn/create-deps.js";
import { createTurnEventStream } from "../../src/turn/event-stream.js";
import { parseCodexTurnParams } from "../../src/params.js";

/** Enough of a client for parameter validation: nothing here talks to Codex. */
const noop = () => undefined;
const stubAppServer = { startThread: noop, resumeThread: noop, startTurn: noop } as never;
const fingerprints = { dynamicTools: "tools-1", engineId: "legacy", policy: "policy-1" };
const PROMPT = "What next?";
const user = (text: string, timestamp = 1): AgentMessage => ({ role: "user", content: text, timestamp });
const assistant = (text: string, timestamp = 2): AgentMessage => ({ role: "assistant", content: [{ type: "text", text }], timestamp });

/** 2n messages: q<i>/a<i>, each block about `size` characters. */
function conversation(n: number, size = 40): AgentMessage[] {
  const pad = (s: string) => `${s} ${"x".repeat(Math.max(0, size - s.length - 12))}`;
  return Array.from({ length: n }, (_, i) => [user(pad(`q${i}-mark`)), assistant(pad(`a${i}-mark`))]).flat();
}

function params(overrides: Partial<ProjectAssembledContextParams>): ProjectAssembledContextParams {
  return { mode: "auto", prompt: PROMPT, history: [], origins: [], fingerprints, historyContinuity: true, ...overrides };
}

/** The context entry values, without their quoted-data label, joined. */
function contextOf(out: ProjectionOutput): string {
  return Object.values(out.additionalContext ?? {})
    .map((e) => {
      expect(e.kind).toBe("untrusted");
      return e.value.slice(QUOTED_DATA_LABEL.length + 2);
    })
    .join("\n\n");
}

const binding = (overrides: Partial<ThreadBinding> = {}): ThreadBinding => ({
  version: 1,
  threadId: "thread-A",
  dynamicToolsFingerprint: "tools-1",
  engineId: "legacy",
  policyFingerprint: "policy-1",
  projectionMode: "none",
  heldTurnIds: ["turn-1"],
  ledger: [],
  ...overrides,
});

describe("history continuity on a fresh thread without an engine", () => {
  it("sends the whole history, in order, as untrusted entries recorded in the ledger, when it fits", () => {
    const history = conversation(3);
    const out = projectAssembledContext(params({ history, origins: history.map(() => ({ threadId: "old", turnId: "t" })) }));
    expect(out).toMatchObject({ mode: "none", reason: "historyContinuity", promptText: PROMPT, thread: { action: "start", reason: "none:noBinding" } });
    const expected = history.map((m) => renderMessageBlock(m)!).join("\n\n");
    expect(contextOf(out)).toBe(expected);
    expect(out.entriesSent).toBe(Object.keys(out.additionalContext!).length);
    const update = out.bindingUpdate as BindingUpdate;
    expect(update.reset).toBe(true);
    expect(update.ledgerAdd).toHaveLength(history.length);
    expect(out.bytes).toBeGreaterThan(Buffer.byteLength(expected));
  });

  it("keeps the newest whole blocks within the budget and says how many earlier entries were left out", () => {
    const history = conversation(20, 100);
    const blocks = history.map((m) => renderMessageBlock(m)!);
    const out = projectAssembledContext(params({ history, totalCapChars: 1_000 }));
    const context = contextOf(out);
    const kept = context.split("\n\n").slice(1);
    expect(kept.length).toBeGreaterThan(0);
    expect(kept).toEqual(blocks.slice(blocks.length - kept.length));
    expect(kept.join("\n\n").length).toBeLessThanOrEqual(1_000);
    // One more block would not have fitted.
    expect(blocks.slice(blocks.length - kept.length - 1).join("\n\n").length).toBeGreaterThan(1_000);
    expect(context.startsWith(`${continuityOmittedNote(history.length - kept.length)}\n\n`)).toBe(true);
    expect(context).toContain("a19-mark");
    expect(context).not.toContain("q0-mark");
  });

  it("stops at the first block that does not fit: older small blocks are not picked past a gap", () => {
    const history = [user("q0-mark"), assistant(`a0-mark ${"y".repeat(500)}`), user("q1-mark"), assistant("a1-mark")];
    const out = projectAssembledContext(params({ history, totalCapChars: 200 }));
    expect(contextOf(out)).toBe([continuityOmittedNote(2), renderMessageBlock(history[2]!), renderMessageBlock(history[3]!)].join("\n\n"));
  });

  it("is deterministic: the same history in another key order gives byte-identical entries", () => {
    const history = conversation(4);
    const reordered = history.map((m) => Object.fromEntries(Object.entries(m).reverse()) as AgentMessage);
    const a = projectAssembledContext(params({ history }));
    const b = projectAssembledContext(params({ history: reordered }));
    expect(JSON.stringify(b.additionalContext)).toBe(JSON.stringify(a.additionalContext));
  });

  it("sends nothing on a resumed thread, with an engine (even when its view is empty), or with no history", () => {
    const history = conversation(3);
    const resumed = projectAssembledContext(params({ history, origins: history.map(() => ({ threadId: "thread-A", turnId: "turn-1" })), binding: binding() }));
    expect(resumed).toMatchObject({ reason: "nothingAssembled", thread: { action: "resume" }, entriesSent: 0 });
    expect(resumed.additionalContext).toBeUndefined();
    const engineOwned = projectAssembledContext(params({ history, historyContinuity: false, assembled: { messages: [], estimatedTokens: 0 } }));
    expect(engineOwned).toMatchObject({ reason: "nothingAssembled", thread: { action: "start" }, entriesSent: 0 });
    expect(engineOwned.additionalContext).toBeUndefined();
    const empty = projectAssembledContext(params({ history: [] }));
    expect(empty).toMatchObject({ reason: "nothingAssembled", entriesSent: 0 });
  });

  it("budgets as OpenClaw's continuity projection: totalCapChars without a token budget, else the prompt's share at 3 chars a token", () => {
    expect(continuityBudgetChars(undefined)).toBe(24_000);
    expect(continuityBudgetChars(undefined, 5_000)).toBe(5_000);
    expect(continuityBudgetChars(200_000)).toBe(300_000); // reserve 100,000
    expect(continuityBudgetChars(30_000)).toBe(30_000); // reserve 20,000 -> 10,000 tokens
    expect(continuityBudgetChars(12_000)).toBe(18_000); // reserve capped so the prompt keeps min(8,000, 6,000)
    expect(continuityBudgetChars(1_000_000)).toBe(1_000_000); // 500,000 tokens x 3, capped
  });
});

describe("newer history on a resumed thread without an engine", () => {
  const own = { threadId: "thread-A", turnId: "turn-1" };
  it("sends what others wrote after the thread's last turn, and nothing else", () => {
    const history = [user("q-own"), assistant("a-own"), user("q-pi written by another runtime"), assistant("a-pi")];
    const out = projectAssembledContext(params({ history, origins: [own, own, null, { threadId: "thread-B", turnId: "t9" }], binding: binding() }));
    expect(out).toMatchObject({ mode: "none", reason: "newerHistory", thread: { action: "resume", threadId: "thread-A" } });
    expect(contextOf(out)).toBe([history[2]!, history[3]!].map((m) => renderMessageBlock(m)).join("\n\n"));
    expect((out.bindingUpdate as BindingUpdate).reset).toBe(false);
    expect((out.bindingUpdate as BindingUpdate).ledgerAdd).toHaveLength(2);
  });

  it("a refused turn's record, a summary, an engine, or nothing newer: the thread is resumed with nothing sent", () => {
    const blocked = { role: "user", content: [{ type: "text", text: "Your message could not be sent" }], timestamp: 3, __openclaw: { beforeAgentRunBlocked: { blockedBy: "g", blockedAt: 3 } } } as AgentMessage;
    const summary = { role: "compactionSummary", summary: "s", tokensBefore: 9, timestamp: 4 } as unknown as AgentMessage;
    const history = [user("q-own"), assistant("a-own"), blocked, summary];
    const refused = projectAssembledContext(params({ history, origins: [own, own, null, null], binding: binding() }));
    expect(refused).toMatchObject({ reason: "nothingAssembled", entriesSent: 0, thread: { action: "resume" } });
    const withForeign = [...history, user("from elsewhere")];
    const engine = projectAssembledContext(params({ history: withForeign, origins: [own, own, null, null, null], binding: binding(), historyContinuity: false }));
    expect(engine).toMatchObject({ reason: "nothingAssembled", entriesSent: 0 });
    const caughtUp = projectAssembledContext(params({ history: history.slice(0, 2), origins: [own, own], binding: binding() }));
    expect(caughtUp).toMatchObject({ reason: "nothingAssembled", entriesSent: 0 });
  });
});

describe("which binding a turn resumes", () => {
  const tools = { dynamicTools: "tools-1", engineId: "legacy" };
  it("a model switch keeps the policy; a binding with the earlier model-bearing policy stays compatible", () => {
    const deps = (model: string | undefined) =>
      createTurnDeps(
        parseCodexTurnParams({ appServer: stubAppServer, sessionId: "s", sessionFile: path.join(os.tmpdir(), "never-written.jsonl"), prompt: "p", ...(model ? { model } : {}) }),
        createTurnEventStream(),
      ).fingerprints;
    const a = deps("gpt-a");
    const b = deps("gpt-b");
    const none = deps(undefined);
    expect(a.policy).toBe(b.policy);
    expect(a.policy).toBe(none.policy);
    expect(a.legacyPolicy).toBeDefined();
    expect(a.legacyPolicy).not.toBe(b.legacyPolicy);
    expect(none.legacyPolicy).toBeUndefined();
    // Written by 0.1 under model gpt-a: still resumed by a gpt-a turn, and after that by any model.
    const legacy = binding({ ...tools, policyFingerprint: a.legacyPolicy! });
    expect(isBindingCompatible(legacy, { ...tools, policy: a.policy, legacyPolicy: a.legacyPolicy! })).toBe(true);
    expect(isBindingCompatible(legacy, { ...tools, policy: b.policy, legacyPolicy: b.legacyPolicy! })).toBe(false);
    expect(isBindingCompatible(binding({ ...tools, policyFingerprint: a.policy }), { ...tools, policy: b.policy })).toBe(true);
  });
});
