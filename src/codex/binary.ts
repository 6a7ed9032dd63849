import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { CodexAppServerError } from "./errors.js";

/** How to launch codex: `command args... app-server ...`. */
export interface CodexCommand {
  command: string;
  /** Arguments placed before `app-server` (the wrapper script path when codex runs through node). */
  prefixArgs: string[];
  /** Where it came from, for logs. */
  source: "override" | "platform-package" | "npm-wrapper";
}

// Same table as @openai/codex/bin/codex.js, so we find the exact binary the wrapper would run (without the extra
// node process the wrapper adds on Node 20, which costs 30-45 ms per spawn).
const TARGETS: Record<string, { triple: string; pkg: string } | undefined> = {
  "linux-x64": { triple: "x86_64-unknown-linux-musl", pkg: "@openai/codex-linux-x64" },
  "linux-arm64": { triple: "aarch64-unknown-linux-musl", pkg: "@openai/codex-linux-arm64" },
  "darwin-x64": { triple: "x86_64-apple-darwin", pkg: "@openai/codex-darwin-x64" },
  "darwin-arm64": { triple: "aarch64-apple-darwin", pkg: "@openai/codex-darwin-arm64" },
  "win32-x64": { triple: "x86_64-pc-windows-msvc", pkg: "@openai/codex-win32-x64" },
  "win32-arm64": { triple: "aarch64-pc-windows-msvc", pkg: "@openai/codex-win32-arm64" },
};

function tryResolve(req: NodeJS.Require, id: string): string | undefined {
  try {
    return req.resolve(id);
  } catch {
    return undefined;
  }
}

/**
 * Find the codex executable: an explicit override (a `.js`/`.mjs` path runs under the current node), else the native
 * binary of the installed `@openai/codex` platform package, else the npm wrapper script.
 *
 * @example
 * ```ts
 * const { command, prefixArgs } = resolveCodexCommand();
 * spawn(command, [...prefixArgs, "app-server"]);
 * ```
 */
export function resolveCodexCommand(override?: string): CodexCommand {
  if (override !== undefined) {
    if (/\.(c|m)?js$/.test(override)) return { command: process.execPath, prefixArgs: [override], source: "override" };
    return { command: override, prefixArgs: [], source: "override" };
  }
  const req = createRequire(import.meta.url);
  const target = TARGETS[`${process.platform}-${process.arch}`];
  const wrapperPkgJson = tryResolve(req, "@openai/codex/package.json");
  if (target) {
    const exe = process.platform === "win32" ? "codex.exe" : "codex";
    const candidates: string[] = [];
    const platformPkgJson =
      tryResolve(req, `${target.pkg}/package.json`) ??
      (wrapperPkgJson ? tryResolve(createRequire(wrapperPkgJson), `${target.pkg}/package.json`) : undefined);
    if (platformPkgJson) candidates.push(path.join(path.dirname(platformPkgJson), "vendor", target.triple, "bin", exe));
    if (wrapperPkgJson) candidates.push(path.join(path.dirname(wrapperPkgJson), "vendor", target.triple, "bin", exe));
    for (const c of candidates) if (existsSync(c)) return { command: c, prefixArgs: [], source: "platform-package" };
  }
  if (wrapperPkgJson) {
    const wrapper = path.join(path.dirname(wrapperPkgJson), "bin", "codex.js");
    if (existsSync(wrapper)) return { command: process.execPath, prefixArgs: [wrapper], source: "npm-wrapper" };
  }
  throw new CodexAppServerError(
    "SPAWN_FAILED",
    "codex binary not found: install @openai/codex (with its platform package) or pass codexBin",
  );
}
