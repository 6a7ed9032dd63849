/**
 * OpenClaw config files as OpenClaw reads them (src/config/io + includes + env-substitution in OpenClaw): JSON5,
 * `$include` with OpenClaw's merge and path rules, `${VAR}` substitution; every problem a typed error naming where.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MAX_INCLUDE_DEPTH, OpenClawConfigError, readOpenClawConfigFile } from "../../src/openclaw/config-file.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "ctm-openclaw-config-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const write = (name: string, text: string) => {
  const file = path.join(dir, name);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  return file;
};

function failure(file: string, env: NodeJS.ProcessEnv = {}): OpenClawConfigError {
  try {
    readOpenClawConfigFile(file, { env });
  } catch (err) {
    expect(err).toBeInstanceOf(OpenClawConfigError);
    return err as OpenClawConfigError;
  }
  throw new Error("expected an OpenClawConfigError");
}

describe("readOpenClawConfigFile", () => {
  it("reads JSON5 as users write openclaw.json: comments, trailing commas, unquoted keys, single quotes", () => {
    const file = write(
      "openclaw.json",
      `// my OpenClaw config
{
  plugins: {
    /* lossless-claw first */
    entries: { 'lossless-claw': { config: { freshTailCount: 32, }, }, },
    slots: { contextEngine: "lossless-claw" },
  },
}`,
    );
    expect(readOpenClawConfigFile(file, { env: {} })).toEqual({
      plugins: { entries: { "lossless-claw": { config: { freshTailCount: 32 } } }, slots: { contextEngine: "lossless-claw" } },
    });
  });

  it("resolves $include: one file as is, several merged in order, sibling keys merged over them (objects merge, arrays concatenate)", () => {
    write("plugins/base.json5", `{ entries: { a: { config: { x: 1, list: ["p"] } } }, allow: ["a"] }`);
    write("plugins/extra.json5", `{ entries: { b: { enabled: true } }, allow: ["b"] }`);
    write("agents.json5", `{ main: { model: "codex/gpt-5.4" } }`);
    const file = write(
      "openclaw.json",
      `{
  agents: { $include: "./agents.json5" },
  plugins: {
    $include: ["./plugins/base.json5", "./plugins/extra.json5"],
    entries: { a: { config: { x: 2, list: ["q"] } } },
  },
}`,
    );
    expect(readOpenClawConfigFile(file, { env: {} })).toEqual({
      agents: { main: { model: "codex/gpt-5.4" } },
      plugins: { entries: { a: { config: { x: 2, list: ["p", "q"] } }, b: { enabled: true } }, allow: ["a", "b"] },
    });
  });

  it("refuses includes that leave the config directory (by path or by symlink), cycles, and nesting past 10", () => {
    const outside = mkdtempSync(path.join(os.tmpdir(), "ctm-openclaw-outside-"));
    try {
      writeFileSync(path.join(outside, "secret.json5"), "{ a: 1 }");
      const byPath = failure(write("openclaw.json", `{ $include: ${JSON.stringify(path.join(outside, "secret.json5"))} }`));
      expect(byPath.code).toBe("CONFIG_INCLUDE");
      expect(byPath.message).toContain("outside the config directory");
      symlinkSync(path.join(outside, "secret.json5"), path.join(dir, "link.json5"));
      expect(failure(write("openclaw.json", `{ $include: "./link.json5" }`)).message).toContain("$include ./link.json5: outside the config directory");
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
    write("a.json5", `{ $include: "./b.json5" }`);
    write("b.json5", `{ $include: "./a.json5" }`);
    const cycle = failure(write("openclaw.json", `{ $include: "./a.json5" }`));
    expect(cycle.message).toContain("circular include (openclaw.json -> a.json5 -> b.json5 -> a.json5)");
    for (let i = 0; i <= MAX_INCLUDE_DEPTH; i++) write(`d${i}.json5`, i === MAX_INCLUDE_DEPTH ? "{ deep: true }" : `{ $include: "./d${i + 1}.json5" }`);
    expect(failure(write("openclaw.json", `{ $include: "./d0.json5" }`)).message).toContain("nested deeper than 10");
    expect(failure(write("openclaw.json", `{ $include: "./missing.json5" }`))).toMatchObject({ code: "CONFIG_INCLUDE" });
    expect(failure(write("openclaw.json", `{ $include: 3 }`)).message).toContain("$include must be a path or a list of paths");
  });

  it("substitutes ${VAR} in strings (upper-case names); $${VAR} stays literal; an unset or empty variable names itself and where", () => {
    const file = write("openclaw.json", `{ plugins: { entries: { mem: { config: { apiKey: "\${MEM_KEY}", url: "http://\${HOST}:\${PORT}/x", lit: "$\${MEM_KEY}", lower: "\${home}", n: 3 } } } } }`);
    expect(readOpenClawConfigFile(file, { env: { MEM_KEY: "k-1", HOST: "127.0.0.1", PORT: "9" } })).toEqual({
      plugins: { entries: { mem: { config: { apiKey: "k-1", url: "http://127.0.0.1:9/x", lit: "${MEM_KEY}", lower: "${home}", n: 3 } } } },
    });
    const missing = failure(file, { HOST: "h", PORT: "1", MEM_KEY: "" });
    expect(missing.code).toBe("CONFIG_ENV_MISSING");
    expect(missing.message).toBe("plugins.entries.mem.config.apiKey: environment variable MEM_KEY is not set");
    const secret = failure(write("openclaw.json", `{ models: [{ apiKey: "\${pass:ai/openai}" }] }`));
    expect(secret.code).toBe("CONFIG_UNSUPPORTED");
    expect(secret.message).toContain("models[0].apiKey: secret references (${pass:...}) are not resolved by this host");
  });

  it("a file that cannot be read, is not JSON5, or is not an object: a typed error naming the file (and line:column)", () => {
    expect(failure(path.join(dir, "none.json"))).toMatchObject({ code: "CONFIG_UNREADABLE" });
    const bad = failure(write("openclaw.json", `{\n  plugins: {\n    entries: ]\n}`));
    expect(bad.code).toBe("CONFIG_SYNTAX");
    expect(bad.message).toMatch(/openclaw\.json: not valid JSON5: invalid character '\]' at 3:14$/);
    expect(failure(write("openclaw.json", "[1, 2]"))).toMatchObject({ code: "CONFIG_NOT_OBJECT" });
  });
});
