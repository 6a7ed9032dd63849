/**
 * Makes `import "openclaw/plugin-sdk"` (and `/core`, `/logging-core`, ...) inside a plugin resolve to our own
 * implementation (`./sdk/`), without OpenClaw installed. A module resolve hook maps each implemented specifier to a
 * small `data:` module whose exports forward, at call time, to functions this process published on `globalThis`.
 *
 * Node >= 22.15 / 24 has synchronous in-thread `module.registerHooks`; Node 20.6+ has the asynchronous
 * `module.register` (hooks in a loader thread). Either way the hook is installed before the plugin's first import,
 * because plugins (lossless-claw) memoize a failed SDK import for the life of the process. `require()` of the SDK is
 * covered only where `registerHooks` exists (it hooks `require` too); on Node 20 a plugin's `require` of an SDK
 * subpath fails as it would without OpenClaw, which plugins treat as optional.
 */
import * as nodeModule from "node:module";
import vm from "node:vm";
import { SDK_MODULES } from "./sdk/index.js";

/** Where the served modules find our implementation. */
export const SDK_GLOBAL_KEY = "codex-turn-machine.openclaw.plugin-sdk";

const SDK_PACKAGE = "openclaw/plugin-sdk";

/** The ESM source served for one subpath: every export forwards to the published implementation. */
export function sdkModuleSource(subpath: string, exportNames: readonly string[]): string {
  const lookup = `globalThis[Symbol.for(${JSON.stringify(SDK_GLOBAL_KEY)})]`;
  const lines = [
    `const impl = (name) => { const sdk = ${lookup}; const fn = sdk && sdk[${JSON.stringify(subpath)}] && sdk[${JSON.stringify(subpath)}][name];`,
    `  if (typeof fn !== "function") throw new Error("openclaw/plugin-sdk: " + name + " is not provided by this host"); return fn; };`,
  ];
  for (const name of exportNames) lines.push(`export const ${name} = (...args) => impl(${JSON.stringify(name)})(...args);`);
  return lines.join("\n");
}

/**
 * Specifier -> `data:` URL for every implemented subpath (`openclaw/plugin-sdk`, `openclaw/plugin-sdk/core`, ...).
 *
 * @example
 * ```ts
 * Object.keys(sdkModuleUrls()); // ["openclaw/plugin-sdk", "openclaw/plugin-sdk/core", ...]
 * ```
 */
export function sdkModuleUrls(): Record<string, string> {
  const urls: Record<string, string> = {};
  for (const [subpath, exports] of Object.entries(SDK_MODULES)) {
    const specifier = subpath === "" ? SDK_PACKAGE : `${SDK_PACKAGE}/${subpath}`;
    urls[specifier] = `data:text/javascript,${encodeURIComponent(sdkModuleSource(subpath, Object.keys(exports)))}`;
  }
  return urls;
}

/** Loader-thread hooks for Node 20's `module.register`: the URL table arrives through `initialize(data)`. */
const ASYNC_HOOKS_SOURCE = [
  "let urls = {};",
  "export async function initialize(data) { urls = (data && data.urls) || {}; }",
  "export async function resolve(specifier, context, next) {",
  "  const url = Object.prototype.hasOwnProperty.call(urls, specifier) ? urls[specifier] : undefined;",
  "  return url ? { url, format: 'module', shortCircuit: true } : next(specifier, context);",
  "}",
].join("\n");

type ResolveResult = { url: string; format?: string | undefined; shortCircuit?: boolean | undefined };
type SyncRegisterHooks = (hooks: {
  resolve: (specifier: string, context: unknown, next: (specifier: string, context: unknown) => ResolveResult) => ResolveResult;
}) => unknown;

/** The parts of `node:module` the resolver uses (injectable for tests of either Node line). */
export interface ModuleHookApi {
  registerHooks?: SyncRegisterHooks | undefined;
  register?: ((specifier: string, options: { data: unknown }) => void) | undefined;
}

