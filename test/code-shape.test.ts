/**
 * Code-shape rules over the hand-written sources (`src/` and `machines/`; the generated protocol types in
 * `src/codex/protocol/` are left out):
 * - from issue 14: no function is longer than about 80 lines unless a comment in front of it says why, in the form
 *   `// Long (about N lines) on purpose: <reason>`;
 * - every optional property says `| undefined` (`timeoutMs?: number | undefined`), so a consumer compiling with
 *   `exactOptionalPropertyTypes` (e.g. `@tsconfig/strictest`) may pass a value that is possibly undefined to any option,
 *   and an engine may return one. Without the flag the two spellings mean the same, so this costs our code nothing.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { repoRoot } from "./helpers/cli.js";

const MAX_LINES = 80;
const REASON = /\/\/\s*Long \(about \d+ lines\) on purpose: \S/;

interface LongFunction {
  where: string;
  name: string;
  lines: number;
}

/** Functions of one source text longer than MAX_LINES with no written reason in the comments in front of them. */
function unexplainedLongFunctions(file: string, text: string): LongFunction[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: LongFunction[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.end).line;
      const lines = last - first + 1;
      if (lines > MAX_LINES && !hasReason(sf, node)) {
        const name = (node as { name?: ts.Node }).name?.getText(sf) ?? "(anonymous)";
        found.push({ where: `${file}:${first + 1}`, name, lines });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

/** The comments in front of the function, or of the statement or property that holds it (`const f = () => ...`). */
function hasReason(sf: ts.SourceFile, node: ts.Node): boolean {
  for (let at: ts.Node | undefined = node; at && at.kind !== ts.SyntaxKind.SourceFile; at = at.parent) {
    const ranges = ts.getLeadingCommentRanges(sf.text, at.getFullStart()) ?? [];
    if (ranges.some((r) => REASON.test(sf.text.slice(r.pos, r.end)))) return true;
    if (ts.isStatement(at) || ts.isClassElement(at) || ts.isPropertyAssignment(at)) break;
  }
  return false;
}

/** Optional property signatures (`a?: T`) whose type does not admit undefined, as `file:line name`. */
function optionalsWithoutUndefined(file: string, text: string): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const admitsUndefined = (t: ts.TypeNode): boolean =>
    t.kind === ts.SyntaxKind.UndefinedKeyword ||
    t.kind === ts.SyntaxKind.AnyKeyword ||
    t.kind === ts.SyntaxKind.UnknownKeyword ||
    (ts.isUnionTypeNode(t) && t.types.some(admitsUndefined)) ||
    (ts.isParenthesizedTypeNode(t) && admitsUndefined(t.type));
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isPropertySignature(node) && node.questionToken && node.type && !admitsUndefined(node.type)) {
      found.push(`${file}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1} ${node.name.getText(sf)}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) return p.endsWith(path.join("src", "codex", "protocol")) ? [] : sourceFiles(p);
    return /\.ts$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [p] : [];
  });
}

const longBody = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join("\n");

describe("code shape", () => {
  it("finds a long function without a reason, and accepts one whose reason is written in front of it", () => {
    const bare = `export function big() {\n${longBody(MAX_LINES)}\n}\n`;
    expect(unexplainedLongFunctions("a.ts", bare)).toEqual([{ where: "a.ts:1", name: "big", lines: MAX_LINES + 2 }]);
    const arrow = `/** Doc. */\nexport const big = async () => {\n${longBody(MAX_LINES)}\n};\n`;
    expect(unexplainedLongFunctions("b.ts", arrow).map((f) => f.name)).toEqual(["(anonymous)"]);
    const explained = `// Long (about 82 lines) on purpose: one table.\n/** Doc. */\nexport function big() {\n${longBody(MAX_LINES)}\n}\n`;
    expect(unexplainedLongFunctions("c.ts", explained)).toEqual([]);
    const short = `export function small() {\n${longBody(MAX_LINES - 2)}\n}\n`;
    expect(unexplainedLongFunctions("d.ts", short)).toEqual([]);
  });

  it(`no function in src/ or machines/ is longer than ${MAX_LINES} lines without a reason written next to it`, () => {
    const files = [...sourceFiles(path.join(repoRoot, "src")), ...sourceFiles(path.join(repoRoot, "machines"))];
    expect(files.length).toBeGreaterThan(100);
    const long = files.flatMap((f) => unexplainedLongFunctions(path.relative(repoRoot, f), readFileSync(f, "utf8")));
    expect(long).toEqual([]);
  });

  it("finds an optional property that does not admit undefined, at any depth", () => {
    const text = [
      "export interface A { a?: string; b?: string | undefined; c?: (() => void) | undefined; d?: unknown }",
      "export type B = { nested?: { inner?: number } | undefined; fn?: () => void };",
    ].join("\n");
    expect(optionalsWithoutUndefined("a.ts", text)).toEqual(["a.ts:1 a", "a.ts:2 inner", "a.ts:2 fn"]);
  });

  it("every optional property in src/ or machines/ admits undefined (exactOptionalPropertyTypes consumers)", () => {
    const files = [...sourceFiles(path.join(repoRoot, "src")), ...sourceFiles(path.join(repoRoot, "machines"))];
    const found = files.flatMap((f) => optionalsWithoutUndefined(path.relative(repoRoot, f), readFileSync(f, "utf8")));
    expect(found).toEqual([]);
  });
});
