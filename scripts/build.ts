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
 *
 * Declarations are kept only where a consumer can reach them: from the `types` of package.json "exports", following
 * their imports. The rest (the CLI's internals, protocol types no public signature mentions) cannot be imported
 * through "exports", so they would only fill the tarball.
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

/** Relative specifiers a declaration file refers to (imports, re-exports, `import("...")` types, reference paths). */
export function declarationSpecifiers(dts: string): string[] {
  const found = relativeSpecifiers(dts);
  for (const m of dts.matchAll(/\/\/\/\s*<reference\s+path=["']([^"']+)["']/g)) found.push(m[1]!.startsWith(".") ? m[1]! : `./${m[1]!}`);
  return found;
}

/** The declaration file a specifier names: `./x.js` -> `./x.d.ts`, `./x.mjs` -> `./x.d.mts`, `./x` -> `./x.d.ts` or `./x/index.d.ts`. */
function declarationFor(fromFile: string, spec: string, exists: (file: string) => boolean): string | undefined {
  const base = path.resolve(path.dirname(fromFile), spec);
  const candidates = /\.d\.[mc]?ts$/.test(base)
    ? [base]
    : /\.(m|c)?js$/.test(base)
      ? [base.replace(/\.(m|c)?js$/, (_m, k: string | undefined) => `.d.${k ?? ""}ts`)]
      : [`${base}.d.ts`, path.join(base, "index.d.ts")];
  return candidates.find(exists);
}

/**
 * Remove every `.d.ts` under `dir` that the entry declarations do not reach. Returns the removed files (absolute).
 * Throws when a reachable declaration refers to one that does not exist.
 *
 * @example
 * ```ts
 * await pruneUnreachableDeclarations(DIST_DIR, [path.join(DIST_DIR, "src", "index.d.ts")]);
 * ```
 */
export async function pruneUnreachableDeclarations(dir: string, entries: string[]): Promise<string[]> {
  const all = (await readdir(dir, { recursive: true, withFileTypes: true }))
    .filter((e) => e.isFile() && /\.d\.[mc]?ts$/.test(e.name))
    .map((e) => path.join(e.parentPath, e.name));
  const present = new Set(all);
  const reached = new Set<string>();
  const queue = [...entries];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (reached.has(file)) continue;
    if (!present.has(file)) throw new Error(`declaration ${path.relative(dir, file)} is referred to but was not emitted`);
    reached.add(file);
    for (const spec of declarationSpecifiers(await readFile(file, "utf8"))) {
      const target = declarationFor(file, spec, (f) => present.has(f));
      if (!target) throw new Error(`${path.relative(dir, file)} refers to "${spec}", which has no declaration in ${dir}`);
      queue.push(target);
    }
  }
  const removed = all.filter((f) => !reached.has(f)).sort();
  await Promise.all(removed.map((f) => rm(f)));
  return removed;
}

/** The declaration entry points package.json "exports" names (every `types` condition), absolute. */
async function exportedDeclarations(): Promise<string[]> {
  const pkg = JSON.parse(await readFile(path.join(repoRoot, "package.json"), "utf8")) as { exports: Record<string, unknown> };
  return Object.values(pkg.exports)
    .flatMap((target) => (target && typeof target === "object" && "types" in target ? [String((target as { types: unknown }).types)] : []))
    .map((rel) => path.join(repoRoot, rel));
}

async function main(): Promise<void> {
  const passThrough = process.argv.slice(2);
  await rm(DIST_DIR, { recursive: true, force: true });
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", path.join(repoRoot, "tsconfig.build.json"), ...passThrough], { stdio: "inherit" });
  const { removed, kept } = await pruneTypeOnlyModules(DIST_DIR);
  const declarationsRemoved = await pruneUnreachableDeclarations(DIST_DIR, await exportedDeclarations());
  const remaining = (await listJs(DIST_DIR)).length;
  process.stdout.write(
    `build: ${remaining} .js modules in dist/, ${removed.length} type-only stubs removed (${kept.length} kept: imported), ` +
      `${declarationsRemoved.length} declarations no export reaches removed\n`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`build failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
