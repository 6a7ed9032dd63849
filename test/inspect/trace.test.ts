import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assign, createActor, fromPromise, setup, toPromise } from "xstate";
import {
  createTraceRecorder,
  parseTraceJSONL,
  readTraceFile,
  stateValueToPaths,
  TraceFileError,
  writeTraceFile,
  type TraceStep,
} from "../../src/inspect/trace.js";

const SECRET = "SECRET-PROMPT-do-not-record-91c2";

// A small machine with a compound state, an invoked promise actor, context holding the secret and a payload event.
const demo = setup({
  types: {
    context: {} as { prompt: string; reply?: string },
    input: {} as { prompt: string },
    events: {} as { type: "SEND"; text: string } | { type: "GO" },
  },
  actors: { answer: fromPromise(async ({ input }: { input: { prompt: string } }) => `echo ${input.prompt}`) },
  actions: {
    storeReply: assign((_, params: { reply: string }) => ({ reply: params.reply })),
  },
}).createMachine({
  id: "demo",
  context: ({ input }) => ({ prompt: input.prompt }),
  initial: "idle",
  states: {
    idle: { on: { SEND: "busy.waiting" } },
    busy: {
      initial: "waiting",
      states: {
        waiting: { on: { GO: "working" } },
        working: {
          invoke: {
            id: "answer",
            src: "answer",
            input: ({ context }) => ({ prompt: context.prompt }),
            onDone: { target: "#demo.done", actions: { type: "storeReply", params: ({ event }) => ({ reply: event.output }) } },
          },
        },
      },
    },
    done: { type: "final" },
  },
  output: ({ context }) => ({ reply: context.reply }),
});

async function runDemo(): Promise<ReturnType<typeof createTraceRecorder>> {
  const recorder = createTraceRecorder();
  const actor = createActor(demo, { input: { prompt: SECRET }, inspect: recorder.inspect });
  actor.start();
  actor.send({ type: "SEND", text: SECRET });
  actor.send({ type: "GO" });
  const output = await toPromise(actor);
  // The run really carried the secret through context, an event, actor input and output.
  expect(output).toEqual({ reply: `echo ${SECRET}` });
  return recorder;
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "trace-test-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("stateValueToPaths", () => {
  it("flattens strings, nested and parallel values", () => {
    expect(stateValueToPaths("idle")).toEqual(["idle"]);
    expect(stateValueToPaths({ turnRunning: "streaming" })).toEqual(["turnRunning.streaming"]);
    expect(stateValueToPaths({ a: { b: "c" }, d: "e" })).toEqual(["a.b.c", "d.e"]);
    expect(stateValueToPaths({ a: {} })).toEqual(["a"]);
    expect(stateValueToPaths(undefined)).toEqual([]);
  });
});

