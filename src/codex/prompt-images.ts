/**
 * Images sent with a turn's prompt: validated at the boundary (zod), then sent to Codex as `turn/start` input and
 * recorded in the transcript as OpenClaw image parts (`{ type: "image", data, mimeType }`).
 *
 * A host passes either bytes (`{ data, mimeType }`, base64, the shape OpenClaw's transcript and plugins use) or a
 * local file (`{ path }`). A file is read once, here, so the transcript records the bytes the model saw and a bad
 * path fails before anything is written; Codex still gets it as `localImage`, which tells the model the file's path
 * (Codex wraps it as `<image name=[Image #1] path="...">`), exactly as `codex -i <file>` does.
 *
 * Observed with Codex 0.169.0 and the pinned 0.171.0 (test/integration/prompt-images.test.ts): a model whose catalog
 * entry lacks the `image` input modality gets each image replaced by the text "image content omitted because you do
 * not support image input"; an unreadable `localImage` path becomes the text "Codex could not read the local image at
 * ..." (the turn still runs). Both are why the checks below run before the turn: the second can then never happen
 * silently.
 */
import fs from "node:fs";
import path from "node:path";
import { z } from "zod";
import type { UserInput } from "./protocol/v2/UserInput.js";

/** The image types accepted (what the Responses API takes as `input_image`). */
export const PROMPT_IMAGE_MIME_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"] as const;
export type PromptImageMimeType = (typeof PROMPT_IMAGE_MIME_TYPES)[number];

/** Largest image accepted, in decoded bytes (the Responses API's per-image limit is of this order). */
export const MAX_PROMPT_IMAGE_BYTES = 20 * 1024 * 1024;

/**
 * An image as a host passes it: base64 bytes with their type, or a local file.
 *
 * @example
 * ```ts
 * const images: PromptImageInput[] = [{ path: path.resolve("screenshot.png") }, { data: pngBase64, mimeType: "image/png" }];
 * await runCodexTurn({ ...params, prompt: "What is wrong in these?", images });
 * ```
 */
export type PromptImageInput = { data: string; mimeType: string; path?: string | undefined } | { path: string };

/** A validated image: its bytes (base64) and type; `path` when it came from a file (sent to Codex as `localImage`). */
export interface PromptImage {
  data: string;
  mimeType: PromptImageMimeType;
  path?: string | undefined;
}

