import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CodexAppServer } from "../../src/codex/app-server.js";
import type { CodexApprovalRequest } from "../../src/codex/approvals.js";
import type { CodexUserInputRequest } from "../../src/codex/options.js";

const FAKE = path.join(import.meta.dirname, "fixtures", "fake-app-server.mjs");
const servers: CodexAppServer[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** Run the scripted turn (tool calls, four approvals, a user-input request); returns the replies the fake got. */
async function scriptedTurn(turnOptions: Record<string, unknown>) {
  const server = await CodexAppServer.spawn({ codexBin: FAKE, temporaryHome: true, env: { FAKE_APP_SERVER_MODE: "normal" } });
  servers.push(server);
  const { threadId } = await server.startThread();
  const turn = await server.startTurn({ threadId, text: "hello", ...turnOptions });
  const record = await turn.completion;
  return { replies: JSON.parse(record.assistantText) as Record<string, unknown>, turn, server, record };
}

describe("host callbacks of a turn (scripted fake app-server)", () => {
  it("onApproval gets typed requests for every approval method and its decision is sent in each method's shape", async () => {
    const seen: CodexApprovalRequest[] = [];
    const { replies } = await scriptedTurn({ onApproval: (r: CodexApprovalRequest) => (seen.push(r), "approve") });
    expect(seen.map((r) => [r.kind, r.method])).toEqual([
      ["commandExecution", "item/commandExecution/requestApproval"],
      ["fileChange", "item/fileChange/requestApproval"],
      ["commandExecution", "execCommandApproval"],
      ["permissions", "item/permissions/requestApproval"],
    ]);
    expect(seen[0]).toMatchObject({ threadId: "thr_fake", turnId: "turn_fake", itemId: "i1", command: "rm -rf /" });
    expect(seen[1]).toMatchObject({ itemId: "i2", changes: [{ path: "/ws/a.txt", kind: "update", diff: "@@ -1 +1 @@\n-a\n+b\n" }] });
    expect(seen[2]).toMatchObject({ threadId: "thr_fake", itemId: "x", command: "ls" });
    expect(replies.commandApproval).toEqual({ decision: "accept" });
    expect(replies.fileApproval).toEqual({ decision: "accept" });
    expect(replies.execApproval).toEqual({ decision: "approved" });
    expect(replies.permissions).toEqual({ permissions: {}, scope: "turn" });
  });

  it("approveForSession and deny map to each method's values; an unknown answer denies with a warning", async () => {
    const session = await scriptedTurn({ onApproval: () => "approveForSession" });
    expect(session.replies.commandApproval).toEqual({ decision: "acceptForSession" });
    expect(session.replies.execApproval).toEqual({ decision: "approved_for_session" });
    expect(session.replies.permissions).toEqual({ permissions: {}, scope: "session" });
    const bogus = await scriptedTurn({ onApproval: () => "yes please" });
    expect(bogus.replies.commandApproval).toEqual({ decision: "decline" });
    expect(bogus.replies.execApproval).toEqual({ decision: { denied: { rejection: expect.any(String) } } });
    expect(bogus.turn.warnings.map((w) => w.code)).toEqual(Array(4).fill("approvalCallbackFailed"));
  });

  it("onUserInput answers request_user_input; without it (or undefined) the request is declined", async () => {
    const asked: CodexUserInputRequest[] = [];
    const answered = await scriptedTurn({ onUserInput: (r: CodexUserInputRequest) => (asked.push(r), { q1: { answers: ["yes"] } }) });
    expect(asked).toEqual([{ threadId: "thr_fake", turnId: "turn_fake", itemId: "i4", questions: [] }]);
    expect(answered.replies.userInput).toEqual({ answers: { q1: { answers: ["yes"] } } });
    const declined = await scriptedTurn({ onUserInput: () => undefined });
    expect(declined.replies.userInput).toMatchObject({ error: { code: -32000 } });
    expect(declined.turn.warnings).toEqual([]);
    const broken = await scriptedTurn({ onUserInput: () => ({ q1: "yes" }) });
    expect(broken.replies.userInput).toMatchObject({ error: { code: -32000 } });
    expect(broken.turn.warnings.map((w) => w.code)).toEqual(["userInputCallbackFailed"]);
  });

  it("a request Codex resolves itself (serverRequest/resolved) withdraws the host's decision: its signal aborts, no answer is sent", async () => {
    const server = await CodexAppServer.spawn({ codexBin: FAKE, temporaryHome: true, env: { FAKE_APP_SERVER_MODE: "resolve-requests" } });
    servers.push(server);
    const { threadId } = await server.startThread();
    const withdrawn: string[] = [];
    // A person who never answers: each callback waits until it is told the question is gone.
    const waitForWithdrawal = (what: string, signal: AbortSignal) => {
      withdrawn.push(`asked ${what}`);
      return new Promise<undefined>((resolve) => signal.addEventListener("abort", () => (withdrawn.push(`withdrawn ${what}`), resolve(undefined)), { once: true }));
    };
    const turn = await server.startTurn({
      threadId,
      text: "hello",
      onApproval: (_r: CodexApprovalRequest, { signal }: { signal: AbortSignal }) => waitForWithdrawal("approval", signal).then(() => "approve" as const),
      onUserInput: (_r: CodexUserInputRequest, { signal }: { signal: AbortSignal }) => waitForWithdrawal("userInput", signal),
    });
    const record = await turn.completion;
    // Each withdrawn when Codex resolved it, while the turn went on (not only when it ended).
    expect(withdrawn).toEqual(["asked approval", "withdrawn approval", "asked userInput", "withdrawn userInput"]);
    // Neither the late "approve" nor a decline went back, and nothing was sent after the resolution.
    expect(JSON.parse(record.assistantText)).toEqual({ approval: "no reply", userInput: "no reply", lateReplies: 0 });
    // Not a failure of the host: no warnings.
    expect(turn.warnings).toEqual([]);
  });

  it("a host answering slower than the idle timeout is waited for (the watchdog is off while the host decides)", async () => {
    const slow = async () => {
      await new Promise((r) => setTimeout(r, 600));
      return { q1: { answers: ["late"] } };
    };
    const { replies, turn, record } = await scriptedTurn({ onUserInput: slow, idleTimeoutMs: 200 });
    expect(record.error).toBeUndefined();
    expect(record.codexStatus).toBe("completed");
    expect(replies.userInput).toEqual({ answers: { q1: { answers: ["late"] } } });
    expect(turn.warnings).toEqual([]);
  });
});
