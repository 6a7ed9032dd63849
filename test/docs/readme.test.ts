/**
 * README.md stays readable: at most 1,500 words of prose (code blocks and comments not counted), its sections in the
 * order a new user needs them, and its first runnable example, the offline first turn, runs here.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createScratchDir, extractExamples, REPO_ROOT, typeCheck } from "./doc-examples.js";

const README = readFileSync(path.join(REPO_ROOT, "README.md"), "utf8");

/** The words outside fenced code blocks and HTML comments. */
export function proseWords(markdown: string): number {
  const prose = markdown.replace(/^```[^\n]*\n[\s\S]*?^```\s*$/gm, "").replace(/<!--[\s\S]*?-->/g, "");
  return prose.split(/\s+/).filter((w) => /[A-Za-z0-9]/.test(w)).length;
}

const scratch = createScratchDir("readme-first");
afterAll(() => scratch.dispose());

describe("README.md", () => {
  it(`has at most 1,500 words of prose (now ${proseWords(README)})`, () => {
    expect(proseWords(README)).toBeLessThanOrEqual(1500);
    // The counter counts: code blocks are left out, prose is not.
    expect(proseWords("one two\n```sh\nthree four five\n```\nsix")).toBe(3);
  });

  it("has its sections in order: quickstart, first turn offline, going live, stream/steer/abort, engine, CLI, links", () => {
    const headings = [...README.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
    expect(headings).toEqual(["Quickstart", "Your first turn, offline", "Going live", "Stream, steer, abort", "Write an engine", "The CLI in ten lines", "Links"]);
    // What it is, in three bullets with links, before the first section.
    const intro = README.slice(0, README.indexOf("\n## "));
    const bullets = intro.split("\n").filter((l) => l.startsWith("- "));
    expect(bullets).toHaveLength(3);
    for (const name of ["OpenClaw", "lossless-claw", "pi session transcript"]) expect(intro).toMatch(new RegExp(`\\[[^\\]]*${name}[^\\]]*\\]\\(https://`));
    expect(README).toContain("npx codex-turn demo");
    expect(README).toContain("npm test");
    expect(README).toContain("docs/security.md");
  });

  it("its first runnable example is the offline first turn, and it type-checks and runs", async () => {
    const examples = extractExamples("README.md");
    const first = examples.find((e) => e.run);
    expect(first?.name).toBe("first-turn");
    expect(first?.heading).toBe("Your first turn, offline");
    expect(first?.code).toMatch(/const \{ appServer, fake, dispose \} = await startOfflineCodex\(\)/);
    const file = scratch.write("first-turn.ts", first!.code);
    expect(typeCheck([file]).get(file)).toEqual([]);
    const logged: unknown[][] = [];
    const log = console.log;
    console.log = (...args: unknown[]) => void logged.push(args);
    try {
      await import(pathToFileURL(file).href);
    } finally {
      console.log = log;
    }
    expect(logged[0]).toEqual(["completed", "Hello from the offline model."]);
  }, 60_000);
});
