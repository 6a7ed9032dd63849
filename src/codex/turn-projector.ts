/**
 * Projects the notifications of ONE Codex turn into a {@link TurnRecordCore}: typed items, an AgentMessage snapshot
 * for the transcript mirror, usage, native compactions and the error. Pure and deterministic: the same notification
 * sequence always gives the same record (timestamps come from the notifications, never from the clock).
 *
 * ## Messages in `messagesSnapshot` (pi `AgentMessage` shapes)
 *
 * The original prompt comes first, then one assistant message per model response, in the order Codex produced the
 * items. A tool call (dynamic or native) is a `toolCall` part of that assistant message, and its result follows the
 * assistant message as a `toolResult` message (`t` = the item's `completedAtMs`, else the notification's time):
 *
 * ```ts
 * { role: "assistant", content: [..., { type: "toolCall", id: ITEM_ID, name: NAME, arguments: ARGS }], api: "codex-app-server",
 *   provider, model, usage, stopReason: "toolUse" | "stop" | "error" | "aborted", timestamp: t }
 * { role: "toolResult", toolCallId: ITEM_ID, toolName: NAME, content: [{ type: "text", text: TEXT }], isError, timestamp: t }
 * ```
 *
 * | Codex item | NAME | ARGS | TEXT | isError |
 * | --- | --- | --- | --- | --- |
 * | `dynamicToolCall` | the tool | the call's arguments | the tool's content items | `success !== true` |
 * | `commandExecution` | `"shell"` | `{ command, cwd }` | `Exit code: N` + `Output:` + aggregated output; `Command declined: ...` | status not completed, or exit code not 0 |
 * | `fileChange` | `"apply_patch"` | `{ changes: [{ path, kind, movePath? }] }` | status line, `A/D/M path` lines, unified diff per file | status not completed |
 * | `mcpToolCall` | `"mcp:<server>/<tool>"` | the call's arguments | the result's text content (else its JSON), or `Error: ...` | status not completed or an error |
 * | `webSearch` | `"web_search"` | `{ query }` (+ `url`/`pattern` for page actions) | `Web search (<action>): <query>` + results JSON | never |
 * | `imageView` | `"view_image"` | `{ path }` | `Viewed image: <path>` (the image itself is not copied) | never |
 * | `collabAgentToolCall` | `"spawn_agent"`, `"send_input"`, `"wait_agent"`, `"close_agent"`, ... | `{ message?, targets?, model?, reasoning_effort? }` | `Status: <status>` + one line per agent (`Agent <id>: <status>` and its last message; agents sorted by id) | status not completed |
 * | `imageGeneration` | `"image_generation"` | `{ prompt }` (the revised prompt) | `Image saved to <path>`, or `Error: ...` | a failure |
 *
 * Native result texts longer than {@link TurnProjectorOptions.toolOutputCapChars} (default 16,000) keep their head and
 * tail around a `[... N characters truncated ...]` marker ({@link capToolOutput}). A web search or an image generation is
 * run by the model's host, so an assistant message whose only tools are those keeps `stopReason: "stop"`. The item
 * projections and views are in native-items.ts.
 *
 * Each plan update (`turn/plan/updated`, the model's `update_plan` tool; or a Plan-mode `plan` item) becomes one
 * custom message after the assistant message (and tool results) of the response that made it, or, when it came before
 * any item of its response, before that response's assistant message:
 *
 * ```ts
 * { role: "custom", customType: "codex.plan", content: "Plan: <explanation>\n- [x] done\n- [>] doing\n- [ ] next",
 *   display: true, timestamp: t }
 * ```
 */
import type { ModelReroute, NativeCompactionRecord, TurnRecord, TurnUsage } from "../../machines/turn.contract.js";
import type {
  AgentMessage,
  AssistantMessage,
  CustomMessage,
  MessagePart,
  MessageUsage,
  ToolCallPart,
  ToolResultMessage,
  UserMessage,
} from "../context-engine/types.js";
import { z } from "zod";
import type { ConsumedParams, IncomingNotification, ParsedThreadItem } from "./schemas.js";
import { DEFAULT_TOOL_OUTPUT_CAP_CHARS, isNativeItem, NATIVE_TOOL_KINDS, nativeView, projectNative, toolArguments, type NativeItem } from "./native-items.js";
import { imagePartOfInput, type PromptImage } from "./prompt-images.js";

export { capToolOutput, DEFAULT_TOOL_OUTPUT_CAP_CHARS, type FileChangeEntry, type NativeItem } from "./native-items.js";

/** One item of the turn, in the order Codex started them. */
export type ProjectedItem =
  | {
      kind: "userMessage";
      id: string;
      text: string;
      completed: boolean;
      /** The message's parts in order, when it carries images (a steer with images): text parts and image parts. */
      parts?: Array<{ type: "text"; text: string } | { type: "image"; data: string; mimeType: string }> | undefined;
    }
  /** A hook's prompt (a `Stop` hook that asked for one more model pass): a user message of the turn. */
  | { kind: "hookPrompt"; id: string; text: string; completed: boolean }
  | { kind: "agentMessage"; id: string; text: string; phase: string | null; completed: boolean }
  | { kind: "reasoning"; id: string; summary: string[]; content: string[]; completed: boolean }
  | {
      kind: "dynamicToolCall";
      id: string;
      tool: string;
      namespace: string | null;
      arguments: unknown;
      /** "inProgress" | "completed" | "failed" in 0.169.0. */
      status: string;
      success: boolean | null;
      /** Text of the tool result (inputText content items joined). */
      resultText: string | null;
      contentItems: unknown[] | null;
      durationMs: number | null;
      completed: boolean;
    }
  | NativeItem
  | { kind: "contextCompaction"; id: string; completed: boolean }
  | { kind: "other"; id: string; type: string; completed: boolean };

