/**
 * Plugin tools (`api.registerTool`) as the turn host's dynamic tools. A registration is a tool object (OpenClaw's
 * `AnyAgentTool`: `name`, `description`, `parameters` JSON Schema, `execute(toolCallId, params, signal?)`) or a
 * factory `(ctx) => tool | tool[] | null`. A factory is called at load with the context the host knows then (its
 * tools declare what Codex sees), and again, once per session, for the session a call comes from: OpenClaw builds a
 * plugin's tools for each run's session, and a tool such as lossless-claw's `lcm_grep` searches that session's
 * conversation. A host that loads a plugin once and runs many sessions therefore gets each session's own tools.
 */
import type { ToolRegistration } from "./registry.js";

/** A dynamic tool as `runCodexTurn({ dynamicTools })` takes it. */
export interface PluginDynamicTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  handler: (args: unknown, ctx?: { callId?: string | undefined; sessionId?: string | undefined; sessionKey?: string | undefined; signal?: AbortSignal | undefined }) => Promise<string> | string;
}

/** What a tool factory receives (the subset of OpenClaw's `OpenClawPluginToolContext` this host knows). */
export interface PluginToolFactoryContext {
  config?: Record<string, unknown> | undefined;
  workspaceDir?: string | undefined;
  sessionId?: string | undefined;
  sessionKey?: string | undefined;
  oneShotCliRun?: boolean | undefined;
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

interface AgentToolLike {
  name: string;
  description?: string | undefined;
  label?: string | undefined;
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

/** Sessions whose factory-built tools are kept; the oldest is dropped past this (it is rebuilt if it calls again). */
const MAX_TOOL_SESSIONS = 64;

type SessionTools = (session: { sessionId?: string | undefined; sessionKey?: string | undefined }) => ReadonlyMap<string, AgentToolLike>;

/** The tools a factory builds for a session, built once per session (the load-time session reuses the load's). */
function sessionToolsOf(factory: (c: PluginToolFactoryContext) => unknown, loadCtx: PluginToolFactoryContext, atLoad: readonly AgentToolLike[]): SessionTools {
  const byName = (tools: readonly AgentToolLike[]) => new Map(tools.map((t) => [t.name, t] as const));
  const loadTools = byName(atLoad);
  const cache = new Map<string, ReadonlyMap<string, AgentToolLike>>();
  // The load's session does not carry over: a session without a key must not inherit the load-time key.
  const { sessionId: _loadSessionId, sessionKey: _loadSessionKey, ...base } = loadCtx;
  return ({ sessionId, sessionKey }) => {
    if (sessionId === undefined && sessionKey === undefined) return loadTools;
    if (sessionId === loadCtx.sessionId && sessionKey === loadCtx.sessionKey) return loadTools;
    const key = JSON.stringify([sessionId ?? null, sessionKey ?? null]);
    let tools = cache.get(key);
    if (!tools) {
      tools = byName(toolList(factory({ ...base, ...(sessionId !== undefined ? { sessionId } : {}), ...(sessionKey !== undefined ? { sessionKey } : {}) })).filter(isAgentTool));
      if (cache.size >= MAX_TOOL_SESSIONS) cache.delete(cache.keys().next().value!);
      cache.set(key, tools);
    }
    return tools;
  };
}

function toolList(produced: unknown): unknown[] {
  return produced === null || produced === undefined ? [] : Array.isArray(produced) ? produced : [produced];
}

function toDynamicTool(tool: AgentToolLike, forSession?: SessionTools): PluginDynamicTool {
  return {
    name: tool.name,
    description: tool.description ?? tool.label ?? tool.name,
    inputSchema: inputSchemaOf(tool.parameters),
    handler: async (args, ctx) => {
      const params = typeof args === "object" && args !== null && !Array.isArray(args) ? (args as Record<string, unknown>) : {};
      const session = { ...(ctx?.sessionId !== undefined ? { sessionId: ctx.sessionId } : {}), ...(ctx?.sessionKey !== undefined ? { sessionKey: ctx.sessionKey } : {}) };
      const target = forSession ? forSession(session).get(tool.name) : tool;
      if (!target) throw new Error(`tool ${tool.name} is not available in session ${ctx?.sessionKey ?? ctx?.sessionId}: the plugin's tool factory did not build it there`);
      return toolResultText(await target.execute(ctx?.callId ?? "call", params, ctx?.signal));
    },
  };
}

/**
 * Resolve the registrations into dynamic tools (factories called with `ctx` now, and per session when a call comes
 * from another session). Throws a `TypeError` naming the tool for a bad name, a duplicate, or a factory that returns
 * something that is not a tool.
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
    const factory = typeof registration.tool === "function" ? (registration.tool as (c: PluginToolFactoryContext) => unknown) : undefined;
    const list = toolList(factory ? factory(ctx) : registration.tool);
    const forSession = factory ? sessionToolsOf(factory, ctx, list.filter(isAgentTool)) : undefined;
    for (const tool of list) {
      const label = registration.opts?.name ?? (tool as { name?: unknown })?.name;
      if (!isAgentTool(tool)) throw new TypeError(`tool ${String(label ?? "(unnamed)")}: expected { name, execute(toolCallId, params) }`);
      if (!TOOL_NAME.test(tool.name)) throw new TypeError(`tool ${tool.name}: names are 1-64 chars of [A-Za-z0-9_-]`);
      if (seen.has(tool.name)) throw new TypeError(`tool ${tool.name}: registered twice`);
      seen.add(tool.name);
      tools.push(toDynamicTool(tool, forSession));
    }
  }
  return tools;
}
