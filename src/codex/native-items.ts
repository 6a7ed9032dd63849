/**
 * Codex's native tool items (commands, file changes, MCP calls, web searches, image views, sub-agent calls, image
 * generations) and plan items: their typed shape, how they are read from a notification's item, and how each appears
 * in the transcript (tool name, arguments, result text). Used by {@link TurnProjector}; the table of what each item
 * becomes is in turn-projector.ts.
 */
import { z } from "zod";
import type { ParsedThreadItem } from "./schemas.js";

/** A native tool item or a plan item, typed (see `ProjectedItem`). */
export type NativeItem =
  | {
      kind: "commandExecution";
      id: string;
      /** The command as Codex runs it (e.g. `/bin/bash -c '...'`). */
      command: string;
      cwd: string;
      /** "inProgress" | "completed" | "failed" | "declined" in 0.169.0. */
      status: string;
      exitCode: number | null;
      /** stdout and stderr as Codex aggregated them (uncapped; the snapshot's result text is capped). */
      aggregatedOutput: string | null;
      durationMs: number | null;
      completed: boolean;
    }
  | {
      kind: "fileChange";
      id: string;
      changes: FileChangeEntry[];
      /** "inProgress" | "completed" | "failed" | "declined" in 0.169.0. */
      status: string;
      completed: boolean;
    }
  | {
      kind: "mcpToolCall";
      id: string;
      server: string;
      tool: string;
      arguments: unknown;
      /** "inProgress" | "completed" | "failed" in 0.169.0. */
      status: string;
      /** Text of the result's content (text parts joined; other parts as JSON), null without a result. */
      resultText: string | null;
      /** The call's error message, null without one. */
      error: string | null;
      durationMs: number | null;
      completed: boolean;
    }
  | {
      kind: "webSearch";
      id: string;
      query: string;
      /** The action's type ("search", "openPage", "findInPage", "other"), null when Codex sent none. */
      action: string | null;
      /** `url` of page actions, `pattern` of find-in-page. */
      url: string | null;
      pattern: string | null;
      results: unknown[] | null;
      completed: boolean;
    }
  /** The model looked at a local image (`view_image`); the image itself is not copied into the record. */
  | { kind: "imageView"; id: string; path: string; completed: boolean }
  | {
      kind: "collabAgentToolCall";
      id: string;
      /** Codex's name of the sub-agent tool ("spawnAgent", "sendInput", "wait", "closeAgent", ... in 0.169.0). */
      tool: string;
      /** "inProgress" | "completed" | "failed" | "interrupted" in 0.169.0. */
      status: string;
      /** The agents the call addressed (for `spawnAgent`, the spawned one). */
      receiverThreadIds: string[];
      prompt: string | null;
      model: string | null;
      reasoningEffort: string | null;
      /** The agents' last known status and message, by agent (thread) id. */
      agentsStates: Record<string, { status: string; message: string | null }>;
      completed: boolean;
    }
  | {
      kind: "imageGeneration";
      id: string;
      status: string;
      revisedPrompt: string | null;
      /** Where Codex saved the image, when it did. */
      savedPath: string | null;
      /** Why the generation failed, when it did. */
      failure: string | null;
      completed: boolean;
    }
  /** A Plan-mode proposed plan (`plan` item); `update_plan` progress comes as the `planUpdated` event instead. */
  | { kind: "plan"; id: string; text: string; completed: boolean };

/** The native items that are tool calls (every native item but `plan`). */
export const NATIVE_TOOL_KINDS: ReadonlyArray<NativeItem["kind"]> = [
  "commandExecution",
  "fileChange",
  "mcpToolCall",
  "webSearch",
  "imageView",
  "collabAgentToolCall",
  "imageGeneration",
];

const NATIVE_KINDS: ReadonlySet<string> = new Set<string>([...NATIVE_TOOL_KINDS, "plan"]);

/** Whether `item` is a native tool or plan item. */
export function isNativeItem(item: { kind: string }): item is NativeItem {
  return NATIVE_KINDS.has(item.kind);
}

/** Tool arguments as an object (a non-object value is wrapped as `{ value }`). */
export function toolArguments(args: unknown): Record<string, unknown> {
  if (args && typeof args === "object" && !Array.isArray(args)) return args as Record<string, unknown>;
  return { value: args };
}