/** One step of a plan update; `status` as Codex reports it ("pending" | "inProgress" | "completed"). */
export interface PlanStep {
  step: string;
  status: string;
}

/**
 * A plan update (`turn/plan/updated`) as the projector records it (the `planUpdated` event's `update`).
 *
 * @example
 * ```ts
 * const update: PlanUpdate = { explanation: "starting", plan: [{ step: "write file", status: "inProgress" }] };
 * planText(update); // => "Plan: starting\n- [>] write file"
 * ```
 */
export interface PlanUpdate {
  explanation: string | null;
  plan: PlanStep[];
}

/** The error of a turn: Codex's message and `codexErrorInfo`, or our own `code` (e.g. "PROCESS_EXITED", "idleTimeout"). */
export interface TurnRecordError {
  message: string;
  codexErrorInfo?: string | undefined;
  code?: string | undefined;
}

/** A {@link TurnRecord} plus the typed item list. */
export interface TurnRecordCore extends TurnRecord {
  items: ProjectedItem[];
  error?: TurnRecordError | undefined;
}

/** Typed streaming events (display only: the logger never sees their text). */
export type CodexTurnEvent =
  | { type: "turnStarted"; threadId: string; turnId: string }
  | { type: "agentMessageDelta"; threadId: string; turnId: string; itemId: string; delta: string }
  | { type: "reasoningDelta"; threadId: string; turnId: string; itemId: string; delta: string; part: "summary" | "content" }
  | { type: "itemStarted"; threadId: string; turnId: string; item: ProjectedItem }
  | { type: "itemCompleted"; threadId: string; turnId: string; item: ProjectedItem }
  | { type: "compactionStarted"; threadId: string; turnId: string; compaction: NativeCompactionRecord }
  | { type: "compactionCompleted"; threadId: string; turnId: string; compaction: NativeCompactionRecord }
  | { type: "tokenUsage"; threadId: string; turnId: string; usage: TurnUsage }
  | { type: "planUpdated"; threadId: string; turnId: string; update: PlanUpdate }
  | { type: "error"; threadId: string; turnId: string; message: string; codexErrorInfo?: string | undefined; willRetry: boolean }
  | { type: "turnCompleted"; threadId: string; turnId: string; codexStatus: TurnRecord["codexStatus"] }
  | { type: "modelRerouted"; threadId: string; turnId: string; reroute: ModelReroute }
  | { type: "warning"; threadId: string; turnId: string; message: string };

export interface TurnProjectorOptions {
  threadId: string;
  turnId: string;
  /** The ORIGINAL user prompt (recorded instead of the projected text Codex received). */
  originalPrompt: string;
  /** Images sent with the prompt: the snapshot's prompt message is then the text part followed by these. */
  promptImages?: ReadonlyArray<{ type: "image"; data: string; mimeType: string }> | undefined;
  /** Image files this client sent in the turn (steers), by path: a `localImage` Codex echoes is recorded with its bytes. */
  sentImageFiles?: ReadonlyMap<string, PromptImage> | undefined;
  /** Written on assistant messages. */
  model?: string | undefined;
  provider?: string | undefined;
  /** Fallback timestamp when no notification carried one (e.g. the turn/start acceptance time). */
  fallbackTimestamp?: number | undefined;
  /** Cap on a native tool's result text in the snapshot (head and tail kept); default {@link DEFAULT_TOOL_OUTPUT_CAP_CHARS}. */
  toolOutputCapChars?: number | undefined;
}

/**
 * `codexErrorInfo` is a string or a one-key object (`{httpConnectionFailed:{…}}`); records keep the name only.
 *
 * @example
 * ```ts
 * codexErrorInfoName({ httpConnectionFailed: { httpStatusCode: null } }); // => "httpConnectionFailed"
 * ```
 */
export function codexErrorInfoName(info: unknown): string | undefined {
  if (typeof info === "string") return info;
  if (info && typeof info === "object") {
    const first = Object.keys(info)[0];
    return first;
  }
  return undefined;
}

const ZERO_USAGE: MessageUsage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0 };

type Breakdown = ConsumedParams<"thread/tokenUsage/updated">["tokenUsage"]["last"];

function usageOf(b: Breakdown): MessageUsage {
  return {
    input: b.inputTokens,
    output: b.outputTokens,
    cacheRead: b.cachedInputTokens,
    cacheWrite: b.cacheWriteInputTokens,
    totalTokens: b.totalTokens,
  };
}

function userInputText(content: Array<{ type: string; text?: string | undefined }>): string {
  return content
    .filter((c) => c.type === "text" && typeof c.text === "string")
    .map((c) => c.text as string)
    .join("\n");
}

