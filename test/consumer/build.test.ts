/**
 * scripts/build.ts removes the `.js` that tsc emits for type-only modules (only `export {};`) unless some runtime
 * module imports it, and the declarations no package export reaches. Checked on small compiled trees.
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { declarationSpecifiers, isTypeOnlyModule, pruneTypeOnlyModules, pruneUnreachableDeclarations, relativeSpecifiers } from "../../scripts/build.js";

const tmp: string[] = [];
afterAll(async () => {
  await Promise.all(tmp.map((d) => rm(d, { recursive: true, force: true })));
});

async function tree(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "ctm-build-"));
  tmp.push(dir);
  for (const [rel, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await writeFile(path.join(dir, rel), text);
  }
  return dir;
}

async function list(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true }))
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

describe("type-only module pruning", () => {
  it("recognizes stubs and re-exports of stubs, not modules with code", () => {
    expect(isTypeOnlyModule("// GENERATED CODE! DO NOT MODIFY BY HAND!\nexport {};\n", () => false)).toBe(true);
    expect(isTypeOnlyModule("/** doc */\nexport {};\n//# sourceMappingURL=x.js.map\n", () => false)).toBe(true);
    expect(isTypeOnlyModule('export * as v2 from "./v2/index.js";\n', (s) => s === "./v2/index.js")).toBe(true);
    expect(isTypeOnlyModule('export * as v2 from "./v2/index.js";\n', () => false)).toBe(false);
    expect(isTypeOnlyModule("export const x = 1;\n", () => true)).toBe(false);
    expect(isTypeOnlyModule('import "./side-effect.js";\nexport {};\n', () => true)).toBe(false);
  });

  it("finds static, side-effect and dynamic relative imports", () => {
    expect(relativeSpecifiers('import { a } from "./a.js";\nimport "../b.js";\nawait import("./c.js");\nexport * from "./d.js";\nimport x from "pkg";')).toEqual([
      "./a.js",
      "./d.js",
      "../b.js",
      "./c.js",
    ]);
  });

  it("removes unimported stubs (and their maps), keeps imported ones and every runtime module", async () => {
    const dir = await tree({
      "index.js": 'export { run } from "./run.js";\nexport * from "./kept-types.js";\n',
      "index.d.ts": "export {};\n",
      "run.js": 'export function run() { return import("./lazy.js"); }\n',
      "lazy.js": "export const lazy = 1;\n",
      "kept-types.js": "export {};\n",
      "types.js": "export {};\n",
      "types.js.map": "{}",
      "types.d.ts": "export type T = 1;\n",
      "protocol/index.js": 'export * as v2 from "./v2/index.js";\n',
      "protocol/A.js": "// GENERATED\nexport {};\n",
      "protocol/v2/index.js": "export {};\n",
    });
    const { removed, kept } = await pruneTypeOnlyModules(dir);
    expect(removed.map((f) => path.relative(dir, f))).toEqual(["protocol/A.js", "protocol/index.js", "protocol/v2/index.js", "types.js"]);
    expect(kept.map((f) => path.relative(dir, f))).toEqual(["kept-types.js"]);
    expect(await list(dir)).toEqual(["index.d.ts", "index.js", "kept-types.js", "lazy.js", "run.js", "types.d.ts"]);
  });

  it("keeps the declarations the entry points reach (imports, import() types, directories), removes the rest", async () => {
    expect(declarationSpecifiers('/// <reference path="g.d.ts" />\nimport type { A } from "./a.js";\ntype B = import("./b.js").B;')).toEqual([
      "./a.js",
      "./b.js",
      "./g.d.ts",
    ]);
    const dir = await tree({
      "index.d.ts": 'export type { A } from "./a.js";\nexport type B = import("./b.js").B;\nexport * as v2 from "./v2";\n',
      "a.d.ts": 'import type { C } from "./deep/c.js";\nexport type A = C;\n',
      "b.d.ts": "export type B = 1;\n",
      "deep/c.d.ts": "export type C = 2;\n",
      "v2/index.d.ts": "export type V = 3;\n",
      "cli/main.d.ts": 'import type { A } from "../a.js";\nexport declare function main(a: A): number;\n',
      "unused.d.ts": "export type U = 4;\n",
      "index.js": "export {};\n",
    });
    const removed = await pruneUnreachableDeclarations(dir, [path.join(dir, "index.d.ts")]);
    expect(removed.map((f) => path.relative(dir, f))).toEqual(["cli/main.d.ts", "unused.d.ts"]);
    expect(await list(dir)).toEqual(["a.d.ts", "b.d.ts", "deep/c.d.ts", "index.d.ts", "index.js", "v2/index.d.ts"]);
    const broken = await tree({ "index.d.ts": 'export type { A } from "./missing.js";\n' });
    await expect(pruneUnreachableDeclarations(broken, [path.join(broken, "index.d.ts")])).rejects.toThrow(/refers to "\.\/missing\.js"/);
  });
});