/** Resolve an implemented SDK specifier to its served module; anything else goes on down the chain. */
export function resolveSdkSpecifier(urls: Readonly<Record<string, string>>) {
  return (specifier: string, context: unknown, next: (specifier: string, context: unknown) => ResolveResult): ResolveResult => {
    const url = Object.prototype.hasOwnProperty.call(urls, specifier) ? urls[specifier] : undefined;
    return url ? { url, format: "module", shortCircuit: true } : next(specifier, context);
  };
}

/**
 * Install the resolve hook with whichever API this Node has: synchronous `registerHooks` (Node >= 22.15, 24) or
 * asynchronous `register` (Node 20.6+). Returns which one.
 *
 * @example
 * ```ts
 * installSdkHooks(nodeModule, sdkModuleUrls()); // "registerHooks" on Node 24
 * ```
 */
export function installSdkHooks(api: ModuleHookApi, urls: Readonly<Record<string, string>>): "registerHooks" | "register" {
  if (typeof api.registerHooks === "function") {
    api.registerHooks({ resolve: resolveSdkSpecifier(urls) });
    return "registerHooks";
  }
  if (typeof api.register === "function") {
    api.register(`data:text/javascript,${encodeURIComponent(ASYNC_HOOKS_SOURCE)}`, { data: { urls } });
    return "register";
  }
  throw new Error(`Node ${process.version} has no module loader hooks (needs Node >= 20.6)`);
}

let installed: "registerHooks" | "register" | undefined;

/**
 * Publish our SDK implementation and install the resolve hook (once per process; later calls return how it was
 * installed). Throws when this Node has neither hook API (Node < 20.6).
 *
 * @example
 * ```ts
 * installOpenClawSdkResolver(); // "register" on Node 20, "registerHooks" on Node 24
 * await import(pluginEntryUrl);  // its `import "openclaw/plugin-sdk/core"` now resolves
 * ```
 */
export function installOpenClawSdkResolver(): "registerHooks" | "register" {
  (globalThis as Record<symbol, unknown>)[Symbol.for(SDK_GLOBAL_KEY)] = SDK_MODULES;
  installed ??= installSdkHooks(nodeModule as unknown as ModuleHookApi, sdkModuleUrls());
  return installed;
}

/**
 * `import()` through Node's own loader (with the hooks above), even where our code runs inside a test runner or
 * bundler that rewrites `import()` or evaluates modules in `vm` (vitest). A `Function`-built import is used first;
 * where the surrounding `vm` has no import callback (`ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING`), a `vm.Script` with the
 * main context's default loader (Node >= 20.12, experimental there, so only used when needed) takes over.
 *
 * @example
 * ```ts
 * const mod = await nativeImport(pathToFileURL(entry).href);
 * ```
 */
export async function nativeImport(specifier: string): Promise<unknown> {
  if (!viaVm) {
    try {
      return await functionImport(specifier);
    } catch (error) {
      if ((error as { code?: unknown })?.code !== "ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING") throw error;
      viaVm = createVmImport();
      if (!viaVm) throw error;
    }
  }
  return viaVm(specifier);
}

const functionImport = new Function("specifier", "return import(specifier)") as (specifier: string) => Promise<unknown>;
let viaVm: ((specifier: string) => Promise<unknown>) | undefined;

function createVmImport(): ((specifier: string) => Promise<unknown>) | undefined {
  const loader = (vm.constants as unknown as { USE_MAIN_CONTEXT_DEFAULT_LOADER?: symbol | undefined } | undefined)?.USE_MAIN_CONTEXT_DEFAULT_LOADER;
  if (loader === undefined) return undefined;
  const script = new vm.Script("(specifier) => import(specifier)", { importModuleDynamically: loader as never });
  return script.runInThisContext() as (specifier: string) => Promise<unknown>;
}
