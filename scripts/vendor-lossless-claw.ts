/**
 * Vendors the real lossless-claw plugin (Martian-Engineering/lossless-claw, MIT), built with its own `build:plugin`,
 * under test/fixtures/lossless-claw/<line>/ for the CI suite test/openclaw/lossless-claw-real/: the 0.15 line from its
 * `main` branch and the 1.0 beta line from `next/1.0`.
 *
 *   tsx scripts/vendor-lossless-claw.ts --git-dir <bare git dir of lossless-claw> [--line main|next-1.0]...
 *   tsx scripts/vendor-lossless-claw.ts --verify
 *
 * With `--git-dir` (e.g. the directory the `fetch` tool gives for github:Martian-Engineering/lossless-claw), each line's
 * branch is exported (`git archive`) into a temporary directory, its dependencies installed from the npm registry as
 * its lockfile pins them (`npm ci --ignore-scripts`), `npm run build:plugin` run, and the files the plugin needs at run
 * time copied: `dist/index.js` (the bundle; `openclaw` and `node:sqlite` stay external), `package.json` (`type: module`,
 * `openclaw.extensions`), `openclaw.plugin.json` (id, config schema) and `LICENSE`. PROVENANCE.md records the repository,
 * commit, build command, Node and npm versions and each file's sha256. When the line was vendored before from the same
 * commit, the rebuilt files are compared with the recorded checksums and any difference is reported (exit 1).
 * `--verify` checks the vendored files against their PROVENANCE.md without building (exit 1 on a mismatch).
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const REPO = "Martian-Engineering/lossless-claw";
const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "test", "fixtures", "lossless-claw");

/** The lines vendored: fixture directory name -> branch. */
export const LOSSLESS_CLAW_LINES: Readonly<Record<string, string>> = { main: "main", "next-1.0": "next/1.0" };

/** The files copied from a built checkout (source path -> vendored name). */
export const VENDORED_FILES: ReadonlyArray<readonly [string, string]> = [
  ["dist/index.js", "dist/index.js"],
  ["package.json", "package.json"],
  ["openclaw.plugin.json", "openclaw.plugin.json"],
  ["LICENSE", "LICENSE"],
];

