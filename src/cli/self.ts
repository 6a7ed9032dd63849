/**
 * Where this CLI lives, to print commands a person can paste: the package's `bin/codex-turn.js` found by walking up
 * from this module (src/cli in a checkout, dist/src/cli in a package).
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

function packageRoot(): string | undefined {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(path.join(dir, "bin", "codex-turn.js")) && existsSync(path.join(dir, "package.json"))) return dir;
    dir = path.dirname(dir);
  }
  return undefined;
}

/**
 * The package version from its package.json ("0.0.0" when it cannot be found).
 *
 * @example
 * ```ts
 * program.version(cliVersion());
 * ```
 */
export function cliVersion(): string {
  const root = packageRoot();
  if (!root) return "0.0.0";
  try {
    const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { version?: unknown };
    return typeof pkg.version === "string" ? pkg.version : "0.0.0";
  } catch {
    return "0.0.0";
  }
}

function shellQuote(arg: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/**
 * A command line that runs this CLI with `args` from any directory: `node <abs bin> ...` (works in a checkout and in
 * an installed package alike, unlike a bare `codex-turn` that needs the bin on PATH).
 *
 * @example
 * ```ts
 * out.text(`replay: ${runnableCommand(["viz", "--trace", traceFile])}`);
 * ```
 */
export function runnableCommand(args: string[]): string {
  const root = packageRoot();
  const head = root ? ["node", path.join(root, "bin", "codex-turn.js")] : ["npx", "codex-turn"];
  return [...head, ...args].map(shellQuote).join(" ");
}
