/**
 * Which turn a sub-agent's server requests and progress belong to (`TurnRunner.runFor`), from the
 * `collabAgentToolCall` items that name the sub-agent threads. The real-binary behaviour (an approval reaching the
 * turn's `onApproval`, the idle watchdog kept alive) is in test/integration/codex-agent-tools.test.ts; this covers the
 * shapes that are hard to produce offline: nested sub-agents, a cycle in a malformed stream, a closed thread.
 */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { validateNotification } from "../../src/codex/rpc.js";
import type { IncomingNotification } from "../../src/codex/schemas.js";
import { MAX_SUB_AGENT_LINKS, TurnRunner } from "../../src/codex/turn-runner.js";
import { TurnRun } from "../../src/codex/turn-run.js";

function runner(rpc: Array<{ method: string; params: unknown }> = []): TurnRunner {
  return new TurnRunner({
    logger: pino({ level: "silent" }),
    rpcRequest: (method, params) => {
      rpc.push({ method, params });
      return Promise.resolve({});
    },
    liveGeneration: () => 1,
    requestTimeoutMs: 1_000,
    idleInterruptGraceMs: 1_000,
  });
}

/** A running turn of `threadId` as the runner keeps it (registered the way `start` does). */
function runningTurn(r: TurnRunner, threadId: string): TurnRun & { idleArms: number } {
  const run = {
    threadId,
    turnId: `turn-${threadId}`,
    generation: 1,
    state: "running",
    idleArms: 0,
    pendingOverride: undefined,
    toolCallsInFlight: 0,
    fileChanges: new Map(),
    // The turn's own notifications are not what these tests look at: its projector takes none.
    projector: { matches: () => false },
    armIdle() {
      run.idleArms++;
    },
    noteFileChanges(n: IncomingNotification) {
      const item = (n.params as { item?: { type?: string; id?: string } }).item;
      if (item?.type === "fileChange") run.fileChanges.set(item.id!, []);
    },
    nativeToolsRunning: new Set<string>(),
    noteNativeTool: TurnRun.prototype.noteNativeTool,
  };
  (r as unknown as { runs: Map<string, unknown> }).runs.set(threadId, run);
  return run as unknown as TurnRun & { idleArms: number };
}

function notification(method: string, params: Record<string, unknown>): IncomingNotification {
  const c = validateNotification({ method, params });
  if (c.kind !== "ok") throw new Error(`not ok: ${method}`);
  return c.notification;
}

/** A `collabAgentToolCall` item of `sender` addressing `receivers`. */
function collab(sender: string, receivers: string[], tool = "spawnAgent"): IncomingNotification {
  return notification("item/completed", {
    threadId: sender,
    turnId: `turn-${sender}`,
    item: { type: "collabAgentToolCall", id: `call-${sender}`, tool, status: "completed", senderThreadId: sender, receiverThreadIds: receivers, prompt: null, model: null, reasoningEffort: null, agentsStates: {} },
  });
}

const agentMessage = (threadId: string) =>
  notification("item/completed", { threadId, turnId: `turn-${threadId}`, item: { type: "agentMessage", id: `m-${threadId}`, text: "x", phase: null } });