/** One file of a `fileChange` item. `diff` is a unified-diff hunk for updates and the file's content for add/delete. */
export interface FileChangeEntry {
  path: string;
  /** "add" | "delete" | "update" in 0.169.0. */
  kind: string;
  /** The new path of a moved file (updates only). */
  movePath: string | null;
  diff: string;
}

// -- native items --------------------------------------------------------------------------------------------------
// schemas.ts validates only the discriminator and id of these item types (they pass through as loose objects), so the
// fields they are projected from are checked here; an item that does not fit stays kind "other".

const nullableString = z.string().nullable().optional();
const nullableNumber = z.number().nullable().optional();

const commandExecutionSchema = z.looseObject({
  id: z.string().min(1),
  command: z.string(),
  cwd: z.string(),
  status: z.string().min(1),
  aggregatedOutput: nullableString,
  exitCode: nullableNumber,
  durationMs: nullableNumber,
});
const fileChangeSchema = z.looseObject({
  id: z.string().min(1),
  status: z.string().min(1),
  changes: z.array(
    z.looseObject({
      path: z.string(),
      kind: z.union([z.looseObject({ type: z.string(), move_path: nullableString }), z.string()]),
      diff: z.string().default(""),
    }),
  ),
});
const mcpToolCallSchema = z.looseObject({
  id: z.string().min(1),
  server: z.string(),
  tool: z.string(),
  status: z.string().min(1),
  arguments: z.unknown(),
  result: z.looseObject({ content: z.array(z.unknown()).default([]), structuredContent: z.unknown().optional() }).nullable().optional(),
  error: z.looseObject({ message: z.string() }).nullable().optional(),
  durationMs: nullableNumber,
});
const webSearchSchema = z.looseObject({
  id: z.string().min(1),
  query: z.string().default(""),
  action: z.looseObject({ type: z.string(), url: nullableString, pattern: nullableString }).nullable().optional(),
  results: z.array(z.unknown()).nullable().optional(),
});
const planItemSchema = z.looseObject({ id: z.string().min(1), text: z.string() });
const imageViewSchema = z.looseObject({ id: z.string().min(1), path: z.string() });
const collabAgentToolCallSchema = z.looseObject({
  id: z.string().min(1),
  tool: z.string().min(1),
  status: z.string().min(1),
  receiverThreadIds: z.array(z.string()).default([]),
  prompt: nullableString,
  model: nullableString,
  reasoningEffort: nullableString,
  agentsStates: z.record(z.string(), z.looseObject({ status: z.string(), message: nullableString }).optional()).default({}),
});
const imageGenerationSchema = z.looseObject({
  id: z.string().min(1),
  status: z.string().default(""),
  revisedPrompt: nullableString,
  savedPath: nullableString,
  failure: z.unknown().optional(),
});

function mcpResultText(result: z.infer<typeof mcpToolCallSchema>["result"]): string | null {
  if (!result) return null;
  const parts = result.content.map((c) => {
    const o = c as { type?: unknown; text?: unknown };
    return o.type === "text" && typeof o.text === "string" ? o.text : JSON.stringify(c);
  });
  if (parts.length === 0 && result.structuredContent !== undefined && result.structuredContent !== null) {
    return JSON.stringify(result.structuredContent);
  }
  return parts.join("\n");
}

type Completed = { completed: boolean };

function projectCommand(item: unknown, { completed }: Completed): NativeItem | undefined {
  const it = commandExecutionSchema.safeParse(item);
  if (!it.success) return undefined;
  const d = it.data;
  return {
    kind: "commandExecution",
    id: d.id,
    command: d.command,
    cwd: d.cwd,
    status: d.status,
    exitCode: d.exitCode ?? null,
    aggregatedOutput: d.aggregatedOutput ?? null,
    durationMs: d.durationMs ?? null,
    completed,
  };
}

function projectFileChange(item: unknown, { completed }: Completed): NativeItem | undefined {
  const it = fileChangeSchema.safeParse(item);
  if (!it.success) return undefined;
  const changes = it.data.changes.map((c): FileChangeEntry => {
    const kind = typeof c.kind === "string" ? c.kind : c.kind.type;
    const movePath = typeof c.kind === "string" ? null : (c.kind.move_path ?? null);
    return { path: c.path, kind, movePath, diff: c.diff };
  });
  return { kind: "fileChange", id: it.data.id, changes, status: it.data.status, completed };
}