/** The type an image's first bytes say it is, or undefined. */
export function sniffImageMimeType(bytes: Uint8Array): PromptImageMimeType | undefined {
  const starts = (sig: number[], at = 0) => sig.every((b, i) => bytes[at + i] === b);
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png";
  if (starts([0xff, 0xd8, 0xff])) return "image/jpeg";
  if (starts([0x47, 0x49, 0x46, 0x38]) && (bytes[4] === 0x37 || bytes[4] === 0x39) && bytes[5] === 0x61) return "image/gif";
  if (starts([0x52, 0x49, 0x46, 0x46]) && starts([0x57, 0x45, 0x42, 0x50], 8)) return "image/webp";
  return undefined;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const SUPPORTED = PROMPT_IMAGE_MIME_TYPES.join(", ");

type Issue = { message: string; path: string[] };

function fromBytes(input: { data: string; mimeType: string; path?: string | undefined }): PromptImage | Issue {
  if (input.data.startsWith("data:")) return { message: "must be the base64 payload alone, without a data: URL prefix", path: ["data"] };
  if (input.data.length === 0 || input.data.length % 4 !== 0 || !BASE64.test(input.data)) return { message: "is not base64", path: ["data"] };
  const mimeType = input.mimeType.toLowerCase();
  if (!(PROMPT_IMAGE_MIME_TYPES as readonly string[]).includes(mimeType)) return { message: `must be one of ${SUPPORTED} (got ${input.mimeType})`, path: ["mimeType"] };
  const bytes = Buffer.from(input.data, "base64");
  if (bytes.length > MAX_PROMPT_IMAGE_BYTES) return { message: `image is ${bytes.length} bytes, over the ${MAX_PROMPT_IMAGE_BYTES}-byte limit`, path: ["data"] };
  const sniffed = sniffImageMimeType(bytes);
  if (sniffed !== mimeType) return { message: `the bytes are ${sniffed ?? "not a supported image"}, not ${mimeType}`, path: ["data"] };
  return { data: input.data, mimeType: sniffed, ...(input.path !== undefined ? { path: input.path } : {}) };
}

function fromFile(file: string): PromptImage | Issue {
  const at = { path: ["path"] };
  if (!path.isAbsolute(file)) return { message: `must be an absolute path (got ${file})`, ...at };
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch (error) {
    return { message: `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? "error"})`, ...at };
  }
  if (!stat.isFile()) return { message: `${file} is not a regular file`, ...at };
  if (stat.size > MAX_PROMPT_IMAGE_BYTES) return { message: `${file} is ${stat.size} bytes, over the ${MAX_PROMPT_IMAGE_BYTES}-byte limit`, ...at };
  let bytes: Buffer;
  try {
    // Synchronous: validation runs where the parameters are parsed (synchronously), before anything is written.
    bytes = fs.readFileSync(file);
  } catch (error) {
    return { message: `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? "error"})`, ...at };
  }
  const mimeType = sniffImageMimeType(bytes);
  if (!mimeType) return { message: `${file} is not a PNG, JPEG, GIF or WebP image`, ...at };
  return { data: bytes.toString("base64"), mimeType, path: file };
}

const imageInputSchema = z.union([
  z.object({ data: z.string(), mimeType: z.string(), path: z.string().min(1).optional() }).strict(),
  z.object({ path: z.string().min(1) }).strict(),
]);

/**
 * Zod schema of a turn's images: checks each (type by its first bytes, size, base64, absolute readable path) and
 * resolves files to bytes. An issue names the image and field, e.g. `images.1.path: /x.png is not a regular file`.
 */
export const promptImagesSchema = z.array(imageInputSchema).transform((inputs, ctx): PromptImage[] => {
  const out: PromptImage[] = [];
  inputs.forEach((input, i) => {
    const image = "data" in input ? fromBytes(input) : fromFile(input.path);
    if ("message" in image) ctx.addIssue({ code: "custom", message: image.message, path: [i, ...image.path] });
    else out.push(image);
  });
  return out;
});

/**
 * An image given as base64 bytes, checked as a prompt image is (type by its first bytes, size, base64): the image, or
 * what is wrong with it.
 *
 * @example
 * ```ts
 * const image = checkImageBytes({ data: pngBase64, mimeType: "image/png" });
 * if ("message" in image) console.warn(image.message);
 * ```
 */
export function checkImageBytes(input: { data: string; mimeType: string }): PromptImage | { message: string; path: string[] } {
  return fromBytes({ data: input.data, mimeType: input.mimeType });
}

/**
 * An image of an earlier user message that goes with a turn because its message is part of the context Codex
 * receives (a fresh thread's view, a delta, the prompt wrapper): sent before the prompt text, right after a text item
 * holding `label`, the same text that stands for it in the rendered context.
 */
export interface ContextImage {
  label: string;
  data: string;
  mimeType: PromptImageMimeType;
}

/** Zod schema of a turn's context images (bytes checked as prompt images are). */
export const contextImagesSchema = z
  .array(z.object({ label: z.string().min(1), data: z.string(), mimeType: z.string() }).strict())
  .transform((inputs, ctx): ContextImage[] => {
    const out: ContextImage[] = [];
    inputs.forEach((input, i) => {
      const image = fromBytes(input);
      if ("message" in image) ctx.addIssue({ code: "custom", message: image.message, path: [i, ...image.path] });
      else out.push({ label: input.label, data: image.data, mimeType: image.mimeType });
    });
    return out;
  });

/**
 * The `turn/start` input items of context images: each one's label as text, then the image (a data URL).
 *
 * @example
 * ```ts
 * contextImageInputs([{ label: "[image 3f2a9c1b0d4e (image/png)]", data: "iVBORw0KGgo=", mimeType: "image/png" }]);
 * // [{ type: "text", text: "[image 3f2a9c1b0d4e (image/png)]", text_elements: [] }, { type: "image", url: "data:image/png;base64,iVBORw0KGgo=" }]
 * ```
 */
export function contextImageInputs(images: readonly ContextImage[]): UserInput[] {
  return images.flatMap((image): UserInput[] => [
    { type: "text", text: image.label, text_elements: [] },
    { type: "image", url: `data:${image.mimeType};base64,${image.data}` },
  ]);
}

/**
 * The `turn/start` input item of an image: `localImage` for a file (the model then sees its path), a data URL
 * otherwise.
 *
 * @example
 * ```ts
 * toUserInput({ data: "iVBORw0KGgo=", mimeType: "image/png" }); // { type: "image", url: "data:image/png;base64,iVBORw0KGgo=" }
 * ```
 */
export function toUserInput(image: PromptImage): UserInput {
  return image.path !== undefined ? { type: "localImage", path: image.path } : { type: "image", url: `data:${image.mimeType};base64,${image.data}` };
}

/** The transcript part of an image (OpenClaw's `ImageContent`). */
export function toImagePart(image: PromptImage): { type: "image"; data: string; mimeType: string } {
  return { type: "image", data: image.data, mimeType: image.mimeType };
}

const DATA_URL = /^data:([a-z]+\/[a-z0-9.+-]+);base64,(.*)$/s;

/**
 * The transcript image part of an image Codex echoes in a `userMessage` item: a data URL (what was sent as bytes) is
 * decoded; a `localImage` path is looked up among the images this client sent (their bytes were read once, before
 * the send). Undefined for anything else.
 *
 * @example
 * ```ts
 * imagePartOfInput({ type: "image", url: "data:image/png;base64,iVBORw0KGgo=" }, new Map()); // { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }
 * ```
 */
export function imagePartOfInput(
  input: { type: string; url?: unknown; path?: unknown },
  sentFiles: ReadonlyMap<string, PromptImage>,
): { type: "image"; data: string; mimeType: string } | undefined {
  if (input.type === "image" && typeof input.url === "string") {
    const m = DATA_URL.exec(input.url);
    return m ? { type: "image", data: m[2]!, mimeType: m[1]! } : undefined;
  }
  if (input.type === "localImage" && typeof input.path === "string") {
    const image = sentFiles.get(input.path);
    return image ? toImagePart(image) : undefined;
  }
  return undefined;
}