describe("sub-agent threads belong to the turn they work for", () => {
  it("a spawned thread's requests go to the spawning turn; so do its own sub-agents'", () => {
    const r = runner();
    const parent = runningTurn(r, "parent");
    expect(r.runFor("child")).toBeUndefined();
    r.onNotification("parent", 1, collab("parent", ["child"]));
    expect(r.runFor("child")).toBe(parent);
    // The child spawns a grandchild (its notifications name the child as sender).
    r.onNotification("child", 1, collab("child", ["grandchild"]));
    expect(r.runFor("grandchild")).toBe(parent);
    // A thread's own running turn comes first.
    const own = runningTurn(r, "child");
    expect(r.runFor("child")).toBe(own);
    expect(r.runFor("grandchild")).toBe(own);
  });

  it("a later turn of the parent thread inherits the link (send_input to an agent spawned earlier)", () => {
    const r = runner();
    const first = runningTurn(r, "parent");
    r.onNotification("parent", 1, collab("parent", ["child"]));
    first.state = "done";
    expect(r.runFor("child")).toBeUndefined();
    const second = runningTurn(r, "parent");
    expect(r.runFor("child")).toBe(second);
  });

  it("a sub-agent's progress re-arms the waiting turn's idle watchdog and never enters its record", () => {
    const r = runner();
    const parent = runningTurn(r, "parent");
    r.onNotification("parent", 1, collab("parent", ["child"]));
    const before = parent.idleArms;
    r.onNotification("child", 1, agentMessage("child"));
    expect(parent.idleArms).toBe(before + 1);
    // Another process generation's notification is not this turn's.
    r.onNotification("child", 2, agentMessage("child"));
    expect(parent.idleArms).toBe(before + 1);
    // An unrelated thread's notification does nothing.
    r.onNotification("stranger", 1, agentMessage("stranger"));
    expect(parent.idleArms).toBe(before + 1);
    // The sub-agent's file changes are kept for the approval requests the turn's host answers.
    r.onNotification("child", 1, notification("item/started", { threadId: "child", turnId: "t", item: { type: "fileChange", id: "fc1", status: "inProgress", changes: [] } }));
    expect(parent.fileChanges.has("fc1")).toBe(true);
    // A command the sub-agent runs counts as the turn's own (Codex is silent while it waits on it), until it ends.
    const command = (method: string) => notification(method, { threadId: "child", turnId: "t", item: { type: "commandExecution", id: "cmd1", command: "sleep 60", cwd: "/", status: "inProgress", commandActions: [] } });
    r.onNotification("child", 1, command("item/started"));
    expect([...parent.nativeToolsRunning]).toEqual(["child:cmd1"]);
    r.onNotification("child", 1, command("item/completed"));
    expect([...parent.nativeToolsRunning]).toEqual([]);
  });

  it("idleSubAgentsOf: every thread below a thread (sub-agents of sub-agents too), except those running a turn", () => {
    const r = runner();
    r.onNotification("parent", 1, collab("parent", ["child", "busy"]));
    r.onNotification("child", 1, collab("child", ["grandchild"]));
    r.onNotification("other", 1, collab("other", ["stranger"]));
    r.onNotification("busy", 1, notification("turn/started", { threadId: "busy", turn: { id: "busy-turn", items: [], status: "inProgress", error: null } }));
    expect(r.idleSubAgentsOf("parent").sort()).toEqual(["child", "grandchild"]);
    expect(r.idleSubAgentsOf("child")).toEqual(["grandchild"]);
    expect(r.idleSubAgentsOf("grandchild")).toEqual([]);
    // Its turn ended: released with the rest. A cycle in a malformed stream ends too.
    r.onNotification("busy", 1, notification("turn/completed", { threadId: "busy", turn: { id: "busy-turn", items: [], status: "completed", error: null } }));
    r.onNotification("grandchild", 1, collab("grandchild", ["parent"]));
    expect(r.idleSubAgentsOf("parent").sort()).toEqual(["busy", "child", "grandchild"]);
  });

  it("terminates on a cycle in a malformed stream, and forgets a closed thread", () => {
    const r = runner();
    r.onNotification("a", 1, collab("a", ["b"]));
    r.onNotification("b", 1, collab("b", ["a"]));
    expect(r.runFor("a")).toBeUndefined();
    const parent = runningTurn(r, "parent");
    r.onNotification("parent", 1, collab("parent", ["child"], "wait"));
    expect(r.runFor("child")).toBe(parent);
    r.forgetThread("child");
    expect(r.runFor("child")).toBeUndefined();
  });

  it("a closed parent takes its sub-agents' links with it; the links are bounded in number", () => {
    const r = runner();
    r.onNotification("parent", 1, collab("parent", ["c1", "c2"]));
    r.onNotification("other", 1, collab("other", ["c3"]));
    expect(r.subAgentCounts().links).toBe(3);
    r.forgetThread("parent");
    expect(r.subAgentCounts().links).toBe(1);
    const other = runningTurn(r, "other");
    expect(r.runFor("c3")).toBe(other);
    expect(r.runFor("c1")).toBeUndefined();

    const many = runner();
    for (let i = 0; i < MAX_SUB_AGENT_LINKS + 5; i++) many.onNotification("p", 1, collab("p", [`child-${i}`]));
    for (let i = 0; i < MAX_SUB_AGENT_LINKS + 5; i++) many.onNotification(`child-${i}`, 1, notification("turn/started", { threadId: `child-${i}`, turn: { id: `t${i}`, status: "inProgress", error: null, items: [] } }));
    expect(many.subAgentCounts()).toEqual({ links: MAX_SUB_AGENT_LINKS, turns: MAX_SUB_AGENT_LINKS });
    // The oldest went first; the newest is still linked.
    const p = runningTurn(many, "p");
    expect(many.runFor("child-0")).toBeUndefined();
    expect(many.runFor(`child-${MAX_SUB_AGENT_LINKS + 4}`)).toBe(p);
  });

  it("an interrupt of the turn interrupts its sub-agents' running turns, and no other thread's", async () => {
    const rpc: Array<{ method: string; params: unknown }> = [];
    const r = runner(rpc);
    const parent = runningTurn(r, "parent");
    const turnStarted = (threadId: string, turnId: string) => notification("turn/started", { threadId, turn: { id: turnId, items: [], status: "inProgress", error: null } });
    const turnCompleted = (threadId: string, turnId: string) => notification("turn/completed", { threadId, turn: { id: turnId, items: [], status: "completed", error: null } });
    // The sub-agent's turn may start before the spawn item names it.
    r.onNotification("child", 1, turnStarted("child", "child-turn"));
    r.onNotification("parent", 1, collab("parent", ["child"]));
    r.onNotification("child", 1, collab("child", ["grandchild"]));
    r.onNotification("grandchild", 1, turnStarted("grandchild", "grandchild-turn"));
    // Another session's thread running a turn (a compaction, say) on the same client.
    r.onNotification("other", 1, turnStarted("other", "other-turn"));
    const interrupt = (run: TurnRun) => (r as unknown as { interrupt(run: TurnRun, graceMs: number): Promise<void> }).interrupt(run, 60_000);
    await interrupt(parent);
    const interrupted = () => rpc.filter((c) => c.method === "turn/interrupt").map((c) => c.params);
    expect(interrupted()).toEqual([
      { threadId: "child", turnId: "child-turn" },
      { threadId: "grandchild", turnId: "grandchild-turn" },
      { threadId: "parent", turnId: "turn-parent" },
    ]);
    // A finished sub-agent turn is not interrupted again.
    rpc.length = 0;
    r.onNotification("child", 1, turnCompleted("child", "child-turn"));
    r.onNotification("grandchild", 1, turnCompleted("grandchild", "grandchild-turn"));
    await interrupt(parent);
    expect(interrupted()).toEqual([{ threadId: "parent", turnId: "turn-parent" }]);
    clearTimeout((parent as unknown as { graceTimer?: NodeJS.Timeout }).graceTimer);
  });
});
