/** A plugin's requireApproval answer, decided: allowed decisions, malformed requests, a failing approver. */
import { describe, expect, it } from "vitest";
import { decidePluginApproval } from "../../src/openclaw/tool-approval.js";

const call = { pluginId: "gate", toolName: "exec", toolCallId: "c1" };

describe("decidePluginApproval", () => {
  it("an answer the plugin does not allow counts as deny; the plugin's own id and timeout reason are used", async () => {
    const seen: string[] = [];
    const raw = { title: "Wipe", description: "", allowedDecisions: ["deny"], pluginId: "owner", onResolution: (d: string) => void seen.push(d) };
    expect(await decidePluginApproval(raw, call, () => "allow-once", new Set())).toEqual({ allow: false, reason: "Denied by user" });
    expect(seen).toEqual(["deny"]);
    const asked: string[] = [];
    await decidePluginApproval({ title: "Wipe", description: "d", timeoutMs: 20, timeoutReason: "nobody answered" }, call, (r) => (asked.push(r.pluginId), new Promise(() => undefined)), new Set()).then((o) =>
      expect(o).toEqual({ allow: false, reason: "nobody answered" }),
    );
    expect(await decidePluginApproval(raw, call, (r) => (asked.push(r.pluginId), "deny"), new Set())).toMatchObject({ allow: false });
    expect(asked).toEqual(["gate", "owner"]);
  });

  it("tells the approver when the request stopped waiting (its signal aborts on the timeout)", async () => {
    let signal: AbortSignal | undefined;
    const outcome = await decidePluginApproval({ title: "T", description: "", timeoutMs: 20 }, call, (_r, o) => ((signal = o.signal), new Promise(() => undefined)), new Set());
    expect(outcome).toEqual({ allow: false, reason: "Approval timed out" });
    expect(signal?.aborted).toBe(true);
    let answered: AbortSignal | undefined;
    await decidePluginApproval({ title: "T", description: "" }, call, (_r, o) => ((answered = o.signal), "allow-once"), new Set());
    expect(answered?.aborted).toBe(false);
  });

  it("a question the turn no longer waits for is withdrawn: the approver's signal aborts, the plugin hears cancelled, the call is blocked", async () => {
    const turnOver = new AbortController();
    const seen: string[] = [];
    let signal: AbortSignal | undefined;
    const pending = decidePluginApproval(
      { title: "T", description: "", onResolution: (d: string) => void seen.push(d) },
      call,
      (_r, o) => ((signal = o.signal), new Promise(() => undefined)),
      new Set(),
      120_000,
      turnOver.signal,
    );
    await new Promise((r) => setImmediate(r));
    expect(signal?.aborted).toBe(false);
    turnOver.abort();
    expect(await pending).toEqual({ allow: false, reason: "Plugin approval withdrawn (the turn ended)" });
    expect(signal?.aborted).toBe(true);
    expect(seen).toEqual(["cancelled"]);
    // Already withdrawn before anyone is asked: no wait.
    const late = await decidePluginApproval({ title: "T", description: "" }, call, () => new Promise(() => undefined), new Set(), 120_000, turnOver.signal);
    expect(late).toEqual({ allow: false, reason: "Plugin approval withdrawn (the turn ended)" });
  });

  it("a malformed request or a failing approver blocks the call", async () => {
    expect(await decidePluginApproval({ description: "no title" }, call, () => "allow-once", new Set())).toEqual({
      allow: false,
      reason: "Plugin approval required (the plugin's approval request is malformed)",
    });
    expect(
      await decidePluginApproval({ title: "T", description: "" }, call, () => {
        throw new Error("ui gone");
      }, new Set()),
    ).toEqual({ allow: false, reason: "Plugin approval required (the approver failed)" });
  });

  it("a plugin's onResolution that throws changes nothing", async () => {
    const raw = { title: "T", description: "", onResolution: () => { throw new Error("observer broke"); } };
    expect(await decidePluginApproval(raw, call, () => "allow-once", new Set())).toEqual({ allow: true });
  });
});
