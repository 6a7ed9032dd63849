/**
 * The README's embedding example is real code: it is extracted, its `codex-turn-machine` import is rewritten to the
 * sources package.json "exports" points at, and it is type-checked with the project's tsconfig. A variant that imports
 * a name the package does not export must fail the same check, which proves the check can fail.
 */
import { afterAll, describe, expect, it } from "vitest";
import { createScratchDir, extractExamples, rewritePackageImports, typeCheck, type DocExample } from "./doc-examples.js";

const scratch = createScratchDir("readme");
afterAll(() => scratch.dispose());

function embeddingExample(): DocExample {
  const example = extractExamples("README.md").find((e) => e.name === "embedding");
  if (!example) throw new Error("README.md has no `<!-- example: embedding -->` block");
  return example;
}

describe("README.md embedding example", () => {
  it("sits under the `Going live` heading, imports the package by name, streams a live turn, and stays short", () => {
    const example = embeddingExample();
    expect(example.heading).toBe("Going live");
    expect(example.code).toMatch(/from "codex-turn-machine"/);
    const lines = example.code.trim().split("\n").length;
    expect(lines).toBeGreaterThanOrEqual(10);
    // One run and one live turn whose stream is read with `for await` (the official SDK's runStreamed() shape).
    expect(example.code).toMatch(/for await \(const event of handle\.events\)/);
    expect(lines).toBeLessThanOrEqual(40);
  });

  it("type-checks against the package's public exports, and the check fails for a non-existent export", () => {
    const example = embeddingExample();
    const good = scratch.write("embedding.ts", example.code);
    // The same example plus one import of a name the package does not export.
    const broken = scratch.write(
      "embedding-broken.ts",
      example.code.replace(
        /import \{ ([^}]*) \} from "codex-turn-machine";/,
        'import { $1, runCodexTurnThatDoesNotExist } from "codex-turn-machine";\nvoid runCodexTurnThatDoesNotExist;',
      ),
    );
    const diagnostics = typeCheck([good, broken]);
    expect(diagnostics.get(good), "README embedding example does not type-check").toEqual([]);
    const brokenDiagnostics = diagnostics.get(broken) ?? [];
    expect(brokenDiagnostics.join("\n")).toMatch(/has no exported member .*runCodexTurnThatDoesNotExist/);
  });

  it("imports only subpaths package.json exports", () => {
    expect(() => rewritePackageImports('import { x } from "codex-turn-machine/internal";', scratch.dir)).toThrow(
      /not exported by package.json/,
    );
    expect(rewritePackageImports('import { x } from "codex-turn-machine/testing";', scratch.dir)).toMatch(
      /from "\.\.\/\.\.\/\.\.\/src\/testing\/index\.js"/,
    );
  });

  it("every ```ts block of the README is a marked example", () => {
    expect(() => extractExamples("README.md")).not.toThrow();
  });
});
