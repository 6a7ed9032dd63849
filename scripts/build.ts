/**
 * Build what the package ships: a clean `dist/` compiled by `tsc -p tsconfig.build.json`, without the runtime stubs
 * of type-only modules.
 *
 *   npm run build                 # type-check and emit
 *   npm run build -- --noCheck    # emit only (prepack: `npm test` type-checks, the consumer test checks the output)
 *
 * tsc emits a `.js` for every `.ts`, so each type-only module (the ~950 generated protocol files, `types.ts` files)
 * becomes a file holding only `export {};`. Nothing imports those at run time (their importers use `import type`,
 * which is erased), so they are removed; their `.d.ts` stay. A stub that some remaining `.js` does import is kept,
 * since removing it would break that import.
 */
import { execFileSync } from "node:child_process";
import { readFile, readdir, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const DIST_DIR = path.join(repoRoot, "dist");

/** Relative specifiers a compiled module imports or re-exports (static, side-effect and literal dynamic imports). */
export function relativeSpecifiers(js: string): string[] {
  const found: string[] = [];
  const patterns = [/\bfrom\s*["'](\.{1,2}\/[^"']+)["']/g, /\bimport\s*["'](\.{1,2}\/[^"']+)["']/g, /\bimport\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g];
  for (const re of patterns) for (const m of js.matchAll(re)) found.push(m[1]!);
  return found;
}

/**
 * True when a compiled module does nothing at run time: after comments and blank lines only `export {};` is left, or
 * re-exports (`export * from` / `export * as x from`) of modules that are themselves type-only (`isTypeOnly`).
 *
 * @example
 * ```ts
 * isTypeOnlyModule("// GENERATED\nexport {};\n", () => false); // true
 * isTypeOnlyModule("export const x = 1;\n", () => false); // false
 * ```
 */
export function isTypeOnlyModule(js: string, isTypeOnly: (specifier: string) => boolean): boolean {
  const code = js
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("//"));
  return code.every((line) => {
    if (line === "export {};") return true;
    const reexport = /^export \*(?: as [A-Za-z_$][\w$]*)? from ["'](\.{1,2}\/[^"']+)["'];$/.exec(line);
    return reexport !== null && isTypeOnly(reexport[1]!);
  });
}

/** All `.js` files under `dir`, absolute. */
async function listJs(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith(".js")).map((e) => path.join(e.parentPath, e.name));
}

/**
 * Remove the `.js` (and `.js.map`) of every type-only module under `dir` that no runtime module imports. Returns the
 * removed files (absolute) and the type-only modules kept because something imports them.
 *
 * @example
 * ```ts
 * const { removed } = await pruneTypeOnlyModules(DIST_DIR);
 * ```
 */
export async function pruneTypeOnlyModules(dir: string): Promise<{ removed: string[]; kept: string[] }> {
  const files = await listJs(dir);
  const sources = new Map(await Promise.all(files.map(async (f) => [f, await readFile(f, "utf8")] as const)));
  const target = (from: string, spec: string): string => path.resolve(path.dirname(from), spec);
  // Fixed point: a module re-exporting only type-only modules is type-only too (protocol/index.js -> v2/index.js).
  const typeOnly = new Set<string>();
  for (let changed = true; changed; ) {
    changed = false;
    for (const [file, js] of sources) {
      if (typeOnly.has(file) || !isTypeOnlyModule(js, (spec) => typeOnly.has(target(file, spec)))) continue;
      typeOnly.add(file);
      changed = true;
    }
  }
  const imported = new Set<string>();
  for (const [file, js] of sources) {
    if (typeOnly.has(file)) continue;
    for (const spec of relativeSpecifiers(js)) imported.add(target(file, spec));
  }
  const removed = [...typeOnly].filter((f) => !imported.has(f)).sort();
  const kept = [...typeOnly].filter((f) => imported.has(f)).sort();
  await Promise.all(removed.flatMap((f) => [rm(f), rm(`${f}.map`, { force: true })]));
  return { removed, kept };
}

async function main(): Promise<void> {
  const passThrough = process.argv.slice(2);
  await rm(DIST_DIR, { recursive: true, force: true });
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", path.join(repoRoot, "tsconfig.build.json"), ...passThrough], { stdio: "inherit" });
  const { removed, kept } = await pruneTypeOnlyModules(DIST_DIR);
  const remaining = (await listJs(DIST_DIR)).length;
  process.stdout.write(`build: ${remaining} .js modules in dist/, ${removed.length} type-only stubs removed, ${kept.length} kept (imported)\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`build failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
