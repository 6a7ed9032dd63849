/**
 * The consumer test: use the package the way a stranger would, from its packed tarball, offline.
 *
 *   npm run test:consumer                       # pack (prepack builds dist/), then check the tarball
 *   npm run test:consumer -- --tarball FILE     # check an existing tarball (e.g. one altered on purpose)
 *   npm run test:consumer -- --keep             # keep the temporary projects and print where they are
 *
 * Steps (each one fails the run, exit 1, naming the step):
 *  1. `npm pack`; the tarball holds dist/, bin/, docs/ and no runtime stubs of type-only modules.
 *  2. `attw` (esm-only profile) and `publint --strict` on the tarball.
 *  3. A fresh `"type": "module"` project installs only the tarball (`npm ci --offline --strict-allow-scripts`, lockfile
 *     cut from ours, see consumer-lockfile.ts: no package in it may need an install script). `codex-turn demo --json`
 *     runs from it with nothing else installed (no tsx, no mermaid); `npx codex --version` is the pinned Codex (for
 *     `npx codex login`);
 *     `codex-turn run --engine ./my-engine.ts` runs the TypeScript engine where Node strips types (exits 3 naming
 *     the fixes on Node 20, which does not);
 *     `codex-turn viz` exits 3 naming the missing optional peer `mermaid`; a CommonJS `require()` gets
 *     ERR_PACKAGE_PATH_NOT_EXPORTED and `import()` works.
 *  4. TypeScript and @types/node (installed beside it, offline) type-check the README embedding example, a probe of
 *     the protocol types and an offline turn (test/consumer/fixture) with `module: nodenext`, `skipLibCheck: false`;
 *     the compiled offline turn runs one real `codex app-server` turn against the fake model.
 *  5. TypeScript 7 (npm's `latest`, the native compiler a new project gets) type-checks the same under nodenext; then
 *     TypeScript 6 and 7 each type-check it under the strictest settings (tsconfig.strictest.json: bundler resolution,
 *     `exactOptionalPropertyTypes`, `skipLibCheck: false`), where src/strict-options.ts passes possibly-undefined
 *     values to public options. The only errors allowed there are xstate's own declarations (its setup.d.ts fails
 *     under `exactOptionalPropertyTypes`, statelyai/xstate#4613; such projects need `skipLibCheck` for xstate anyway).
 * Nothing leaves loopback; npm reads only its cache (filled by `npm ci` in the checkout).
 */
