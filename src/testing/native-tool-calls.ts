/**
 * Scripting Codex's NATIVE tools from the fake model: builders for the calls a model makes to the tools Codex 0.169.0
 * offers (recorded from the real binary's `tools` array with the offline catalog: `exec_command` because the catalog
 * says `shell_type: "unified_exec"`, the freeform `apply_patch` custom tool, and `update_plan` when the thread's config
 * enables `tools.update_plan.enabled`), and a reader for the tool outputs Codex sends back in the next request.
 *
 * Put the returned calls into a {@link FakeReply} (`functionCall` / `customToolCall`), then queue the final text:
 * each tool output makes Codex send one more request, which takes the next queued reply.
 */
import type { FakeCustomToolCall, FakeFunctionCall } from "./fake-responses-server.js";

/** `exec_command` arguments as Codex 0.169.0 declares them (only the fields a script needs). */
export interface ExecCommandOptions {
  /** Working directory; Codex defaults to the turn cwd. */
  workdir?: string | undefined;
  /** Per-command sandbox override; `"require_escalated"` asks for approval to run unsandboxed. */
  sandboxPermissions?: "use_default" | "require_escalated" | undefined;
  /** The approval question shown with `require_escalated`. */
  justification?: string | undefined;
  /** Wait before yielding output (ms); the command's exit is awaited when it ends sooner. */
  yieldTimeMs?: number | undefined;
  /** Run through a login shell (Codex's default is true; false keeps dotfiles out of tests). */
  login?: boolean | undefined;
  callId?: string | undefined;
}

/**
 * A model call of Codex's unified-exec shell tool (`exec_command`), which Codex reports as a `commandExecution` item.
 *
 * @example
 * ```ts
 * fake.enqueue([{ functionCall: execCommandCall("echo hi > out.txt", { workdir }) }, { text: "done" }]);
 * ```
 */
export function execCommandCall(cmd: string, options: ExecCommandOptions = {}): FakeFunctionCall {
  const args: Record<string, unknown> = { cmd, login: options.login ?? false };
  if (options.workdir !== undefined) args.workdir = options.workdir;
  if (options.sandboxPermissions !== undefined) args.sandbox_permissions = options.sandboxPermissions;
  if (options.justification !== undefined) args.justification = options.justification;
  if (options.yieldTimeMs !== undefined) args.yield_time_ms = options.yieldTimeMs;
  return { name: "exec_command", arguments: args, ...(options.callId !== undefined ? { callId: options.callId } : {}) };
}

/** One file operation of an `apply_patch` call. Paths are relative to the turn cwd (or absolute). */
export type PatchFileOp =
  | { kind: "add"; path: string; content: string }
  | { kind: "delete"; path: string }
  /** `lines` are raw hunk lines, each starting with " ", "-" or "+"; `context` is the optional `@@` anchor. */
  | { kind: "update"; path: string; lines: string[]; context?: string | undefined; moveTo?: string | undefined };

/**
 * The text of a patch in Codex's apply_patch grammar (`*** Begin Patch` ... `*** End Patch`).
 *
 * @example
 * ```ts
 * applyPatchText([{ kind: "add", path: "notes.txt", content: "one\ntwo\n" }]);
 * // => "*** Begin Patch\n*** Add File: notes.txt\n+one\n+two\n*** End Patch\n"
 * ```
 */
export function applyPatchText(ops: PatchFileOp[]): string {
  const out = ["*** Begin Patch"];
  for (const op of ops) {
    if (op.kind === "add") {
      out.push(`*** Add File: ${op.path}`);
      const body = op.content.endsWith("\n") ? op.content.slice(0, -1) : op.content;
      for (const line of body.split("\n")) out.push(`+${line}`);
    } else if (op.kind === "delete") {
      out.push(`*** Delete File: ${op.path}`);
    } else {
      out.push(`*** Update File: ${op.path}`);
      if (op.moveTo !== undefined) out.push(`*** Move to: ${op.moveTo}`);
      out.push(op.context === undefined ? "@@" : `@@ ${op.context}`);
      out.push(...op.lines);
    }
  }
  out.push("*** End Patch");
  return `${out.join("\n")}\n`;
}

/**
 * A model call of Codex's freeform `apply_patch` tool, reported as a `fileChange` item.
 *
 * @example
 * ```ts
 * fake.enqueue([{ customToolCall: applyPatchCall([{ kind: "add", path: "a.txt", content: "x\n" }]) }, { text: "done" }]);
 * ```
 */
export function applyPatchCall(patch: string | PatchFileOp[], callId?: string): FakeCustomToolCall {
  const input = typeof patch === "string" ? patch : applyPatchText(patch);
  return { name: "apply_patch", input, ...(callId !== undefined ? { callId } : {}) };
}

/** One step of an `update_plan` call, with the model-side status spelling. */
export interface FakePlanStep {
  step: string;
  status: "pending" | "in_progress" | "completed";
}

/**
 * A model call of Codex's `update_plan` tool (offered only when the config sets `tools.update_plan.enabled = true`);
 * Codex reports it as a `turn/plan/updated` notification.
 *
 * @example
 * ```ts
 * const fake = await startFakeResponsesServer();
 * fake.enqueue([{ functionCall: updatePlanCall([{ step: "write file", status: "in_progress" }], "starting") }, { text: "ok" }]);
 * ```
 */
export function updatePlanCall(plan: FakePlanStep[], explanation?: string, callId?: string): FakeFunctionCall {
  const args: Record<string, unknown> = { plan };
  if (explanation !== undefined) args.explanation = explanation;
  return { name: "update_plan", arguments: args, ...(callId !== undefined ? { callId } : {}) };
}

/** A tool output Codex sent back to the model. */
export interface ToolOutput {
  callId: string;
  /** `function_call_output` (function tools such as exec_command) or `custom_tool_call_output` (apply_patch). */
  type: "function_call_output" | "custom_tool_call_output";
  /** The output text (content parts joined with "\n" when the output is a list). */
  output: string;
}

function outputText(output: unknown): string {
  if (typeof output === "string") return output;
  if (Array.isArray(output)) {
    return output
      .map((part: { text?: unknown }) => (typeof part?.text === "string" ? part.text : ""))
      .filter((t) => t.length > 0)
      .join("\n");
  }
  if (output && typeof output === "object" && "content" in output) return outputText((output as { content: unknown }).content);
  return "";
}

/**
 * Every tool output in a request body's `input`, in order.
 *
 * @example
 * ```ts
 * fake.setDefault((req) => ({ text: `saw ${toolOutputs(req.body).length} tool outputs` }));
 * ```
 */
export function toolOutputs(body: Record<string, unknown> | null): ToolOutput[] {
  const input = body?.input;
  if (!Array.isArray(input)) return [];
  const out: ToolOutput[] = [];
  for (const item of input) {
    const it = item as { type?: unknown; call_id?: unknown; output?: unknown };
    if ((it.type === "function_call_output" || it.type === "custom_tool_call_output") && typeof it.call_id === "string") {
      out.push({ callId: it.call_id, type: it.type, output: outputText(it.output) });
    }
  }
  return out;
}
