/**
 * OpenClaw plugin manifests: `openclaw.plugin.json` (id, name, config schema) and `package.json#openclaw`
 * (`extensions`: the runtime entry files). Validated with zod; a bad one is a `MANIFEST_INVALID` {@link PluginLoadError}
 * naming the file and the field.
 */
import { realpath } from "node:fs/promises";
import { readRegularTextFile } from "../regular-file.js";
import path from "node:path";
import { z } from "zod";
import { PluginLoadError } from "./errors.js";

export const PLUGIN_MANIFEST_FILE = "openclaw.plugin.json";

const pluginManifestSchema = z.looseObject({
  id: z.string().min(1, "must be a non-empty string"),
  name: z.string().optional(),
  description: z.string().optional(),
  version: z.string().optional(),
  kind: z.union([z.string(), z.array(z.string())]).optional(),
  configSchema: z.record(z.string(), z.unknown()).optional(),
});

const packageJsonSchema = z.looseObject({
  name: z.string().optional(),
  version: z.string().optional(),
  main: z.string().optional(),
  openclaw: z
    .looseObject({
      extensions: z.array(z.string().min(1, "entries must be non-empty paths")).min(1, "must list at least one entry").optional(),
    })
    .optional(),
});

/** `openclaw.plugin.json` as far as the host reads it. */
export type PluginManifest = z.infer<typeof pluginManifestSchema>;
/** `package.json` as far as the host reads it. */
export type PluginPackageJson = z.infer<typeof packageJsonSchema>;

/** What a plugin directory declares. Either file may be absent (a bare engine module has neither). */
export interface PluginDescriptor {
  rootDir: string;
  manifest?: PluginManifest | undefined;
  packageJson?: PluginPackageJson | undefined;
  /** Absolute entry file: `openclaw.extensions[0]`, else `main`, else `index.js`. */
  entry: string;
}

async function readJsonFile(file: string, spec: string): Promise<unknown | undefined> {
  let text: string;
  try {
    text = await readRegularTextFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new PluginLoadError("MANIFEST_INVALID", spec, `${path.basename(file)}: cannot read: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new PluginLoadError("MANIFEST_INVALID", spec, `${path.basename(file)}: not valid JSON: ${(error as Error).message}`);
  }
}

function parseWith<T>(schema: z.ZodType<T>, value: unknown, file: string, spec: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue && issue.path.length > 0 ? issue.path.map(String).join(".") : "(root)";
  throw new PluginLoadError("MANIFEST_INVALID", spec, `${file}: ${field} ${issue?.message ?? "is invalid"}`);
}

function isInside(root: string, candidate: string): boolean {
  const rel = path.relative(root, candidate);
  return rel === "" || (!rel.startsWith(`..${path.sep}`) && rel !== ".." && !path.isAbsolute(rel));
}

async function realpathOrSelf(p: string): Promise<string> {
  try {
    return await realpath(p);
  } catch {
    return p;
  }
}

/**
 * Read a plugin directory's manifests and pick its entry file.
 *
 * @example
 * ```ts
 * const d = await readPluginDescriptor("/plugins/lossless-claw", "lossless-claw");
 * d.manifest?.id; // "lossless-claw"
 * d.entry;        // "/plugins/lossless-claw/dist/index.js"
 * ```
 */
export async function readPluginDescriptor(rootDir: string, spec: string): Promise<PluginDescriptor> {
  const rawManifest = await readJsonFile(path.join(rootDir, PLUGIN_MANIFEST_FILE), spec);
  const rawPackage = await readJsonFile(path.join(rootDir, "package.json"), spec);
  const manifest = rawManifest === undefined ? undefined : parseWith(pluginManifestSchema, rawManifest, PLUGIN_MANIFEST_FILE, spec);
  const packageJson = rawPackage === undefined ? undefined : parseWith(packageJsonSchema, rawPackage, "package.json", spec);
  const relativeEntry = packageJson?.openclaw?.extensions?.[0] ?? packageJson?.main ?? "index.js";
  const entry = path.resolve(rootDir, relativeEntry);
  // Real paths: an entry that is a symlink, or under a symlinked directory, must resolve inside the plugin directory
  // too (a missing entry is judged by its path; loading it fails later, naming it).
  if (!isInside(rootDir, entry) || !isInside(await realpathOrSelf(rootDir), await realpathOrSelf(entry))) {
    throw new PluginLoadError("MANIFEST_INVALID", spec, `package.json: entry ${relativeEntry} points outside the plugin directory`);
  }
  return {
    rootDir,
    ...(manifest ? { manifest } : {}),
    ...(packageJson ? { packageJson } : {}),
    entry,
  };
}
