#!/usr/bin/env node
// Runs the compiled CLI (dist/src/cli/main.js: shipped in the package, built by `npm run build`, which `prepack` runs
// before `npm pack`/`npm publish`; nothing builds on install). In a source checkout without a build it runs
// src/cli/main.ts through tsx (a devDependency).
// CODEX_TURN_FROM_SOURCE=1 forces the sources even when dist/ exists (a checkout's dist/ may be older than src/).
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const compiled = path.join(root, "dist", "src", "cli", "main.js");
const source = path.join(root, "src", "cli", "main.ts");
const EXIT_ENV = 3;

function fail(message) {
  process.stderr.write(`codex-turn: ${message}\n`);
  process.exit(EXIT_ENV);
}

async function loadCli() {
  const fromSource = process.env.CODEX_TURN_FROM_SOURCE === "1";
  if (!fromSource && existsSync(compiled)) return import(pathToFileURL(compiled).href);
  if (!existsSync(source)) {
    fail(
      fromSource
        ? `CODEX_TURN_FROM_SOURCE=1 but ${source} does not exist (an installed package ships only dist/)`
        : `the compiled CLI ${compiled} is missing; reinstall the package, or run \`npm run build\` in a checkout`,
    );
  }
  let register;
  try {
    ({ register } = await import("tsx/esm/api"));
  } catch {
    fail(
      `${compiled} is missing and running from source needs the devDependency "tsx", which cannot be loaded: ` +
        "run `npm install` (or `npm run build`) in the checkout",
    );
  }
  register();
  return import(pathToFileURL(source).href);
}

const { main } = await loadCli();
process.exitCode = await main(process.argv.slice(2));