/** A user message's parts in order when it carries images (else undefined: the text alone is recorded). */
function userInputParts(
  content: Array<{ type: string; text?: string | undefined; url?: unknown; path?: unknown }>,
  sentFiles: ReadonlyMap<string, PromptImage> = new Map(),
): Array<{ type: "text"; text: string } | { type: "image"; data: string; mimeType: string }> | undefined {
  if (!content.some((c) => c.type === "image" || c.type === "localImage")) return undefined;
  const parts: Array<{ type: "text"; text: string } | { type: "image"; data: string; mimeType: string }> = [];
  for (const c of content) {
    if (c.type === "text" && typeof c.text === "string") parts.push({ type: "text", text: c.text });
    else {
      const image = imagePartOfInput(c, sentFiles);
      if (image) parts.push(image);
    }
  }
  return parts;
}

function toolResultText(contentItems: unknown[] | null | undefined): string | null {
  if (!contentItems) return null;
  return contentItems
    .filter((c): c is { type: "inputText"; text: string } => {
      const o = c as { type?: unknown; text?: unknown };
      return o.type === "inputText" && typeof o.text === "string";
    })
    .map((c) => c.text)
    .join("\n");
}

function toolResultParts(contentItems: unknown[] | null | undefined): MessagePart[] {
  if (!contentItems) return [];
  return contentItems.map((c): MessagePart => {
    const o = c as { type?: unknown; text?: unknown; imageUrl?: unknown };
    if (o.type === "inputText" && typeof o.text === "string") return { type: "text", text: o.text };
    if (o.type === "inputImage" && typeof o.imageUrl === "string") return { type: "imageUrl", url: o.imageUrl };
    return { type: String(o.type ?? "unknown"), value: c };
  });
}


const planUpdatedSchema = z.looseObject({
  threadId: z.string().min(1),
  turnId: z.string().min(1),
  explanation: z.string().nullable().optional(),
  plan: z.array(z.looseObject({ step: z.string(), status: z.string() })),
});

/**
 * How a tool item appears in the transcript: the `toolCall` part and its `toolResult`.
 *
 * @example
 * ```ts
 * const view: ToolCallView | undefined = toolCallView(item);
 * // a finished command: { toolCallId: "call_1", toolName: "shell", arguments: { command, cwd },
 * //   resultText: "Exit code: 0\nOutput:\n...", resultParts: [{ type: "text", text: ... }], isError: false, awaitsOutput: true }
 * ```
 */
export interface ToolCallView {
  toolCallId: string;
  toolName: string;
  arguments: Record<string, unknown>;
  /** The result text (capped for native tools); null while the item has not completed. */
  resultText: string | null;
  /** The result as message parts (dynamic tools may return images). */
  resultParts: MessagePart[];
  isError: boolean;
  /** Executed on this side (Codex or the host), so the model waited for the output; false for hosted web search. */
  awaitsOutput: boolean;
}

/**
 * The transcript view of a tool item (dynamic or native): name, arguments and result as they appear in
 * `messagesSnapshot`. Undefined for items that are not tool calls. Hosts use it on `itemStarted` / `itemCompleted`
 * events to run `beforeToolCall` / `afterToolCall` observation hooks for native tools.
 *
 * @example
 * ```ts
 * onEvent: (e) => {
 *   const view = e.type === "itemCompleted" ? toolCallView(e.item) : undefined;
 *   if (view) console.log(view.toolName, view.isError); // "shell" false
 * }
 * ```
 */
export function toolCallView(item: ProjectedItem, capChars: number = DEFAULT_TOOL_OUTPUT_CAP_CHARS): ToolCallView | undefined {
  if (item.kind === "dynamicToolCall") {
    return {
      toolCallId: item.id,
      toolName: item.tool,
      arguments: toolArguments(item.arguments),
      resultText: item.completed ? item.resultText : null,
      resultParts: toolResultParts(item.contentItems),
      isError: item.success !== true,
      awaitsOutput: true,
    };
  }
  const view = isNativeItem(item) ? nativeView(item, capChars) : undefined;
  if (!view) return undefined;
  const resultText = item.completed ? view.resultText : null;
  return { ...view, toolCallId: item.id, resultText, resultParts: resultText === null ? [] : [{ type: "text", text: resultText }] };
}

function planStepMark(status: string): string {
  return status === "completed" ? "[x]" : status === "inProgress" || status === "in_progress" ? "[>]" : "[ ]";
}

/**
 * A plan update as the text of its `codex.plan` custom message: the explanation (if any), then one checklist line per
 * step (`[x]` completed, `[>]` in progress, `[ ]` pending).
 *
 * @example
 * ```ts
 * planText({ explanation: "starting", plan: [{ step: "write file", status: "inProgress" }] });
 * // => "Plan: starting\n- [>] write file"
 * ```
 */
export function planText(update: PlanUpdate): string {
  const lines = update.explanation ? [`Plan: ${update.explanation}`] : ["Plan:"];
  for (const s of update.plan) lines.push(`- ${planStepMark(s.status)} ${s.step}`);
  return lines.join("\n");
}

/** A tool call as its response's toolCall part and the toolResult message after it (`unfinished`: still running). */
function toolCallMessages(view: ToolCallView, timestamp: number, opts: { unfinished?: boolean | undefined } = {}): { call: ToolCallPart; result: ToolResultMessage } {
  return {
    call: { type: "toolCall", id: view.toolCallId, name: view.toolName, arguments: view.arguments },
    result: {
      role: "toolResult",
      toolCallId: view.toolCallId,
      toolName: view.toolName,
      content: opts.unfinished ? [{ type: "text", text: UNFINISHED_TOOL_RESULT }] : view.resultParts,
      isError: opts.unfinished ? false : view.isError,
      timestamp,
    },
  };
}

