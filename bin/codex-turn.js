#!/usr/bin/env node
// The package runs from source: register tsx's ESM loader, then run the TypeScript CLI.
import { register } from "tsx/esm/api";
import { fileURLToPath } from "node:url";
import path from "node:path";

register();
const here = path.dirname(fileURLToPath(import.meta.url));
const { main } = await import(path.join(here, "..", "src", "cli", "main.ts"));
process.exitCode = await main(process.argv.slice(2));
