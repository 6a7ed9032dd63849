/**
 * `viz` needs `mermaid` and `--inspect` needs `@statelyai/inspect`, both devDependencies. When one is not installed
 * the command exits 3 with a message naming the package, never a stack trace.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { CliError, importOptional, isMissingPackageError, main } from "../../src/cli/main.js";

// Rendering the page is where mermaid's bundle is resolved (page.ts): make that fail as it does without the package.
vi.mock("../../src/inspect/page.js", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../src/inspect/page.js")>();
  return {
    ...actual,
    renderPageFromDiagrams: () => {
      const cause = Object.assign(new Error("Cannot find module 'mermaid/dist/mermaid.min.js'"), { code: "MODULE_NOT_FOUND" });
      throw new actual.VizError("VIZ_MERMAID_MISSING", `cannot read mermaid/dist/mermaid.min.js: ${cause.message}`, { cause });
    },
  };
});

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "ctm-optdeps-"));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function captureStderr(): { text: () => string; restore: () => void } {
  let text = "";
  const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    text += String(chunk);
    return true;
  });
  return { text: () => text, restore: () => spy.mockRestore() };
}

describe("missing optional packages", () => {
  it("isMissingPackageError recognises Node's not-found errors for that package only", () => {
    const esm = Object.assign(new Error("Cannot find package '@statelyai/inspect' imported from /x/live.js"), { code: "ERR_MODULE_NOT_FOUND" });
    const cjs = Object.assign(new Error("Cannot find module 'mermaid/dist/mermaid.min.js'"), { code: "MODULE_NOT_FOUND" });
    expect(isMissingPackageError(esm, "@statelyai/inspect")).toBe(true);
    expect(isMissingPackageError(cjs, "mermaid")).toBe(true);
    expect(isMissingPackageError(esm, "mermaid")).toBe(false);
    expect(isMissingPackageError(new Error("boom in @statelyai/inspect"), "@statelyai/inspect")).toBe(false);
    expect(isMissingPackageError(null, "mermaid")).toBe(false);
  });

  it("importOptional turns a real missing-package import into a CliError naming the package (exit 3)", async () => {
    const pkg = "codex-turn-machine-no-such-package";
    const err = await importOptional(pkg, "--feature", () => import(/* @vite-ignore */ pkg)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliError);
    expect(err).toMatchObject({ code: "ENV", exitCode: 3 });
    expect((err as Error).message).toBe(
      `--feature needs the package "${pkg}", which is not installed (it is a devDependency of codex-turn-machine): run \`npm install ${pkg}\``,
    );
    // Any other load failure is an environment error too, not a crash.
    const other = await importOptional("x", "--feature", () => Promise.reject(new Error("syntax"))).catch((e: unknown) => e);
    expect(other).toMatchObject({ code: "ENV", exitCode: 3, message: "--feature: cannot load x: syntax" });
  });

  it("viz without mermaid exits 3 naming the package and writes nothing", async () => {
    const out = path.join(dir, "viz.html");
    const err = captureStderr();
    let code: number;
    try {
      code = await main(["viz", "--out", out]);
    } finally {
      err.restore();
    }
    expect(code).toBe(3);
    expect(err.text()).toBe(
      'codex-turn: viz needs the package "mermaid", which is not installed (it is a devDependency of codex-turn-machine): run `npm install mermaid`\n',
    );
    await expect(stat(out)).rejects.toThrow();
  });

  it("--inspect without @statelyai/inspect exits 3 naming the package, before any app-server starts", async () => {
    // A resolve hook that resolves @statelyai/inspect from a directory with no node_modules: Node's own
    // ERR_MODULE_NOT_FOUND, exactly as when the package is not installed. Installed as src/openclaw/sdk-resolver.ts
    // installs its hook: `registerHooks` where Node has it (Node 26 prints a DeprecationWarning for `register`, which
    // would land in the stderr checked below), `register` on Node 20. Not async, so it serves both.
    const hooks = path.join(dir, "hooks.mjs");
    await writeFile(
      hooks,
      `export function resolve(specifier, context, next) {
  if (specifier === "@statelyai/inspect" || specifier.startsWith("@statelyai/inspect/")) {
    return next(specifier, { ...context, parentURL: new URL("./nowhere.js", import.meta.url).href });
  }
  return next(specifier, context);
}
`,
    );
    const register = path.join(dir, "register.mjs");
    const hooksUrl = JSON.stringify(pathToFileURL(hooks).href);
    await writeFile(
      register,
      `import * as m from "node:module";\nif (typeof m.registerHooks === "function") m.registerHooks(await import(${hooksUrl}));\nelse m.register(${hooksUrl});\n`,
    );
    const session = path.join(dir, "inspect.jsonl");
    const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ["--import", pathToFileURL(register).href, path.join(root, "bin", "codex-turn.js"), "run", "hi", "--session", session, "--offline", "--inspect"],
        { cwd: root, env: { ...process.env, CODEX_TURN_FROM_SOURCE: "1" }, timeout: 30_000 },
        (e, stdout, stderr) => {
          const code = e ? (typeof (e as { code?: unknown }).code === "number" ? (e as { code: number }).code : -1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
    });
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(
      'codex-turn: --inspect needs the package "@statelyai/inspect", which is not installed (it is a devDependency of codex-turn-machine): run `npm install @statelyai/inspect`\n',
    );
    // Failed before the turn: no session file was written.
    await expect(stat(session)).rejects.toThrow();
  });
});
