/**
 * Codex's questions (`request_user_input`) in the CLI: how a question is shown, how a typed line answers it (a number
 * or a label picks an option, other text is the person's own answer), the chat question that asks a request's
 * questions in turn (Enter alone declines), the note `run` prints for a declined question, and the Q&A `run --json`
 * reads back from the turn's messages.
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import type { CodexUserInputRequest } from "../../../src/codex/options.js";
import type { AgentMessage } from "../../../src/context-engine/types.js";
import { createPromptReader } from "../../../src/cli/chat/input.js";
import { ChatQuestions } from "../../../src/cli/chat/questions.js";
import { askUserInput, parseUserInputAnswer, USER_INPUT_HINT } from "../../../src/cli/chat/user-input.js";
import { declinedQuestionNote, declineUserInput, renderUserInputQuestion, userInputRecords } from "../../../src/cli/user-input.js";

type Question = CodexUserInputRequest["questions"][number];

const color: Question = {
  id: "color",
  header: "Color",
  question: "Which color should the button be?",
  isOther: true,
  isSecret: false,
  options: [
    { label: "Blue (Recommended)", description: "matches the brand" },
    { label: "Red", description: "stands out" },
  ],
};
const size: Question = { id: "size", header: "Size", question: "How big?", isOther: true, isSecret: false, options: [{ label: "Small", description: "" }, { label: "Large", description: "" }] };
const request = (...questions: Question[]): CodexUserInputRequest => ({ threadId: "th", turnId: "tu", itemId: "call_1", questions });

describe("a question as shown", () => {
  it("header and question, then numbered options with their descriptions; (n/N) when a request asks several", () => {
    expect(renderUserInputQuestion(color, 0, 1)).toEqual([
      "Color: Which color should the button be?",
      "  1. Blue (Recommended): matches the brand",
      "  2. Red: stands out",
    ]);
    expect(renderUserInputQuestion(size, 1, 2)).toEqual(["(2/2) Size: How big?", "  1. Small", "  2. Large"]);
    expect(renderUserInputQuestion({ ...color, header: "", options: null }, 0, 1)).toEqual(["Which color should the button be?"]);
  });

  it("run's note for a declined request names why and shows every question", () => {
    expect(declinedQuestionNote(request(color, size), "run cannot ask")).toBe(
      [
        "codex-turn: Codex asks (declined: run cannot ask):",
        "  (1/2) Color: Which color should the button be?",
        "    1. Blue (Recommended): matches the brand",
        "    2. Red: stands out",
        "  (2/2) Size: How big?",
        "    1. Small",
        "    2. Large",
      ].join("\n"),
    );
    const stderr = new PassThrough();
    let written = "";
    stderr.on("data", (c: Buffer) => (written += c.toString()));
    expect(declineUserInput(stderr, "why")(request(color), { signal: new AbortController().signal })).toBeUndefined();
    expect(written).toContain("Which color should the button be?");
  });
});

describe("a typed answer", () => {
  it("a number picks that option; its label typed out (any case) picks it too; other text is the person's own answer", () => {
    expect(parseUserInputAnswer("2", color)).toEqual({ answer: "Red" });
    expect(parseUserInputAnswer(" 1 ", color)).toEqual({ answer: "Blue (Recommended)" });
    expect(parseUserInputAnswer("red", color)).toEqual({ answer: "Red" });
    expect(parseUserInputAnswer("teal, like the logo", color)).toEqual({ answer: "teal, like the logo" });
  });

  it("a number that is no option's asks again; free text where only options are allowed asks again", () => {
    expect(parseUserInputAnswer("3", color)).toEqual({ retry: "(no option 3: type a number from 1 to 2 or your own answer)" });
    expect(parseUserInputAnswer("0", color)).toMatchObject({ retry: expect.stringContaining("no option 0") });
    const strict = { ...color, isOther: false };
    expect(parseUserInputAnswer("teal", strict)).toEqual({ retry: "(this question takes one of its options: type a number from 1 to 2)" });
    expect(parseUserInputAnswer("1", strict)).toEqual({ answer: "Blue (Recommended)" });
    // No options at all: whatever is typed is the answer.
    expect(parseUserInputAnswer("42", { ...color, options: null, isOther: false })).toEqual({ answer: "42" });
  });
});

describe("chat: a request's questions asked in turn", () => {
  const queue = () => {
    const shown: string[] = [];
    return { shown, q: new ChatQuestions((l) => shown.push(l), 60_000) };
  };

  it("each question with its options and the hint; the answers go back by question id", async () => {
    const { shown, q } = queue();
    const answers = askUserInput(q, request(color, size));
    expect(shown).toEqual([
      ["codex-turn: Codex asks: (1/2) Color: Which color should the button be?", "  1. Blue (Recommended): matches the brand", "  2. Red: stands out", USER_INPUT_HINT].join("\n"),
    ]);
    expect(q.answer("9")).toBe(true); // not an option: asked again, with a hint
    expect(shown.at(-1)).toBe("(no option 9: type a number from 1 to 2 or your own answer)");
    expect(q.answer("2")).toBe(true);
    expect(shown.at(-1)).toBe(["codex-turn: Color -> Red", "codex-turn: Codex asks: (2/2) Size: How big?", "  1. Small", "  2. Large", USER_INPUT_HINT].join("\n"));
    expect(q.answer("somewhere in between")).toBe(true);
    expect(await answers).toEqual({ color: { answers: ["Red"] }, size: { answers: ["somewhere in between"] } });
    expect(shown.at(-1)).toBe("codex-turn: Size -> somewhere in between");
    expect(q.waiting).toBe(false);
  });

  it("Enter alone declines the whole request; so do the turn ending, the end of input and the asker withdrawing", async () => {
    const { shown, q } = queue();
    const first = askUserInput(q, request(color, size));
    q.answer("1");
    q.answer("");
    expect(await first).toBeUndefined();
    expect(shown.at(-1)).toBe("codex-turn: question declined (empty answer); Codex goes on without an answer");

    const second = askUserInput(q, request(color));
    q.declineAll("the turn ended");
    expect(await second).toBeUndefined();
    expect(shown.at(-1)).toBe("codex-turn: question declined (the turn ended); Codex goes on without an answer");

    const ac = new AbortController();
    const third = askUserInput(q, request(color), ac.signal);
    ac.abort();
    expect(await third).toBeUndefined();
    expect(shown.at(-1)).toContain("no longer asked: the request was withdrawn");

    q.close("end of input");
    expect(await askUserInput(q, request(color))).toBeUndefined();
    expect(shown.at(-1)).toContain("(end of input)");
  });

  it("an unanswered question is declined at the timeout, visibly", async () => {
    const shown: string[] = [];
    const q = new ChatQuestions((l) => shown.push(l), 30);
    expect(await askUserInput(q, request(color))).toBeUndefined();
    expect(shown.at(-1)).toBe("codex-turn: question declined (no answer within 0 s); Codex goes on without an answer");
  });

  it("a secret answer is sent but not shown again", async () => {
    const { shown, q } = queue();
    const answers = askUserInput(q, request({ ...color, id: "token", header: "Token", isSecret: true }));
    q.answer("hunter2");
    expect(await answers).toEqual({ token: { answers: ["hunter2"] } });
    expect(shown.at(-1)).toBe("codex-turn: Token -> (answer given)");
    expect(shown.join("\n")).not.toContain("hunter2");
  });

  it("an approval and a question arriving together are asked one after the other, each answered by its own line", async () => {
    const { shown, q } = queue();
    const { approvalQuestion } = await import("../../../src/cli/chat/approvals.js");
    const approval = q.put(approvalQuestion("run ls"));
    const answers = askUserInput(q, request(color));
    expect(shown).toEqual(["run ls -- approve? [y]es / [s]ession / [N]o"]);
    q.answer("y");
    expect(await approval).toBe("approve");
    expect(shown.at(-1)).toContain("Codex asks: Color");
    q.answer("1");
    expect(await answers).toEqual({ color: { answers: ["Blue (Recommended)"] } });
  });
});

describe("the chat's input: Enter on an empty line", () => {
  it("is reported as an empty line (a waiting question's decline), never as a prompt", async () => {
    const input = Object.assign(new PassThrough(), { isTTY: false });
    const output = new PassThrough();
    output.resume();
    const prompts: string[] = [];
    let empty = 0;
    createPromptReader(input, output, { onPrompt: (t) => prompts.push(t), onEmptyLine: () => empty++, onInterrupt: () => undefined, onClose: () => undefined });
    input.end("first\n\ncontinued \\\n\nlast\n");
    await new Promise((r) => setTimeout(r, 20));
    expect(prompts).toEqual(["first", "continued", "last"]); // the empty line after a continuation ends that prompt
    expect(empty).toBe(1);
  });
});

describe("run --json: the turn's questions and answers", () => {
  const call = (id: string, questions: Question[]): AgentMessage => ({
    role: "assistant",
    stopReason: "toolUse",
    timestamp: 1,
    content: [{ type: "toolCall", id, name: "request_user_input", arguments: { questions } }],
  });
  const result = (id: string, text: string, isError: boolean): AgentMessage => ({ role: "toolResult", toolCallId: id, toolName: "request_user_input", content: [{ type: "text", text }], isError, timestamp: 2 });

  it("each request with its questions and the answers given; a declined one has answers null", () => {
    const messages: AgentMessage[] = [
      { role: "user", content: "plan it", timestamp: 0 },
      call("call_a", [color]),
      result("call_a", JSON.stringify({ answers: { color: { answers: ["Red"] } } }), false),
      call("call_b", [size]),
      result("call_b", '{"answers":{}}', true),
      { role: "assistant", content: [{ type: "text", text: "done" }], timestamp: 3 },
    ];
    expect(userInputRecords(messages)).toEqual([
      { itemId: "call_a", questions: [{ id: "color", header: "Color", question: color.question, options: color.options }], answers: { color: ["Red"] } },
      { itemId: "call_b", questions: [{ id: "size", header: "Size", question: "How big?", options: size.options }], answers: null },
    ]);
    expect(userInputRecords([{ role: "user", content: "hi", timestamp: 0 }])).toEqual([]);
  });
});
