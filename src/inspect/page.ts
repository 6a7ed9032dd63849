/**
 * The self-contained statechart page: Mermaid diagrams plus an optional trace replay, in one HTML file that needs
 * no network when viewed. This file works on Mermaid definitions; `viz.ts` produces them from machines.
 *
 * Why the pieces are as they are:
 * - Mermaid's browser bundle is inlined (read from node_modules at render time) so the page works offline; a
 *   Content-Security-Policy of `default-src 'none'` makes the browser refuse any fetch the page might attempt.
 * - Highlight frames (which diagram states are active at each step) are computed here in Node, so they are
 *   deterministic and unit-testable; the page script only toggles CSS classes on the SVG Mermaid drew.
 * - Mermaid names a state's SVG group `<svgId>-state-<stateId>-<n>`; we pass our own `svgId` to `mermaid.render`
 *   so the page can find the group of every state id without guessing.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pino, type Logger } from "pino";
import { z } from "zod";
import { traceStepSchema, type TraceStep } from "./trace.js";

/** Codes of {@link VizError}. */
export type VizErrorCode =
  /** Page inputs failed validation. */
  | "VIZ_INVALID_ARGUMENT"
  /** `mermaid/dist/mermaid.min.js` could not be found or read. */
  | "VIZ_MERMAID_MISSING"
  /** The Mermaid bundle contains a sequence that cannot be inlined in a `<script>` element safely. */
  | "VIZ_BUNDLE_UNSAFE";

/**
 * The error type thrown while rendering a statechart page.
 *
 * @example
 * ```ts
 * try {
 *   renderStatechartPage({ machines: [] });
 * } catch (err) {
 *   if (err instanceof VizError && err.code === "VIZ_INVALID_ARGUMENT") console.error(err.message);
 * }
 * ```
 */
export class VizError extends Error {
  readonly code: VizErrorCode;
  constructor(code: VizErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "VizError";
    this.code = code;
  }
}

/**
 * Diagram ids become DOM/SVG ids and Mermaid render ids, so they are restricted to a safe alphabet.
 *
 * @example
 * ```ts
 * diagramIdSchema.parse("turn"); // ok; "a b" throws
 * ```
 */
export const diagramIdSchema = z.string().regex(/^[A-Za-z][A-Za-z0-9_-]{0,63}$/, "must match /^[A-Za-z][A-Za-z0-9_-]{0,63}$/");

/** One diagram of the page, already converted to Mermaid. */
export interface PageDiagram {
  /** DOM-safe id of the diagram. */
  id: string;
  /** Heading shown above the diagram. */
  title: string;
  /** Mermaid `stateDiagram-v2` source. */
  definition: string;
  /** The `id` of the machine drawn: trace steps whose `machineId` equals it drive this diagram's highlight. */
  machineId: string;
  /** Dotted state path (as in {@link TraceStep.state}) -> Mermaid state id, for every state of the machine. */
  stateIds: Record<string, string>;
}

const pageDiagramSchema = z.object({
  id: diagramIdSchema,
  title: z.string().min(1).max(200),
  definition: z.string().min(1).max(1_000_000),
  machineId: z.string().min(1).max(200),
  stateIds: z.record(z.string(), z.string()),
});

export const pageInputSchema = z.object({
  diagrams: z
    .array(pageDiagramSchema)
    .min(1)
    .max(50)
    .refine((ds) => new Set(ds.map((d) => d.id)).size === ds.length, "diagram ids must be unique"),
  trace: z.array(traceStepSchema).max(100_000).optional(),
  title: z.string().min(1).max(200).optional(),
  live: z
    .object({ wsUrl: z.string().regex(/^ws:\/\/127\.0\.0\.1:\d{1,5}$/, "must be ws://127.0.0.1:<port>") })
    .strict()
    .optional(),
});

export interface PageInput {
  diagrams: PageDiagram[];
  trace?: TraceStep[] | undefined;
  /** Page title. Default "Statecharts". */
  title?: string | undefined;
  /**
   * Live mode: the page connects to this loopback inspector relay and highlights the states of running actors as
   * their snapshots arrive (the offline view of the live inspector). The CSP then allows exactly this WebSocket.
   */
  live?: { wsUrl: string } | undefined;
  logger?: Logger | undefined;
}

/** Per step, per diagram id: the Mermaid state ids to highlight (active leaves and their ancestors). */
export type HighlightFrame = Record<string, string[]>;

