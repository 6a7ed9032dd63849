/**
 * Machine definition -> Mermaid `stateDiagram-v2`, generated from the resolved state-node tree (`machine.toJSON()`),
 * so docs and the offline viewer always draw the machine that runs. Deterministic: same machine, same text.
 *
 * Node ids: a top-level state's id is its key (`turnRunning`); a nested state's id joins the path with `_`
 * (`turnRunning_streaming`). Transitions defined on the root (e.g. ABORT before the turn) are drawn from a pseudo
 * node `anyState`.
 */
import type { AnyStateMachine } from "xstate";

interface JsonTransition {
  target?: Array<string | { id: string }> | undefined;
  guard?: string | { type?: string | undefined } | null | undefined;
  eventType?: string | null | undefined;
  delay?: string | number | undefined;
}
interface JsonStateNode {
  id: string;
  key: string;
  type: string;
  initial?: { target?: Array<string | { id: string }> | undefined } | null | undefined;
  states?: Record<string, JsonStateNode> | undefined;
  on?: Record<string, JsonTransition[]> | undefined;
  always?: JsonTransition[] | undefined;
  invoke?: Array<{ id?: string | undefined; src?: string | { type?: string | undefined } | undefined }> | undefined;
}

/** Mermaid id of a state node id like `turn.turnRunning.streaming` (machine id first). */
export function mermaidStateId(stateNode: string | { id: string }): string {
  const stateNodeId = typeof stateNode === "string" ? stateNode : stateNode.id;
  const parts = stateNodeId.replace(/^#/, "").split(".");
  return parts.slice(1).join("_") || "root";
}

function sanitizeLabel(text: string): string {
  return text.replace(/[:;#{}]/g, " ").replace(/\s+/g, " ").trim();
}

function eventLabel(t: JsonTransition): string {
  const type = t.eventType ?? "";
  let label: string;
  if (type === "") label = "always";
  else if (type.startsWith("xstate.done.actor.")) label = `done ${type.slice("xstate.done.actor.".length)}`;
  else if (type.startsWith("xstate.error.actor.")) label = `error ${type.slice("xstate.error.actor.".length)}`;
  else if (type.startsWith("xstate.after.")) label = `after ${String(t.delay ?? type.split(".")[2] ?? "")}`;
  else label = type;
  const guard = typeof t.guard === "string" ? t.guard : t.guard && typeof t.guard === "object" ? t.guard.type : undefined;
  return sanitizeLabel(guard ? `${label} [${guard}]` : label);
}

interface LiveStateNode {
  states: Record<string, LiveStateNode>;
  always?: Array<{ target?: Array<{ id: string }> | undefined; guard?: unknown }> | undefined;
}

/** `toJSON()` leaves eventless (`always`) transitions out; copy them from the live state nodes. */
function attachAlways(json: JsonStateNode, live: LiveStateNode): void {
  if (live.always && live.always.length > 0) {
    json.always = live.always.map((t) => {
      const guard = t.guard as { type?: string | undefined } | string | undefined;
      const out: JsonTransition = { target: (t.target ?? []).map((n) => n.id), eventType: "" };
      if (typeof guard === "string") out.guard = guard;
      else if (guard && typeof guard === "object" && typeof guard.type === "string") out.guard = { type: guard.type };
      return out;
    });
  }
  for (const [key, child] of Object.entries(json.states ?? {})) {
    const liveChild = live.states[key];
    if (liveChild) attachAlways(child, liveChild);
  }
}

/**
 * A composite state's transition to one of its own children (e.g. `turnRunning` on ABORT -> `interrupting`) is
 * taken from whichever child is active; drawn from the composite itself, Mermaid puts its label under the target.
 * So draw it from each other child instead (the same behaviour, readable).
 */
function innerSources(composite: JsonStateNode, targetId: string): string[] {
  const prefix = `${composite.id.replace(/^#/, "")}.`;
  const target = targetId.replace(/^#/, "");
  if (!target.startsWith(prefix)) return [];
  return Object.values(composite.states ?? {})
    .filter((c) => c.id !== target && c.type !== "final" && !target.startsWith(`${c.id}.`))
    .map((c) => mermaidStateId(c.id));
}

/** Options of {@link machineToMermaid}. */
export interface MachineToMermaidOptions {
  /**
   * Draw the transitions between the same two states as ONE edge whose label lists every event (`a / b`). Mermaid
   * places the labels of parallel edges on top of each other (e.g. "error maintain" over "done maintain"), so the
   * statechart page uses this. Default false (the generated lifecycle doc keeps one edge per transition).
   */
  mergeParallelEdges?: boolean | undefined;
}

/**
 * Render a machine as a Mermaid state diagram.
 *
 * @example
 * ```ts
 * import { turnMachine } from "codex-turn-machine";
 * console.log(machineToMermaid(turnMachine)); // "stateDiagram-v2\n  [*] --> loadHistory\n…"
 * ```
 */
export function machineToMermaid(machine: AnyStateMachine, options: MachineToMermaidOptions = {}): string {
  const root = machine.toJSON() as unknown as JsonStateNode;
  attachAlways(root, machine.root as unknown as LiveStateNode);
  const lines: string[] = ["stateDiagram-v2"];
  const edges: string[] = [];
  const seenEdges = new Set<string>();
  // from --> to => index in `edges` and its labels (merge mode).
  const merged = new Map<string, { index: number; labels: string[] }>();

  const addEdge = (from: string, to: string, label: string) => {
    if (options.mergeParallelEdges) {
      const pair = `${from} --> ${to}`;
      const entry = merged.get(pair);
      if (entry === undefined) {
        merged.set(pair, { index: edges.length, labels: [label] });
        edges.push(`  ${pair} : ${label}`);
      } else if (!entry.labels.includes(label)) {
        entry.labels.push(label);
        edges[entry.index] = `  ${pair} : ${entry.labels.join(" / ")}`;
      }
      return;
    }
    const line = `${from} --> ${to} : ${label}`;
    if (seenEdges.has(line)) return;
    seenEdges.add(line);
    edges.push(`  ${line}`);
  };

  const transitionsOf = (node: JsonStateNode): JsonTransition[] => {
    const out: JsonTransition[] = [];
    for (const key of Object.keys(node.on ?? {}).sort()) out.push(...(node.on?.[key] ?? []));
    out.push(...(node.always ?? []).map((t) => ({ ...t, eventType: "" })));
    return out;
  };

  const walk = (node: JsonStateNode, indent: string) => {
    const children = Object.values(node.states ?? {});
    for (const child of children) {
      const id = mermaidStateId(child.id);
      const invoked = (child.invoke ?? [])
        .map((i) => (typeof i.src === "string" ? i.src : i.src?.type) ?? i.id)
        .filter((s): s is string => typeof s === "string");
      if (child.states && Object.keys(child.states).length > 0) {
        // A `name : text` line would replace a composite state's title, so the invoke goes into the title instead.
        const title = invoked.length > 0 ? `${child.key} · invoke ${sanitizeLabel(invoked.join(", "))}` : child.key;
        lines.push(`${indent}state "${title}" as ${id} {`);
        const initial = child.initial?.target?.[0];
        if (initial) lines.push(`${indent}  [*] --> ${mermaidStateId(initial)}`);
        walk(child, `${indent}  `);
        lines.push(`${indent}}`);
      } else {
        lines.push(`${indent}state "${child.key}" as ${id}`);
      }
      const composite = child.states && Object.keys(child.states).length > 0;
      if (invoked.length > 0 && !composite) lines.push(`${indent}${id} : invoke ${sanitizeLabel(invoked.join(", "))}`);
      if (child.type === "final") edges.push(`  ${id} --> [*]`);
      for (const t of transitionsOf(child)) {
        for (const target of t.target ?? []) {
          const targetId = typeof target === "string" ? target : target.id;
          const inner = options.mergeParallelEdges && composite ? innerSources(child, targetId) : [];
          if (inner.length > 0) for (const from of inner) addEdge(from, mermaidStateId(targetId), eventLabel(t));
          else addEdge(id, mermaidStateId(target), eventLabel(t));
        }
      }
    }
  };

  const initial = root.initial?.target?.[0];
  if (initial) lines.push(`  [*] --> ${mermaidStateId(initial)}`);
  walk(root, "  ");
  const rootTransitions = transitionsOf(root).filter((t) => (t.target ?? []).length > 0);
  if (rootTransitions.length > 0) {
    lines.push(`  state "any state (unless handled)" as anyState`);
    for (const t of rootTransitions) for (const target of t.target ?? []) addEdge("anyState", mermaidStateId(target), eventLabel(t));
  }
  return [...lines, ...edges].join("\n") + "\n";
}