function projectMcp(item: unknown, { completed }: Completed): NativeItem | undefined {
  const it = mcpToolCallSchema.safeParse(item);
  if (!it.success) return undefined;
  const d = it.data;
  return {
    kind: "mcpToolCall",
    id: d.id,
    server: d.server,
    tool: d.tool,
    arguments: d.arguments,
    status: d.status,
    resultText: mcpResultText(d.result),
    error: d.error?.message ?? null,
    durationMs: d.durationMs ?? null,
    completed,
  };
}

function projectWebSearch(item: unknown, { completed }: Completed): NativeItem | undefined {
  const it = webSearchSchema.safeParse(item);
  if (!it.success) return undefined;
  const a = it.data.action;
  return {
    kind: "webSearch",
    id: it.data.id,
    query: it.data.query,
    action: a?.type ?? null,
    url: a?.url ?? null,
    pattern: a?.pattern ?? null,
    results: it.data.results ?? null,
    completed,
  };
}

function projectPlanItem(item: unknown, { completed }: Completed): NativeItem | undefined {
  const it = planItemSchema.safeParse(item);
  return it.success ? { kind: "plan", id: it.data.id, text: it.data.text, completed } : undefined;
}

function projectImageView(item: unknown, { completed }: Completed): NativeItem | undefined {
  const it = imageViewSchema.safeParse(item);
  return it.success ? { kind: "imageView", id: it.data.id, path: it.data.path, completed } : undefined;
}

function projectCollabAgentToolCall(item: unknown, { completed }: Completed): NativeItem | undefined {
  const it = collabAgentToolCallSchema.safeParse(item);
  if (!it.success) return undefined;
  const d = it.data;
  const agentsStates: Record<string, { status: string; message: string | null }> = {};
  // Sorted by agent id: Codex sends this map in no fixed order, and the transcript must not depend on it.
  for (const id of Object.keys(d.agentsStates).sort()) {
    const state = d.agentsStates[id];
    if (state) agentsStates[id] = { status: state.status, message: state.message ?? null };
  }
  return {
    kind: "collabAgentToolCall",
    id: d.id,
    tool: d.tool,
    status: d.status,
    receiverThreadIds: d.receiverThreadIds,
    prompt: d.prompt ?? null,
    model: d.model ? d.model : null,
    reasoningEffort: d.reasoningEffort ?? null,
    agentsStates,
    completed,
  };
}

function projectImageGeneration(item: unknown, { completed }: Completed): NativeItem | undefined {
  const it = imageGenerationSchema.safeParse(item);
  if (!it.success) return undefined;
  const d = it.data;
  return {
    kind: "imageGeneration",
    id: d.id,
    status: d.status,
    revisedPrompt: d.revisedPrompt ?? null,
    savedPath: d.savedPath ?? null,
    failure: failureText(d.failure),
    completed,
  };
}

/** Codex's `ImageGenerationFailure` as text: its `type` (0.169.0 has `usageLimitExceeded`), or a message if one comes. */
function failureText(failure: unknown): string | null {
  if (failure === undefined || failure === null) return null;
  if (typeof failure === "string") return failure;
  const { message, type } = failure as { message?: unknown; type?: unknown };
  if (typeof message === "string") return message;
  return typeof type === "string" ? type : JSON.stringify(failure);
}

const NATIVE_PROJECTORS: Record<string, (item: unknown, c: Completed) => NativeItem | undefined> = {
  commandExecution: projectCommand,
  fileChange: projectFileChange,
  mcpToolCall: projectMcp,
  webSearch: projectWebSearch,
  imageView: projectImageView,
  collabAgentToolCall: projectCollabAgentToolCall,
  imageGeneration: projectImageGeneration,
  plan: projectPlanItem,
};

/** The typed item of a native tool or plan item, or undefined when `item` is not one (or does not fit its shape). */
export function projectNative(item: ParsedThreadItem, completed: boolean): NativeItem | undefined {
  const projector = Object.prototype.hasOwnProperty.call(NATIVE_PROJECTORS, item.type) ? NATIVE_PROJECTORS[item.type] : undefined;
  return projector?.(item, { completed });
}

/**
 * Default of `TurnProjectorOptions.toolOutputCapChars` (turn-projector.ts).
 *
 * @example
 * ```ts
 * capToolOutput(output, DEFAULT_TOOL_OUTPUT_CAP_CHARS) === capToolOutput(output); // true
 * ```
 */
export const DEFAULT_TOOL_OUTPUT_CAP_CHARS = 16_000;

