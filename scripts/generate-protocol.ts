/**
 * Regenerate the checked-in TypeScript protocol types (src/codex/protocol) from the pinned codex binary:
 * `codex app-server generate-ts --experimental --out DIR` (experimental, so additionalContext/dynamicTools are typed).
 *
 *   npm run gen:protocol            # rewrite src/codex/protocol
 *   npx tsx scripts/generate-protocol.ts --out /tmp/proto   # write elsewhere
 *
 * test/codex/protocol-drift.test.ts regenerates into a temp dir and fails when the result differs from the copy.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rename, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { resolveCodexCommand } from "../src/codex/binary.js";

const run = promisify(execFile);
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const PROTOCOL_DIR = path.join(repoRoot, "src", "codex", "protocol");

/** Run the generator into `outDir` (created by codex). An empty CODEX_HOME keeps user config out of it. */
export async function generateProtocol(outDir: string): Promise<void> {
  const home = await mkdtemp(path.join(os.tmpdir(), "codex-gen-home-"));
  try {
    const { command, prefixArgs } = resolveCodexCommand();
    await run(command, [...prefixArgs, "app-server", "generate-ts", "--experimental", "--out", outDir], {
      env: { PATH: process.env.PATH ?? "", HOME: home, CODEX_HOME: home },
      timeout: 60_000,
    });
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

/** Relative paths of all files under `dir`, sorted. */
export async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

/** Files that differ between two generated trees (missing on either side, or different bytes). */
export async function diffTrees(a: string, b: string): Promise<string[]> {
  const [fa, fb] = await Promise.all([listFiles(a), listFiles(b)]);
  const all = [...new Set([...fa, ...fb])].sort();
  const diffs: string[] = [];
  for (const rel of all) {
    if (!fa.includes(rel)) diffs.push(`only in ${b}: ${rel}`);
    else if (!fb.includes(rel)) diffs.push(`only in ${a}: ${rel}`);
    else if (!(await readFile(path.join(a, rel))).equals(await readFile(path.join(b, rel)))) diffs.push(`differs: ${rel}`);
  }
  return diffs;
}

async function main(): Promise<void> {
  const outFlag = process.argv.indexOf("--out");
  const target = outFlag >= 0 && process.argv[outFlag + 1] ? path.resolve(process.argv[outFlag + 1]!) : PROTOCOL_DIR;
  const staging = await mkdtemp(path.join(path.dirname(target), ".protocol-staging-"));
  try {
    await generateProtocol(staging);
    await rm(target, { recursive: true, force: true });
    await rename(staging, target);
    process.stdout.write(`generated ${(await listFiles(target)).length} files into ${target}\n`);
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    throw err;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`generate-protocol failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