/** Put `result` after the tool results that follow the assistant message at `at`. */
function insertAfterResults(messages: AgentMessage[], at: number, result: ToolResultMessage): void {
  let end = at + 1;
  while (end < messages.length && messages[end]!.role === "toolResult") end++;
  messages.splice(end, 0, result);
}

/** One model response being assembled: its assistant parts, then the messages that follow it. */
interface PendingGroup {
  parts: MessagePart[];
  timestamp: number;
  usage?: MessageUsage | undefined;
  results: ToolResultMessage[];
  /** Tool calls whose output went back to the model (a next response follows): every tool but hosted web search. */
  clientTools: number;
  /** Messages after the results (plan updates made during this response). */
  after: CustomMessage[];
  /** Identity of the response, kept by the copy `finish()` flushes. */
  id: number;
}

/**
 * The result recorded for a tool call still running when its turn ended: Codex reported the call (`item/started`)
 * but neither its end nor, for a command left running in the background, the output the model got back.
 */
export const UNFINISHED_TOOL_RESULT = "(still running when the turn ended; Codex reported no result for it)";

const TOOL_KINDS: ReadonlySet<ProjectedItem["kind"]> = new Set(["dynamicToolCall", ...NATIVE_TOOL_KINDS]);

/**
 * Feed one turn's notifications in order with {@link TurnProjector.apply}; read the record with
 * {@link TurnProjector.finish}. Notifications of other threads/turns are ignored.
 *
 * @example
 * ```ts
 * const p = new TurnProjector({ threadId, turnId, originalPrompt: "hi" });
 * for (const n of notifications) p.apply(n);
 * const record = p.finish();
 * ```
 */
export class TurnProjector {
  private readonly opts: TurnProjectorOptions;
  private readonly items = new Map<string, ProjectedItem>();
  private readonly order: string[] = [];
  private readonly messages: AgentMessage[] = [];
  private readonly compactions = new Map<string, NativeCompactionRecord>();
  private readonly compactionsInProgress = new Set<string>();
  private group: PendingGroup | undefined;
  private lastAssistant: AssistantMessage | undefined;
  private groupCount = 0;
  /** The assistant message each flushed response became, by response id. */
  private readonly assistantOfGroup = new Map<number, AssistantMessage>();
  /** Tool calls started and not ended, with the response (and the position in it) they started in. */
  private readonly unfinishedTools = new Map<string, { groupId: number; partIndex: number; at: number }>();
  /** Per flushed response: the start positions of the calls put into it after it was flushed (see addLateToolCall). */
  private readonly lateCalls = new Map<number, number[]>();
  /** The turn's model reroute, once Codex reported one. */
  private reroute: ModelReroute | undefined;
  private promptTimestamp: number | undefined;
  private turnStartedAt: number | undefined;
  private sawPromptItem = false;
  private lastTimestamp: number | undefined;
  private usage: TurnUsage | undefined;
  private lastError: TurnRecordError | undefined;
  private status: TurnRecord["codexStatus"] | undefined;
  private completedError: TurnRecordError | undefined;
  private applied = 0;

  constructor(opts: TurnProjectorOptions) {
    this.opts = opts;
  }

  get threadId(): string {
    return this.opts.threadId;
  }
  get turnId(): string {
    return this.opts.turnId;
  }
  /** Codex sent turn/completed for this turn. */
  get completed(): boolean {
    return this.status !== undefined;
  }
  /** How many notifications of this turn were applied. */
  get appliedCount(): number {
    return this.applied;
  }

  /** Does this notification belong to this turn? (`turn/plan/updated` is matched even when passed through unparsed.) */
  matches(n: IncomingNotification): boolean {
    if (!n.consumed && n.method !== "turn/plan/updated") return false;
    const p = n.params as { threadId?: string | undefined; turnId?: string | undefined; turn?: { id?: string | undefined } | undefined };
    if (p.threadId !== this.opts.threadId) return false;
    const turnId = p.turnId ?? p.turn?.id;
    if (turnId !== undefined) return turnId === this.opts.turnId;
    return n.method === "thread/status/changed" || n.method === "warning" || n.method === "guardianWarning";
  }

  /**
   * The items that follow belong to the model's next response when a tool's output is already in the current one.
   * A live turn learns where a response ends from its usage notification; a turn rebuilt from Codex's record of the
   * thread has none, so the rebuild calls this before each tool item (a model that called tools in parallel is then
   * recorded as one response per call, which keeps every call before its result).
   */
  nextResponseAfterToolOutput(): void {
    const g = this.group;
    if (g && (g.results.length > 0 || g.after.length > 0)) this.flushGroup("toolUse");
  }

