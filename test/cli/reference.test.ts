/** One source for what the CLI and the docs say about exit codes and the environment (src/cli/reference.ts). */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { main } from "../../src/cli/main.js";
import { EXIT } from "../../src/cli/errors.js";
import { ENV_VAR_DOCS, EXIT_CODE_DOCS, environmentLines, exitCodesLine } from "../../src/cli/reference.js";
import { repoRoot } from "../helpers/cli.js";

const read = (file: string) => readFileSync(path.join(repoRoot, file), "utf8");

async function helpText(): Promise<string> {
  let text = "";
  const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    text += String(chunk);
    return true;
  });
  try {
    expect(await main(["--help"])).toBe(0);
  } finally {
    spy.mockRestore();
  }
  return text;
}

describe("CLI reference", () => {
  it("documents every exit code the CLI uses", () => {
    expect(EXIT_CODE_DOCS.map((e) => e.code).sort((a, b) => a - b)).toEqual(Object.values(EXIT).sort((a, b) => a - b));
  });

  it("--help, README.md and docs/cli.md give the same exit codes", async () => {
    const help = await helpText();
    expect(help).toContain(exitCodesLine());
    expect(read("README.md")).toContain(exitCodesLine());
    expect(read("docs/cli.md")).toContain(exitCodesLine());
  });

  it("--help and docs/cli.md list the same environment variables", async () => {
    const help = await helpText();
    for (const line of environmentLines()) expect(help).toContain(line);
    const doc = read("docs/cli.md");
    for (const v of ENV_VAR_DOCS) expect(doc).toContain(`| \`${v.name}\` | ${v.meaning} |`);
  });
});
