/**
 * What a model request held, against what a native-mode engine view says it should hold: one line per input item after
 * Codex's own framing (`role: text`, `ref: <block>` for labelled reference data, whether a user-role item or a turn's
 * lead context entry, `call:` / `output:` for tool pairs).
 */
import type { AgentMessage } from "../../src/context-engine/types.js";
import { NATIVE_REFERENCE_LABEL } from "../../src/projection/native.js";
import { renderMessageBlock } from "../../src/projection/render.js";
import type { RecordedRequest } from "../../src/testing/index.js";

const textOfContent = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.map((c: { text?: unknown }) => (typeof c.text === "string" ? c.text : "")).filter((t) => t.length > 0).join("\n")
      : "";

/** Codex's own framing: base/developer instructions, permissions, the environment context. */
export function isFraming(item: Record<string, unknown>): boolean {
  if (item.type !== "message") return false;
  const text = textOfContent(item.content);
  if (item.role === "developer") return true;
  return item.role === "user" && (text.startsWith("<environment_context>") || text.startsWith("<skills_instructions>"));
}

/** One request item as a line: `role: text`, `ref: <block>` for labelled reference data, `call:`/`output:` for tools. */
function itemLine(i: Record<string, unknown>): string {
  if (i.type === "function_call") return `call: ${String(i.name)}`;
  if (i.type === "function_call_output") {
    const output = typeof i.output === "string" ? i.output : textOfContent(i.output);
    // Reference data that rode with a turn as its lead (an untrusted context entry) reads as the same `ref:` line.
    if (output.startsWith(`${NATIVE_REFERENCE_LABEL}\n\n`)) return `ref: ${output.slice(NATIVE_REFERENCE_LABEL.length + 2)}`;
    return `output: ${output}`;
  }
  const text = textOfContent(i.content);
  if (i.role === "user" && text.startsWith(`${NATIVE_REFERENCE_LABEL}\n\n`)) return `ref: ${text.slice(NATIVE_REFERENCE_LABEL.length + 2)}`;
  return `${String(i.role ?? i.type)}: ${text}`;
}

/** The conversation the model received, one line per item after Codex's framing. */
export function conversation(req: RecordedRequest): string[] {
  const input = (req.body?.input ?? []) as Array<Record<string, unknown>>;
  return input.filter((i) => !isFraming(i)).map(itemLine);
}

/** What the view says the model should see, in the same lines, then the prompt. */
export function expected(view: readonly AgentMessage[], prompt: string): string[] {
  const out: string[] = [];
  for (const m of view) {
    if (m.role === "user") out.push(`user: ${textOfContent((m as { content: unknown }).content)}`);
    else if (m.role === "assistant") {
      for (const part of (m as { content: Array<{ type: string; text?: string; name?: string }> }).content) {
        if (part.type === "text" && part.text) out.push(`assistant: ${part.text}`);
        else if (part.type === "toolCall") out.push(`call: ${part.name}`);
      }
    } else if (m.role === "toolResult") out.push(`output: ${textOfContent((m as { content: unknown }).content)}`);
    else out.push(`ref: ${renderMessageBlock(m)}`);
  }
  return [...out, `user: ${prompt}`];
}