/** Marks where the inlined library starts and ends, so tests and tools can cut it out of the page. */
export const MERMAID_BEGIN_MARKER = "/*! inlined: mermaid/dist/mermaid.min.js */";
export const MERMAID_END_MARKER = "/*! end inlined mermaid */";

/**
 * Every ancestor path of a dotted path, outermost first: `"a.b.c"` -> `["a", "a.b", "a.b.c"]`.
 *
 * @example
 * ```ts
 * pathWithAncestors("turnRunning.streaming"); // ["turnRunning", "turnRunning.streaming"]
 * ```
 */
export function pathWithAncestors(path: string): string[] {
  const parts = path.split(".");
  return parts.map((_, i) => parts.slice(0, i + 1).join("."));
}

/**
 * For every trace step, the Mermaid state ids each diagram should highlight: the states of the most recent step (at
 * or before it) of an actor running that diagram's machine. Unknown paths are skipped (and reported by
 * {@link unmatchedTraceStates}).
 *
 * @example
 * ```ts
 * const frames = computeHighlightFrames(diagrams, trace);
 * frames[3]?.turn; // e.g. ["turnRunning", "turnRunning_streaming"]
 * ```
 */
export function computeHighlightFrames(diagrams: readonly PageDiagram[], trace: readonly TraceStep[]): HighlightFrame[] {
  const current: HighlightFrame = Object.fromEntries(diagrams.map((d) => [d.id, [] as string[]]));
  const frames: HighlightFrame[] = [];
  for (const step of trace) {
    for (const d of diagrams) {
      if (step.machineId !== d.machineId) continue;
      const ids: string[] = [];
      for (const leaf of step.state) {
        for (const p of pathWithAncestors(leaf)) {
          const id = d.stateIds[p];
          if (id !== undefined && !ids.includes(id)) ids.push(id);
        }
      }
      current[d.id] = ids;
    }
    frames.push(Object.fromEntries(diagrams.map((d) => [d.id, [...(current[d.id] ?? [])]])));
  }
  return frames;
}

/**
 * Trace state paths of a diagram's machine that have no Mermaid state id (a naming mismatch between the trace and
 * the diagram). Empty when every state in the trace can be highlighted.
 *
 * @example
 * ```ts
 * expect(unmatchedTraceStates(diagrams, trace)).toEqual([]);
 * ```
 */
export function unmatchedTraceStates(diagrams: readonly PageDiagram[], trace: readonly TraceStep[]): string[] {
  const missing = new Set<string>();
  for (const step of trace) {
    for (const d of diagrams) {
      if (step.machineId !== d.machineId) continue;
      for (const leaf of step.state) for (const p of pathWithAncestors(leaf)) if (!(p in d.stateIds)) missing.add(`${d.id}:${p}`);
    }
  }
  return [...missing].sort();
}

let cachedBundle: string | undefined;

/**
 * Mermaid's browser bundle, checked to be safe for an inline `<script>`. Cached: it is 3.5 MB and never changes at
 * run time. Throws {@link VizError} `VIZ_MERMAID_MISSING` when `mermaid` is not installed.
 *
 * @example
 * ```ts
 * const js = loadMermaidBundle(); // defines the global `mermaid` when run in a page
 * ```
 */
