import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import {
  computeHighlightFrames,
  MERMAID_BEGIN_MARKER,
  MERMAID_END_MARKER,
  pathWithAncestors,
  renderPageFromDiagrams,
  unmatchedTraceStates,
  VizError,
  type PageDiagram,
} from "../../src/inspect/page.js";
import type { TraceStep } from "../../src/inspect/trace.js";

const bundle = readFileSync(createRequire(import.meta.url).resolve("mermaid/dist/mermaid.min.js"), "utf8");

const runDef = `stateDiagram-v2
  [*] --> idle
  idle --> busy : SEND
  state "busy" as busy {
    [*] --> busy_waiting
    busy_waiting : waiting
    busy_waiting --> busy_working : GO
    busy_working : working
  }
  busy --> done : xstate.done.actor.answer
  done --> [*]
`;
const otherDef = `stateDiagram-v2
  [*] --> a
  a --> b : NEXT
  b --> [*]
`;

const diagrams: PageDiagram[] = [
  {
    id: "run",
    title: "Run <machine>",
    definition: runDef,
    machineId: "demo",
    stateIds: { idle: "idle", busy: "busy", "busy.waiting": "busy_waiting", "busy.working": "busy_working", done: "done" },
  },
  { id: "other", title: "Other", definition: otherDef, machineId: "other", stateIds: { a: "a", b: "b" } },
];

const step = (n: number, over: Partial<TraceStep>): TraceStep => ({
  step: n,
  actorId: "root",
  machineId: "demo",
  eventType: "E",
  state: [],
  status: "active",
  ...over,
});

const trace: TraceStep[] = [
  step(1, { eventType: "xstate.init", state: ["idle"] }),
  step(2, { actorId: "o", machineId: "other", eventType: "xstate.init", state: ["a"] }),
  step(3, { eventType: "SEND", state: ["busy.waiting"] }),
  step(4, { eventType: "GO", state: ["busy.working"] }),
  step(5, { actorId: "answer", parentId: "root", machineId: undefined, eventType: "xstate.promise.resolve", status: "done" }),
  step(6, { eventType: "xstate.done.actor.answer", state: ["done"], status: "done" }),
];

