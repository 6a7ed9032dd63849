/**
 * Where a plugin spec points: `./path/to/plugin` (a directory or an entry file), an installed package name resolved
 * from the working directory (`lossless-claw`, `@scope/name`), either with an optional `#engine-id` suffix.
 */
import { stat } from "node:fs/promises";
import path from "node:path";
import { PluginLoadError } from "./errors.js";
import { PLUGIN_MANIFEST_FILE, readPluginDescriptor, type PluginDescriptor } from "./manifest.js";

/** A parsed spec: what to load, and which engine id was asked for (when the spec had `#id`). */
export interface ParsedPluginSpec {
  target: string;
  engineId?: string | undefined;
}

/**
 * Split `pkg#engine-id` (the last `#`); a spec without `#` asks for the plugin's only (or manifest-named) engine.
 *
 * @example
 * ```ts
 * parsePluginSpec("lossless-claw#lossless-claw"); // { target: "lossless-claw", engineId: "lossless-claw" }
 * ```
 */
export function parsePluginSpec(spec: string): ParsedPluginSpec {
  const hash = spec.lastIndexOf("#");
  if (hash <= 0 || hash === spec.length - 1) return { target: spec };
  return { target: spec.slice(0, hash), engineId: spec.slice(hash + 1) };
}

const PACKAGE_NAME = /^(@[a-z0-9][\w.-]*\/)?[a-z0-9][\w.-]*$/i;

async function statOrUndefined(file: string) {
  try {
    return await stat(file);
  } catch {
    return undefined;
  }
}

/** The nearest directory at or above `from` holding a plugin manifest, looking no higher than its package root. */
async function findPluginRoot(from: string): Promise<string | undefined> {
  let dir = from;
  for (;;) {
    if (await statOrUndefined(path.join(dir, PLUGIN_MANIFEST_FILE))) return dir;
    if (await statOrUndefined(path.join(dir, "package.json"))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/** `<dir>/node_modules/<name>` for `dir` = cwd and each of its ancestors, as Node resolves packages. */
async function findInstalledPackage(name: string, cwd: string): Promise<string | undefined> {
  let dir = path.resolve(cwd);
  for (;;) {
    const candidate = path.join(dir, "node_modules", name);
    if ((await statOrUndefined(path.join(candidate, "package.json")))?.isFile()) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/** A located plugin: its descriptor and whether the spec named a bare module file (no manifest). */
export interface LocatedPlugin extends PluginDescriptor {
  kind: "path" | "package";
}

/**
 * Find what `target` names. A path that exists wins (so `engine.mjs` keeps working without `./`); otherwise a name
 * that looks like a package is looked up in `node_modules` from `cwd` upwards.
 *
 * @example
 * ```ts
 * const located = await locatePlugin("./plugins/summarizer", process.cwd(), "./plugins/summarizer");
 * ```
 */
export async function locatePlugin(target: string, cwd: string, spec: string): Promise<LocatedPlugin> {
  const asPath = path.resolve(cwd, target);
  const info = await statOrUndefined(asPath);
  if (info?.isDirectory()) return { ...(await readPluginDescriptor(asPath, spec)), kind: "path" };
  if (info?.isFile()) {
    const root = await findPluginRoot(path.dirname(asPath));
    const bare: LocatedPlugin = { rootDir: path.dirname(asPath), entry: asPath, kind: "path" };
    if (root === undefined) return bare;
    const descriptor = await readPluginDescriptor(root, spec);
    // A package.json that says nothing about OpenClaw (e.g. the app's own) does not make the file a plugin.
    if (!descriptor.manifest && !descriptor.packageJson?.openclaw) return bare;
    return { ...descriptor, entry: asPath, kind: "path" };
  }
  const looksLikePath = target.startsWith(".") || path.isAbsolute(target);
  if (!looksLikePath && PACKAGE_NAME.test(target)) {
    const dir = await findInstalledPackage(target, cwd);
    if (dir) return { ...(await readPluginDescriptor(dir, spec)), kind: "package" };
    throw new PluginLoadError("PLUGIN_NOT_FOUND", spec, `no file ${asPath} and no package ${target} installed in node_modules from ${cwd} upwards`);
  }
  throw new PluginLoadError("PLUGIN_NOT_FOUND", spec, `no such file or directory: ${asPath}`);
}
