/**
 * Codex's questions (`request_user_input`, asked in Plan mode, `--plan`) as the CLI shows them: the question text and
 * its numbered options; in `run` and a chat whose input is not a terminal, declined with the question printed on
 * stderr (nobody could answer it, and waiting would hang); in `run --json`, the questions and answers of the turn,
 * read back from the turn's messages (the library records each request as a `request_user_input` tool call and its
 * result). Codex 0.169 shows the model a declined request as `{"answers":{}}`, the same as a request answered with
 * nothing.
 */
import type { CodexUserInputRequest, UserInputAnswers, UserInputCallback } from "../codex/options.js";
import type { AgentMessage, ToolCallPart } from "../context-engine/types.js";

/** One question of a `request_user_input` request. */
export type UserInputQuestion = CodexUserInputRequest["questions"][number];

/**
 * One question as shown: `<header>: <question>` (with `(n/N)` when the request asks several), then its options
 * numbered from 1, each `n. <label>: <description>`.
 *
 * @example
 * ```ts
 * renderUserInputQuestion({ id: "c", header: "Color", question: "Which color?", isOther: true, isSecret: false,
 *   options: [{ label: "Blue", description: "calm" }] }, 0, 1);
 * // ["Color: Which color?", "  1. Blue: calm"]
 * ```
 */
export function renderUserInputQuestion(q: UserInputQuestion, index: number, total: number): string[] {
  const count = total > 1 ? `(${index + 1}/${total}) ` : "";
  const head = q.header.trim() !== "" && q.header.trim() !== q.question.trim() ? `${q.header}: ` : "";
  const options = (q.options ?? []).map((o, i) => `  ${i + 1}. ${o.label}${o.description.trim() !== "" ? `: ${o.description}` : ""}`);
  return [`${count}${head}${q.question}`, ...options];
}

/**
 * The note `run` (and a chat without a terminal) prints on stderr for a question it declines.
 *
 * @example
 * ```ts
 * declinedQuestionNote(request, "run cannot ask");
 * // "codex-turn: Codex asks (declined: run cannot ask):\n  Color: Which color?\n    1. Blue: calm"
 * ```
 */
export function declinedQuestionNote(request: CodexUserInputRequest, why: string): string {
  const lines = request.questions.flatMap((q, i) => renderUserInputQuestion(q, i, request.questions.length).map((l) => `  ${l}`));
  return [`codex-turn: Codex asks (declined: ${why}):`, ...lines].join("\n");
}

/**
 * An `onUserInput` that declines every request (`undefined`) after printing it on `stderr`: for `run` and a chat
 * whose input is not a terminal, where nobody can answer and waiting would hang.
 *
 * @example
 * ```ts
 * runCodexTurn({ ...params, onUserInput: declineUserInput(process.stderr, "run cannot ask") });
 * ```
 */
export function declineUserInput(stderr: NodeJS.WritableStream, why: string): UserInputCallback {
  return (request) => {
    stderr.write(`${declinedQuestionNote(request, why)}\n`);
    return undefined;
  };
}

/** One request of a turn as `--json` reports it: its questions and the answers given (`null`: not answered). */
export interface UserInputRecord {
  itemId: string;
  questions: Array<{ id: string; header: string; question: string; options: Array<{ label: string; description: string }> }>;
  answers: Record<string, string[]> | null;
}

/** The answers of a recorded `request_user_input` result text (the response the library sent, as JSON), if any. */
function recordedAnswers(text: string | undefined, isError: boolean): Record<string, string[]> | null {
  if (isError || text === undefined) return null;
  try {
    const parsed = JSON.parse(text) as { answers?: UserInputAnswers | undefined };
    if (typeof parsed.answers !== "object" || parsed.answers === null) return null;
    return Object.fromEntries(Object.entries(parsed.answers).map(([id, a]) => [id, Array.isArray(a?.answers) ? a.answers.map(String) : []]));
  } catch {
    return null;
  }
}

function recordedQuestions(call: ToolCallPart): UserInputRecord["questions"] {
  const questions = Array.isArray(call.arguments.questions) ? (call.arguments.questions as Array<Partial<UserInputQuestion>>) : [];
  return questions.map((q) => ({
    id: String(q.id ?? ""),
    header: String(q.header ?? ""),
    question: String(q.question ?? ""),
    options: (q.options ?? []).map((o) => ({ label: String(o.label), description: String(o.description) })),
  }));
}

/**
 * The `request_user_input` requests of a turn's messages, with the answers given, for `run --json`.
 *
 * @example
 * ```ts
 * userInputRecords(result.messagesSnapshot); // [{ itemId: "call_0_0", questions: [...], answers: { color: ["Blue"] } }]
 * ```
 */
export function userInputRecords(messages: readonly AgentMessage[]): UserInputRecord[] {
  const results = new Map<string, { text: string | undefined; isError: boolean }>();
  for (const m of messages) {
    if (m.role !== "toolResult" || m.toolName !== "request_user_input") continue;
    const content = (m.content ?? []) as Array<{ type: string; text?: unknown }>;
    const text = content.find((c) => c.type === "text" && typeof c.text === "string")?.text as string | undefined;
    results.set(String(m.toolCallId), { text, isError: m.isError === true });
  }
  const records: UserInputRecord[] = [];
  for (const m of messages) {
    if (m.role !== "assistant" || !Array.isArray(m.content)) continue;
    for (const part of m.content as Array<{ type: string }>) {
      if (part.type !== "toolCall" || (part as ToolCallPart).name !== "request_user_input") continue;
      const call = part as ToolCallPart;
      const result = results.get(call.id);
      records.push({ itemId: call.id, questions: recordedQuestions(call), answers: recordedAnswers(result?.text, result?.isError ?? true) });
    }
  }
  return records;
}
