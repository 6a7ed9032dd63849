/**
 * docs/engines.md examples are real: every ```ts block is type-checked against the package's public exports, and the
 * ones marked `run` (offline: fake Responses API + real codex app-server) are executed.
 */
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createScratchDir, extractExamples, typeCheck } from "./doc-examples.js";

const DOC = "docs/engines.md";
const examples = extractExamples(DOC);
const scratch = createScratchDir("engines");
afterAll(() => scratch.dispose());
const files = new Map<string, string>();
try {
  for (const e of examples) files.set(e.name, scratch.write(`${e.name}.ts`, e.code));
} catch (error) {
  scratch.dispose(); // e.g. an import of a subpath package.json does not export
  throw error;
}

describe(DOC, () => {
  it("has the engine example and an offline test example", () => {
    expect(examples.map((e) => e.name)).toEqual(expect.arrayContaining(["my-engine", "engine-test"]));
    expect(examples.find((e) => e.name === "engine-test")?.run).toBe(true);
    expect(examples.find((e) => e.name === "engine-test")?.code).toMatch(/from "codex-turn-machine\/testing"/);
  });

  it("every example type-checks", () => {
    const diagnostics = typeCheck([...files.values()]);
    for (const [file, list] of diagnostics) expect(list, `${file} does not type-check`).toEqual([]);
  });

  for (const example of examples.filter((e) => e.run)) {
    it(`the "${example.name}" example runs offline`, async () => {
      await import(pathToFileURL(files.get(example.name)!).href);
    }, 60_000);
  }
});
