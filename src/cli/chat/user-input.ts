/**
 * `chat` on a terminal answers Codex's questions (`request_user_input`, Plan mode): each question of a request is
 * shown with its numbered options, and the next line typed answers it: an option's number (or its label) picks that
 * option, other text is the person's own answer (Codex 0.169 marks every question `isOther`: free text allowed). An
 * empty line declines the whole request, as do the end of input, the turn ending and no answer in time.
 */
import type { CodexUserInputRequest, UserInputAnswers } from "../../codex/options.js";
import { renderUserInputQuestion, type UserInputQuestion } from "../user-input.js";
import type { ChatQuestion, ChatQuestions } from "./questions.js";

/** The hint shown under each question. */
export const USER_INPUT_HINT = "(type a number or your own answer; Enter alone declines)";

/** A typed line as the answer to `q`: the answer text, or `retry` (a hint) when it answers nothing. */
export type ParsedUserInput = { answer: string } | { retry: string };

/**
 * A typed (non-empty) line as the answer to `q`: `2` picks the second option's label, a label typed out picks that
 * option, other text is a free answer when the question allows one (`isOther`, or no options); a number that is no
 * option's, or free text where only options are allowed, asks again.
 *
 * @example
 * ```ts
 * parseUserInputAnswer("2", question); // { answer: "Red" }
 * parseUserInputAnswer("teal, please", question); // { answer: "teal, please" }
 * ```
 */
export function parseUserInputAnswer(line: string, q: UserInputQuestion): ParsedUserInput {
  const text = line.trim();
  const options = q.options ?? [];
  const pick = options.length > 0 ? `a number from 1 to ${options.length}` : "";
  if (/^\d+$/.test(text) && options.length > 0) {
    const option = options[Number(text) - 1];
    return option ? { answer: option.label } : { retry: `(no option ${text}: type ${pick}${q.isOther ? " or your own answer" : ""})` };
  }
  const byLabel = options.find((o) => o.label.trim().toLowerCase() === text.toLowerCase());
  if (byLabel) return { answer: byLabel.label };
  if (q.isOther || options.length === 0) return { answer: text };
  return { retry: `(this question takes one of its options: type ${pick})` };
}

/** What the chat shows for question `index` of `request`: the question, its options, the hint. */
function promptFor(request: CodexUserInputRequest, index: number): string {
  const q = request.questions[index]!;
  const lines = renderUserInputQuestion(q, index, request.questions.length);
  return [`codex-turn: Codex asks: ${lines[0]}`, ...lines.slice(1), USER_INPUT_HINT].join("\n");
}

/** The line shown once question `q` is answered (a secret answer is not repeated). */
function answeredLine(q: UserInputQuestion, answer: string): string {
  return `codex-turn: ${q.header.trim() || q.id} -> ${q.isSecret ? "(answer given)" : answer}`;
}

/**
 * A `request_user_input` request as one chat question that asks its questions in turn; resolves with the answers
 * (question id -> `{ answers: [text] }`), or `undefined` (declined) on an empty line or any decline.
 *
 * @example
 * ```ts
 * const answers = await questions.put(userInputQuestion(request), signal); // undefined: declined
 * ```
 */
export function userInputQuestion(request: CodexUserInputRequest): ChatQuestion<UserInputAnswers | undefined> {
  const answers: UserInputAnswers = {};
  let at = 0;
  const declined = (why: string) => ({ value: undefined, shown: `codex-turn: question declined (${why}); Codex goes on without an answer` });
  return {
    prompt: promptFor(request, 0),
    take: (line) => {
      const q = request.questions[at]!;
      if (line.trim() === "") return declined("empty answer");
      const parsed = parseUserInputAnswer(line, q);
      if ("retry" in parsed) return { next: parsed.retry };
      answers[q.id] = { answers: [parsed.answer] };
      at += 1;
      const shown = answeredLine(q, parsed.answer);
      return at < request.questions.length ? { next: `${shown}\n${promptFor(request, at)}` } : { value: { ...answers }, shown };
    },
    decline: declined,
  };
}

/**
 * Puts Codex's questions to the person at the chat, one at a time, through the chat's question queue; `signal` (the
 * library's: Codex stopped waiting) withdraws them. A request without questions is declined without asking.
 *
 * @example
 * ```ts
 * const onUserInput: UserInputCallback = (request, { signal }) => askUserInput(questions, request, signal);
 * ```
 */
export function askUserInput(questions: ChatQuestions, request: CodexUserInputRequest, signal?: AbortSignal): Promise<UserInputAnswers | undefined> {
  if (request.questions.length === 0) return Promise.resolve(undefined);
  return questions.put(userInputQuestion(request), signal);
}
