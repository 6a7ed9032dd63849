/**
 * zod schemas for the subset of app-server messages this client consumes. Objects are loose (unknown fields pass
 * through) so a newer Codex adding fields does not break us; a missing or mistyped field we rely on is a validation
 * failure that is counted and logged by method name only.
 */
import { z } from "zod";

const requestId = z.union([z.string(), z.number()]);

/** `{id, result}` or `{id, error}`. */
export const responseEnvelopeSchema = z.looseObject({
  id: requestId,
  result: z.unknown().optional(),
  error: z
    .looseObject({
      code: z.number(),
      message: z.string(),
      data: z.unknown().optional(),
    })
    .optional(),
});

/** Server -> client request `{id, method, params}`. */
export const serverRequestEnvelopeSchema = z.looseObject({
  id: requestId,
  method: z.string().min(1),
  params: z.unknown().optional(),
});

/** Notification `{method, params, emittedAtMs?}`. */
export const notificationEnvelopeSchema = z.looseObject({
  method: z.string().min(1),
  params: z.unknown().optional(),
  emittedAtMs: z.number().optional(),
});

export const codexErrorInfoSchema = z.union([z.string(), z.record(z.string(), z.unknown())]);

export const turnErrorSchema = z.looseObject({
  message: z.string(),
  codexErrorInfo: codexErrorInfoSchema.nullable().optional(),
  additionalDetails: z.string().nullable().optional(),
});

export const turnSchema = z.looseObject({
  id: z.string().min(1),
  /** "completed" | "interrupted" | "failed" | "inProgress" in 0.169.0; kept open so a new status cannot hide turn/completed. */
  status: z.string().min(1),
  error: turnErrorSchema.nullable().optional(),
  items: z.array(z.unknown()).optional(),
  durationMs: z.number().nullable().optional(),
});

const itemBase = {
  id: z.string().min(1),
  startedAtMs: z.number().nullable().optional(),
  completedAtMs: z.number().nullable().optional(),
};

const userInputSchema = z.looseObject({ type: z.string(), text: z.string().optional() });

export const userMessageItemSchema = z.looseObject({
  type: z.literal("userMessage"),
  ...itemBase,
  content: z.array(userInputSchema),
});
export const agentMessageItemSchema = z.looseObject({
  type: z.literal("agentMessage"),
  ...itemBase,
  text: z.string(),
  phase: z.string().nullable().optional(),
});
export const reasoningItemSchema = z.looseObject({
  type: z.literal("reasoning"),
  ...itemBase,
  summary: z.array(z.string()),
  content: z.array(z.string()).optional().default([]),
});
export const dynamicToolContentItemSchema = z.union([
  z.looseObject({ type: z.literal("inputText"), text: z.string() }),
  z.looseObject({ type: z.literal("inputImage"), imageUrl: z.string() }),
  z.looseObject({ type: z.literal("inputAudio"), audioUrl: z.string() }),
  z.looseObject({ type: z.string() }),
]);
export const dynamicToolCallItemSchema = z.looseObject({
  type: z.literal("dynamicToolCall"),
  ...itemBase,
  namespace: z.string().nullable().optional(),
  tool: z.string(),
  arguments: z.unknown(),
  status: z.string().min(1),
  contentItems: z.array(dynamicToolContentItemSchema).nullable().optional(),
  success: z.boolean().nullable().optional(),
  durationMs: z.number().nullable().optional(),
});
export const contextCompactionItemSchema = z.looseObject({ type: z.literal("contextCompaction"), ...itemBase });
/** Any other item type: only the discriminator and id are relied on. */
export const otherItemSchema = z.looseObject({ type: z.string().min(1), ...itemBase });

export type UserMessageItem = z.infer<typeof userMessageItemSchema>;
export type AgentMessageItem = z.infer<typeof agentMessageItemSchema>;
export type ReasoningItem = z.infer<typeof reasoningItemSchema>;
export type DynamicToolCallItem = z.infer<typeof dynamicToolCallItemSchema>;
export type ContextCompactionItem = z.infer<typeof contextCompactionItemSchema>;
export type OtherItem = z.infer<typeof otherItemSchema> & { type: string };
export type ParsedThreadItem =
  | UserMessageItem
  | AgentMessageItem
  | ReasoningItem
  | DynamicToolCallItem
  | ContextCompactionItem
  | OtherItem;

const itemSchemaByType: Record<string, z.ZodType<ParsedThreadItem>> = {
  userMessage: userMessageItemSchema,
  agentMessage: agentMessageItemSchema,
  reasoning: reasoningItemSchema,
  dynamicToolCall: dynamicToolCallItemSchema,
  contextCompaction: contextCompactionItemSchema,
};

