/**
 * TypeScript modules given to the plugin host (`--engine ./my-engine.ts`, a plugin whose entry is `index.ts`): Node
 * imports them itself where it strips types (Node >= 22.18, 24, 26: `process.features.typescript`); on an older Node
 * (20) they are imported through tsx's `tsImport` when tsx is installed (scoped to that import: nothing is registered
 * for the rest of the process); else the import fails with {@link TypeScriptImportError}, which names the Node version
 * and the fixes, instead of Node's "Unknown file extension .ts".
 */
import { pathToFileURL } from "node:url";

/** A TypeScript module's extension (`.ts`, `.mts`, `.cts`, `.tsx`). */
export const TYPESCRIPT_FILE = /\.(?:[mc]?ts|tsx)$/i;

/** How a TypeScript module is imported on this Node. */
export type TypeScriptLoader = "native" | "tsx";

/** A TypeScript module this Node cannot import, and no tsx to do it. */
export class TypeScriptImportError extends Error {
  constructor(
    readonly file: string,
    readonly nodeVersion: string,
  ) {
    super(
      `${file} is TypeScript, which Node ${nodeVersion} cannot import (Node >= 22.18 strips types itself): ` +
        "run it on a newer Node, install tsx beside it (`npm install tsx`), or compile it to .js",
    );
    this.name = "TypeScriptImportError";
  }
}

/** What the choice reads from the running process (injectable for tests of either Node line). */
export interface TypeScriptRuntime {
  version: string;
  /** `process.features.typescript`: "strip" / "transform" where Node strips types; undefined or false before. */
  typescript: unknown;
  /** tsx's `tsImport`; rejects when tsx is not installed. */
  tsImport: (url: string) => Promise<unknown>;
}

function currentRuntime(): TypeScriptRuntime {
  return {
    version: process.version,
    typescript: (process.features as { typescript?: unknown }).typescript,
    tsImport: async (url) => {
      let api: { tsImport: (specifier: string, parent: string) => Promise<unknown> };
      try {
        api = (await import("tsx/esm/api" as string)) as typeof api;
      } catch {
        throw new TypeScriptImportError(url, process.version);
      }
      return api.tsImport(url, import.meta.url);
    },
  };
}

/**
 * How `file` is imported here: undefined for JavaScript, "native" where Node strips types, else "tsx".
 *
 * @example
 * ```ts
 * typeScriptLoaderFor("/work/my-engine.ts"); // "native" on Node 24, "tsx" on Node 20
 * ```
 */
export function typeScriptLoaderFor(file: string, runtime: Pick<TypeScriptRuntime, "typescript"> = currentRuntime()): TypeScriptLoader | undefined {
  if (!TYPESCRIPT_FILE.test(file)) return undefined;
  return typeof runtime.typescript === "string" ? "native" : "tsx";
}

/**
 * Import the module file `file` with `nativeImport` (Node's own loader), or, for TypeScript on a Node that does not
 * strip types, through tsx's `tsImport`. Throws {@link TypeScriptImportError} when that needs tsx and it is missing.
 *
 * @example
 * ```ts
 * const mod = await importModuleFile("/work/my-engine.ts", (url) => import(url));
 * ```
 */
export async function importModuleFile(
  file: string,
  nativeImport: (url: string) => Promise<unknown>,
  runtime: TypeScriptRuntime = currentRuntime(),
): Promise<unknown> {
  const url = pathToFileURL(file).href;
  if (typeScriptLoaderFor(file, runtime) !== "tsx") return nativeImport(url);
  try {
    return await runtime.tsImport(url);
  } catch (error) {
    if (error instanceof TypeScriptImportError) throw new TypeScriptImportError(file, runtime.version);
    throw error;
  }
}