  /** Apply one notification; returns the stream events it produced (empty when it is not ours). */
  apply(n: IncomingNotification): CodexTurnEvent[] {
    if (!this.matches(n) || this.status !== undefined) return [];
    this.applied++;
    if (n.emittedAtMs !== undefined) this.lastTimestamp = n.emittedAtMs;
    const base = { threadId: this.opts.threadId, turnId: this.opts.turnId };
    // Handled whether the client passes it through unparsed or validates it: the params are checked here.
    if (n.method === "turn/plan/updated") return this.onPlanUpdated(n.params, n.emittedAtMs);
    if (!n.consumed) return [];
    switch (n.method) {
      case "turn/started":
        if (n.emittedAtMs !== undefined) this.turnStartedAt = n.emittedAtMs;
        return [{ type: "turnStarted", ...base }];
      case "item/started":
        return this.onItemStarted(n.params.item, n.params.startedAtMs ?? n.emittedAtMs);
      case "item/completed":
        return this.onItemCompleted(n.params.item, n.params.completedAtMs ?? n.emittedAtMs);
      case "item/agentMessage/delta": {
        const item = this.items.get(n.params.itemId);
        if (item?.kind === "agentMessage" && !item.completed) item.text += n.params.delta;
        return [{ type: "agentMessageDelta", ...base, itemId: n.params.itemId, delta: n.params.delta }];
      }
      case "item/reasoning/summaryTextDelta":
        return [{ type: "reasoningDelta", ...base, itemId: n.params.itemId, delta: n.params.delta, part: "summary" }];
      case "item/reasoning/textDelta":
        return [{ type: "reasoningDelta", ...base, itemId: n.params.itemId, delta: n.params.delta, part: "content" }];
      case "thread/tokenUsage/updated":
        return this.onTokenUsage(n.params.tokenUsage);
      case "model/rerouted": {
        // Messages of this turn from now on name the model that answered (OpenClaw's `responseModel`).
        this.reroute = { fromModel: n.params.fromModel, toModel: n.params.toModel, reason: n.params.reason };
        return [{ type: "modelRerouted", ...base, reroute: { ...this.reroute } }];
      }
      case "warning":
      case "guardianWarning":
        return [{ type: "warning", ...base, message: n.params.message }];
      case "error": {
        const info = codexErrorInfoName(n.params.error.codexErrorInfo);
        if (!n.params.willRetry) {
          this.lastError = { message: n.params.error.message, ...(info !== undefined ? { codexErrorInfo: info } : {}) };
        }
        return [
          {
            type: "error",
            ...base,
            message: n.params.error.message,
            ...(info !== undefined ? { codexErrorInfo: info } : {}),
            willRetry: n.params.willRetry,
          },
        ];
      }
      case "turn/completed": {
        const turn = n.params.turn;
        // An unexpected status ends the turn as failed rather than leaving it open.
        this.status = turn.status === "completed" || turn.status === "interrupted" ? turn.status : "failed";
        if (turn.error) {
          const info = codexErrorInfoName(turn.error.codexErrorInfo);
          this.completedError = { message: turn.error.message, ...(info !== undefined ? { codexErrorInfo: info } : {}) };
        }
        return [{ type: "turnCompleted", ...base, codexStatus: this.status }];
      }
      default:
        return [];
    }
  }

  private ts(explicit: number | null | undefined): number {
    const t = explicit ?? this.lastTimestamp ?? this.opts.fallbackTimestamp ?? 0;
    this.lastTimestamp = t;
    return t;
  }

  private remember(item: ProjectedItem): ProjectedItem {
    const existing = this.items.get(item.id);
    if (!existing) this.order.push(item.id);
    this.items.set(item.id, item);
    return item;
  }

  private project(item: ParsedThreadItem, completed: boolean): ProjectedItem {
    switch (item.type) {
      case "userMessage": {
        const it = item as Extract<ParsedThreadItem, { type: "userMessage" }>;
        const parts = userInputParts(it.content as Array<{ type: string; text?: string | undefined; url?: unknown; path?: unknown }>, this.opts.sentImageFiles);
        return { kind: "userMessage", id: it.id, text: userInputText(it.content), completed, ...(parts ? { parts } : {}) };
      }
      case "agentMessage": {
        const it = item as Extract<ParsedThreadItem, { type: "agentMessage" }>;
        return { kind: "agentMessage", id: it.id, text: it.text, phase: it.phase ?? null, completed };
      }
      case "hookPrompt": {
        const fragments = (item as { fragments?: unknown }).fragments;
        const texts = Array.isArray(fragments) ? fragments.map((f) => (f as { text?: unknown })?.text).filter((t): t is string => typeof t === "string") : [];
        return { kind: "hookPrompt", id: item.id, text: texts.join("\n"), completed };
      }
      case "reasoning": {
        const it = item as Extract<ParsedThreadItem, { type: "reasoning" }>;
        return { kind: "reasoning", id: it.id, summary: it.summary, content: it.content ?? [], completed };
      }
      case "dynamicToolCall": {
        const it = item as Extract<ParsedThreadItem, { type: "dynamicToolCall" }>;
        return {
          kind: "dynamicToolCall",
          id: it.id,
          tool: it.tool,
          namespace: it.namespace ?? null,
          arguments: it.arguments,
          status: it.status,
          success: it.success ?? null,
          resultText: toolResultText(it.contentItems),
          contentItems: it.contentItems ?? null,
          durationMs: it.durationMs ?? null,
          completed,
        };
      }
      case "contextCompaction":
        return { kind: "contextCompaction", id: item.id, completed };
      default:
        return projectNative(item, completed) ?? { kind: "other", id: item.id, type: item.type, completed };
    }
  }

