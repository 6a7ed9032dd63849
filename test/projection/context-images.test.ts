/**
 * Images of earlier user messages in the context a turn sends (src/projection/context-images.ts): which ones go with
 * the turn, in what order, and what stands for them in the rendered text.
 */
import { describe, expect, it } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import type { AssembleOutput, ProjectionOutput } from "../../machines/turn.contract.js";
import {
  MAX_CONTEXT_IMAGES,
  contextImageOfPart,
  projectAssembledContext,
  renderMessageBlock,
  selectContextImages,
  type ProjectAssembledContextParams,
} from "../../src/projection/index.js";
import { startTurnSchema } from "../../src/codex/options.js";
import { contextImageInputs } from "../../src/codex/prompt-images.js";
import type { ThreadBinding } from "../../src/transcript/binding.js";
import { deepFreeze, markDeepFrozen } from "../../src/transcript/freeze.js";

/** A real 1x1 PNG. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
/** A different valid PNG: the same bytes with an extra trailing chunk byte pattern (still sniffed as PNG). */
const pngVariant = (n: number): string => Buffer.concat([Buffer.from(PNG, "base64"), Buffer.from([n, n, n])]).toString("base64");
const fingerprints = { dynamicTools: "t", engineId: "e", policy: "p" };
const PROMPT = "What next?";
const image = (data = PNG, mimeType = "image/png") => ({ type: "image", data, mimeType });
const userWith = (text: string, ...images: object[]): AgentMessage => ({ role: "user", content: [{ type: "text", text }, ...images], timestamp: 1 }) as AgentMessage;
const assistant = (text: string): AgentMessage => ({ role: "assistant", content: [{ type: "text", text }], timestamp: 2 }) as AgentMessage;
const toolResultWith = (...images: object[]): AgentMessage =>
  ({ role: "toolResult", toolCallId: "c1", toolName: "shot", content: [{ type: "text", text: "shot taken" }, ...images], timestamp: 3 }) as AgentMessage;

function params(overrides: Partial<ProjectAssembledContextParams>): ProjectAssembledContextParams {
  return { mode: "auto", prompt: PROMPT, history: [], origins: [], fingerprints, ...overrides };
}
const assembled = (messages: AgentMessage[]): AssembleOutput => ({ messages, estimatedTokens: 10 });
const sentText = (out: ProjectionOutput) => [out.promptText, ...Object.values(out.additionalContext ?? {}).map((e) => e.value)].join("\n");
const labelOf = (data = PNG) => contextImageOfPart(image(data))!.label;

describe("context images", () => {
  it("a fresh thread's view sends a user message's image after its label; the block names it by content hash", () => {
    const view = [userWith("see this", image()), assistant("a red pixel")];
    const out = projectAssembledContext(params({ mode: "delta", assembled: assembled(view) }));
    const label = labelOf();
    expect(label).toMatch(/^\[image [0-9a-f]{12} \(image\/png\)\]$/);
    expect(sentText(out)).toContain(`[user]\nsee this\n${label}`);
    expect(out.contextImages).toEqual([{ label, data: PNG, mimeType: "image/png" }]);
    // What the turn sends before its prompt: the label as text, then the image.
    expect(contextImageInputs(out.contextImages as never)).toEqual([
      { type: "text", text: label, text_elements: [] },
      { type: "image", url: `data:image/png;base64,${PNG}` },
    ]);
  });

  it("tool-result images, bad bytes and a wrong type still render [image omitted] and are not sent", () => {
    const view = [toolResultWith(image()), userWith("bad", image(PNG, "image/jpeg"), image("not base64!", "image/png"), image(PNG, "image/tiff"))];
    const out = projectAssembledContext(params({ mode: "delta", assembled: assembled(view) }));
    expect(out.contextImages).toBeUndefined();
    expect(sentText(out).split("[image omitted]").length - 1).toBe(4);
  });

  it("a block's text does not depend on whether its image is attached, so the ledger unit is stable", () => {
    const message = userWith("see this", image());
    // A history message (deep-frozen by the history cache: its image check is cached) renders the same.
    const frozen = markDeepFrozen(deepFreeze(structuredClone(message)));
    expect(renderMessageBlock(frozen)).toBe(renderMessageBlock(message));
    expect(renderMessageBlock(frozen)).toBe(renderMessageBlock(frozen));
    expect(renderMessageBlock(message)).toBe(`[user]\nsee this\n${labelOf()}`);
  });

  it("a resumed thread that holds the message gets nothing; a block it lacks brings its image", () => {
    const held = userWith("held one", image(pngVariant(1)));
    const fresh = userWith("new one", image(pngVariant(2)));
    const binding: ThreadBinding = {
      version: 1,
      threadId: "thread-A",
      dynamicToolsFingerprint: "t",
      engineId: "e",
      policyFingerprint: "p",
      projectionMode: "delta",
      heldTurnIds: ["turn-1"],
      ledger: [],
    };
    const history = [held, assistant("ok")];
    const origins = [{ threadId: "thread-A", turnId: "turn-1" }, { threadId: "thread-A", turnId: "turn-1" }];
    const out = projectAssembledContext(params({ mode: "delta", history, origins, binding, assembled: assembled([...history, fresh]) }));
    expect(out.thread.action).toBe("resume");
    expect(out.contextImages?.map((i) => i.label)).toEqual([labelOf(pngVariant(2))]);
  });

  it("prompt mode attaches the images named in the wrapper text", () => {
    const out = projectAssembledContext(params({ mode: "prompt", assembled: assembled([userWith("see this", image())]) }));
    expect(out.promptText).toContain(labelOf());
    expect(out.contextImages?.map((i) => i.label)).toEqual([labelOf()]);
  });

  it(`keeps the ${MAX_CONTEXT_IMAGES} newest in the order they appear, and sends a repeated image once`, () => {
    const view = Array.from({ length: 10 }, (_, i) => userWith(`m${i}`, image(pngVariant(i)))).concat(userWith("again", image(pngVariant(9))));
    const out = projectAssembledContext(params({ mode: "delta", assembled: assembled(view) }));
    expect(out.contextImages?.map((i) => i.label)).toEqual(Array.from({ length: 8 }, (_, i) => labelOf(pngVariant(i + 2))));
  });

  it("selects only images whose labels were sent", () => {
    const view = [userWith("a", image(pngVariant(1))), userWith("b", image(pngVariant(2)))];
    expect(selectContextImages(view, `text ${labelOf(pngVariant(2))}`).map((i) => i.label)).toEqual([labelOf(pngVariant(2))]);
    expect(selectContextImages(view, "no labels here")).toEqual([]);
  });

  it("the client checks context images' bytes as it checks prompt images, naming the field", () => {
    const bad = startTurnSchema.safeParse({ threadId: "t", text: "x", contextImages: [{ label: "[image x (image/png)]", data: PNG, mimeType: "image/gif" }] });
    expect(bad.success).toBe(false);
    expect(bad.error!.issues[0]).toMatchObject({ path: ["contextImages", 0, "data"], message: "the bytes are image/png, not image/gif" });
    const good = startTurnSchema.parse({ threadId: "t", text: "x", contextImages: [{ label: "[image x (image/png)]", data: PNG, mimeType: "image/png" }] });
    expect(good.contextImages).toEqual([{ label: "[image x (image/png)]", data: PNG, mimeType: "image/png" }]);
  });
});