/** sha256 (hex) of a file. */
export function sha256File(file: string): string {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

/**
 * The checksums a PROVENANCE.md records (`| file | sha256 |` rows) and its commit.
 *
 * @example
 * ```ts
 * parseProvenance("commit: `abc`\n| `LICENSE` | `00ff` |").sha256; // { LICENSE: "00ff" }
 * ```
 */
export function parseProvenance(text: string): { commit?: string | undefined; sha256: Record<string, string> } {
  const sha256: Record<string, string> = {};
  for (const m of text.matchAll(/^\| `([^`]+)` \| `([0-9a-f]{64})` \|/gm)) sha256[m[1]!] = m[2]!;
  const commit = /^- commit: `([0-9a-f]{40})`/m.exec(text)?.[1];
  return { ...(commit ? { commit } : {}), sha256 };
}

/** Vendored files whose sha256 differs from PROVENANCE.md's (or is missing), by name; empty when all match. */
export function verifyVendored(dir: string): string[] {
  const provenance = path.join(dir, "PROVENANCE.md");
  if (!existsSync(provenance)) return ["PROVENANCE.md (missing)"];
  const { sha256 } = parseProvenance(readFileSync(provenance, "utf8"));
  const bad: string[] = [];
  for (const [, name] of VENDORED_FILES) {
    const file = path.join(dir, name);
    if (!existsSync(file)) bad.push(`${name} (missing)`);
    else if (sha256[name] !== sha256File(file)) bad.push(`${name} (sha256 ${sha256File(file)}, recorded ${sha256[name] ?? "none"})`);
  }
  return bad;
}

function run(cmd: string, args: string[], cwd: string): string {
  return execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 64 << 20 });
}

function vendorLine(gitDir: string, line: string): boolean {
  const branch = LOSSLESS_CLAW_LINES[line];
  if (!branch) throw new Error(`unknown line ${line} (known: ${Object.keys(LOSSLESS_CLAW_LINES).join(", ")})`);
  let commit: string;
  try {
    commit = run("git", ["--git-dir", gitDir, "rev-parse", "--verify", `${branch}^{commit}`], process.cwd()).trim();
  } catch {
    const tags = run("git", ["--git-dir", gitDir, "tag", "--list", "v*"], process.cwd()).trim().split("\n").slice(-8).join(", ");
    throw new Error(`${gitDir} has no branch ${branch} (recent tags: ${tags})`);
  }
  const work = mkdtempSync(path.join(os.tmpdir(), `lcm-vendor-${line}-`));
  try {
    execFileSync("sh", ["-c", `git --git-dir "${gitDir}" archive ${commit} | tar -x -C "${work}"`], { stdio: "inherit" });
    const pkg = JSON.parse(readFileSync(path.join(work, "package.json"), "utf8")) as { version: string; scripts?: Record<string, string> };
    const build = pkg.scripts?.["build:plugin"];
    if (!build) throw new Error(`${branch} (${commit}) has no build:plugin script`);
    console.log(`${line}: ${REPO}@${commit} (${pkg.version}): npm ci --ignore-scripts, npm run build:plugin`);
    run("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund"], work);
    run("npm", ["run", "build:plugin"], work);
    const dest = path.join(FIXTURES, line);
    const before = existsSync(path.join(dest, "PROVENANCE.md")) ? parseProvenance(readFileSync(path.join(dest, "PROVENANCE.md"), "utf8")) : undefined;
    const sums: Array<[string, string, number]> = [];
    for (const [from, name] of VENDORED_FILES) {
      const target = path.join(dest, name);
      mkdirSync(path.dirname(target), { recursive: true });
      copyFileSync(path.join(work, from), target);
      sums.push([name, sha256File(target), readFileSync(target).length]);
    }
    const npmVersion = run("npm", ["--version"], work).trim();
    writeFileSync(path.join(dest, "PROVENANCE.md"), provenanceText({ line, branch, commit, version: pkg.version, build, npmVersion, sums }));
    const changed = before?.commit === commit ? sums.filter(([name, sum]) => before.sha256[name] !== sum).map(([name]) => name) : [];
    for (const [name, sum, bytes] of sums) console.log(`  ${name}: ${bytes} bytes, sha256 ${sum}`);
    if (changed.length > 0) console.error(`  ${line}: rebuilt from the same commit, but these differ from the recorded checksums: ${changed.join(", ")}`);
    else if (before?.commit === commit) console.log(`  ${line}: rebuilt from the same commit: every checksum matches the recorded one`);
    return changed.length === 0;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function provenanceText(p: { line: string; branch: string; commit: string; version: string; build: string; npmVersion: string; sums: Array<[string, string, number]> }): string {
  return [
    `# lossless-claw ${p.version} (vendored build)`,
    "",
    `The real lossless-claw plugin, built from its own sources, for the CI suite test/openclaw/lossless-claw-real/.`,
    `Re-vendor (and check the checksums) with \`tsx scripts/vendor-lossless-claw.ts --git-dir <bare git dir> --line ${p.line}\`;`,
    "check the files against this note with `tsx scripts/vendor-lossless-claw.ts --verify`.",
    "",
    `- repository: https://github.com/${REPO} (licence: MIT, see LICENSE)`,
    `- branch: \`${p.branch}\``,
    `- commit: \`${p.commit}\``,
    `- version: ${p.version}`,
    `- build: \`npm ci --ignore-scripts\` then \`npm run build:plugin\` (\`${p.build}\`)`,
    `- built with Node ${process.version}, npm ${p.npmVersion}`,
    "- vendored: only what the plugin needs at run time (the bundle, its package.json and manifest) and its licence",
    "",
    "| file | sha256 | bytes |",
    "| --- | --- | --- |",
    ...p.sums.map(([name, sum, bytes]) => `| \`${name}\` | \`${sum}\` | ${bytes} |`),
    "",
  ].join("\n");
}

function main(argv: string[]): number {
  const lines: string[] = [];
  let gitDir: string | undefined;
  let verify = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--git-dir") gitDir = argv[++i];
    else if (a === "--line") lines.push(argv[++i] ?? "");
    else if (a === "--verify") verify = true;
    else throw new Error(`unknown argument ${a}`);
  }
  const chosen = lines.length > 0 ? lines : Object.keys(LOSSLESS_CLAW_LINES);
  if (verify) {
    let ok = true;
    for (const line of chosen) {
      const bad = verifyVendored(path.join(FIXTURES, line));
      console.log(bad.length === 0 ? `${line}: every vendored file matches PROVENANCE.md` : `${line}: MISMATCH: ${bad.join("; ")}`);
      ok &&= bad.length === 0;
    }
    return ok ? 0 : 1;
  }
  if (!gitDir) throw new Error("give --git-dir <bare git dir of lossless-claw> (or --verify)");
  let ok = true;
  for (const line of chosen) ok = vendorLine(path.resolve(gitDir), line) && ok;
  return ok ? 0 : 1;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exitCode = 2;
  }
}