  private onItemStarted(raw: ParsedThreadItem, at: number | undefined): CodexTurnEvent[] {
    const base = { threadId: this.opts.threadId, turnId: this.opts.turnId };
    const known = this.items.get(raw.id);
    const item = this.remember(known ?? this.project(raw, false));
    const events: CodexTurnEvent[] = [{ type: "itemStarted", ...base, item }];
    if (item.kind === "userMessage" && !this.sawPromptItem && this.promptTimestamp === undefined) {
      this.promptTimestamp = raw.startedAtMs ?? at;
    }
    // A non-tool item after the output of a tool (update_plan included) went back to the model starts the next response.
    const g = this.group;
    if (!TOOL_KINDS.has(item.kind) && item.kind !== "contextCompaction" && g && (g.clientTools > 0 || g.after.length > 0)) {
      this.flushGroup("toolUse");
    }
    if (TOOL_KINDS.has(item.kind) && !item.completed && !this.unfinishedTools.has(item.id)) {
      // Not through ts(): a start must not move the clock later messages without a time of their own fall back on.
      const startedAt = raw.startedAtMs ?? at ?? this.lastTimestamp ?? this.opts.fallbackTimestamp ?? 0;
      const group = this.ensureGroup(startedAt);
      this.unfinishedTools.set(item.id, { groupId: group.id, partIndex: group.parts.length, at: startedAt });
    }
    if (item.kind === "contextCompaction") {
      this.compactionsInProgress.add(item.id);
      const record = this.compactionRecord(item.id, false);
      events.push({ type: "compactionStarted", ...base, compaction: record });
    }
    return events;
  }

  private compactionRecord(itemId: string, completed: boolean): NativeCompactionRecord {
    const record: NativeCompactionRecord = {
      backend: "codex-app-server",
      threadId: this.opts.threadId,
      turnId: this.opts.turnId,
      itemId,
      completed,
    };
    this.compactions.set(itemId, record);
    return { ...record };
  }

  private ensureGroup(timestamp: number): PendingGroup {
    if (!this.group) this.group = { parts: [], timestamp, results: [], clientTools: 0, after: [], id: ++this.groupCount };
    return this.group;
  }

  private onItemCompleted(raw: ParsedThreadItem, at: number | undefined): CodexTurnEvent[] {
    const base = { threadId: this.opts.threadId, turnId: this.opts.turnId };
    const item = this.remember(this.project(raw, true));
    const started = this.unfinishedTools.get(item.id);
    this.unfinishedTools.delete(item.id);
    const events: CodexTurnEvent[] = [{ type: "itemCompleted", ...base, item }];
    const t = this.ts(raw.completedAtMs ?? at);
    switch (item.kind) {
      case "userMessage":
        if (!this.sawPromptItem) {
          // The first user message is the prompt Codex received; the snapshot records the original prompt instead.
          this.sawPromptItem = true;
          if (this.promptTimestamp === undefined) this.promptTimestamp = raw.startedAtMs ?? t;
        } else {
          // A steer: the model saw it mid-turn, so it belongs to the transcript in order.
          this.flushGroup("stop");
          const msg: UserMessage = { role: "user", content: item.parts ?? item.text, timestamp: t };
          this.messages.push(msg);
        }
        break;
      case "hookPrompt":
        // The model saw it as a user message after its answer (Codex wraps it in <hook_prompt>): the answer before it
        // and the revised one after it are separate assistant messages, the last one the turn's final answer.
        if (item.text.length > 0) {
          this.flushGroup("stop");
          this.messages.push({ role: "user", content: item.text, timestamp: t } satisfies UserMessage);
        }
        break;
      case "reasoning": {
        const text = (item.summary.length > 0 ? item.summary : item.content).join("\n\n");
        if (text.length > 0) {
          const g = this.ensureGroup(t);
          g.parts.push({ type: "thinking", thinking: text });
          g.timestamp = t;
        }
        break;
      }
      case "agentMessage": {
        const g = this.ensureGroup(t);
        g.parts.push({ type: "text", text: item.text });
        g.timestamp = t;
        break;
      }
      case "plan":
        this.addPlanMessage(item.text, t);
        break;
      case "contextCompaction": {
        this.compactionsInProgress.delete(item.id);
        events.push({ type: "compactionCompleted", ...base, compaction: this.compactionRecord(item.id, true) });
        break;
      }
      default: {
        // Dynamic and native tool calls (TOOL_KINDS). A call whose response was already recorded goes back into it.
        if (!TOOL_KINDS.has(item.kind)) break;
        const response = started && started.groupId !== this.group?.id ? this.assistantOfGroup.get(started.groupId) : undefined;
        if (response && started) this.addLateToolCall(item, t, response, started);
        else this.addToolCall(item, t);
        break;
      }
    }
    return events;
  }

  private addToolCall(item: ProjectedItem, t: number): void {
    const view = toolCallView(item, this.opts.toolOutputCapChars ?? DEFAULT_TOOL_OUTPUT_CAP_CHARS);
    if (!view) return;
    const { call, result } = toolCallMessages(view, t);
    const g = this.ensureGroup(t);
    g.parts.push(call);
    g.timestamp = t;
    if (view.awaitsOutput) g.clientTools++;
    g.results.push(result);
  }