/**
 * Cap a tool output at `capChars` characters: the head and the tail are kept (half each) around a marker naming how
 * many characters were removed. Deterministic; text within the cap is returned unchanged.
 *
 * @example
 * ```ts
 * capToolOutput("a".repeat(30), 10); // => "aaaaa\n[... 20 characters truncated ...]\naaaaa"
 * ```
 */
export function capToolOutput(text: string, capChars: number = DEFAULT_TOOL_OUTPUT_CAP_CHARS): string {
  if (text.length <= capChars) return text;
  const head = Math.ceil(capChars / 2);
  const tail = capChars - head;
  const removed = text.length - head - tail;
  return `${text.slice(0, head)}\n[... ${removed} characters truncated ...]\n${tail > 0 ? text.slice(-tail) : ""}`;
}

/** How a native item appears in the transcript (the tool call's id is the item's). */
export interface NativeView {
  toolName: string;
  arguments: Record<string, unknown>;
  /** The result text, uncapped; null while there is none. */
  resultText: string | null;
  isError: boolean;
  /** Executed on this side, so the model waited for the output; false for tools the model's host runs. */
  awaitsOutput: boolean;
}

function patchKindLetter(kind: string): string {
  return kind === "add" ? "A" : kind === "delete" ? "D" : "M";
}

function prefixLines(text: string, prefix: string): string {
  const body = text.endsWith("\n") ? text.slice(0, -1) : text;
  return body.length === 0 ? "" : `${body.split("\n").map((l) => `${prefix}${l}`).join("\n")}\n`;
}

/** A file change as a unified diff (Codex sends add/delete as the file content and updates as bare hunks). */
function unifiedDiff(c: FileChangeEntry): string {
  if (c.kind === "add") return `--- /dev/null\n+++ ${c.path}\n${prefixLines(c.diff, "+")}`;
  if (c.kind === "delete") return `--- ${c.path}\n+++ /dev/null\n${prefixLines(c.diff, "-")}`;
  const body = c.diff.length === 0 || c.diff.endsWith("\n") ? c.diff : `${c.diff}\n`;
  return `--- ${c.path}\n+++ ${c.movePath ?? c.path}\n${body}`;
}

const PATCH_STATUS_LINE: Record<string, string> = {
  completed: "Patch applied.",
  declined: "Patch declined: no file was changed.",
  failed: "Patch failed.",
};

function fileChangeText(item: Extract<NativeItem, { kind: "fileChange" }>): string {
  const files = item.changes.map((c) => `${patchKindLetter(c.kind)} ${c.path}${c.movePath ? ` -> ${c.movePath}` : ""}`);
  const diffs = item.changes.map(unifiedDiff).join("");
  return `${PATCH_STATUS_LINE[item.status] ?? `Patch ${item.status}.`}\n${files.join("\n")}\n\n${diffs}`;
}

function commandText(item: Extract<NativeItem, { kind: "commandExecution" }>): string {
  if (item.status === "declined") return "Command declined: it was not run.";
  const exit = item.exitCode === null ? `Status: ${item.status}` : `Exit code: ${item.exitCode}`;
  return `${exit}\nOutput:\n${item.aggregatedOutput ?? ""}`;
}

function webSearchArguments(item: Extract<NativeItem, { kind: "webSearch" }>): Record<string, unknown> {
  const args: Record<string, unknown> = { query: item.query };
  if (item.url !== null) args.url = item.url;
  if (item.pattern !== null) args.pattern = item.pattern;
  return args;
}

function webSearchText(item: Extract<NativeItem, { kind: "webSearch" }>): string {
  const head = `Web search (${item.action ?? "search"}): ${item.url ?? item.query}`;
  return item.results && item.results.length > 0 ? `${head}\n${JSON.stringify(item.results)}` : head;
}


function commandView(item: Extract<NativeItem, { kind: "commandExecution" }>): NativeView {
  const failed = item.status !== "completed" || (item.exitCode !== null && item.exitCode !== 0);
  const args = { command: item.command, cwd: item.cwd };
  return { toolName: "shell", arguments: args, resultText: commandText(item), isError: failed, awaitsOutput: true };
}

function fileChangeView(item: Extract<NativeItem, { kind: "fileChange" }>): NativeView {
  const changes = item.changes.map((c) => ({ path: c.path, kind: c.kind, ...(c.movePath !== null ? { movePath: c.movePath } : {}) }));
  return { toolName: "apply_patch", arguments: { changes }, resultText: fileChangeText(item), isError: item.status !== "completed", awaitsOutput: true };
}