describe("createTraceRecorder", () => {
  it("records state paths, event types, actor ids and increasing step numbers for the root and its children", async () => {
    const recorder = await runDemo();
    const steps = recorder.events();
    expect(steps.map((s) => s.step)).toEqual(steps.map((_, i) => i + 1));

    const root = steps.filter((s) => s.machineId === "demo");
    expect(root.map((s) => [s.eventType, s.state])).toEqual([
      ["xstate.init", ["idle"]],
      ["SEND", ["busy.waiting"]],
      ["GO", ["busy.working"]],
      ["xstate.done.actor.answer", ["done"]],
    ]);
    expect(root.at(-1)?.status).toBe("done");
    const rootId = root[0]?.actorId;
    expect(root.every((s) => s.actorId === rootId && s.parentId === undefined)).toBe(true);

    const child = steps.filter((s) => s.actorId === "answer");
    expect(child.length).toBeGreaterThan(0);
    expect(child.every((s) => s.parentId === rootId && s.machineId === undefined && s.state.length === 0)).toBe(true);
    expect(child.at(-1)?.status).toBe("done");
  });

  it("never records payloads, context, input or output", async () => {
    const recorder = await runDemo();
    const jsonl = recorder.toJSONL();
    expect(jsonl).toContain('"eventType":"SEND"');
    expect(jsonl).not.toContain(SECRET);
    expect(jsonl).not.toContain("echo");
    expect(JSON.stringify(recorder.events())).not.toContain(SECRET);
    for (const line of jsonl.trim().split("\n")) {
      expect(Object.keys(JSON.parse(line) as object).sort()).toEqual(
        expect.arrayContaining(["actorId", "eventType", "state", "status", "step"]),
      );
      expect(line).not.toMatch(/"(context|event|payload|input|output|text)"/);
    }
  });

  it("gives byte-identical JSONL for identical runs", async () => {
    const a = (await runDemo()).toJSONL();
    const b = (await runDemo()).toJSONL();
    // XState's own root ids differ between these runs ("x:4", "x:6"); the recorder aliases them.
    expect(a).toBe(b);
    expect(a).toContain('"actorId":"root"');
    expect(a).toContain('"parentId":"root"');
  });

  it("events() returns a copy", async () => {
    const recorder = await runDemo();
    const first = recorder.events();
    first[0]?.state.push("tampered");
    expect(recorder.events()[0]?.state).not.toContain("tampered");
  });

  it("stops at maxSteps", async () => {
    const recorder = createTraceRecorder({ maxSteps: 2 });
    const actor = createActor(demo, { input: { prompt: "x" }, inspect: recorder.inspect });
    actor.start();
    actor.send({ type: "SEND", text: "x" });
    actor.send({ type: "GO" });
    await toPromise(actor);
    expect(recorder.events()).toHaveLength(2);
  });
});

describe("trace files", () => {
  it("round-trips through writeTraceFile/readTraceFile", async () => {
    const steps = (await runDemo()).events();
    const file = join(dir, "ok.jsonl");
    await writeTraceFile(file, steps);
    expect(await readTraceFile(file)).toEqual(steps);
    expect((await readFile(file, "utf8")).endsWith("\n")).toBe(true);
  });

  it("names the line of a line that is not JSON", async () => {
    const steps = (await runDemo()).events();
    const lines = steps.map((s) => JSON.stringify(s));
    lines.splice(2, 0, "{not json");
    const file = join(dir, "bad-json.jsonl");
    await writeFile(file, `${lines.join("\n")}\n`);
    const err = await readTraceFile(file).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TraceFileError);
    expect((err as TraceFileError).code).toBe("TRACE_LINE_INVALID");
    expect((err as TraceFileError).line).toBe(3);
    expect((err as Error).message).toContain("line 3");
    expect((err as Error).message).toContain(file);
  });

  it("names the line and field of a line that is not a trace step (including smuggled context)", async () => {
    const good: TraceStep = { step: 1, actorId: "x:0", eventType: "xstate.init", state: ["idle"], status: "active" };
    const text = [
      JSON.stringify(good),
      "",
      JSON.stringify({ ...good, step: 2, status: "sleeping" }),
    ].join("\n");
    const err = (() => {
      try {
        return parseTraceJSONL(text, "t.jsonl");
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(TraceFileError);
    expect((err as TraceFileError).line).toBe(3);
    expect((err as Error).message).toMatch(/t\.jsonl line 3: .*status/);

    const smuggled = JSON.stringify({ ...good, context: { prompt: SECRET } });
    expect(() => parseTraceJSONL(smuggled)).toThrow(/line 1/);
  });

  it("rejects step numbers that do not increase", () => {
    const s = (step: number) => JSON.stringify({ step, actorId: "a", eventType: "E", state: [], status: "active" });
    expect(() => parseTraceJSONL([s(1), s(2), s(2)].join("\n"))).toThrow(
      expect.objectContaining({ code: "TRACE_STEP_ORDER", line: 3 }),
    );
  });

  it("writeTraceFile refuses steps with extra fields and reports a missing file as TRACE_IO", async () => {
    const bad = [{ step: 1, actorId: "a", eventType: "E", state: [], status: "active", context: SECRET }] as unknown as TraceStep[];
    const file = join(dir, "never.jsonl");
    await expect(writeTraceFile(file, bad)).rejects.toMatchObject({ code: "TRACE_INVALID_ARGUMENT" });
    await expect(readTraceFile(file)).rejects.toMatchObject({ code: "TRACE_IO" });
  });
});