  /**
   * A call that ends after its response was recorded (Codex 0.169 can report a command's end after the usage that closes
   * the response, even after the next response's items began): the call goes into that response, at the place it
   * started at, and its result after that response's results, as if it had ended in time.
   */
  private addLateToolCall(item: ProjectedItem, t: number, response: AssistantMessage, started: { groupId: number; partIndex: number }): void {
    const view = toolCallView(item, this.opts.toolOutputCapChars ?? DEFAULT_TOOL_OUTPUT_CAP_CHARS);
    if (!view) return;
    const { call, result } = toolCallMessages(view, t);
    response.content.splice(this.placeInResponse(started, response.content.length), 0, call);
    // As for a call that ends in time: the response's time is that of its last part to end.
    response.timestamp = Math.max(response.timestamp, t);
    const late = this.lateCalls.get(started.groupId) ?? [];
    late.push(started.partIndex);
    this.lateCalls.set(started.groupId, late);
    insertAfterResults(this.messages, this.messages.indexOf(response), result);
  }

  /** Where a call that started at `partIndex` of its response goes now: after the calls put there before it. */
  private placeInResponse(started: { groupId: number; partIndex: number }, length: number): number {
    const before = (this.lateCalls.get(started.groupId) ?? []).filter((i) => i <= started.partIndex).length;
    return Math.min(started.partIndex + before, length);
  }

  /** Tool calls started in this response and not ended. */
  private runningToolsIn(groupId: number): number {
    let n = 0;
    for (const start of this.unfinishedTools.values()) if (start.groupId === groupId) n++;
    return n;
  }

  /** A plan message follows the response that made it (after that response's tool results). */
  private addPlanMessage(content: string, t: number): void {
    const msg: CustomMessage = { role: "custom", customType: "codex.plan", content, display: true, timestamp: t };
    if (this.group) this.group.after.push(msg);
    else this.messages.push(msg);
  }

  private onPlanUpdated(params: unknown, at: number | undefined): CodexTurnEvent[] {
    const parsed = planUpdatedSchema.safeParse(params);
    if (!parsed.success) return [];
    const update: PlanUpdate = {
      explanation: parsed.data.explanation ?? null,
      plan: parsed.data.plan.map((s) => ({ step: s.step, status: s.status })),
    };
    this.addPlanMessage(planText(update), this.ts(at));
    return [{ type: "planUpdated", threadId: this.opts.threadId, turnId: this.opts.turnId, update }];
  }

  private onTokenUsage(tu: ConsumedParams<"thread/tokenUsage/updated">["tokenUsage"]): CodexTurnEvent[] {
    const usage: TurnUsage = {
      inputTokens: tu.total.inputTokens,
      cachedInputTokens: tu.total.cachedInputTokens,
      outputTokens: tu.total.outputTokens,
      reasoningOutputTokens: tu.total.reasoningOutputTokens,
      totalTokens: tu.total.totalTokens,
      lastCallInputTokens: tu.last.inputTokens,
      lastCallCachedInputTokens: tu.last.cachedInputTokens,
      lastCallOutputTokens: tu.last.outputTokens,
      lastCallTotalTokens: tu.last.totalTokens,
      ...(typeof tu.modelContextWindow === "number" ? { modelContextWindow: tu.modelContextWindow } : {}),
    };
    this.usage = usage;
    // Usage arrives after each model response: attribute it to that response's assistant message. Updates inside a
    // compaction describe the compaction request or the new history estimate, not a response.
    if (this.compactionsInProgress.size === 0 && (tu.last.inputTokens > 0 || tu.last.outputTokens > 0)) {
      const g = this.group;
      const running = g ? this.runningToolsIn(g.id) : 0;
      if (g && (g.parts.length > 0 || running > 0) && !g.usage) {
        g.usage = usageOf(tu.last);
        // The response is complete; with tool results, a plan update or a call still running (its end reported late,
        // or never for a command left in the background) what follows is a new response.
        if (running > 0) this.flushGroup("toolUse");
        else if (g.results.length > 0 || g.after.length > 0) this.flushGroup("stop");
      } else if (this.lastAssistant && this.lastAssistant.usage === ZERO_USAGE) {
        this.lastAssistant.usage = usageOf(tu.last);
      }
    }
    return [{ type: "tokenUsage", threadId: this.opts.threadId, turnId: this.opts.turnId, usage: { ...usage } }];
  }

  private flushGroup(stopReason: AssistantMessage["stopReason"], errorMessage?: string): void {
    const g = this.group;
    if (!g) return;
    this.group = undefined;
    // A response whose only calls are still running is kept: they go into it when they end, or at finish().
    if (g.parts.length === 0 && g.results.length === 0 && this.runningToolsIn(g.id) === 0) {
      this.messages.push(...g.after);
      return;
    }
    const msg: AssistantMessage = {
      role: "assistant",
      content: g.parts,
      api: "codex-app-server",
      provider: this.opts.provider ?? "codex",
      model: this.opts.model ?? "unknown",
      ...(this.reroute ? { responseModel: this.reroute.toModel } : {}),
      usage: g.usage ?? ZERO_USAGE,
      stopReason: g.clientTools > 0 || g.after.length > 0 ? "toolUse" : stopReason,
      ...(errorMessage !== undefined && g.results.length === 0 ? { errorMessage } : {}),
      timestamp: g.timestamp,
    };
    this.messages.push(msg);
    this.lastAssistant = msg;
    this.assistantOfGroup.set(g.id, msg);
    this.messages.push(...g.results, ...g.after);
  }

