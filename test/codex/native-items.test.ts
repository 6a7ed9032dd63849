/**
 * Native items the offline integration tests cannot all produce: sub-agent calls in every shape, and image generations
 * (Codex 0.169.0 offers `image_generation` only to OpenAI's own provider, so the fake model cannot trigger one). Item
 * shapes follow the pinned binary's generated protocol types (`ThreadItem`, `ImageGenerationItem`).
 */
import { describe, expect, it } from "vitest";
import { validateNotification } from "../../src/codex/rpc.js";
import { nativeView, projectNative, type NativeItem } from "../../src/codex/native-items.js";
import type { ParsedThreadItem } from "../../src/codex/schemas.js";
import { TurnProjector } from "../../src/codex/turn-projector.js";

const project = (item: Record<string, unknown>, completed = true): NativeItem | undefined => projectNative(item as ParsedThreadItem, completed);
const view = (item: Record<string, unknown>) => {
  const projected = project(item);
  if (!projected) throw new Error("item did not project");
  return nativeView(projected, 16_000);
};

const collab = (over: Record<string, unknown> = {}) => ({
  type: "collabAgentToolCall",
  id: "call_1",
  tool: "wait",
  status: "completed",
  senderThreadId: "parent",
  receiverThreadIds: ["agent-b", "agent-a"],
  prompt: null,
  model: null,
  reasoningEffort: null,
  agentsStates: { "agent-b": { status: "completed", message: "bee" }, "agent-a": { status: "running", message: null } },
  ...over,
});

describe("sub-agent calls (collabAgentToolCall)", () => {
  it("names the call as the model did and reports each agent's status and last message", () => {
    expect(view(collab())).toEqual({
      toolName: "wait_agent",
      arguments: { targets: ["agent-b", "agent-a"] },
      resultText: "Status: completed\nAgent agent-b: completed\nbee\nAgent agent-a: running",
      isError: false,
      awaitsOutput: true,
    });
  });

  it("does not depend on the order Codex sends the agents' states in (the record must be byte-stable)", () => {
    const reordered = collab({ agentsStates: { "agent-a": { status: "running", message: null }, "agent-b": { status: "completed", message: "bee" } } });
    expect(JSON.stringify(project(reordered))).toBe(JSON.stringify(project(collab())));
    expect(JSON.stringify(view(reordered))).toBe(JSON.stringify(view(collab())));
  });

  it("a spawn carries the task, a requested model and effort; its result names the new agent", () => {
    const spawn = collab({ tool: "spawnAgent", prompt: "count", model: "gpt-x", reasoningEffort: "high", receiverThreadIds: ["agent-c"], agentsStates: { "agent-c": { status: "pendingInit", message: null } } });
    expect(view(spawn)).toMatchObject({
      toolName: "spawn_agent",
      arguments: { message: "count", model: "gpt-x", reasoning_effort: "high" },
      resultText: "Status: completed\nSpawned agent agent-c: pendingInit",
    });
    // Codex reports the model as "" while the spawn is in progress: no model argument then.
    expect(view(collab({ tool: "spawnAgent", prompt: "count", model: "", receiverThreadIds: [], agentsStates: {} }))?.arguments).toEqual({ message: "count" });
  });

  it("a failed or interrupted call is an error; an unknown tool keeps Codex's name", () => {
    expect(view(collab({ status: "failed" }))?.isError).toBe(true);
    expect(view(collab({ status: "interrupted" }))?.isError).toBe(true);
    expect(view(collab({ tool: "someFutureTool" }))?.toolName).toBe("someFutureTool");
    expect(view(collab({ tool: "closeAgent" }))?.toolName).toBe("close_agent");
  });

  it("an item that does not fit the shape is not projected (it stays kind 'other' in the record)", () => {
    expect(project({ type: "collabAgentToolCall", id: "x", status: "completed" })).toBeUndefined();
    expect(project({ type: "imageView", id: "x" })).toBeUndefined();
  });
});