/** Validate a thread item with the schema of its `type` (unknown types only need `type` and `id`). */
export const threadItemSchema: z.ZodType<ParsedThreadItem> = z.unknown().transform((raw, ctx) => {
  const base = otherItemSchema.safeParse(raw);
  if (!base.success) {
    for (const issue of base.error.issues) ctx.addIssue({ ...issue, code: "custom", message: issue.message });
    return z.NEVER;
  }
  const specific = itemSchemaByType[base.data.type];
  if (!specific) return base.data;
  const parsed = specific.safeParse(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) ctx.addIssue({ ...issue, code: "custom", message: issue.message });
    return z.NEVER;
  }
  return parsed.data;
}) as unknown as z.ZodType<ParsedThreadItem>;

export const tokenUsageBreakdownSchema = z.looseObject({
  totalTokens: z.number(),
  inputTokens: z.number(),
  cachedInputTokens: z.number(),
  cacheWriteInputTokens: z.number().optional().default(0),
  outputTokens: z.number(),
  reasoningOutputTokens: z.number(),
});

const threadTurn = { threadId: z.string().min(1), turnId: z.string().min(1) };

/** Params schemas of the notifications we consume, keyed by method. */
export const consumedNotificationSchemas = {
  "turn/started": z.looseObject({ threadId: z.string().min(1), turn: turnSchema }),
  "turn/completed": z.looseObject({ threadId: z.string().min(1), turn: turnSchema }),
  "item/started": z.looseObject({ ...threadTurn, item: threadItemSchema, startedAtMs: z.number().optional() }),
  "item/completed": z.looseObject({ ...threadTurn, item: threadItemSchema, completedAtMs: z.number().optional() }),
  "item/agentMessage/delta": z.looseObject({ ...threadTurn, itemId: z.string(), delta: z.string() }),
  "item/reasoning/summaryTextDelta": z.looseObject({
    ...threadTurn,
    itemId: z.string(),
    delta: z.string(),
    summaryIndex: z.number(),
  }),
  "item/reasoning/textDelta": z.looseObject({ ...threadTurn, itemId: z.string(), delta: z.string(), contentIndex: z.number() }),
  "thread/tokenUsage/updated": z.looseObject({
    ...threadTurn,
    tokenUsage: z.looseObject({
      total: tokenUsageBreakdownSchema,
      last: tokenUsageBreakdownSchema,
      modelContextWindow: z.number().nullable().optional(),
    }),
  }),
  error: z.looseObject({ ...threadTurn, error: turnErrorSchema, willRetry: z.boolean() }),
  "thread/closed": z.looseObject({ threadId: z.string().min(1) }),
  // Codex answered with another model than asked (the Responses API's `openai-model` header; e.g. a high-risk-cyber fallback).
  "model/rerouted": z.looseObject({ ...threadTurn, fromModel: z.string(), toModel: z.string(), reason: z.string() }),
  // A concise message for the user; `threadId` null when it is about the process, not a thread.
  warning: z.looseObject({ threadId: z.string().nullish(), message: z.string() }),
  // The approvals reviewer's (guardian's) concise message for the user about a thread; Codex's own exec mode prints
  // it exactly as a `warning`.
  guardianWarning: z.looseObject({ threadId: z.string().min(1), message: z.string() }),
  "thread/status/changed": z.looseObject({
    threadId: z.string().min(1),
    status: z.looseObject({ type: z.string() }),
  }),
} as const;

export type ConsumedMethod = keyof typeof consumedNotificationSchemas;
export type ConsumedParams<M extends ConsumedMethod> = z.infer<(typeof consumedNotificationSchemas)[M]>;

/** A validated notification of a method we consume (typed params). Narrow with `n.consumed && n.method === "..."`. */
export type ConsumedNotification = {
  [M in ConsumedMethod]: { consumed: true; method: M; params: ConsumedParams<M>; emittedAtMs?: number | undefined };
}[ConsumedMethod];
/** A known notification we do not interpret (params untouched). */
export interface PassthroughNotification {
  consumed: false;
  method: string;
  params: unknown;
  emittedAtMs?: number | undefined;
}
export type IncomingNotification = ConsumedNotification | PassthroughNotification;

export function isConsumedMethod(method: string): method is ConsumedMethod {
  return Object.prototype.hasOwnProperty.call(consumedNotificationSchemas, method);
}

// Response schemas for the requests we make (only what we read).
export const initializeResultSchema = z.looseObject({ userAgent: z.string(), codexHome: z.string().optional() });
export const threadResultSchema = z.looseObject({
  thread: z.looseObject({ id: z.string().min(1) }),
  model: z.string().optional(),
  modelProvider: z.string().optional(),
});
export const turnStartResultSchema = z.looseObject({ turn: turnSchema });
export const turnSteerResultSchema = z.looseObject({ turnId: z.string().min(1) });

/** `item/tool/call` params. */
export const dynamicToolCallParamsSchema = z.looseObject({
  threadId: z.string().min(1),
  turnId: z.string().min(1),
  callId: z.string().min(1),
  namespace: z.string().nullable().optional(),
  tool: z.string().min(1),
  arguments: z.unknown(),
});