function unescapeHtml(s: string): string {
  return s.replace(/&#(\d+);/g, (_, n: string) => String.fromCharCode(Number(n)));
}

function withoutLibrary(html: string): string {
  const start = html.indexOf(MERMAID_BEGIN_MARKER);
  const end = html.indexOf(MERMAID_END_MARKER);
  expect(start).toBeGreaterThan(0);
  expect(end).toBeGreaterThan(start);
  return html.slice(0, start) + html.slice(end);
}

describe("highlight frames", () => {
  it("pathWithAncestors lists outer states first", () => {
    expect(pathWithAncestors("a.b.c")).toEqual(["a", "a.b", "a.b.c"]);
    expect(pathWithAncestors("a")).toEqual(["a"]);
  });

  it("highlights each machine's latest state with its ancestors and keeps it across other actors' steps", () => {
    const frames = computeHighlightFrames(diagrams, trace);
    expect(frames).toHaveLength(trace.length);
    expect(frames[0]).toEqual({ run: ["idle"], other: [] });
    expect(frames[1]).toEqual({ run: ["idle"], other: ["a"] });
    expect(frames[2]).toEqual({ run: ["busy", "busy_waiting"], other: ["a"] });
    expect(frames[3]).toEqual({ run: ["busy", "busy_working"], other: ["a"] });
    expect(frames[4]).toEqual(frames[3]); // a promise actor's step changes no diagram
    expect(frames[5]).toEqual({ run: ["done"], other: ["a"] });
  });

  it("reports trace states the diagram cannot name", () => {
    expect(unmatchedTraceStates(diagrams, trace)).toEqual([]);
    const extra = [...trace, step(7, { state: ["ghost.inner"] })];
    expect(unmatchedTraceStates(diagrams, extra)).toEqual(["run:ghost", "run:ghost.inner"]);
  });
});

describe("renderPageFromDiagrams", () => {
  const html = renderPageFromDiagrams({ diagrams, trace, title: "Demo <page>" });

  it("contains each diagram's Mermaid source and title, escaped", () => {
    for (const d of diagrams) {
      const m = new RegExp(`<pre class="viz-source" id="viz-source-${d.id}">([\\s\\S]*?)</pre>`).exec(html);
      expect(m).not.toBeNull();
      expect(unescapeHtml(m?.[1] ?? "")).toBe(d.definition);
    }
    expect(html).toContain("<h2>Run &#60;machine&#62;</h2>");
    expect(html).toContain("<title>Demo &#60;page&#62;</title>");
  });

  it("inlines the mermaid library verbatim and initialises it with startOnLoad:false, securityLevel strict", () => {
    expect(html).toContain(`${MERMAID_BEGIN_MARKER}\n${bundle}\n${MERMAID_END_MARKER}`);
    const own = withoutLibrary(html);
    expect(own).toMatch(/mermaid\.initialize\(\{ startOnLoad: false, securityLevel: "strict"/);
    expect(own).toContain("mermaid.render(");
  });

  it("has no network URLs, external scripts or stylesheets outside the inlined library", () => {
    const own = withoutLibrary(html);
    expect(own).not.toMatch(/https?:/i);
    expect(own).not.toMatch(/<script[^>]*\ssrc=/i);
    expect(own).not.toMatch(/<link\b/i);
    expect(own).not.toMatch(/@import|url\(/i);
    expect(own).toContain(`content="default-src 'none'; script-src 'unsafe-inline'`);
  });

  it("lists the trace steps and embeds the frames for the replay", () => {
    const items = [...html.matchAll(/<li data-index="(\d+)">([\s\S]*?)<\/li>/g)];
    expect(items).toHaveLength(trace.length);
    expect(unescapeHtml(items[2]?.[2] ?? "")).toContain("SEND \u2192 busy.waiting");
    expect(unescapeHtml(items[4]?.[2] ?? "")).toContain("xstate.promise.resolve \u2192 (done)");
    for (const id of ["btn-prev", "btn-next", "btn-play", "step-slider"]) expect(html).toContain(`id="${id}"`);
    expect(html).toContain(`max="${trace.length - 1}"`);

    const json = /<script type="application\/json" id="viz-data">([\s\S]*?)<\/script>/.exec(html)?.[1] ?? "";
    const data = JSON.parse(json) as { steps: unknown[]; frames: unknown[]; diagrams: unknown[] };
    expect(data.steps).toHaveLength(trace.length);
    expect(data.frames).toEqual(computeHighlightFrames(diagrams, trace));
    expect(data.diagrams).toEqual([
      { id: "run", machineId: "demo" },
      { id: "other", machineId: "other" },
    ]);
  });

  it("is deterministic for the same inputs and changes with the trace", () => {
    expect(renderPageFromDiagrams({ diagrams, trace, title: "Demo <page>" })).toBe(html);
    expect(renderPageFromDiagrams({ diagrams, trace: trace.slice(0, 3), title: "Demo <page>" })).not.toBe(html);
  });

  it("has no replay panel without a trace", () => {
    const plain = renderPageFromDiagrams({ diagrams });
    expect(plain).not.toContain('id="replay"');
    expect(plain).toContain('id="viz-source-run"');
  });

  it("cannot be broken out of by hostile strings in the trace or titles", () => {
    const evil = "</script><script>alert(1)</script>";
    const page = renderPageFromDiagrams({
      diagrams: [{ ...diagrams[0]!, title: evil }],
      trace: [step(1, { eventType: evil, state: ["idle"] })],
    });
    const own = withoutLibrary(page);
    expect(own).not.toContain("<script>alert(1)");
    // Only our own three script elements (data, library, page script) open.
    expect(own.match(/<script\b/g)).toHaveLength(3);
  });

  it("rejects bad input with a VizError naming the field", () => {
    const call = (input: Parameters<typeof renderPageFromDiagrams>[0]) => {
      try {
        renderPageFromDiagrams(input);
        return undefined;
      } catch (e) {
        return e;
      }
    };
    const dup = call({ diagrams: [diagrams[0]!, diagrams[0]!] });
    expect(dup).toBeInstanceOf(VizError);
    expect((dup as Error).message).toContain("unique");
    const badId = call({ diagrams: [{ ...diagrams[0]!, id: "a b" }] });
    expect((badId as VizError).code).toBe("VIZ_INVALID_ARGUMENT");
    expect((badId as Error).message).toContain("diagrams.0.id");
    const badTrace = call({ diagrams, trace: [{ ...trace[0]!, status: "weird" as never }] });
    expect((badTrace as Error).message).toContain("trace.0.status");
  });
});
