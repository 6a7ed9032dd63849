/**
 * `--plan`: Codex's Plan mode, in which the model's `request_user_input` questions reach the CLI. Spawned as a user
 * runs it, against the real `codex app-server` and the offline fake model scripted (`--offline-script`) to ask; what
 * the model received next is read from the hidden `--offline-requests` file (the fake server's captured requests).
 * - `chat --plan` on a terminal (a tmux pane): each question is shown with its numbered options, the typed answers
 *   (a number, free text) reach the model and the transcript; Enter alone and the end of input (Ctrl-D) decline.
 * - `run --plan` and `chat --plan` with piped input: nobody is asked; the question is declined at once, printed on
 *   stderr, and Codex goes on (the model sees `{"answers":{}}`); `run --json` lists it under `userInput`.
 * - without `--plan` (and with `--no-plan`) Codex refuses the tool itself: nothing reaches the CLI.
 */
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliBin, runCli } from "../helpers/cli.js";
import { tmuxDriver } from "../helpers/tmux.js";

const session = `ctm-chat-plan-${process.pid}`;
const { tmux, pane, type, key, waitFor, kill } = tmuxDriver(session);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-plan-"));
});
afterAll(async () => {
  kill();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const COLOR = {
  id: "color",
  header: "Color",
  question: "Which color should the button be?",
  options: [
    { label: "Blue (Recommended)", description: "matches the brand" },
    { label: "Red", description: "stands out" },
  ],
};
const SIZE = { id: "size", header: "Size", question: "How big should it be?", options: [{ label: "Small", description: "compact" }, { label: "Large", description: "easy to hit" }] };
const ask = (...questions: unknown[]) => ({ functionCall: { name: "request_user_input", arguments: { questions } } });

async function script(name: string, replies: unknown[]): Promise<string> {
  const file = path.join(dir, `${name}.script.json`);
  await writeFile(file, JSON.stringify(replies));
  return file;
}

/** The `function_call_output`s of each request the offline model received (`--offline-requests`), in order. */
async function toolOutputsSeen(file: string): Promise<string[][]> {
  const lines = (await readFile(file, "utf8")).split("\n").filter(Boolean);
  return lines.map((l) => {
    const input = ((JSON.parse(l) as { body: { input?: unknown[] } }).body.input ?? []) as Array<{ type?: string; output?: unknown }>;
    return input.filter((i) => i.type === "function_call_output").map((i) => (typeof i.output === "string" ? i.output : JSON.stringify(i.output)));
  });
}

describe("chat --plan on a terminal", { timeout: 240_000 }, () => {
  it("shows Codex's questions, the typed answers reach the model and the transcript; Enter alone and Ctrl-D decline", async () => {
    const replies = [ask(COLOR, SIZE), { text: "PLAN-ANSWERED" }, ask(COLOR), { text: "PLAN-DECLINED" }, ask(SIZE), { text: "PLAN-AFTER-EOF" }];
    const scriptFile = await script("chat", replies);
    const sessionFile = path.join(dir, "chat.jsonl");
    const requests = path.join(dir, "chat.requests.jsonl");
    const exitFile = path.join(dir, "chat.exit");
    const args = ["chat", "--session", sessionFile, "--offline", "--offline-script", scriptFile, "--offline-requests", requests, "--plan"];
    const cmd = [process.execPath, cliBin, ...args].map((a) => `'${a}'`).join(" ");
    tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "60", "-e", "CODEX_TURN_FROM_SOURCE=1", `${cmd}; echo EXIT=$? > '${exitFile}'; sleep 60`); // the pane stays after the exit
    await waitFor((s) => s.includes("> "), "the prompt");

    type("plan the button");
    const asked = await waitFor((s) => s.includes("Enter alone declines"), "the first question");
    expect(asked).toContain("codex-turn: Codex asks: (1/2) Color: Which color should the button be?");
    expect(asked).toContain("  1. Blue (Recommended): matches the brand");
    expect(asked).toContain("  2. Red: stands out");
    type("5"); // not an option: asked again
    await waitFor((s) => s.includes("(no option 5: type a number from 1 to 2 or your own answer)"), "the hint");
    type("2");
    await waitFor((s) => s.includes("(2/2) Size: How big should it be?"), "the second question");
    type("as big as a thumb"); // the person's own words
    await waitFor((s) => s.includes("PLAN-ANSWERED"), "the reply after the answers");
    const afterFirst = pane();
    expect(afterFirst).toContain("codex-turn: Color -> Red");
    expect(afterFirst).toContain("codex-turn: Size -> as big as a thumb");
    expect(afterFirst).not.toContain("(steer sent)"); // the answers were not steers

    await waitFor((s) => s.trimEnd().endsWith(">"), "the idle prompt");
    type("and the label?");
    await waitFor((s) => (s.match(/Enter alone declines/g) ?? []).length === 3, "the third question");
    key("Enter"); // Enter alone: declined
    await waitFor((s) => s.includes("PLAN-DECLINED"), "the reply after the decline");
    expect(pane()).toContain("codex-turn: question declined (empty answer); Codex goes on without an answer");

    // Ctrl-D while a question waits: declined (nobody can answer any more), the turn ends, then the chat.
    await waitFor((s) => s.trimEnd().endsWith(">"), "the idle prompt after the second turn");
    type("one more");
    await waitFor((s) => s.includes("Codex asks: Size: How big should it be?"), "the question of the third turn");
    key("C-d");
    const deadline = Date.now() + 20_000;
    while (!existsSync(exitFile) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect((await readFile(exitFile, "utf8")).trim()).toBe("EXIT=0");
    expect(existsSync(`${sessionFile}.lock`)).toBe(false);
    const end = pane();
    expect(end).toContain("codex-turn: question declined (end of input); Codex goes on without an answer");
    expect(end).toContain("PLAN-AFTER-EOF");
    kill();

    // What the model received after each question: the typed answers, then (declined) nothing. Codex serializes the
    // answers itself (its map's key order varies), so they are compared parsed.
    const answer = { answers: { color: { answers: ["Red"] }, size: { answers: ["as big as a thumb"] } } };
    const seen = await toolOutputsSeen(requests);
    expect(seen, JSON.stringify(seen)).toHaveLength(6); // per turn: the prompt, then after the question
    expect(JSON.parse(seen[1]!.at(-1)!)).toEqual(answer);
    expect(seen[3]!.at(-1)).toBe('{"answers":{}}');
    expect(seen[5]!.at(-1)).toBe('{"answers":{}}');
    // The transcript holds each question (a tool call) and its answer (the tool's result).
    const transcript = (await readFile(sessionFile, "utf8")).split("\n").filter(Boolean).map((l) => JSON.parse(l) as { message?: Record<string, unknown> });
    const messages = transcript.flatMap((e) => (e.message ? [e.message] : []));
    const calls = messages.flatMap((m) => (m.role === "assistant" ? (m.content as Array<Record<string, unknown>>) : [])).filter((p) => p.name === "request_user_input");
    expect(calls.map((c) => (c.arguments as { questions: Array<{ id: string }> }).questions.map((q) => q.id))).toEqual([["color", "size"], ["color"], ["size"]]);
    const results = messages.filter((m) => m.role === "toolResult" && m.toolName === "request_user_input");
    expect(results.map((r) => [(r.content as Array<{ text: string }>)[0]!.text, r.isError])).toEqual([
      [JSON.stringify(answer), false],
      ['{"answers":{}}', true],
      ['{"answers":{}}', true],
    ]);
  });
});

describe("run --plan and chat --plan without a terminal", { timeout: 240_000 }, () => {
  it("run: the question is declined at once and printed on stderr; Codex goes on; --json lists it", async () => {
    const scriptFile = await script("run", [ask(COLOR), { text: "WENT-ON" }]);
    const requests = path.join(dir, "run.requests.jsonl");
    const sessionFile = path.join(dir, "run.jsonl");
    const started = Date.now();
    const r = await runCli(["run", "plan the button", "--session", sessionFile, "--offline", "--offline-script", scriptFile, "--offline-requests", requests, "--plan", "--json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(Date.now() - started).toBeLessThan(60_000); // no wait for an answer that cannot come
    expect(r.stderr).toContain(
      [
        "codex-turn: Codex asks (declined: run cannot ask; answer Codex's questions in chat on a terminal):",
        "  Color: Which color should the button be?",
        "    1. Blue (Recommended): matches the brand",
        "    2. Red: stands out",
      ].join("\n"),
    );
    const json = JSON.parse(r.stdout.trim()) as Record<string, unknown>;
    expect(json).toMatchObject({ status: "completed", assistantText: "WENT-ON" });
    expect(json.userInput).toEqual([{ itemId: expect.any(String), questions: [{ ...COLOR }], answers: null }]);
    // What Codex showed the model for the declined question.
    expect((await toolOutputsSeen(requests)).at(-1)).toEqual(['{"answers":{}}']);
  });

  it("run: the plan Codex proposed is printed after the reply (Codex takes it out of the reply); --json has proposedPlan", async () => {
    const reply = "Here is the plan.\n<proposed_plan>\n# Button\n1. Add a blue button\n2. Test it\n</proposed_plan>\n";
    const scriptFile = await script("proposed", [{ text: reply }]);
    const text = await runCli(["run", "plan the button", "--session", path.join(dir, "proposed.jsonl"), "--offline", "--offline-script", scriptFile, "--plan"]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/Here is the plan\.\n+plan:\n# Button\n1\. Add a blue button\n2\. Test it\nstatus: completed/);
    expect(text.stdout).not.toContain("proposed_plan");
    const jsonScript = await script("proposed-json", [{ text: reply }]);
    const r = await runCli(["run", "plan the button", "--session", path.join(dir, "proposed-json.jsonl"), "--offline", "--offline-script", jsonScript, "--plan", "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout.trim()) as Record<string, unknown>;
    expect(json).toMatchObject({ assistantText: "Here is the plan.\n", proposedPlan: "# Button\n1. Add a blue button\n2. Test it\n" });
  });

  it("chat with piped input: declined and printed on stderr, the next line is a prompt, not an answer", async () => {
    const scriptFile = await script("pipe", [ask(COLOR), { text: "PIPE-WENT-ON" }, { text: "SECOND-PROMPT" }]);
    const requests = path.join(dir, "pipe.requests.jsonl");
    const args = ["chat", "--session", path.join(dir, "pipe.jsonl"), "--offline", "--offline-script", scriptFile, "--offline-requests", requests, "--plan"];
    const r = await runCli(args, { input: "plan the button\nsecond prompt\n" });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain("codex-turn: Codex asks (declined: chat's input is not a terminal):\n  Color: Which color should the button be?");
    expect(r.stdout).toContain("PIPE-WENT-ON");
    expect(r.stdout).toContain("SECOND-PROMPT"); // the second line was the next prompt
    const seen = await toolOutputsSeen(requests);
    expect(seen).toHaveLength(3);
    expect(seen[1]).toEqual(['{"answers":{}}']); // the request right after the question
  });

  it("without --plan, and with --no-plan, Codex refuses the question itself: nothing is asked or printed", async () => {
    for (const mode of [[], ["--no-plan"]]) {
      const scriptFile = await script(`default${mode.length}`, [ask(COLOR), { text: "NOT-PLANNED" }]);
      const requests = path.join(dir, `default${mode.length}.requests.jsonl`);
      const r = await runCli(["run", "go", "--session", path.join(dir, `default${mode.length}.jsonl`), "--offline", "--offline-script", scriptFile, "--offline-requests", requests, "--json", ...mode]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).not.toContain("Codex asks");
      expect(JSON.parse(r.stdout.trim())).not.toHaveProperty("userInput");
      expect((await toolOutputsSeen(requests)).at(-1)).toEqual(["request_user_input is unavailable in Default mode"]);
    }
  });

  it("--plan is documented on run and chat; compact has no such option (exit 2)", async () => {
    for (const cmd of ["run", "chat"]) {
      const help = await runCli([cmd, "--help"]);
      expect(help.stdout.replace(/\s+/g, " "), cmd).toContain("--plan Codex's Plan mode: it plans before acting and may ask you questions (request_user_input)");
      expect(help.stdout, cmd).toContain("--no-plan");
    }
    const compact = await runCli(["compact", "--session", path.join(dir, "none.jsonl"), "--offline", "--plan"]);
    expect(compact.code).toBe(2);
    expect(compact.stderr).toContain("unknown option '--plan'");
  });
});
