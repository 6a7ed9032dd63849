/**
 * bin/codex-turn.js picks what to run: the compiled dist/src/cli/main.js when it exists (an installed package), else
 * src/cli/main.ts through tsx (a checkout), else a clear error. Checked on a copy of the bin in a temporary package
 * directory outside the repository, so no node_modules of the repository is reachable unless linked on purpose.
 */
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function runBin(pkg: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  const childEnv: Record<string, string | undefined> = { ...process.env, ...env };
  if (!("CODEX_TURN_FROM_SOURCE" in env)) delete childEnv.CODEX_TURN_FROM_SOURCE;
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(pkg, "bin", "codex-turn.js"), ...args], { cwd: pkg, env: childEnv, timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** A package directory holding only a copy of the bin (and `"type": "module"`, as the real package.json says). */
async function fakePackage(): Promise<string> {
  const pkg = await mkdtemp(path.join(os.tmpdir(), "ctm-bin-"));
  dirs.push(pkg);
  await mkdir(path.join(pkg, "bin"));
  await copyFile(path.join(root, "bin", "codex-turn.js"), path.join(pkg, "bin", "codex-turn.js"));
  await writeFile(path.join(pkg, "package.json"), JSON.stringify({ name: "codex-turn-machine", type: "module" }));
  return pkg;
}

async function writeDist(pkg: string): Promise<void> {
  await mkdir(path.join(pkg, "dist", "src", "cli"), { recursive: true });
  await writeFile(
    path.join(pkg, "dist", "src", "cli", "main.js"),
    'export async function main(argv) { process.stdout.write(`dist:${argv.join(",")}`); return 7; }\n',
  );
}

async function writeSource(pkg: string): Promise<void> {
  await mkdir(path.join(pkg, "src", "cli"), { recursive: true });
  // TypeScript syntax, so it only loads through tsx.
  await writeFile(
    path.join(pkg, "src", "cli", "main.ts"),
    'export async function main(argv: string[]): Promise<number> { process.stdout.write(`source:${argv.join(",")}`); return 5; }\n',
  );
}

async function linkTsx(pkg: string): Promise<void> {
  await mkdir(path.join(pkg, "node_modules"), { recursive: true });
  await symlink(path.join(root, "node_modules", "tsx"), path.join(pkg, "node_modules", "tsx"), "dir");
}

describe("bin/codex-turn.js", () => {
  it("runs the compiled dist/ CLI when it exists, passing argv and the exit code through", async () => {
    const pkg = await fakePackage();
    await writeDist(pkg);
    await writeSource(pkg);
    await linkTsx(pkg);
    const r = await runBin(pkg, ["run", "hi"]);
    expect(r).toMatchObject({ code: 7, stdout: "dist:run,hi", stderr: "" });
  });

  it("CODEX_TURN_FROM_SOURCE=1 runs the sources through tsx even when dist/ exists", async () => {
    const pkg = await fakePackage();
    await writeDist(pkg);
    await writeSource(pkg);
    await linkTsx(pkg);
    const r = await runBin(pkg, ["--help"], { CODEX_TURN_FROM_SOURCE: "1" });
    expect(r).toMatchObject({ code: 5, stdout: "source:--help", stderr: "" });
  });

  it("falls back to the sources through tsx in a checkout without a build", async () => {
    const pkg = await fakePackage();
    await writeSource(pkg);
    await linkTsx(pkg);
    const r = await runBin(pkg, ["demo"]);
    expect(r).toMatchObject({ code: 5, stdout: "source:demo", stderr: "" });
  });

  it("without dist/ and without tsx: exit 3 naming tsx, no stack trace", async () => {
    const pkg = await fakePackage();
    await writeSource(pkg);
    const r = await runBin(pkg, ["demo"]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('running from source needs the devDependency "tsx"');
    expect(r.stderr).not.toMatch(/^\s+at /m);
  });

  it("with neither dist/ nor src/: exit 3 saying the compiled CLI is missing", async () => {
    const pkg = await fakePackage();
    const r = await runBin(pkg, ["demo"]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`the compiled CLI ${path.join(pkg, "dist", "src", "cli", "main.js")} is missing`);
    expect(r.stderr).not.toMatch(/^\s+at /m);
  });
});
