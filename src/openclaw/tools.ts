/**
 * Plugin tools (`api.registerTool`) as the turn host's dynamic tools. A registration is a tool object (OpenClaw's
 * `AnyAgentTool`: `name`, `description`, `parameters` JSON Schema, `execute(toolCallId, params, signal?)`) or a
 * factory `(ctx) => tool | tool[] | null` called once at load with the session context the host knows.
 */
import type { ToolRegistration } from "./registry.js";

/** A dynamic tool as `runCodexTurn({ dynamicTools })` takes it. */
export interface PluginDynamicTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  handler: (args: unknown, ctx?: { callId?: string }) => Promise<string> | string;
}

/** What a tool factory receives (the subset of OpenClaw's `OpenClawPluginToolContext` this host knows). */
export interface PluginToolFactoryContext {
  config?: Record<string, unknown>;
  workspaceDir?: string;
  sessionId?: string;
  sessionKey?: string;
  oneShotCliRun?: boolean;
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

interface AgentToolLike {
  name: string;
  description?: string;
  label?: string;
  parameters?: unknown;
  execute: (toolCallId: string, params: Record<string, unknown>, signal?: AbortSignal) => unknown;
}

function isAgentTool(value: unknown): value is AgentToolLike {
  const v = value as AgentToolLike | null;
  return typeof v === "object" && v !== null && typeof v.name === "string" && typeof v.execute === "function";
}

/** A JSON Schema from `parameters` (TypeBox schemas are JSON Schema plus symbol keys, which JSON drops). */
function inputSchemaOf(parameters: unknown): Record<string, unknown> {
  if (typeof parameters !== "object" || parameters === null) return { type: "object", properties: {} };
  return JSON.parse(JSON.stringify(parameters)) as Record<string, unknown>;
}

/**
 * A tool result as the text Codex gets back: a string as is; OpenClaw's `{ content: [...] }` as its text parts joined
 * by newlines (other parts as `[<type> omitted]`); anything else as JSON.
 *
 * @example
 * ```ts
 * toolResultText({ content: [{ type: "text", text: "3 matches" }] }); // "3 matches"
 * ```
 */
export function toolResultText(result: unknown): string {
  if (typeof result === "string") return result;
  const content = (result as { content?: unknown } | null)?.content;
  if (Array.isArray(content)) {
    return content
      .map((part: { type?: unknown; text?: unknown }) => (part?.type === "text" && typeof part.text === "string" ? part.text : `[${String(part?.type ?? "unknown")} omitted]`))
      .join("\n");
  }
  return result === undefined ? "" : JSON.stringify(result);
}

function toDynamicTool(tool: AgentToolLike): PluginDynamicTool {
  return {
    name: tool.name,
    description: tool.description ?? tool.label ?? tool.name,
    inputSchema: inputSchemaOf(tool.parameters),
    handler: async (args, ctx) => {
      const params = typeof args === "object" && args !== null && !Array.isArray(args) ? (args as Record<string, unknown>) : {};
      return toolResultText(await tool.execute(ctx?.callId ?? "call", params));
    },
  };
}

/**
 * Resolve the registrations into dynamic tools (factories called once with `ctx`). Throws a `TypeError` naming the
 * tool for a bad name, a duplicate, or a factory that returns something that is not a tool.
 *
 * @example
 * ```ts
 * const tools = resolvePluginTools(registry.tools, { workspaceDir: cwd });
 * ```
 */
export function resolvePluginTools(registrations: readonly ToolRegistration[], ctx: PluginToolFactoryContext): PluginDynamicTool[] {
  const tools: PluginDynamicTool[] = [];
  const seen = new Set<string>();
  for (const registration of registrations) {
    const produced = typeof registration.tool === "function" ? (registration.tool as (c: PluginToolFactoryContext) => unknown)(ctx) : registration.tool;
    const list = produced === null || produced === undefined ? [] : Array.isArray(produced) ? produced : [produced];
    for (const tool of list) {
      const label = registration.opts?.name ?? (tool as { name?: unknown })?.name;
      if (!isAgentTool(tool)) throw new TypeError(`tool ${String(label ?? "(unnamed)")}: expected { name, execute(toolCallId, params) }`);
      if (!TOOL_NAME.test(tool.name)) throw new TypeError(`tool ${tool.name}: names are 1-64 chars of [A-Za-z0-9_-]`);
      if (seen.has(tool.name)) throw new TypeError(`tool ${tool.name}: registered twice`);
      seen.add(tool.name);
      tools.push(toDynamicTool(tool));
    }
  }
  return tools;
}