function mcpView(item: Extract<NativeItem, { kind: "mcpToolCall" }>): NativeView {
  const text = item.error !== null ? `Error: ${item.error}` : (item.resultText ?? `Status: ${item.status}`);
  const isError = item.status !== "completed" || item.error !== null;
  return { toolName: `mcp:${item.server}/${item.tool}`, arguments: toolArguments(item.arguments), resultText: text, isError, awaitsOutput: true };
}

/** The function name the model called for a sub-agent tool (Codex reports its own enum). */
const COLLAB_TOOL_NAMES: Record<string, string> = {
  spawnAgent: "spawn_agent",
  sendInput: "send_input",
  resumeAgent: "resume_agent",
  wait: "wait_agent",
  closeAgent: "close_agent",
  sendMessage: "send_message",
  followupTask: "followup_task",
  interruptAgent: "interrupt_agent",
  listAgents: "list_agents",
};

function collabToolName(tool: string): string {
  return Object.prototype.hasOwnProperty.call(COLLAB_TOOL_NAMES, tool) ? COLLAB_TOOL_NAMES[tool]! : tool;
}

/**
 * A sub-agent call: what the item says of the call (the message, the agents addressed, a requested model), and as its
 * result the agents it names with their status and last message. Codex reports the call, not its raw arguments.
 */
function collabView(item: Extract<NativeItem, { kind: "collabAgentToolCall" }>): NativeView {
  const spawn = item.tool === "spawnAgent";
  const args: Record<string, unknown> = {
    ...(item.prompt !== null ? { message: item.prompt } : {}),
    ...(!spawn && item.receiverThreadIds.length > 0 ? { targets: item.receiverThreadIds } : {}),
    ...(spawn && item.model !== null ? { model: item.model } : {}),
    ...(spawn && item.reasoningEffort !== null ? { reasoning_effort: item.reasoningEffort } : {}),
  };
  const agents = item.receiverThreadIds.length > 0 ? item.receiverThreadIds : Object.keys(item.agentsStates);
  const lines = [`Status: ${item.status}`];
  for (const id of [...new Set([...agents, ...Object.keys(item.agentsStates)])]) {
    const state = item.agentsStates[id];
    const label = spawn ? `Spawned agent ${id}` : `Agent ${id}`;
    lines.push(state ? `${label}: ${state.status}${state.message !== null ? `\n${state.message}` : ""}` : label);
  }
  return { toolName: collabToolName(item.tool), arguments: args, resultText: lines.join("\n"), isError: item.status !== "completed", awaitsOutput: true };
}

function imageGenerationView(item: Extract<NativeItem, { kind: "imageGeneration" }>): NativeView {
  const failed = item.failure !== null || item.status === "failed";
  const text = item.failure !== null ? `Error: ${item.failure}` : item.savedPath !== null ? `Image saved to ${item.savedPath}` : `Status: ${item.status || "completed"}`;
  const args = item.revisedPrompt !== null ? { prompt: item.revisedPrompt } : {};
  // Generated by the model's host (a hosted tool, like web search): the model did not wait for output from this side.
  return { toolName: "image_generation", arguments: args, resultText: text, isError: failed, awaitsOutput: false };
}

export function nativeView(item: NativeItem, capChars: number): NativeView | undefined {
  let view: NativeView;
  switch (item.kind) {
    case "commandExecution":
      view = commandView(item);
      break;
    case "fileChange":
      view = fileChangeView(item);
      break;
    case "mcpToolCall":
      view = mcpView(item);
      break;
    case "webSearch":
      // Run by the model's host: no output goes back from this side, so the model did not wait for one.
      view = { toolName: "web_search", arguments: webSearchArguments(item), resultText: webSearchText(item), isError: false, awaitsOutput: false };
      break;
    case "imageView":
      // The image went to the model as input; the record keeps the path, not the pixels.
      view = { toolName: "view_image", arguments: { path: item.path }, resultText: `Viewed image: ${item.path}`, isError: false, awaitsOutput: true };
      break;
    case "collabAgentToolCall":
      view = collabView(item);
      break;
    case "imageGeneration":
      view = imageGenerationView(item);
      break;
    default:
      return undefined;
  }
  return { ...view, resultText: view.resultText === null ? null : capToolOutput(view.resultText, capChars) };
}
