/**
 * Offline statechart pictures: one self-contained HTML page with a Mermaid diagram per machine and, given a recorded
 * trace, a replay panel that highlights the active states step by step. The page needs no network when viewed.
 */
import type { Logger } from "pino";
import type { AnyStateMachine } from "xstate";
import { z } from "zod";
import { machineToMermaid, mermaidStateId } from "./mermaid.js";
import { diagramIdSchema, renderPageFromDiagrams, VizError, type PageDiagram } from "./page.js";
import type { TraceStep } from "./trace.js";

export { VizError, type VizErrorCode, unmatchedTraceStates, computeHighlightFrames } from "./page.js";

/** One machine to draw. */
export interface VizMachine {
  /** DOM-safe id (`/^[A-Za-z][A-Za-z0-9_-]{0,63}$/`). */
  id: string;
  title: string;
  machine: AnyStateMachine;
}

export interface RenderStatechartPageInput {
  machines: VizMachine[];
  /** A trace from `createTraceRecorder` / `readTraceFile`; adds the replay panel. */
  trace?: TraceStep[] | undefined;
  /** Page title. Default "Statecharts". */
  title?: string | undefined;
  /** Live mode: follow a loopback inspector relay instead of (or besides) a recorded trace. */
  live?: { wsUrl: string } | undefined;
  logger?: Logger | undefined;
}

const machinesSchema = z
  .array(
    z.object({
      id: diagramIdSchema,
      title: z.string().min(1).max(200),
      machine: z.custom<AnyStateMachine>(
        (m) => typeof m === "object" && m !== null && "root" in m && typeof (m as { id?: unknown }).id === "string",
        "must be an XState machine (createMachine/setup().createMachine)",
      ),
    }),
  )
  .min(1);

interface StateNodeLike {
  key: string;
  id: string;
  path: string[];
  states: Record<string, StateNodeLike>;
}

function allStateNodes(machine: AnyStateMachine): StateNodeLike[] {
  const out: StateNodeLike[] = [];
  const walk = (node: StateNodeLike) => {
    for (const child of Object.values(node.states)) {
      out.push(child);
      walk(child);
    }
  };
  walk(machine.root as unknown as StateNodeLike);
  return out;
}

/**
 * The state ids a Mermaid `stateDiagram-v2` source declares or uses (`[*]` excluded).
 *
 * @example
 * ```ts
 * mermaidStateIds('stateDiagram-v2\n  state "run" as a_b {\n  a_b --> c : GO\n'); // Set { "a_b", "c" }
 * ```
 */
export function mermaidStateIds(definition: string): Set<string> {
  const ids = new Set<string>();
  const add = (id: string | undefined) => {
    if (id !== undefined && id !== "[*]" && id !== "") ids.add(id);
  };
  for (const raw of definition.split("\n")) {
    const line = raw.trim();
    if (line === "" || line === "}" || line.startsWith("%%") || /^(stateDiagram|classDef|class|note|direction|style|click)\b/.test(line)) continue;
    let m = /^state\s+"[^"]*"\s+as\s+([^\s{:]+)/.exec(line);
    if (m) {
      add(m[1]);
      continue;
    }
    m = /^state\s+([^\s{:"]+)/.exec(line);
    if (m) {
      add(m[1]);
      continue;
    }
    m = /^(\S+)\s+-->\s+([^\s:]+)/.exec(line);
    if (m) {
      add(m[1]);
      add(m[2]);
      continue;
    }
    m = /^([^\s:]+)\s*(?::|$)/.exec(line);
    if (m) add(m[1]?.replace(/:::.*$/, ""));
  }
  return ids;
}

/**
 * Maps every state of `machine` (dotted path, as in a trace) to its Mermaid id (`mermaidStateId`), keeping only ids
 * the Mermaid source really declares, so a renamed node shows up as a missing highlight (`unmatchedTraceStates`)
 * instead of a silent no-op in the browser.
 *
 * @example
 * ```ts
 * const ids = resolveStateIds(turnMachine, machineToMermaid(turnMachine));
 * ids["turnRunning.streaming"]; // "turnRunning_streaming"
 * ```
 */
export function resolveStateIds(machine: AnyStateMachine, definition: string): Record<string, string> {
  const declared = mermaidStateIds(definition);
  const out: Record<string, string> = {};
  for (const node of allStateNodes(machine)) {
    const id = mermaidStateId(node.id);
    if (declared.has(id)) out[node.path.join(".")] = id;
  }
  return out;
}

/**
 * Builds the page's diagram list: Mermaid source and state-id map for each machine.
 *
 * @example
 * ```ts
 * const [diagram] = machinesToDiagrams([{ id: "turn", title: "Turn", machine: turnMachine }]);
 * ```
 */
export function machinesToDiagrams(machines: VizMachine[]): PageDiagram[] {
  const parsed = machinesSchema.safeParse(machines);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new VizError(
      "VIZ_INVALID_ARGUMENT",
      `invalid machines at ${issue?.path.join(".") || "(root)"}: ${issue?.message ?? "invalid"}`,
    );
  }
  return parsed.data.map(({ id, title, machine }) => {
    // One edge per state pair: Mermaid draws the labels of parallel edges on top of each other.
    const definition = machineToMermaid(machine, { mergeParallelEdges: true });
    return { id, title, definition, machineId: machine.id, stateIds: resolveStateIds(machine, definition) };
  });
}

/**
 * Renders ONE self-contained HTML page: Mermaid's library inlined from `node_modules/mermaid/dist/mermaid.min.js`,
 * a diagram per machine (from `machineToMermaid`), and, when `trace` is given, a replay panel (slider, prev/next/
 * play, the step list) that highlights the active states of the current step. Open `page.html#step=N` to start at
 * step index N. The same inputs always give a byte-identical page.
 *
 * @example
 * ```ts
 * const recorder = createTraceRecorder();
 * // ... run an actor with { inspect: recorder.inspect } ...
 * const html = renderStatechartPage({
 *   machines: [{ id: "turn", title: "Turn", machine: turnMachine }],
 *   trace: recorder.events(),
 * });
 * await writeFile("turn.html", html);
 * ```
 */
export function renderStatechartPage(input: RenderStatechartPageInput): string {
  const diagrams = machinesToDiagrams(input.machines);
  return renderPageFromDiagrams({
    diagrams,
    ...(input.trace !== undefined ? { trace: input.trace } : {}),
    ...(input.title !== undefined ? { title: input.title } : {}),
    ...(input.live !== undefined ? { live: input.live } : {}),
    ...(input.logger !== undefined ? { logger: input.logger } : {}),
  });
}
