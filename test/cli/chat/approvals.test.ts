import { describe, expect, it } from "vitest";
import { approvalQuestion, parseApprovalAnswer } from "../../../src/cli/chat/approvals.js";
import { ChatQuestions } from "../../../src/cli/chat/questions.js";

/** The chat's question queue with approvals in it, as `chat --approve ask` uses it. */
class ApprovalQuestions extends ChatQuestions {
  ask(question: string, signal?: AbortSignal) {
    return this.put(approvalQuestion(question), signal);
  }
}

describe("chat --approve ask questions", () => {
  it("y/yes approve, s/session approve for the session, anything else denies", () => {
    expect(["y", " Yes ", "s", "SESSION", "n", "", "sure", "yess"].map(parseApprovalAnswer)).toEqual([
      "approve",
      "approve",
      "approveForSession",
      "approveForSession",
      "deny",
      "deny",
      "deny",
      "deny",
    ]);
  });

  it("asks one question at a time, in order; each typed line answers the oldest open one", async () => {
    const shown: string[] = [];
    const q = new ApprovalQuestions((l) => shown.push(l), 60_000);
    expect(q.answer("y")).toBe(false); // nothing open: the line is a prompt or a steer
    const first = q.ask("run A");
    const second = q.ask("run B");
    expect(q.waiting).toBe(true);
    expect(shown).toEqual(["run A -- approve? [y]es / [s]ession / [N]o"]);
    expect(q.answer("s")).toBe(true);
    expect(await first).toBe("approveForSession");
    expect(shown.slice(1)).toEqual(["run A -> approveForSession", "run B -- approve? [y]es / [s]ession / [N]o"]);
    expect(q.answer("no")).toBe(true);
    expect(await second).toBe("deny");
    expect(q.waiting).toBe(false);
    expect(shown.at(-1)).toBe("run B -> deny");
  });

  it("an unanswered question is denied at its timeout, visibly; an ended turn denies what is open", async () => {
    const shown: string[] = [];
    const q = new ApprovalQuestions((l) => shown.push(l), 30);
    expect(await q.ask("run slow")).toBe("deny");
    expect(shown.at(-1)).toBe("run slow -> deny (no answer within 0 s)");
    const open = [q.ask("run X"), q.ask("run Y")];
    q.declineAll("the turn ended");
    expect(await Promise.all(open)).toEqual(["deny", "deny"]);
    expect(shown.slice(-2)).toEqual(["run X -> deny (the turn ended)", "run Y -> deny (the turn ended)"]);
    expect(q.waiting).toBe(false);
  });

  it("a question whose asker stopped waiting is withdrawn: shown as such when it was being asked, silently when queued", async () => {
    const shown: string[] = [];
    const q = new ApprovalQuestions((l) => shown.push(l), 60_000);
    const a = new AbortController();
    const b = new AbortController();
    const first = q.ask("run A", a.signal);
    const second = q.ask("run B", b.signal);
    const third = q.ask("run C");
    b.abort(); // queued: withdrawn without a word
    expect(await second).toBe("deny");
    a.abort(); // being asked: shown, and the next question comes up
    expect(await first).toBe("deny");
    expect(shown).toEqual([
      "run A -- approve? [y]es / [s]ession / [N]o",
      "run A -> deny (no longer asked: the request was withdrawn)",
      "run C -- approve? [y]es / [s]ession / [N]o",
    ]);
    expect(q.answer("y")).toBe(true);
    expect(await third).toBe("approve");
  });

  it("Enter alone denies ([N]o is the default); after the end of input every question is denied at once", async () => {
    const shown: string[] = [];
    const q = new ApprovalQuestions((l) => shown.push(l), 60_000);
    const first = q.ask("run A");
    const second = q.ask("run B");
    expect(q.answer("")).toBe(true);
    expect(await first).toBe("deny");
    q.close("end of input");
    expect(await second).toBe("deny");
    expect(await q.ask("run C")).toBe("deny");
    expect(shown).toEqual([
      "run A -- approve? [y]es / [s]ession / [N]o",
      "run A -> deny",
      "run B -- approve? [y]es / [s]ession / [N]o",
      "run B -> deny (end of input)",
      "run C -> deny (end of input)",
    ]);
    expect(q.waiting).toBe(false);
  });
});
