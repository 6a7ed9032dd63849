/**
 * Lockfiles for the consumer test's temporary projects, cut from the repository's own package-lock.json, so that
 * `npm ci --offline` installs them from npm's cache alone.
 *
 * Why: `npm install --offline <tarball>` must resolve the tarball's version ranges (`pino@^10.4.0`) against package
 * metadata that `npm ci` never stores (it installs from the lockfile), so it fails with ENOTCACHED. A lockfile that
 * names exact versions and integrities needs only the package contents, which `npm ci` put into the cache. The versions
 * are the ones our own suite ran against.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

/** One `packages` entry of a lockfile v3 (only the fields this module reads; the rest is copied through). */
export interface LockEntry {
  name?: string;
  version?: string;
  resolved?: string;
  integrity?: string;
  dev?: boolean;
  devOptional?: boolean;
  optional?: boolean;
  peer?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  [field: string]: unknown;
}

/** The `packages` map of a lockfile v3: install path (`node_modules/a/node_modules/b`) to entry; "" is the root. */
export type LockPackages = Record<string, LockEntry>;

/**
 * Where Node would find package `name` when required from the package installed at `fromPath`: its own
 * node_modules, then each enclosing node_modules up to the top. Undefined when the lockfile has no such path.
 *
 * @example
 * ```ts
 * resolveLockPath({ "node_modules/b": {} }, "node_modules/a", "b"); // "node_modules/b"
 * ```
 */
export function resolveLockPath(packages: LockPackages, fromPath: string, name: string): string | undefined {
  let base = fromPath;
  for (;;) {
    const candidate = `${base ? `${base}/` : ""}node_modules/${name}`;
    if (packages[candidate]) return candidate;
    if (!base) return undefined;
    const parent = base.lastIndexOf("/node_modules/");
    base = parent < 0 ? "" : base.slice(0, parent);
  }
}

/**
 * The install paths npm would lay out for `rootDeps` (names of top-level dependencies) and everything they need:
 * dependencies must resolve (else it throws, naming the package); optional dependencies and peers are followed when the
 * lockfile has them and skipped when it does not (a platform package of another OS, an optional peer).
 *
 * @example
 * ```ts
 * const paths = dependencyClosure(lock.packages, ["pino"]); // ["node_modules/pino", "node_modules/sonic-boom", ...]
 * ```
 */
export function dependencyClosure(packages: LockPackages, rootDeps: string[]): string[] {
  const seen = new Set<string>();
  const queue: Array<{ from: string; name: string; required: boolean }> = rootDeps.map((name) => ({ from: "", name, required: true }));
  while (queue.length > 0) {
    const { from, name, required } = queue.shift()!;
    const at = resolveLockPath(packages, from, name);
    if (!at) {
      if (required) throw new Error(`package-lock.json has no install of "${name}" reachable from "${from || "the root"}"`);
      continue;
    }
    if (seen.has(at)) continue;
    seen.add(at);
    const entry = packages[at]!;
    for (const dep of Object.keys(entry.dependencies ?? {})) queue.push({ from: at, name: dep, required: true });
    for (const dep of Object.keys(entry.optionalDependencies ?? {})) queue.push({ from: at, name: dep, required: false });
    for (const dep of Object.keys(entry.peerDependencies ?? {})) {
      if (!entry.peerDependenciesMeta?.[dep]?.optional) queue.push({ from: at, name: dep, required: false });
    }
  }
  return [...seen].sort();
}

/** The entry as it stands in a project where it is a production install: no dev/peer flags of the source project. */
function asProductionEntry(entry: LockEntry): LockEntry {
  const { dev: _dev, devOptional: _devOptional, peer: _peer, ...rest } = entry;
  return rest;
}

/** `sha512-...` integrity of a file, as npm writes it for a tarball dependency. */
export function fileIntegrity(file: string): string {
  return `sha512-${createHash("sha512").update(readFileSync(file)).digest("base64")}`;
}

/** A package installed from a local tarball: its spec in package.json, its manifest and its integrity. */
export interface TarballDependency {
  /** As written in the consumer's package.json and lock: `file:<path relative to the project>`. */
  spec: string;
  manifest: LockEntry & { name: string; version: string };
  integrity: string;
}

/**
 * package.json and package-lock.json (v3) of a project that depends on `deps` (names installed as in `source`, at the
 * versions `source` locks) and optionally on a package tarball, with every package `npm ci` needs.
 *
 * @example
 * ```ts
 * const { packageJson, lockfile } = consumerLockfile({ name: "app", source: lock.packages, deps: [], tarball });
 * ```
 */
export function consumerLockfile(options: {
  name: string;
  source: LockPackages;
  deps: string[];
  tarball?: TarballDependency;
}): { packageJson: Record<string, unknown>; lockfile: Record<string, unknown> } {
  const { name, source, deps, tarball } = options;
  const dependencies: Record<string, string> = {};
  for (const dep of deps) {
    const entry = source[`node_modules/${dep}`];
    if (!entry?.version) throw new Error(`package-lock.json does not install "${dep}" at the top level`);
    // An alias (`"typescript-7": "npm:typescript@7.0.2"`) is installed under its own name: the entry names the package.
    dependencies[dep] = entry.name && entry.name !== dep ? `npm:${entry.name}@${entry.version}` : entry.version;
  }
  const packages: LockPackages = {};
  const tarballDeps = tarball ? Object.keys(tarball.manifest.dependencies ?? {}) : [];
  for (const at of dependencyClosure(source, [...tarballDeps, ...deps])) packages[at] = asProductionEntry(source[at]!);
  if (tarball) {
    dependencies[tarball.manifest.name] = tarball.spec;
    const { name: _name, ...manifest } = tarball.manifest;
    packages[`node_modules/${tarball.manifest.name}`] = { ...manifest, resolved: tarball.spec, integrity: tarball.integrity };
  }
  const sortedDeps = Object.fromEntries(Object.entries(dependencies).sort(([a], [b]) => a.localeCompare(b)));
  const root = { name, version: "0.0.0", dependencies: sortedDeps };
  const sortedPackages = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => a.localeCompare(b)));
  return {
    packageJson: { ...root, private: true, type: "module" },
    lockfile: { name, version: "0.0.0", lockfileVersion: 3, requires: true, packages: { "": root, ...sortedPackages } },
  };
}
