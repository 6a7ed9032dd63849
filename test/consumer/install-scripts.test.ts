/**
 * Install scripts. npm 12 runs a dependency's install scripts (`preinstall`, `install`, `postinstall`) only when the
 * project's `allowScripts` (package.json) approves them; npm 11.16+ warns about unreviewed ones, and
 * `--strict-allow-scripts` (which `.ci/run` and the consumer test pass) fails the install on them. Two promises follow,
 * checked here from package-lock.json's `hasInstallScript` flags:
 * - a user of the package needs no approvals: nothing the package brings (dependencies, and the optional peers a user
 *   may add, at the versions this lockfile pins) has an install script;
 * - this repository decided on every dev dependency that has one, and names nothing that has none.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { dependencyClosure, type LockPackages } from "../../scripts/consumer-lockfile.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

interface Manifest {
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  allowScripts?: Record<string, boolean>;
}

/** The package name of a lockfile install path (`node_modules/a/node_modules/@s/b` -> `@s/b`). */
function packageNameOf(installPath: string): string {
  return installPath.slice(installPath.lastIndexOf("node_modules/") + "node_modules/".length);
}

/** Lockfile paths whose package has an install script, among `paths` (default: all). */
function withInstallScripts(packages: LockPackages, paths: string[] = Object.keys(packages)): string[] {
  return paths.filter((p) => p !== "" && packages[p]?.hasInstallScript === true);
}

/**
 * What is wrong with the project's install-script policy: packages with install scripts that a user of the package
 * would install, packages with install scripts `allowScripts` does not decide on, and `allowScripts` entries that match
 * no package with an install script (left over from a dependency that went).
 */
function installScriptProblems(manifest: Manifest, packages: LockPackages): string[] {
  const problems: string[] = [];
  const shipped = dependencyClosure(packages, [...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.peerDependencies ?? {})]);
  for (const p of withInstallScripts(packages, shipped)) problems.push(`${packageNameOf(p)} (installed for users) has an install script`);
  // Keys are names or pinned `name@version`; either way the entry decides on the name.
  const decided = new Set(Object.keys(manifest.allowScripts ?? {}).map((key) => key.replace(/(.)@[^@]*$/, "$1")));
  const scripted = new Set(withInstallScripts(packages).map(packageNameOf));
  for (const name of [...scripted].sort()) if (!decided.has(name)) problems.push(`${name} has an install script that allowScripts does not decide on`);
  for (const name of [...decided].sort()) if (!scripted.has(name)) problems.push(`allowScripts names ${name}, which has no install script`);
  return problems;
}

describe("install scripts", () => {
  const manifest = JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as Manifest;
  const lock = JSON.parse(readFileSync(path.join(repoRoot, "package-lock.json"), "utf8")) as { packages: LockPackages };

  it("nothing a user installs has one, and allowScripts decides on exactly the dev dependencies that have one", () => {
    expect(installScriptProblems(manifest, lock.packages)).toEqual([]);
    // The decisions themselves: none is needed (the suite and the consumer test pass with all four skipped).
    expect(manifest.allowScripts).toEqual({ "@google/genai": false, esbuild: false, koffi: false, protobufjs: false });
  });

  it("names what breaks each promise", () => {
    const packages: LockPackages = {
      "": { name: "p", dependencies: { a: "1" }, devDependencies: { d: "1", e: "1" } },
      "node_modules/a": { version: "1.0.0", dependencies: { b: "1" } },
      "node_modules/a/node_modules/b": { version: "1.0.0", hasInstallScript: true },
      "node_modules/d": { version: "1.0.0", dev: true, hasInstallScript: true },
      "node_modules/@s/e": { version: "2.0.0", dev: true, hasInstallScript: true },
    };
    expect(installScriptProblems({ dependencies: { a: "1" }, allowScripts: { d: false, "@s/e@2.0.0": true, gone: false } }, packages)).toEqual([
      "b (installed for users) has an install script",
      "b has an install script that allowScripts does not decide on",
      "allowScripts names gone, which has no install script",
    ]);
    expect(installScriptProblems({ dependencies: { a: "1" }, allowScripts: { b: false, d: false, "@s/e": false } }, packages)).toEqual([
      "b (installed for users) has an install script",
    ]);
    // A user's optional peer counts as installed for users.
    const peer: LockPackages = { "node_modules/m": { version: "1.0.0", hasInstallScript: true } };
    expect(installScriptProblems({ peerDependencies: { m: "1" }, allowScripts: { m: false } }, peer)).toEqual(["m (installed for users) has an install script"]);
  });
});
