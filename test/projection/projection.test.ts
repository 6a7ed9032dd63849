import { describe, expect, it } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import type { AssembleOutput, HistoryOutput, ProjectionOutput } from "../../machines/turn.contract.js";
import {
  chunkBlocks,
  composeDeveloperInstructions,
  contextEntryKey,
  defaultDivergenceTokens,
  estimateTokens,
  fingerprintDynamicTools,
  fingerprintPolicy,
  ledgerUnit,
  ledgerUnitTokens,
  MAX_ENTRY_CHARS,
  projectAssembledContext,
  usesNativeSync,
  projectionEpoch,
  QUOTED_DATA_LABEL,
  renderMessageBlock,
  type ProjectAssembledContextParams,
} from "../../src/projection/index.js";
import { applyBindingUpdate, markNativeCompaction, type BindingUpdate, type ThreadBinding } from "../../src/transcript/binding.js";

const user = (text: string, timestamp = 1): AgentMessage => ({ role: "user", content: text, timestamp });
const assistant = (text: string, timestamp = 2): AgentMessage => ({ role: "assistant", content: [{ type: "text", text }], timestamp });
const summary = (text: string): AgentMessage => ({ role: "compactionSummary", summary: text, tokensBefore: 100 });
const fingerprints = { dynamicTools: "tools-1", engineId: "engine-1", policy: "policy-1" };
const PROMPT = "What next?";

function binding(overrides: Partial<ThreadBinding> = {}): ThreadBinding {
  return {
    version: 1,
    threadId: "thread-A",
    dynamicToolsFingerprint: "tools-1",
    engineId: "engine-1",
    policyFingerprint: "policy-1",
    projectionMode: "delta",
    heldTurnIds: ["turn-1"],
    ledger: [],
    ...overrides,
  };
}

function params(overrides: Partial<ProjectAssembledContextParams>): ProjectAssembledContextParams {
  return { mode: "delta", prompt: PROMPT, history: [], origins: [], fingerprints, ...overrides };
}

const assembledOf = (messages: AgentMessage[], extra: Partial<AssembleOutput> = {}): AssembleOutput => ({ messages, estimatedTokens: 5, ...extra });
const onThread = (n: number, turnId = "turn-1", threadId = "thread-A"): HistoryOutput["origins"] =>
  Array.from({ length: n }, () => ({ threadId, turnId }));
/** Context entry values without the quoted-data label each one starts with (asserted here). */
const values = (out: ProjectionOutput) =>
  Object.entries(out.additionalContext ?? {})
    .filter(([key]) => key.startsWith("openclaw.context."))
    .map(([, e]) => {
      expect(e.kind).toBe("untrusted");
      expect(e.value.startsWith(`${QUOTED_DATA_LABEL}\n\n`)).toBe(true);
      return e.value.slice(QUOTED_DATA_LABEL.length + 2);
    });
const contextKeys = (out: ProjectionOutput) => Object.keys(out.additionalContext ?? {}).filter((k) => k.startsWith("openclaw.context."));
const update = (out: ProjectionOutput) => out.bindingUpdate as BindingUpdate;
/** The binding the host would persist once Codex accepted the turn. */
const accept = (out: ProjectionOutput, previous: ThreadBinding | undefined, turnId: string, threadId = out.thread.threadId ?? `fresh-${turnId}`) =>
  applyBindingUpdate(previous, {
    threadId,
    turnId,
    update: out.bindingUpdate,
    dynamicToolsFingerprint: fingerprints.dynamicTools,
    engineId: fingerprints.engineId,
    policyFingerprint: fingerprints.policy,
    projectionMode: out.mode,
  });

