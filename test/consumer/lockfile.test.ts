/**
 * The consumer test installs the packed tarball with `npm ci --offline` from a lockfile cut out of ours
 * (scripts/consumer-lockfile.ts): these check the cut on small lockfiles and on the real one.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { consumerLockfile, dependencyClosure, fileIntegrity, resolveLockPath, type LockPackages } from "../../scripts/consumer-lockfile.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const tmp: string[] = [];
afterAll(async () => {
  await Promise.all(tmp.map((d) => rm(d, { recursive: true, force: true })));
});

const small: LockPackages = {
  "": { name: "src", dependencies: { a: "^1.0.0" }, devDependencies: { d: "1.0.0" } },
  "node_modules/a": { version: "1.0.0", integrity: "sha512-a", dependencies: { b: "^2.0.0", c: "^1.0.0" }, optionalDependencies: { gone: "1.0.0" } },
  "node_modules/a/node_modules/b": { version: "2.0.0", integrity: "sha512-b2" },
  "node_modules/b": { version: "1.0.0", integrity: "sha512-b1", dev: true },
  "node_modules/c": { version: "1.0.0", integrity: "sha512-c", devOptional: true, peerDependencies: { p: "*", q: "*" }, peerDependenciesMeta: { q: { optional: true } } },
  "node_modules/p": { version: "1.0.0", integrity: "sha512-p", peer: true },
  "node_modules/q": { version: "1.0.0", integrity: "sha512-q" },
  "node_modules/d": { version: "1.0.0", integrity: "sha512-d", dev: true },
};

describe("consumer lockfile", () => {
  it("resolves a name as Node does: own node_modules first, then each enclosing one", () => {
    expect(resolveLockPath(small, "node_modules/a", "b")).toBe("node_modules/a/node_modules/b");
    expect(resolveLockPath(small, "node_modules/a/node_modules/b", "c")).toBe("node_modules/c");
    expect(resolveLockPath(small, "", "b")).toBe("node_modules/b");
    expect(resolveLockPath(small, "node_modules/a", "nope")).toBeUndefined();
  });

  it("takes what the roots need: nested versions, required peers; not optional peers, missing optionals or dev-only packages", () => {
    expect(dependencyClosure(small, ["a"])).toEqual(["node_modules/a", "node_modules/a/node_modules/b", "node_modules/c", "node_modules/p"]);
    expect(() => dependencyClosure({ "node_modules/a": { dependencies: { x: "1" } } }, ["a"])).toThrow(/no install of "x" reachable from "node_modules\/a"/);
  });

  it("writes a project depending on the tarball, with exact entries and no dev/peer flags of the source", () => {
    const { packageJson, lockfile } = consumerLockfile({
      name: "app",
      source: small,
      deps: [],
      tarball: { spec: "file:../pack/pkg-1.0.0.tgz", manifest: { name: "pkg", version: "1.0.0", dependencies: { a: "^1.0.0" } }, integrity: "sha512-t" },
    });
    expect(packageJson).toEqual({ name: "app", version: "0.0.0", dependencies: { pkg: "file:../pack/pkg-1.0.0.tgz" }, private: true, type: "module" });
    const packages = (lockfile as { packages: LockPackages }).packages;
    expect(Object.keys(packages)).toEqual(["", "node_modules/a", "node_modules/a/node_modules/b", "node_modules/c", "node_modules/p", "node_modules/pkg"]);
    expect(packages["node_modules/pkg"]).toEqual({ version: "1.0.0", dependencies: { a: "^1.0.0" }, resolved: "file:../pack/pkg-1.0.0.tgz", integrity: "sha512-t" });
    expect(packages["node_modules/c"]).not.toHaveProperty("devOptional");
    expect(packages["node_modules/p"]).not.toHaveProperty("peer");
    expect(() => consumerLockfile({ name: "x", source: small, deps: ["zzz"] })).toThrow(/does not install "zzz"/);
  });

  it("depends on an alias by its npm: spec, so npm installs the named package under the alias", () => {
    const aliased: LockPackages = { ...small, "node_modules/b-next": { name: "b", version: "3.0.0", integrity: "sha512-b3", dev: true } };
    const { packageJson, lockfile } = consumerLockfile({ name: "tools", source: aliased, deps: ["b-next", "d"] });
    expect(packageJson.dependencies).toEqual({ "b-next": "npm:b@3.0.0", d: "1.0.0" });
    expect((lockfile as { packages: LockPackages }).packages["node_modules/b-next"]).toEqual({ name: "b", version: "3.0.0", integrity: "sha512-b3" });
  });

  it("cut from the real lockfile: the package's runtime closure holds Codex and its platform binary, no dev tools", async () => {
    const lock = JSON.parse(await readFile(path.join(repoRoot, "package-lock.json"), "utf8")) as { packages: LockPackages };
    const pkg = JSON.parse(await readFile(path.join(repoRoot, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    const closure = dependencyClosure(lock.packages, Object.keys(pkg.dependencies));
    expect(closure).toContain("node_modules/@openai/codex");
    expect(closure).toContain("node_modules/pino");
    for (const devOnly of ["node_modules/vitest", "node_modules/tsx", "node_modules/typescript", "node_modules/mermaid", "node_modules/@statelyai/inspect"]) {
      expect(closure).not.toContain(devOnly);
    }
    expect(closure.every((at) => lock.packages[at]?.dev !== true)).toBe(true);
  });

  it("computes a tarball's integrity as npm writes it", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "ctm-lock-"));
    tmp.push(dir);
    await writeFile(path.join(dir, "f"), "abc");
    expect(fileIntegrity(path.join(dir, "f"))).toBe(
      "sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw==",
    );
  });
});