  /**
   * Tool calls still running at the end go into the snapshot where the model made them: the call in the response it
   * started in, at its place there, its result (`UNFINISHED_TOOL_RESULT`) after that response's results. Works on the
   * snapshot (copies), so `finish()` stays idempotent.
   */
  private addUnfinishedTools(snapshot: AgentMessage[], flushed: AgentMessage[]): void {
    const capChars = this.opts.toolOutputCapChars ?? DEFAULT_TOOL_OUTPUT_CAP_CHARS;
    // Latest first, so an insertion never moves the place of one still to insert before it.
    for (const [id, start] of [...this.unfinishedTools].reverse()) {
      const item = this.items.get(id);
      const view = item ? toolCallView(item, capChars) : undefined;
      if (!view) continue;
      const anchor = this.assistantOfGroup.get(start.groupId);
      let at = anchor ? flushed.indexOf(anchor) : -1;
      let partIndex = this.placeInResponse(start, Number.MAX_SAFE_INTEGER);
      if (at < 0) {
        // Its response recorded nothing else: the call goes to the last response of the turn, at its end.
        at = flushed.findLastIndex((m) => m.role === "assistant");
        partIndex = Number.MAX_SAFE_INTEGER;
      }
      const { call: part, result } = toolCallMessages(view, start.at, { unfinished: true });
      if (at < 0) {
        snapshot.push({ role: "assistant", content: [part], api: "codex-app-server", provider: this.opts.provider ?? "codex", model: this.opts.model ?? "unknown", usage: ZERO_USAGE, stopReason: "toolUse", timestamp: start.at } satisfies AssistantMessage, result);
        continue;
      }
      // Snapshot index: the prompt comes first.
      const message = snapshot[at + 1] as AssistantMessage;
      message.content.splice(Math.min(partIndex, message.content.length), 0, part);
      insertAfterResults(snapshot, at + 1, result);
    }
  }

  /**
   * Build the record. `override` ends a turn Codex did not complete (process exit, idle timeout): its status and error
   * win over what was seen. Safe to call more than once.
   */
  finish(override?: { codexStatus: TurnRecord["codexStatus"]; error?: TurnRecordError | undefined }): TurnRecordCore {
    const status = override?.codexStatus ?? this.status ?? "failed";
    const error =
      override?.error ??
      this.completedError ??
      (status === "failed" ? (this.lastError ?? { message: "turn ended without turn/completed", code: "incomplete" }) : undefined);
    // Work on copies so finish() is idempotent.
    const saved = { group: this.group, messages: this.messages.length, lastAssistant: this.lastAssistant };
    const stop: AssistantMessage["stopReason"] = status === "completed" ? "stop" : status === "failed" ? "error" : "aborted";
    if (this.group) this.group = { ...this.group, parts: [...this.group.parts], results: [...this.group.results], after: [...this.group.after] };
    this.flushGroup(stop, status === "completed" ? undefined : error?.message);
    const prompt: UserMessage = {
      role: "user",
      content:
        this.opts.promptImages && this.opts.promptImages.length > 0
          ? [{ type: "text", text: this.opts.originalPrompt }, ...this.opts.promptImages.map((p) => ({ ...p }))]
          : this.opts.originalPrompt,
      timestamp: this.promptTimestamp ?? this.turnStartedAt ?? this.opts.fallbackTimestamp ?? 0,
    };
    const snapshot: AgentMessage[] = [prompt, ...this.messages.map((m) => structuredClone(m))];
    this.addUnfinishedTools(snapshot, this.messages);
    this.messages.length = saved.messages;
    this.group = saved.group;
    this.lastAssistant = saved.lastAssistant;

    const lastAssistant = [...snapshot].reverse().find((m): m is AssistantMessage => m.role === "assistant");
    const assistantText = lastAssistant
      ? lastAssistant.content
          .filter((p): p is { type: "text"; text: string } => p.type === "text")
          .map((p) => p.text)
          .join("\n\n")
      : "";
    const record: TurnRecordCore = {
      threadId: this.opts.threadId,
      turnId: this.opts.turnId,
      codexStatus: status,
      assistantText,
      messagesSnapshot: snapshot,
      compactions: [...this.compactions.values()].map((c) => ({ ...c })),
      items: this.order.map((id) => structuredClone(this.items.get(id)!)),
    };
    if (this.usage) record.usage = { ...this.usage };
    if (error) record.error = { ...error };
    if (this.reroute) record.modelRerouted = { ...this.reroute };
    const images = this.order.flatMap((id) => {
      const item = this.items.get(id);
      return item?.kind === "imageGeneration" && item.completed && typeof item.savedPath === "string" ? [{ itemId: item.id, path: item.savedPath }] : [];
    });
    if (images.length > 0) record.generatedImages = images;
    const plans = this.order.flatMap((id) => {
      const item = this.items.get(id);
      return item?.kind === "plan" && item.completed ? [item.text] : [];
    });
    if (plans.length > 0) record.proposedPlan = plans.at(-1)!;
    return record;
  }
}
