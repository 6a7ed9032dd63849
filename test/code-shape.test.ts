/**
 * The code-shape rule from issue 14: no source function (in `src/` and `machines/`) is longer than about 80 lines
 * unless a comment in front of it says why, in the form `// Long (about N lines) on purpose: <reason>`. The generated
 * protocol types (`src/codex/protocol/`) are not hand-written and are left out.
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
});