export function loadMermaidBundle(): string {
  if (cachedBundle !== undefined) return cachedBundle;
  let text: string;
  try {
    const file = createRequire(import.meta.url).resolve("mermaid/dist/mermaid.min.js");
    text = readFileSync(file, "utf8");
  } catch (cause) {
    throw new VizError("VIZ_MERMAID_MISSING", `cannot read mermaid/dist/mermaid.min.js: ${(cause as Error).message}`, {
      cause,
    });
  }
  // `</script` would end the element early; `<script` after the bundle's `<!--` strings would switch the HTML parser
  // into the "double escaped" state. Neither can be rewritten safely in arbitrary minified code, so refuse.
  if (/<\/?script/i.test(text)) {
    throw new VizError("VIZ_BUNDLE_UNSAFE", "mermaid.min.js contains a <script or </script sequence; cannot inline it");
  }
  cachedBundle = text;
  return text;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** JSON for a `<script type="application/json">` block: `<`, `>`, `&` and line separators escaped. */
function jsonForScript(value: unknown): string {
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function stepLabel(step: TraceStep): string {
  const state = step.state.length > 0 ? step.state.join(", ") : `(${step.status})`;
  return `${step.eventType} \u2192 ${state}`;
}

const CSS = `
:root { color-scheme: light; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
body { margin: 0; display: flex; min-height: 100vh; background: #fafafa; color: #1a1a1a; }
main { flex: 1; padding: 16px 24px; overflow: auto; }
h1 { font-size: 20px; margin: 0 0 12px; }
section.diagram { background: #fff; border: 1px solid #ddd; border-radius: 8px; padding: 12px 16px; margin-bottom: 20px; }
section.diagram h2 { font-size: 16px; margin: 0 0 8px; }
.viz-svg svg { max-width: 100%; height: auto; }
.viz-svg .viz-error { color: #b00020; white-space: pre-wrap; }
details.viz-source-box summary { cursor: pointer; color: #555; font-size: 13px; }
pre.viz-source { font-size: 12px; background: #f4f4f4; padding: 8px; overflow: auto; }
aside#replay { width: 380px; flex: none; border-left: 1px solid #ddd; background: #fff; padding: 16px; box-sizing: border-box;
  position: sticky; top: 0; height: 100vh; display: flex; flex-direction: column; }
aside#replay h2, aside#live h2 { font-size: 16px; margin: 0 0 8px; }
aside#live { width: 380px; flex: none; border-left: 1px solid #ddd; background: #fff; padding: 16px; box-sizing: border-box;
  position: sticky; top: 0; height: 100vh; display: flex; flex-direction: column; }
#live-status { font-size: 13px; margin-bottom: 8px; }
ol#live-events { list-style: none; margin: 0; padding: 0; overflow: auto; flex: 1; font-size: 12px; font-family: ui-monospace, Menlo, Consolas, monospace; }
.controls { display: flex; gap: 6px; align-items: center; margin-bottom: 8px; }
.controls button { font: inherit; padding: 4px 10px; }
#step-slider { width: 100%; margin: 4px 0 8px; }
#step-current { font-size: 13px; margin-bottom: 8px; min-height: 2.6em; }
ol#steps { list-style: none; margin: 0; padding: 0; overflow: auto; flex: 1; font-size: 12px; font-family: ui-monospace, Menlo, Consolas, monospace; }
ol#steps li { padding: 3px 6px; border-radius: 4px; cursor: pointer; }
ol#steps li .actor { color: #777; }
ol#steps li.current { background: #ffe082; font-weight: 600; }
g.viz-active > rect, g.viz-active > path, g.viz-active > polygon, g.viz-active > circle,
g.viz-active > g > rect, g.viz-active > g > path { fill: #ffd54f !important; stroke: #e65100 !important; stroke-width: 3px !important; }
g.viz-active.statediagram-cluster > rect, g.viz-active.statediagram-cluster > g > rect { fill: #fff8e1 !important; }
`;

const SCRIPT = `
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("viz-data").textContent);
  var diagrams = data.diagrams;
  var steps = data.steps;
  var frames = data.frames;
  // diagram id -> state id -> SVG groups
  var index = {};
  var current = 0;
  var timer = null;

  function escapeRe(s) { return s.replace(/[.*+?^$()|[\\]\\\\{}]/g, "\\\\$&"); }

  function indexSvg(d, container) {
    var map = {};
    var re = new RegExp("^" + escapeRe("viz-svg-" + d.id) + "-state-(.+)-\\\\d+$");
    var groups = container.querySelectorAll("g[id]");
    for (var i = 0; i < groups.length; i++) {
      var m = re.exec(groups[i].id);
      var key = m ? m[1] : groups[i].getAttribute("data-id");
      if (!key) continue;
      (map[key] = map[key] || []).push(groups[i]);
    }
    index[d.id] = map;
  }

  function highlight(d, active) {
    var map = index[d.id] || {};
    Object.keys(map).forEach(function (k) {
      var on = active.indexOf(k) >= 0;
      map[k].forEach(function (g) { g.classList.toggle("viz-active", on); });
    });
    document.getElementById("diagram-" + d.id).setAttribute("data-active", active.join(" "));
  }

  function show(i) {
    if (steps.length === 0) return;
    current = Math.max(0, Math.min(steps.length - 1, i));
    var frame = frames[current];
    diagrams.forEach(function (d) { highlight(d, frame[d.id] || []); });
    var slider = document.getElementById("step-slider");
    slider.value = String(current);
    var s = steps[current];
    document.getElementById("step-current").textContent =
      "step " + s.step + " (" + (current + 1) + "/" + steps.length + ") " + s.actorId + ": " + s.label;
    var items = document.querySelectorAll("ol#steps li");
    for (var j = 0; j < items.length; j++) items[j].classList.toggle("current", j === current);
    if (items[current] && items[current].scrollIntoView) items[current].scrollIntoView({ block: "nearest" });
    document.body.setAttribute("data-step", String(current));
  }

  function stop() { if (timer) { clearInterval(timer); timer = null; } var b = document.getElementById("btn-play"); if (b) b.textContent = "Play"; }
  function play() {
    if (timer) return stop();
    if (current >= steps.length - 1) show(0);
    document.getElementById("btn-play").textContent = "Pause";
    timer = setInterval(function () { if (current >= steps.length - 1) stop(); else show(current + 1); }, 700);
  }

  function wire() {
    if (steps.length === 0) return;
    document.getElementById("btn-prev").addEventListener("click", function () { stop(); show(current - 1); });
    document.getElementById("btn-next").addEventListener("click", function () { stop(); show(current + 1); });
    document.getElementById("btn-play").addEventListener("click", play);
    document.getElementById("step-slider").addEventListener("input", function (e) { stop(); show(Number(e.target.value)); });
    var items = document.querySelectorAll("ol#steps li");
    for (var j = 0; j < items.length; j++) (function (k) { items[k].addEventListener("click", function () { stop(); show(k); }); })(j);
    document.addEventListener("keydown", function (e) {
      if (e.key === "ArrowLeft") { stop(); show(current - 1); }
      if (e.key === "ArrowRight") { stop(); show(current + 1); }
    });
  }

  function initialStep() {
    var m = /(?:^|[#&])step=(\\d+)/.exec(location.hash);
    return m ? Number(m[1]) : 0;
  }

  async function renderAll() {
    mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "default", fontFamily: "system-ui, sans-serif" });
    for (var i = 0; i < diagrams.length; i++) {
      var d = diagrams[i];
      var container = document.getElementById("viz-svg-box-" + d.id);
      var source = document.getElementById("viz-source-" + d.id).textContent;
      try {
        var out = await mermaid.render("viz-svg-" + d.id, source);
        container.innerHTML = out.svg;
        indexSvg(d, container);
      } catch (err) {
        var p = document.createElement("p");
        p.className = "viz-error";
        p.textContent = "Mermaid could not render this diagram: " + (err && err.message ? err.message : String(err));
        container.appendChild(p);
        document.body.setAttribute("data-render-error", d.id);
      }
    }
    wire();
    show(initialStep());
    document.body.setAttribute("data-rendered", "true");
    if (data.live) connectLive(data.live);
  }

  // Live mode: snapshots from the loopback relay (Stately inspection protocol) drive the highlight.
  function statePaths(value, prefix) {
    if (typeof value === "string") return [prefix ? prefix + "." + value : value];
    if (!value || typeof value !== "object") return [];
    var keys = Object.keys(value);
    if (keys.length === 0) return prefix ? [prefix] : [];
    var out = [];
    keys.forEach(function (k) { out = out.concat(statePaths(value[k], prefix ? prefix + "." + k : k)); });
    return out;
  }

  function liveIds(d, value) {
    var ids = [];
    statePaths(value, "").forEach(function (leaf) {
      var parts = leaf.split(".");
      for (var i = 1; i <= parts.length; i++) {
        var id = d.stateIds[parts.slice(0, i).join(".")];
        if (id && ids.indexOf(id) < 0) ids.push(id);
      }
    });
    return ids;
  }

  function connectLive(live) {
    var machineOf = {};
    var count = 0;
    var status = document.getElementById("live-status");
    var list = document.getElementById("live-events");
    function setStatus(s) { status.textContent = s; document.body.setAttribute("data-live-status", s); }
    function apply(sessionId, snapshot, eventType) {
      var machineId = machineOf[sessionId];
      if (!machineId || !snapshot || snapshot.value === undefined) return;
      diagrams.forEach(function (d) { if (d.machineId === machineId) highlight(d, liveIds(d, snapshot.value)); });
      count++;
      document.body.setAttribute("data-live-events", String(count));
      var li = document.createElement("li");
      li.textContent = machineId + ": " + (eventType || "?") + " \u2192 " + statePaths(snapshot.value, "").join(", ");
      list.insertBefore(li, list.firstChild);
      while (list.childNodes.length > 200) list.removeChild(list.lastChild);
    }
    setStatus("connecting");
    var ws = new WebSocket(live.wsUrl);
    ws.onopen = function () { setStatus("connected"); };
    ws.onclose = function () { setStatus("disconnected"); };
    ws.onmessage = function (e) {
      var m;
      try { m = JSON.parse(e.data); } catch (err) { return; }
      if (m.type === "@xstate.actor") {
        try { machineOf[m.sessionId] = JSON.parse(m.definition).id; } catch (err) { /* not a machine */ }
        apply(m.sessionId, m.snapshot, "start");
      } else if (m.type === "@xstate.snapshot") {
        apply(m.sessionId, m.snapshot, m.event && m.event.type);
      }
    };
  }

  renderAll();
})();
`;

/**
 * Renders the page from Mermaid definitions (use `renderStatechartPage` in `viz.ts` to start from machines).
 * Output is a pure function of the inputs: the same diagrams and trace give a byte-identical page.
 *
 * @example
 * ```ts
 * const html = renderPageFromDiagrams({
 *   diagrams: [{ id: "demo", title: "Demo", definition: "stateDiagram-v2\n  [*] --> idle\n", machineId: "demo",
 *     stateIds: { idle: "idle" } }],
 * });
 * ```
 */
export function renderPageFromDiagrams(input: PageInput): string {
  const { logger: inputLogger, ...rest } = input;
  const logger = inputLogger ?? pino({ level: "silent" });
  const parsed = pageInputSchema.safeParse(rest);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new VizError(
      "VIZ_INVALID_ARGUMENT",
      `invalid statechart page input at ${issue?.path.join(".") || "(root)"}: ${issue?.message ?? "invalid"}`,
    );
  }
  const { diagrams, trace = [], title = "Statecharts", live } = parsed.data;
  const frames = computeHighlightFrames(diagrams, trace);
  const bundle = loadMermaidBundle();

  // Live mode maps state values in the browser, so it needs each diagram's state-id map; replay needs only frames.
  const data = {
    diagrams: diagrams.map((d) => (live ? { id: d.id, machineId: d.machineId, stateIds: d.stateIds } : { id: d.id, machineId: d.machineId })),
    steps: trace.map((s) => ({ step: s.step, actorId: s.actorId, label: stepLabel(s) })),
    frames,
    ...(live ? { live: { wsUrl: live.wsUrl } } : {}),
  };

  const sections = diagrams.map(renderDiagramSection).join("\n");
  const replay = trace.length === 0 ? renderLivePanel(live) : renderReplayPanel(trace);

  const html = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:${live ? `; connect-src ${live.wsUrl}` : ""}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${CSS}</style>
</head>
<body>
<main>
<h1>${escapeHtml(title)}</h1>
${sections}
</main>
${replay}
<script type="application/json" id="viz-data">${jsonForScript(data)}</script>
<script>${MERMAID_BEGIN_MARKER}
${bundle}
${MERMAID_END_MARKER}</script>
<script>${SCRIPT}</script>
</body>
</html>
`;
  logger.debug(
    { event: "inspect.viz.rendered", diagrams: diagrams.length, steps: trace.length, bytes: html.length },
    "statechart page rendered",
  );
  return html;
}

type PageData = z.output<typeof pageInputSchema>;

function renderDiagramSection(d: PageData["diagrams"][number]): string {
  return `<section class="diagram" id="diagram-${d.id}" data-machine-id="${escapeHtml(d.machineId)}">
<h2>${escapeHtml(d.title)}</h2>
<div class="viz-svg" id="viz-svg-box-${d.id}"></div>
<details class="viz-source-box"><summary>Mermaid source</summary>
<pre class="viz-source" id="viz-source-${d.id}">${escapeHtml(d.definition)}</pre>
</details>
</section>`;
}

function renderLivePanel(live: PageData["live"]): string {
  return live
    ? `<aside id="live">
<h2>Live (offline view)</h2>
<div id="live-status">connecting</div>
<ol id="live-events"></ol>
</aside>`
    : "";
}

function renderReplayPanel(trace: NonNullable<PageData["trace"]>): string {
  return `<aside id="replay">
<h2>Trace replay (${trace.length} steps)</h2>
<div class="controls">
<button type="button" id="btn-prev" title="Previous step (Left arrow)">&#9664; Prev</button>
<button type="button" id="btn-play">Play</button>
<button type="button" id="btn-next" title="Next step (Right arrow)">Next &#9654;</button>
</div>
<input type="range" id="step-slider" min="0" max="${trace.length - 1}" value="0" step="1" aria-label="Trace step">
<div id="step-current"></div>
<ol id="steps">
${trace
  .map(
    (s, i) =>
      `<li data-index="${i}"><span class="n">${s.step}.</span> <span class="actor">${escapeHtml(s.actorId)}</span> ${escapeHtml(stepLabel(s))}</li>`,
  )
  .join("\n")}
</ol>
</aside>`;
}