describe("spec unit list (context-engine-projection)", () => {
  const history = [user("u1"), assistant("a1")];
  const cases: Array<[string, Partial<ProjectAssembledContextParams>]> = [
    ["prompt", { mode: "prompt" }],
    ["delta, fresh thread", { mode: "delta" }],
    ["delta, bound thread", { mode: "delta", binding: binding({ heldTurnIds: [] }) }],
    ["threadBootstrap", { mode: "threadBootstrap" }],
  ];

  it.each(cases)("stable output for identical inputs (%s)", (_label, overrides) => {
    const make = () =>
      projectAssembledContext(
        params({ ...overrides, history, origins: onThread(2), baseDeveloperInstructions: "BASE", assembled: assembledOf([summary("S"), ...history], { systemPromptAddition: "ADD" }) }),
      );
    expect(JSON.stringify(make())).toBe(JSON.stringify(make()));
  });

  it.each(cases)("no duplicate current prompt when the assembled view ends with it (%s)", (_label, overrides) => {
    const out = projectAssembledContext(params({ ...overrides, history, origins: onThread(2), assembled: assembledOf([...history, user(` ${PROMPT} `)]) }));
    const everything = [out.promptText, ...values(out)].join("\n");
    expect(everything.split(PROMPT)).toHaveLength(2);
  });

  it.each(cases)("handles empty history (%s)", (_label, overrides) => {
    const out = projectAssembledContext(params({ ...overrides, assembled: assembledOf([user(PROMPT)]) }));
    expect(out.promptText).toBe(PROMPT);
    expect(out.additionalContext).toBeUndefined();
    expect(out.entriesSent).toBe(0);
    const nothing = projectAssembledContext(params({ ...overrides, assembled: assembledOf([]) }));
    expect(nothing).toMatchObject({ mode: "none", promptText: PROMPT, thread: { action: overrides.binding ? "resume" : "start" } });
  });

  it.each(cases)("preserves role order (%s)", (_label, overrides) => {
    const view = [summary("S1"), user("u1"), assistant("a1"), { role: "toolResult", toolCallId: "c", toolName: "t", content: [{ type: "text", text: "r1" }], isError: false, timestamp: 3 } as AgentMessage, user("u2")];
    const out = projectAssembledContext(params({ ...overrides, assembled: assembledOf(view) }));
    const text = overrides.mode === "prompt" ? out.promptText : values(out).join("\n\n");
    const order = ["[compactionSummary]\nS1", "[user]\nu1", "[assistant]\na1", "[toolResult]\nr1", "[user]\nu2"].map((b) => text.indexOf(b));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it.each(cases)("includes systemPromptAddition only in developer instructions (%s)", (_label, overrides) => {
    const out = projectAssembledContext(
      params({ ...overrides, baseDeveloperInstructions: "BASE", assembled: assembledOf([user("ctx")], { systemPromptAddition: "  SECRET-ADDITION \n" }) }),
    );
    expect(out.developerInstructions).toBe("BASE\n\nSECRET-ADDITION");
    expect(out.promptText).not.toContain("SECRET-ADDITION");
    expect(values(out).join("")).not.toContain("SECRET-ADDITION");
  });
});

describe("developer instructions", () => {
  it("composes base and addition with one blank line, trimming the addition", () => {
    expect(composeDeveloperInstructions("base", " add ")).toBe("base\n\nadd");
    expect(composeDeveloperInstructions(undefined, "x")).toBe("x");
    expect(composeDeveloperInstructions("", "x")).toBe("x");
    expect(composeDeveloperInstructions("base", "  ")).toBe("base");
    expect(composeDeveloperInstructions(undefined, undefined)).toBeUndefined();
  });

  it("carries changed developer instructions into a resumed thread as a developer (application) entry", () => {
    const assembled = assembledOf([user("ctx")], { systemPromptAddition: "NEW RULE" });
    const fresh = projectAssembledContext(params({ baseDeveloperInstructions: "BASE", assembled }));
    const hash = update(fresh).developerInstructionsHash!;
    expect(fresh.thread.action).toBe("start");
    expect(Object.keys(fresh.additionalContext ?? {}).some((k) => k.startsWith("openclaw.developer"))).toBe(false);
    const same = projectAssembledContext(params({ baseDeveloperInstructions: "BASE", assembled, binding: binding({ developerInstructionsHash: hash }) }));
    expect(Object.keys(same.additionalContext ?? {}).some((k) => k.startsWith("openclaw.developer"))).toBe(false);
    const changed = projectAssembledContext(
      params({ baseDeveloperInstructions: "BASE", assembled: { ...assembled, systemPromptAddition: "NEWER RULE" }, binding: binding({ developerInstructionsHash: hash }) }),
    );
    const entry = Object.entries(changed.additionalContext ?? {}).find(([k]) => k.startsWith("openclaw.developer"));
    expect(entry?.[1]).toEqual({ kind: "application", value: "BASE\n\nNEWER RULE" });
    expect(changed.promptText).not.toContain("NEWER RULE");
  });
});

describe("mode none (no assembled context)", () => {
  it("sends the raw prompt and resumes only a compatible binding", () => {
    expect(projectAssembledContext(params({ binding: binding() }))).toMatchObject({
      mode: "none",
      reason: "nothingAssembled",
      promptText: PROMPT,
      thread: { action: "resume", threadId: "thread-A" },
      entriesSent: 0,
    });
    expect(projectAssembledContext(params({})).thread).toEqual({ action: "start", reason: "none:noBinding" });
    for (const changed of [{ engineId: "other" }, { dynamicToolsFingerprint: "other" }, { policyFingerprint: "other" }, { threadId: "" }]) {
      const out = projectAssembledContext(params({ binding: binding(changed) }));
      expect(out.thread).toEqual({ action: "start", reason: "none:incompatibleBinding" });
      expect(update(out).reset).toBe(true);
    }
  });
});

describe("mode prompt (the anchor)", () => {
  it("renders the context into the prompt and resumes the compatible thread every turn", () => {
    const out = projectAssembledContext(params({ mode: "prompt", binding: binding(), assembled: assembledOf([user("u1"), assistant("a1"), user(PROMPT)]) }));
    expect(out).toMatchObject({ mode: "prompt", reason: "perTurnText", thread: { action: "resume", threadId: "thread-A" }, entriesSent: 2 });
    expect(out.promptText.endsWith(`Current user request:\n${PROMPT}`)).toBe(true);
    expect(out.bytes).toBe(Buffer.byteLength(out.promptText));
    expect(out.additionalContext).toBeUndefined();
    expect(update(out)).toMatchObject({ reset: false, ledgerAdd: [] });
  });

  it("sends the raw prompt when everything was deduplicated", () => {
    const out = projectAssembledContext(params({ mode: "prompt", assembled: assembledOf([user(PROMPT)]) }));
    expect(out).toMatchObject({ mode: "prompt", reason: "nothingToRender", promptText: PROMPT, thread: { action: "start" } });
  });
});

describe("mode delta", () => {
  const history = [user("u1"), assistant("a1")];

  it("sends nothing the bound thread already holds", () => {
    const out = projectAssembledContext(params({ history, origins: onThread(2), binding: binding(), assembled: assembledOf([...history, user(PROMPT)]) }));
    expect(out).toMatchObject({ mode: "delta", reason: "threadHoldsContext", entriesSent: 0, promptText: PROMPT, thread: { action: "resume", threadId: "thread-A" } });
    expect(out.additionalContext).toBeUndefined();
  });

  it("projects what the thread lacks once, recording block units in the ledger", () => {
    const view = [summary("ENGINE SUMMARY"), ...history];
    const first = projectAssembledContext(params({ history, origins: onThread(2), binding: binding(), assembled: assembledOf(view) }));
    expect(first).toMatchObject({ reason: "newContext", entriesSent: 1, thread: { action: "resume" } });
    const [key, entry] = Object.entries(first.additionalContext ?? {})[0]!;
    const block = "[compactionSummary]\nENGINE SUMMARY";
    expect(key).toMatch(/^openclaw\.context\.000\.[0-9a-f]{10}$/);
    expect(key).toBe(contextEntryKey(0, `${QUOTED_DATA_LABEL}\n\n${block}`));
    expect(entry).toEqual({ kind: "untrusted", value: `${QUOTED_DATA_LABEL}\n\n${block}` });
    expect(update(first)).toMatchObject({ reset: false, ledgerAdd: [ledgerUnit(block)], developerInstructionsHash: expect.any(String), staleTokens: 0 });
    expect(ledgerUnit(block)).toMatch(/^[0-9a-f]{20}:9$/);
    const next = accept(first, binding(), "turn-2");
    const second = projectAssembledContext(params({ history, origins: onThread(2), binding: next, assembled: assembledOf(view) }));
    expect(second).toMatchObject({ reason: "threadHoldsContext", entriesSent: 0 });
  });

  it("sends only the new block when the engine adds context next to what it injected before", () => {
    const b1 = binding({ ledger: [ledgerUnit("[compactionSummary]\nS1")] });
    const out = projectAssembledContext(
      params({ history, origins: onThread(2), binding: b1, assembled: assembledOf([summary("S1"), { role: "custom", customType: "memory", content: "retrieved fact" }, ...history]) }),
    );
    expect(values(out)).toEqual(["[custom]\nretrieved fact"]);
  });

  it("counts identical blocks separately", () => {
    const view = [user("ok", 1), assistant("x"), user("ok", 5)];
    const out = projectAssembledContext(params({ binding: binding({ heldTurnIds: [] }), assembled: assembledOf(view) }));
    expect(values(out)).toEqual(["[user]\nok\n\n[assistant]\nx\n\n[user]\nok"]);
    const units = update(out).ledgerAdd;
    expect(new Set(units).size).toBe(3);
    expect(units[2]).toMatch(/#1:/);
  });

  it("re-projects messages of turns dropped by a native compaction, and of other threads", () => {
    const dropped = projectAssembledContext(params({ history, origins: onThread(2), binding: binding({ heldTurnIds: [] }), assembled: assembledOf(history) }));
    expect(values(dropped)).toEqual(["[user]\nu1\n\n[assistant]\na1"]);
    const other = projectAssembledContext(params({ history, origins: onThread(2, "turn-1", "thread-OLD"), binding: binding(), assembled: assembledOf(history) }));
    expect(other.entriesSent).toBe(1);
    const unmirrored = projectAssembledContext(params({ history, origins: [null, null], binding: binding(), assembled: assembledOf(history) }));
    expect(unmirrored.entriesSent).toBe(1);
  });

  it("chunks large context under the per-entry cap with keys sorting in content order", () => {
    const view = Array.from({ length: 12 }, (_, i) => user(`${String.fromCharCode(97 + i)}`.repeat(900), i));
    const out = projectAssembledContext(params({ binding: binding({ heldTurnIds: [] }), assembled: assembledOf(view) }));
    const keys = contextKeys(out);
    expect(keys.length).toBeGreaterThan(2);
    expect(out.entriesSent).toBe(keys.length);
    expect([...keys].sort()).toEqual(keys);
    const ordered = keys.map((k) => out.additionalContext![k]!.value);
    expect(ordered.every((v) => v.length <= MAX_ENTRY_CHARS)).toBe(true);
    expect(values(out).join("\n\n")).toBe(view.map((m) => renderMessageBlock(m)).join("\n\n"));
    expect(out.bytes).toBe(Buffer.byteLength(PROMPT) + ordered.reduce((n, v) => n + Buffer.byteLength(v), 0));
  });

  it("starts a fresh thread with everything as entries when there is no compatible binding", () => {
    const view = [summary("S"), ...history, user(PROMPT)];
    const out = projectAssembledContext(params({ mode: "delta", history, origins: onThread(2), binding: binding({ engineId: "x" }), assembled: assembledOf(view) }));
    expect(out).toMatchObject({ mode: "delta", reason: "incompatibleBinding", thread: { action: "start" } });
    expect(values(out)).toEqual(["[compactionSummary]\nS\n\n[user]\nu1\n\n[assistant]\na1"]);
    expect(update(out).reset).toBe(true);
  });

  describe("divergence", () => {
    const held = Array.from({ length: 10 }, (_, i) => user(`held message ${i} ${"x".repeat(200)}`, i));
    const heldTokens = (from: number, to: number) => held.slice(from, to).reduce((n, m) => n + estimateTokens(renderMessageBlock(m)!), 0);

    it("rotates when the engine dropped more held tokens than divergenceTokens", () => {
      const droppedTokens = heldTokens(0, 8);
      const at = (divergenceTokens: number) =>
        projectAssembledContext(params({ history: held, origins: onThread(10), binding: binding(), divergenceTokens, assembled: assembledOf(held.slice(8)) }));
      expect(at(droppedTokens)).toMatchObject({ reason: "threadHoldsContext", thread: { action: "resume" } });
      const rotated = at(droppedTokens - 1);
      expect(rotated).toMatchObject({ mode: "delta", reason: "divergence", thread: { action: "start" } });
      expect(update(rotated).reset).toBe(true);
      expect(values(rotated)).toEqual([held.slice(8).map((m) => renderMessageBlock(m)).join("\n\n")]);
    });

    it("with a budget, rotates once stale + view exceed it (the tolerance defaults to 25% of the budget, else 8,000)", () => {
      expect(defaultDivergenceTokens(undefined)).toBe(8_000);
      expect(defaultDivergenceTokens(1_000)).toBe(250);
      const droppedTokens = heldTokens(0, 8);
      const viewTokens = heldTokens(8, 10);
      const withBudget = (tokenBudget: number) =>
        projectAssembledContext(
          params({ history: held, origins: onThread(10), binding: binding(), tokenBudget, divergenceTokens: 100_000, assembled: assembledOf(held.slice(8)) }),
        );
      expect(withBudget(droppedTokens + viewTokens)).toMatchObject({ reason: "threadHoldsContext", staleTokens: droppedTokens });
      expect(withBudget(droppedTokens + viewTokens - 1)).toMatchObject({ reason: "divergence", staleTokens: 0, thread: { action: "start" } });
      // The default tolerance (25% of the budget) rotates a thread whose stale tokens exceed it.
      const budget = droppedTokens * 4 - 4;
      expect(projectAssembledContext(params({ history: held, origins: onThread(10), binding: binding(), tokenBudget: budget, assembled: assembledOf(held.slice(8)) })).reason).toBe("divergence");
      expect(projectAssembledContext(params({ history: held, origins: onThread(10), binding: binding(), assembled: assembledOf(held.slice(8)) })).reason).toBe(
        "threadHoldsContext",
      );
    });

    it("recognizes held messages by content when the engine returns copies, not the history's objects", () => {
      // The projection matches view messages to held ones by reference first; copies must take the content path
      // and give the same decisions (held, dropped, missing) as the objects themselves.
      const copy = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
      const droppedTokens = heldTokens(0, 8);
      for (const divergenceTokens of [droppedTokens, droppedTokens - 1]) {
        const run = (view: AgentMessage[]) =>
          projectAssembledContext(params({ history: held, origins: onThread(10), binding: binding(), divergenceTokens, assembled: assembledOf(view) }));
        const same = run(held.slice(8));
        const copied = run(copy(held.slice(8)));
        expect(copied).toEqual(same);
        expect(copied.reason).toBe(divergenceTokens === droppedTokens ? "threadHoldsContext" : "divergence");
      }
      // A copied view of everything held plus one new message sends only the new one.
      const fresh = user("not on the thread yet", 99);
      const out = projectAssembledContext(
        params({ history: held, origins: onThread(10), binding: binding(), divergenceTokens: 0, assembled: assembledOf([...copy(held), fresh]) }),
      );
      expect(out).toMatchObject({ reason: "newContext", thread: { action: "resume" }, entriesSent: 1 });
      expect(values(out)).toEqual([renderMessageBlock(fresh)]);
    });

    it("counts injected blocks the engine has since dropped", () => {
      const stale = "[compactionSummary]\n" + "old summary ".repeat(100);
      const b = binding({ ledger: [ledgerUnit(stale)] });
      const out = projectAssembledContext(params({ binding: b, divergenceTokens: 100, assembled: assembledOf([summary("new summary")]) }));
      expect(out).toMatchObject({ reason: "divergence", thread: { action: "start" } });
      // A view worth more than one turn's rent (0.1 x stale) keeps the thread (rent-or-buy, below).
      const bigger = [summary(`new summary ${"y".repeat(400)}`)];
      const kept = projectAssembledContext(params({ binding: b, divergenceTokens: 1_000, assembled: assembledOf(bigger) }));
      expect(kept).toMatchObject({ reason: "newContext", thread: { action: "resume" }, staleTokens: ledgerUnitTokens(ledgerUnit(stale)) });
    });
  });

  it("over a session, every block reaches the thread exactly once", () => {
    // Simulate: the engine shows [summary, ...history]; each accepted turn adds a user+assistant pair held by the thread.
    let b: ThreadBinding | undefined;
    const history: AgentMessage[] = [];
    const origins: HistoryOutput["origins"] = [];
    const received: string[] = [];
    let threadId = "";
    for (let turn = 1; turn <= 6; turn++) {
      const prompt = `prompt ${turn}`;
      const view = [summary(turn < 4 ? "S1" : "S2"), ...history, user(prompt)];
      const out = projectAssembledContext(params({ mode: "delta", prompt, history, origins, binding: b, divergenceTokens: 1_000, assembled: assembledOf(view) }));
      received.push(...values(out));
      threadId = out.thread.threadId ?? threadId ?? "";
      if (!out.thread.threadId) threadId = `thread-${turn}`;
      b = accept(out, b, `turn-${turn}`, threadId);
      history.push(user(prompt, turn * 10), assistant(`answer ${turn}`, turn * 10 + 1));
      origins.push({ threadId, turnId: `turn-${turn}` }, { threadId, turnId: `turn-${turn}` });
    }
    expect(received).toEqual(["[compactionSummary]\nS1", "[compactionSummary]\nS2"]);
    expect(b?.ledger).toHaveLength(2);
    expect(b?.heldTurnIds).toHaveLength(6);
  });
});

describe("mode threadBootstrap", () => {
  const view = [user("u1"), assistant("a1")];
  const withEpoch = (epoch: string, messages = view) => assembledOf(messages, { contextProjection: { mode: "thread_bootstrap", epoch } });

  it("bootstraps a fresh thread, resumes within an epoch sending only the prompt, and rotates when it changes", () => {
    const fresh = projectAssembledContext(params({ mode: "threadBootstrap", assembled: withEpoch("e1") }));
    expect(fresh).toMatchObject({ mode: "threadBootstrap", reason: "noBinding", thread: { action: "start" }, promptText: PROMPT });
    expect(values(fresh)).toEqual(["[user]\nu1\n\n[assistant]\na1"]);
    expect(update(fresh)).toMatchObject({ reset: true, projectionEpoch: "e1" });
    const b = accept(fresh, undefined, "turn-1", "thread-A");
    expect(b).toMatchObject({ projectionEpoch: "e1", heldTurnIds: ["turn-1"] });
    // Same epoch: the turn's own messages are now held natively; the bootstrap blocks are in the ledger.
    const history = [...view, user(PROMPT), assistant("answer")];
    const origins: HistoryOutput["origins"] = [null, null, { threadId: "thread-A", turnId: "turn-1" }, { threadId: "thread-A", turnId: "turn-1" }];
    const same = projectAssembledContext(params({ mode: "threadBootstrap", prompt: "next", history, origins, binding: b, assembled: withEpoch("e1", [...history, user("next")]) }));
    expect(same).toMatchObject({ reason: "sameEpoch", entriesSent: 0, promptText: "next", thread: { action: "resume", threadId: "thread-A" } });
    expect(same.additionalContext).toBeUndefined();
    const next = projectAssembledContext(params({ mode: "threadBootstrap", prompt: "next", history, origins, binding: b, assembled: withEpoch("e2", history.slice(2)) }));
    expect(next).toMatchObject({ reason: "epochChanged", thread: { action: "start" } });
    expect(values(next)).toEqual(["[user]\nWhat next?\n\n[assistant]\nanswer"]);
    expect(update(next)).toMatchObject({ reset: true, projectionEpoch: "e2" });
  });

  it.each([["engineId"], ["dynamicToolsFingerprint"], ["policyFingerprint"]] as const)("rotates when %s changes", (field) => {
    const out = projectAssembledContext(params({ mode: "threadBootstrap", binding: binding({ projectionEpoch: "e1", [field]: "changed" }), assembled: withEpoch("e1") }));
    expect(out).toMatchObject({ reason: "incompatibleBinding", thread: { action: "start" } });
  });

  it("adopts the first epoch on a thread started without a bootstrap when the engine dropped none of it", () => {
    // Turn 1 had nothing assembled (empty history): its thread holds turn 1 natively and records no epoch.
    const history = [user("first"), assistant("first answer")];
    const origins = onThread(2, "turn-1", "thread-A");
    const unbootstrapped = binding({ projectionMode: "none" });
    const adopted = projectAssembledContext(
      params({ mode: "threadBootstrap", prompt: "next", history, origins, binding: unbootstrapped, assembled: withEpoch("e1", [...history, user("next")]) }),
    );
    expect(adopted).toMatchObject({ mode: "threadBootstrap", reason: "epochAdopted", entriesSent: 0, thread: { action: "resume", threadId: "thread-A" } });
    expect(update(adopted)).toMatchObject({ reset: false, projectionEpoch: "e1" });
    // Once adopted, the next turn in that epoch is an ordinary same-epoch resume.
    const b = accept(adopted, unbootstrapped, "turn-2", "thread-A");
    expect(b.projectionEpoch).toBe("e1");
    // Context the thread lacks is sent on adoption, like a delta.
    const withSummary = projectAssembledContext(
      params({ mode: "threadBootstrap", prompt: "next", history, origins, binding: unbootstrapped, assembled: withEpoch("e1", [summary("older"), ...history]) }),
    );
    expect(withSummary).toMatchObject({ reason: "epochAdopted", entriesSent: 1 });
    // The engine dropped a message the thread still shows: the thread no longer matches the view, so rotate.
    const dropped = projectAssembledContext(
      params({ mode: "threadBootstrap", prompt: "next", history, origins, binding: unbootstrapped, assembled: withEpoch("e1", history.slice(1)) }),
    );
    expect(dropped).toMatchObject({ reason: "epochChanged", thread: { action: "start" } });
  });

  it("restores the view on the same thread after a native compaction dropped it", () => {
    const fresh = projectAssembledContext(params({ mode: "threadBootstrap", assembled: withEpoch("e1") }));
    const compacted = markNativeCompaction(accept(fresh, undefined, "turn-1", "thread-A"), "thread-A");
    const out = projectAssembledContext(params({ mode: "threadBootstrap", binding: compacted, assembled: withEpoch("e1") }));
    expect(out).toMatchObject({ reason: "sameEpochRestore", thread: { action: "resume", threadId: "thread-A" }, entriesSent: 1 });
    expect(update(out)).toMatchObject({ reset: false, projectionEpoch: "e1" });
  });

  it("derives a stable epoch when the engine gives none", () => {
    const fp = assembledOf(view, { contextProjection: { mode: "thread_bootstrap", fingerprint: "F" } });
    expect(projectionEpoch(fp, view)).toBe("fp:F");
    const bare = assembledOf(view);
    const e1 = projectionEpoch(bare, view);
    expect(e1).toMatch(/^first:[0-9a-f]{16}$/);
    // Growing the view at the end keeps the epoch; moving its start changes it.
    expect(projectionEpoch(bare, [...view, user("more")])).toBe(e1);
    expect(projectionEpoch(bare, view.slice(1))).not.toBe(e1);
    expect(projectionEpoch(assembledOf([]), [])).toBe("first:empty");
    // Explicit threadBootstrap mode works for an engine that never asked for it.
    const out = projectAssembledContext(params({ mode: "threadBootstrap", binding: binding({ projectionEpoch: e1, ledger: [] }), assembled: bare }));
    expect(out).toMatchObject({ mode: "threadBootstrap", thread: { action: "resume" } });
  });
});

describe("mode auto", () => {
  it("syncs natively whenever the engine assembled a view, threadBootstrap request or not; without a view it is none", () => {
    for (const extra of [{ contextProjection: { mode: "thread_bootstrap" as const, epoch: "e" } }, { contextProjection: { mode: "per_turn" as const } }, {}]) {
      const out = projectAssembledContext(params({ mode: "auto", assembled: assembledOf([user("x")], extra) }));
      expect(out).toMatchObject({ mode: "native", reason: "noBinding", entriesSent: 0, thread: { action: "start" } });
      expect(out.nativeSync?.units).toHaveLength(1);
      expect(out.additionalContext ?? {}).toEqual({});
    }
    expect(projectAssembledContext(params({ mode: "auto", assembled: assembledOf([]) })).mode).toBe("none");
    expect(projectAssembledContext(params({ mode: "auto" })).mode).toBe("none");
    expect(usesNativeSync({ mode: "native", assembled: assembledOf([]) })).toBe(true);
    expect(usesNativeSync({ mode: "delta", assembled: assembledOf([user("x")]) })).toBe(false);
  });
});

describe("chunking and keys", () => {
  it("packs blocks in order under the cap, splitting only over-long blocks", () => {
    const blocks = Array.from({ length: 5 }, (_, i) => `[user]\n${String(i).repeat(2000)}`);
    const chunks = chunkBlocks(blocks);
    expect(chunks.every((c) => c.length <= MAX_ENTRY_CHARS)).toBe(true);
    expect(chunks.join("\n\n")).toBe(blocks.join("\n\n"));
    expect(chunkBlocks(["a", "b"], 10)).toEqual(["a\n\nb"]);
    expect(chunkBlocks(["x".repeat(25)], 10)).toEqual(["x".repeat(10), "x".repeat(10), "x".repeat(5)]);
    expect(chunkBlocks([])).toEqual([]);
  });

  it("keys are content-addressed and order-preserving", () => {
    expect(contextEntryKey(7, "v")).toMatch(/^openclaw\.context\.007\.[0-9a-f]{10}$/);
    expect(contextEntryKey(7, "v")).toBe(contextEntryKey(7, "v"));
    expect(contextEntryKey(7, "v")).not.toBe(contextEntryKey(7, "w"));
    const keys = Array.from({ length: 120 }, (_, i) => contextEntryKey(i, `value ${120 - i}`));
    expect([...keys].sort()).toEqual(keys);
  });
});

describe("fingerprints", () => {
  it("fingerprints dynamic tools without descriptions or handlers, independent of order and key order", () => {
    const a = fingerprintDynamicTools([
      { name: "b", description: "one", inputSchema: { type: "object", properties: { x: { type: "string" } } }, handler: () => 1 },
      { name: "a", inputSchema: { type: "object" } },
    ]);
    const b = fingerprintDynamicTools([
      { inputSchema: { type: "object" }, name: "a", description: "changed description" },
      { name: "b", inputSchema: { properties: { x: { type: "string" } }, type: "object" } },
    ]);
    expect(a).toBe(b);
    expect(a).toMatch(/^[0-9a-f]{16}$/);
    expect(fingerprintDynamicTools([{ name: "a", inputSchema: { type: "array" } }])).not.toBe(a);
    expect(fingerprintDynamicTools([])).toBe(fingerprintDynamicTools([]));
  });

  it("fingerprints the policy with sorted keys, ignoring undefined values", () => {
    expect(fingerprintPolicy({ mode: "delta", partCapChars: 10, model: undefined })).toBe(fingerprintPolicy({ partCapChars: 10, mode: "delta" }));
    expect(fingerprintPolicy({ mode: "delta" })).not.toBe(fingerprintPolicy({ mode: "prompt" }));
  });

  it("estimates tokens as characters / 4, rounded up", () => {
    expect(estimateTokens("")).toBe(0);
    expect(estimateTokens("abcd")).toBe(1);
    expect(estimateTokens("abcde")).toBe(2);
  });
});
