/**
 * Code examples in the docs are real: every ```ts block in a checked document must carry a marker line right above
 * it, `<!-- example: NAME -->` (or `<!-- example: NAME run -->` for one that also runs offline). The blocks are
 * written as `NAME.ts` into a temporary directory inside the repository (so relative imports between the examples
 * of one document work), with the package imports (`codex-turn-machine`, `codex-turn-machine/testing`) rewritten to
 * the sources that package.json "exports" maps them to, then type-checked with the project's tsconfig.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
export const PACKAGE_NAME = "codex-turn-machine";

export interface DocExample {
  /** Document path relative to the repository root. */
  doc: string;
  name: string;
  /** Marked `run`: executed by the docs tests (must be offline and self-cleaning). */
  run: boolean;
  code: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The nearest `#` heading above the block. */
  heading: string | undefined;
}

const MARKER = /^<!--\s*example:\s*([a-z0-9-]+)(\s+run)?\b[^>]*-->\s*$/;
const FENCE_OPEN = /^```(\S*)\s*$/;

/** Every fenced block of a document, with its language and the example marker above it (if any). */
export function extractFencedBlocks(doc: string): Array<{ lang: string; line: number; marker?: RegExpMatchArray; heading?: string; code: string }> {
  const lines = readFileSync(path.join(REPO_ROOT, doc), "utf8").split("\n");
  const blocks: Array<{ lang: string; line: number; marker?: RegExpMatchArray; heading?: string; code: string }> = [];
  let heading: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE_OPEN.exec(lines[i]!);
    if (!open) {
      if (lines[i]!.startsWith("#")) heading = lines[i]!.replace(/^#+\s*/, "").trim();
      continue;
    }
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    if (i >= lines.length) throw new Error(`${doc}:${start + 1}: unterminated code fence`);
    let m = start - 1;
    while (m >= 0 && lines[m]!.trim() === "") m--;
    const marker = m >= 0 ? (MARKER.exec(lines[m]!.trim()) ?? undefined) : undefined;
    blocks.push({ lang: open[1] ?? "", line: start + 1, ...(marker ? { marker } : {}), ...(heading ? { heading } : {}), code: `${body.join("\n")}\n` });
  }
  return blocks;
}

/** The marked TypeScript examples of a document; throws when a ```ts block has no marker. */
export function extractExamples(doc: string): DocExample[] {
  const examples: DocExample[] = [];
  for (const block of extractFencedBlocks(doc)) {
    if (block.lang !== "ts" && block.lang !== "typescript") continue;
    if (!block.marker) {
      throw new Error(`${doc}:${block.line}: a \`\`\`ts block needs an \`<!-- example: NAME -->\` marker line above it`);
    }
    examples.push({ doc, name: block.marker[1]!, run: Boolean(block.marker[2]), code: block.code, line: block.line, heading: block.heading });
  }
  const names = examples.map((e) => e.name);
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup) throw new Error(`${doc}: example name "${dup}" is used twice`);
  return examples;
}

/**
 * The source file a package specifier resolves to through package.json "exports" (`./dist/src/x.js` -> `src/x.ts`).
 * Throws when the subpath is not exported, so docs cannot import something a user could not.
 */
export function resolvePackageSpecifier(specifier: string): string {
  const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")) as {
    name: string;
    exports: Record<string, { import?: string; types?: string }>;
  };
  if (pkg.name !== PACKAGE_NAME) throw new Error(`package.json name is ${pkg.name}, expected ${PACKAGE_NAME}`);
  const subpath = specifier === PACKAGE_NAME ? "." : `.${specifier.slice(PACKAGE_NAME.length)}`;
  const target = pkg.exports[subpath]?.import;
  if (!target) throw new Error(`"${specifier}" is not exported by package.json "exports" (no "${subpath}" entry)`);
  const source = target.replace(/^\.\/dist\//, "").replace(/\.js$/, ".ts");
  if (!existsSync(path.join(REPO_ROOT, source))) throw new Error(`"${specifier}" maps to ${target}, but ${source} does not exist`);
  return path.join(REPO_ROOT, source);
}

/** Rewrite `codex-turn-machine[/sub]` imports to relative imports of the sources, as seen from `fromDir`. */
export function rewritePackageImports(code: string, fromDir: string): string {
  return code.replace(/(["'])(codex-turn-machine(?:\/[A-Za-z0-9._/-]+)?)\1/g, (_all, quote: string, spec: string) => {
    let rel = path.relative(fromDir, resolvePackageSpecifier(spec)).replace(/\.ts$/, ".js");
    if (!rel.startsWith(".")) rel = `./${rel}`;
    return `${quote}${rel.split(path.sep).join("/")}${quote}`;
  });
}

/** A scratch directory inside the repository (test/docs/.tmp-examples-*), removed by `dispose()`. */
export function createScratchDir(label: string): { dir: string; write(relFile: string, code: string): string; dispose(): void } {
  const dir = path.join(REPO_ROOT, "test", "docs", `.tmp-examples-${label}-${process.pid}-${Date.now().toString(36)}`);
  mkdirSync(dir, { recursive: true });
  return {
    dir,
    write(relFile, code) {
      const file = path.join(dir, relFile);
      const rewritten = rewritePackageImports(code, path.dirname(file));
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, rewritten);
      return file;
    },
    dispose() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Type-check `files` with the project's tsconfig; returns formatted diagnostics per file (empty: clean). */
export function typeCheck(files: readonly string[]): Map<string, string[]> {
  const configPath = path.join(REPO_ROOT, "tsconfig.json");
  const config = ts.readConfigFile(configPath, ts.sys.readFile);
  if (config.error) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, "\n"));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, REPO_ROOT, undefined, configPath);
  const program = ts.createProgram({ rootNames: [...files], options: { ...parsed.options, noEmit: true } });
  const host: ts.FormatDiagnosticsHost = {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => REPO_ROOT,
    getNewLine: () => "\n",
  };
  const out = new Map<string, string[]>();
  for (const file of files) {
    const source = program.getSourceFile(file);
    if (!source) {
      out.set(file, [`${file}: not part of the program`]);
      continue;
    }
    const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
    out.set(
      file,
      diagnostics.map((d) => ts.formatDiagnostic(d, host).trim()),
    );
  }
  return out;
}