import { execFile, type ExecFileOptions } from "node:child_process";
import { cp, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { extractExamples } from "../test/docs/doc-examples.js";
import { consumerLockfile, fileIntegrity, type LockEntry, type LockPackages } from "./consumer-lockfile.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const FIXTURE = path.join(repoRoot, "test", "consumer", "fixture");
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run a command; never throws (the caller decides what a non-zero exit means). */
function exec(command: string, args: string[], options: ExecFileOptions = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(command, args, { maxBuffer: 64 * 1024 * 1024, timeout: 600_000, ...options, encoding: "utf8" }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

class StepError extends Error {}

/** Throw unless the run exited 0, showing the tail of its output. */
function mustSucceed(what: string, r: Run): Run {
  if (r.code !== 0) throw new StepError(`${what} exited ${r.code}\n${(r.stdout + r.stderr).trim().split("\n").slice(-40).join("\n")}`);
  return r;
}

function check(condition: boolean, message: string): void {
  if (!condition) throw new StepError(message);
}

const timings: Array<{ step: string; ms: number }> = [];

async function step<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  process.stdout.write(`consumer: ${name} ...\n`);
  try {
    const value = await fn();
    timings.push({ step: name, ms: Math.round(performance.now() - t0) });
    process.stdout.write(`consumer: ${name} ok (${Math.round(performance.now() - t0)} ms)\n`);
    return value;
  } catch (err) {
    throw new StepError(`step "${name}" failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** `npm pack` into `dir` (prepack builds dist/); returns the tarball path. */
async function pack(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const r = mustSucceed("npm pack", await exec(NPM, ["pack", "--json", "--pack-destination", dir], { cwd: repoRoot }));
  const info = JSON.parse(r.stdout.slice(r.stdout.search(/^\[/m))) as Array<{ filename: string; entryCount: number; size: number }>;
  const file = path.join(dir, info[0]!.filename);
  process.stdout.write(`consumer: packed ${info[0]!.filename}: ${info[0]!.entryCount} files, ${info[0]!.size} bytes\n`);
  return file;
}

type Manifest = LockEntry & { name: string; version: string };

/**
 * What the tarball holds: only shipped folders, and no `.js` that is only `export {};` (type-only stub). Returns the
 * fields of its package.json that npm records in a lockfile.
 */
async function checkTarballContents(tarball: string, scratch: string): Promise<Manifest> {
  const dir = path.join(scratch, "unpacked");
  await mkdir(dir, { recursive: true });
  mustSucceed("tar", await exec("tar", ["xzf", tarball, "-C", dir]));
  const root = path.join(dir, "package");
  const files = (await readdir(root, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => path.relative(root, path.join(e.parentPath, e.name)));
  const outside = files.filter((f) => !/^(dist|bin|docs)\//.test(f) && !/^(package\.json|README\.md|LICENSE)$/.test(f));
  check(outside.length === 0, `tarball holds files outside dist/, bin/, docs/: ${outside.slice(0, 10).join(", ")}`);
  const stubs: string[] = [];
  for (const f of files.filter((name) => name.endsWith(".js"))) {
    const code = (await readFile(path.join(root, f), "utf8")).replace(/^\s*\/\/.*$/gm, "").trim();
    if (code === "export {};") stubs.push(f);
  }
  check(stubs.length === 0, `tarball holds ${stubs.length} type-only .js stubs, e.g. ${stubs.slice(0, 3).join(", ")}`);
  check(files.includes("dist/src/index.d.ts") && files.includes("dist/src/codex/protocol/ClientRequest.d.ts"), "tarball misses declarations");
  process.stdout.write(`consumer: tarball holds ${files.length} files\n`);
  const pkg = JSON.parse(await readFile(path.join(root, "package.json"), "utf8")) as Record<string, unknown>;
  await rm(dir, { recursive: true, force: true });
  const keep = ["name", "version", "license", "dependencies", "peerDependencies", "peerDependenciesMeta", "bin", "engines"];
  return Object.fromEntries(keep.filter((k) => pkg[k] !== undefined).map((k) => [k, pkg[k]])) as Manifest;
}

/** Write package.json + package-lock.json for `deps` (and the tarball) and `npm ci --offline` there. */
async function installOffline(dir: string, source: LockPackages, deps: string[], tarball?: { file: string; manifest: Manifest }): Promise<void> {
  await mkdir(dir, { recursive: true });
  const tarballDep = tarball
    ? { spec: `file:${path.relative(dir, tarball.file).split(path.sep).join("/")}`, manifest: tarball.manifest, integrity: fileIntegrity(tarball.file) }
    : undefined;
  const { packageJson, lockfile } = consumerLockfile({ name: path.basename(dir), source, deps, ...(tarballDep ? { tarball: tarballDep } : {}) });
  await writeFile(path.join(dir, "package.json"), `${JSON.stringify(packageJson, null, 2)}\n`);
  await writeFile(path.join(dir, "package-lock.json"), `${JSON.stringify(lockfile, null, 2)}\n`);
  // --strict-allow-scripts: the project approves no install script, so an install script anywhere in the tree fails the
  // install, as npm 12 would skip it (a user of the package needs no approvals).
  mustSucceed(`npm ci --offline in ${path.basename(dir)}`, await exec(NPM, ["ci", "--offline", "--no-audit", "--no-fund", "--strict-allow-scripts"], { cwd: dir }));
}

/** Step 3: the installed package, with nothing else installed, runs the demo and reports missing optional peers. */
async function checkInstalledCli(app: string, scratch: string, manifest: Manifest): Promise<void> {
  const installed = await readdir(path.join(app, "node_modules"));
  const extra = ["tsx", "typescript", "mermaid", "@statelyai", "vitest"].filter((name) => installed.includes(name));
  check(extra.length === 0, `the consumer project has more than the package's own dependencies: ${extra.join(", ")}`);
  const npx = (argv: string[]): Promise<Run> => exec(NPM, ["exec", "--offline", "--", "codex-turn", ...argv], { cwd: app });
  const demo = mustSucceed("npx codex-turn demo", await npx(["demo", "--json", "--out", path.join(scratch, "demo")]));
  const summary = JSON.parse(demo.stdout.trim().split("\n").at(-1)!) as { statuses?: string[]; turns?: number };
  check(summary.turns === 5 && summary.statuses?.every((s) => s === "completed") === true, `demo summary: ${demo.stdout.trim().split("\n").at(-1)}`);
  const codexVersion = mustSucceed("npx codex --version", await exec(NPM, ["exec", "--offline", "--", "codex", "--version"], { cwd: app }));
  const pinned = (manifest.dependencies ?? {})["@openai/codex"];
  check(pinned !== undefined && codexVersion.stdout.includes(pinned), `npx codex --version: ${codexVersion.stdout.trim()} (pinned ${pinned})`);
  await checkTypeScriptEngine(app, scratch, npx);
  const viz = await npx(["viz", "--out", path.join(scratch, "viz.html")]);
  check(viz.code === 3 && /mermaid/.test(viz.stderr), `viz without mermaid: exit ${viz.code}, ${viz.stderr.trim()}`);
  const cjs = path.join(app, "cjs-probe.cjs");
  await writeFile(
    cjs,
    [
      "let requireCode = null;",
      'try { require("codex-turn-machine"); } catch (err) { requireCode = err.code; }',
      'import("codex-turn-machine").then((m) => console.log(JSON.stringify({ requireCode, importRunCodexTurn: typeof m.runCodexTurn })));',
    ].join("\n"),
  );
  const probe = mustSucceed("CommonJS probe", await exec(process.execPath, [cjs], { cwd: app }));
  const seen = JSON.parse(probe.stdout) as { requireCode: string | null; importRunCodexTurn: string };
  check(seen.requireCode === "ERR_PACKAGE_PATH_NOT_EXPORTED" && seen.importRunCodexTurn === "function", `CommonJS sees ${probe.stdout.trim()}`);
}

/**
 * `--engine ./my-engine.ts` from the installed package (compiled CLI, no tsx): where Node strips types (22.18+, 24,
 * 26) the turn runs with the engine (its system prompt addition reaches the model); on Node 20 it exits 3 naming the
 * Node version and the fixes (a newer Node, or tsx), never "Unknown file extension".
 */
async function checkTypeScriptEngine(app: string, scratch: string, npx: (argv: string[]) => Promise<Run>): Promise<void> {
  const engine = path.join(app, "my-engine.ts");
  await writeFile(
    engine,
    [
      'import type { ContextEngine } from "codex-turn-machine";',
      "export function createContextEngine(): ContextEngine {",
      '  return { info: { id: "ts-engine", name: "TypeScript engine" }, async ingest() { return { ingested: true }; },',
      '    async assemble({ messages }: { messages: unknown[] }) { return { messages, estimatedTokens: 0, systemPromptAddition: "TS-ENGINE-MARKER" }; },',
      "    async compact() { return { ok: true, compacted: false }; } } as unknown as ContextEngine;",
      "}",
    ].join("\n"),
  );
  const requests = path.join(scratch, "ts-engine-requests.jsonl");
  const r = await npx(["run", "hi", "--session", path.join(scratch, "ts-engine.jsonl"), "--offline", "--offline-requests", requests, "--engine", "./my-engine.ts", "--json"]);
  check(!/Unknown file extension/.test(r.stdout + r.stderr), `--engine my-engine.ts: ${r.stdout.trim()} ${r.stderr.trim()}`);
  if (typeof (process.features as { typescript?: unknown }).typescript === "string") {
    check(r.code === 0 && (await readFile(requests, "utf8")).includes("TS-ENGINE-MARKER"), `--engine my-engine.ts on ${process.version}: exit ${r.code}, ${r.stdout.trim()} ${r.stderr.trim()}`);
  } else {
    check(r.code === 3 && /22\.18/.test(r.stdout) && /tsx/.test(r.stdout), `--engine my-engine.ts on ${process.version} without tsx: exit ${r.code}, ${r.stdout.trim()} ${r.stderr.trim()}`);
  }
  process.stdout.write(`consumer: --engine my-engine.ts on ${process.version}: exit ${r.code}\n`);
}

/** Step 4: type-check the README example, the type probe and the offline turn under nodenext; run the turn. */
async function checkTypesAndTurn(app: string, tools: string, scratch: string): Promise<void> {
  await cp(path.join(FIXTURE, "tsconfig.json"), path.join(app, "tsconfig.json"));
  await cp(path.join(FIXTURE, "src"), path.join(app, "src"), { recursive: true });
  const readme = extractExamples("README.md").find((e) => e.name === "embedding");
  check(readme !== undefined, "README.md has no `<!-- example: embedding -->` block");
  await writeFile(path.join(app, "src", "readme-embedding.ts"), readme!.code);
  // @types/node as a project would have it (node_modules/@types/node), installed beside the package, not into it.
  await mkdir(path.join(app, "node_modules", "@types"), { recursive: true });
  await symlink(path.join(tools, "node_modules", "@types", "node"), path.join(app, "node_modules", "@types", "node"), "dir");
  const tsc = path.join(tools, "node_modules", "typescript", "bin", "tsc");
  mustSucceed("tsc (nodenext, skipLibCheck: false)", await exec(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: app }));
  const turn = mustSucceed("offline turn", await exec(process.execPath, [path.join(app, "out", "offline-turn.js")], { cwd: app }));
  process.stdout.write(`consumer: offline turn ${turn.stdout.trim()}\n`);
}

/** xstate's declarations fail under exactOptionalPropertyTypes (upstream); every other error fails the step. */
const UPSTREAM_DECLARATION_ERRORS = /^node_modules\/xstate\//;

/** Step 5: TypeScript 7 under nodenext; TypeScript 6 and 7 under the strictest settings. */
async function checkTypesStrictest(app: string, tools: string): Promise<void> {
  await cp(path.join(FIXTURE, "tsconfig.strictest.json"), path.join(app, "tsconfig.strictest.json"));
  const compilers = { "TypeScript 6": "typescript", "TypeScript 7": "typescript-7" };
  const tsc7 = path.join(tools, "node_modules", compilers["TypeScript 7"], "bin", "tsc");
  const version = mustSucceed("tsc 7 --version", await exec(process.execPath, [tsc7, "--version"], { cwd: app }));
  check(/Version 7\./.test(version.stdout), `typescript-7 is ${version.stdout.trim()}`);
  mustSucceed("tsc 7 (nodenext, skipLibCheck: false)", await exec(process.execPath, [tsc7, "-p", "tsconfig.json", "--noEmit"], { cwd: app }));
  for (const [label, dir] of Object.entries(compilers)) {
    const tsc = path.join(tools, "node_modules", dir, "bin", "tsc");
    const run = await exec(process.execPath, [tsc, "-p", "tsconfig.strictest.json"], { cwd: app });
    const errors = run.stdout.split("\n").filter((line) => /error TS\d+/.test(line) && !/^\s/.test(line));
    const ours = errors.filter((line) => !UPSTREAM_DECLARATION_ERRORS.test(line));
    check(run.code === 0 || (errors.length > 0 && ours.length === 0), `${label} (strictest) exited ${run.code}:\n${run.stdout.trim().split("\n").slice(0, 40).join("\n")}`);
    check(ours.length === 0, `${label} (strictest): ${ours.length} error(s) outside xstate's declarations:\n${ours.slice(0, 20).join("\n")}`);
    process.stdout.write(`consumer: ${label} strictest: no errors in the package or the project (${errors.length} in xstate's declarations)\n`);
  }
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const keep = args.includes("--keep");
  const given = args.includes("--tarball") ? path.resolve(args[args.indexOf("--tarball") + 1] ?? "") : undefined;
  const scratch = await mkdtemp(path.join(os.tmpdir(), "ctm-consumer-"));
  const source = (JSON.parse(await readFile(path.join(repoRoot, "package-lock.json"), "utf8")) as { packages: LockPackages }).packages;
  const bin = (name: string): string => path.join(repoRoot, "node_modules", ".bin", name);
  try {
    const tarball = given ?? (await step("npm pack", () => pack(path.join(scratch, "pack"))));
    const manifest = await step("tarball contents", () => checkTarballContents(tarball, scratch));
    await step("attw", async () => void mustSucceed("attw", await exec(bin("attw"), [tarball, "--profile", "esm-only"])));
    await step("publint", async () => void mustSucceed("publint", await exec(bin("publint"), ["run", tarball, "--strict"])));
    const app = path.join(scratch, "app");
    await step("install the tarball offline", () => installOffline(app, source, [], { file: tarball, manifest }));
    await step("installed CLI: demo, missing optional peer, CommonJS", () => checkInstalledCli(app, scratch, manifest));
    const tools = path.join(scratch, "tools");
    await step("install typescript 6 and 7 and @types/node offline", () => installOffline(tools, source, ["typescript", "typescript-7", "@types/node"]));
    await step("type-check under nodenext and run one offline turn", () => checkTypesAndTurn(app, tools, scratch));
    await step("type-check with TypeScript 7 and under the strictest settings", () => checkTypesStrictest(app, tools));
    const total = timings.reduce((sum, t) => sum + t.ms, 0);
    process.stdout.write(`consumer: all steps passed in ${(total / 1000).toFixed(1)} s (${timings.map((t) => `${t.step} ${t.ms} ms`).join("; ")})\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`consumer test FAILED: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    if (keep) process.stdout.write(`consumer: kept ${scratch}\n`);
    else await rm(scratch, { recursive: true, force: true });
  }
}

process.exitCode = await main();