describe("image views and generations", () => {
  it("view_image keeps the path, not the pixels", () => {
    expect(view({ type: "imageView", id: "call_v", path: "/w/shot.png" })).toEqual({
      toolName: "view_image",
      arguments: { path: "/w/shot.png" },
      resultText: "Viewed image: /w/shot.png",
      isError: false,
      awaitsOutput: true,
    });
  });

  it("an image generation names the saved file, or the failure; it is a hosted tool", () => {
    const done = { type: "imageGeneration", id: "ig_1", status: "completed", revisedPrompt: "a red square", failure: null, savedPath: "/codex/images/ig_1.png" };
    expect(view(done)).toEqual({
      toolName: "image_generation",
      arguments: { prompt: "a red square" },
      resultText: "Image saved to /codex/images/ig_1.png",
      isError: false,
      awaitsOutput: false,
    });
    // The pinned protocol's only failure: a usage limit (the item then has no saved file).
    const failed = { ...done, status: "failed", savedPath: undefined, failure: { type: "usageLimitExceeded", limitId: "images", resetsAt: null } };
    expect(view(failed)).toMatchObject({ resultText: "Error: usageLimitExceeded", isError: true });
    // The image bytes Codex may include (`result`, base64) never reach the record.
    expect(JSON.stringify(project({ ...done, result: "iVBORw0KGgo=" }))).not.toContain("iVBORw0KGgo");
  });

  it("in a turn record, a response whose only tool is an image generation keeps stopReason 'stop'", () => {
    const threadId = "t1";
    const turnId = "u1";
    const raw = [
      { method: "turn/started", params: { threadId, turn: { id: turnId, items: [], status: "inProgress", error: null } } },
      { method: "item/completed", params: { threadId, turnId, item: { type: "userMessage", id: "m0", content: [{ type: "text", text: "draw" }], startedAtMs: 1, completedAtMs: 1 } } },
      { method: "item/completed", params: { threadId, turnId, item: { type: "agentMessage", id: "m1", text: "here", phase: null, startedAtMs: 2, completedAtMs: 2 } } },
      { method: "item/completed", params: { threadId, turnId, item: { type: "imageGeneration", id: "ig_1", status: "completed", revisedPrompt: null, failure: null, savedPath: "/i.png", completedAtMs: 3 } } },
      { method: "turn/completed", params: { threadId, turn: { id: turnId, items: [], status: "completed", error: null } } },
    ];
    const p = new TurnProjector({ threadId, turnId, originalPrompt: "draw" });
    for (const r of raw) {
      const c = validateNotification(r);
      if (c.kind !== "ok") throw new Error(`not ok: ${r.method}`);
      p.apply(c.notification);
    }
    const record = p.finish();
    expect(record.messagesSnapshot).toMatchObject([
      { role: "user", content: "draw" },
      { role: "assistant", stopReason: "stop", content: [{ type: "text", text: "here" }, { type: "toolCall", id: "ig_1", name: "image_generation", arguments: {} }] },
      { role: "toolResult", toolCallId: "ig_1", toolName: "image_generation", content: [{ type: "text", text: "Image saved to /i.png" }], isError: false },
    ]);
    // The saved file is the turn's media (OpenClaw forwards exactly it as the reply's image).
    expect(record.generatedImages).toEqual([{ itemId: "ig_1", path: "/i.png" }]);
  });

  it("a turn record lists only the images Codex saved, in order; none means no field", () => {
    const threadId = "t1";
    const turnId = "u1";
    const gen = (id: string, savedPath: string | null, status = "completed") => ({ method: "item/completed", params: { threadId, turnId, item: { type: "imageGeneration", id, status, revisedPrompt: null, failure: savedPath ? null : { type: "usageLimitExceeded" }, savedPath, completedAtMs: 3 } } });
    const run = (items: unknown[]) => {
      const p = new TurnProjector({ threadId, turnId, originalPrompt: "draw" });
      for (const r of items) {
        const c = validateNotification(r);
        if (c.kind !== "ok") throw new Error("not ok");
        p.apply(c.notification);
      }
      return p.finish();
    };
    expect(run([gen("ig_1", "/a.png"), gen("ig_2", null, "failed"), gen("ig_3", "/b.png")]).generatedImages).toEqual([
      { itemId: "ig_1", path: "/a.png" },
      { itemId: "ig_3", path: "/b.png" },
    ]);
    expect(run([gen("ig_2", null, "failed")])).not.toHaveProperty("generatedImages");
  });
});
