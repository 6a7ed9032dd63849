/**
 * An OpenClaw config file (`openclaw.json`) read as OpenClaw reads it: JSON5 (comments, trailing commas, unquoted
 * keys), `$include` directives resolved (a path or a list of paths relative to the including file, inside the top-level
 * config's directory even through symlinks, at most 10 deep, no cycles; sibling keys deep-merged over the included
 * content: objects merge, arrays concatenate, other values are replaced), then `${VAR}` environment references
 * substituted in string values (upper-case names; `$${VAR}` stays literal; an unset or empty variable is an error
 * naming it and the config path). A user's real config, including one that refers to secrets through environment
 * variables, loads unchanged.
 */
import fs from "node:fs";
import path from "node:path";
import JSON5 from "json5";

/** Why a config file could not be read. */
export type OpenClawConfigErrorCode = "CONFIG_UNREADABLE" | "CONFIG_SYNTAX" | "CONFIG_INCLUDE" | "CONFIG_ENV_MISSING" | "CONFIG_UNSUPPORTED" | "CONFIG_NOT_OBJECT";

/**
 * A config file that could not be read, with what and where.
 *
 * @example
 * ```ts
 * try { readOpenClawConfigFile(file); } catch (e) { if (e instanceof OpenClawConfigError) console.error(e.code, e.message); }
 * ```
 */
export class OpenClawConfigError extends Error {
  constructor(
    readonly code: OpenClawConfigErrorCode,
    readonly file: string,
    message: string,
  ) {
    super(message);
    this.name = "OpenClawConfigError";
  }
}

/** OpenClaw's bounds on `$include`. */
export const MAX_INCLUDE_DEPTH = 10;
const MAX_FILE_BYTES = 2 * 1024 * 1024;
const INCLUDE_KEY = "$include";
const BLOCKED_KEYS = new Set(["__proto__", "prototype", "constructor"]);
const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype;
}

/** OpenClaw's include merge: arrays concatenate, objects merge recursively, anything else: the later value wins. */
function deepMerge(target: unknown, source: unknown): unknown {
  if (Array.isArray(target) && Array.isArray(source)) return [...target, ...source];
  if (isPlainObject(target) && isPlainObject(source)) {
    const result: Record<string, unknown> = { ...target };
    for (const key of Object.keys(source)) {
      if (BLOCKED_KEYS.has(key)) continue;
      result[key] = key in result ? deepMerge(result[key], source[key]) : source[key];
    }
    return result;
  }
  return source;
}

function isInside(root: string, candidate: string): boolean {
  const rel = path.relative(root, candidate);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
}

function realpathOr(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return p;
  }
}

interface IncludeScope {
  /** The top-level config file (named in every error). */
  topFile: string;
  rootDir: string;
  rootRealDir: string;
}

function parseFile(scope: IncludeScope, file: string, shown: string): unknown {
  let text: string;
  try {
    const st = fs.statSync(file);
    if (!st.isFile()) throw new Error("not a regular file");
    if (st.size > MAX_FILE_BYTES) throw new Error(`larger than ${MAX_FILE_BYTES} bytes`);
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    const code = file === scope.topFile ? "CONFIG_UNREADABLE" : "CONFIG_INCLUDE";
    throw new OpenClawConfigError(code, scope.topFile, `${shown}: cannot read: ${(err as Error).message}`);
  }
  try {
    return JSON5.parse(text);
  } catch (err) {
    // JSON5's message carries the line and column ("invalid character 'x' at 3:5").
    throw new OpenClawConfigError("CONFIG_SYNTAX", scope.topFile, `${shown}: not valid JSON5: ${(err as Error).message.replace(/^JSON5: /, "")}`);
  }
}

function resolveIncludes(scope: IncludeScope, value: unknown, from: string, chain: readonly string[]): unknown {
  if (Array.isArray(value)) return value.map((item) => resolveIncludes(scope, item, from, chain));
  if (!isPlainObject(value)) return value;
  const rest: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === INCLUDE_KEY || BLOCKED_KEYS.has(key)) continue;
    rest[key] = resolveIncludes(scope, v, from, chain);
  }
  if (!(INCLUDE_KEY in value)) return rest;
  const spec = value[INCLUDE_KEY];
  const paths = typeof spec === "string" ? [spec] : Array.isArray(spec) && spec.every((s) => typeof s === "string") ? (spec as string[]) : undefined;
  if (!paths) throw new OpenClawConfigError("CONFIG_INCLUDE", scope.topFile, `${path.basename(from)}: ${INCLUDE_KEY} must be a path or a list of paths`);
  // One path: its content as it is; several: merged in order.
  const included = typeof spec === "string" ? loadInclude(scope, spec, from, chain) : paths.reduce<unknown>((merged, p) => deepMerge(merged, loadInclude(scope, p, from, chain)), {});
  if (Object.keys(rest).length === 0) return included;
  if (!isPlainObject(included)) throw new OpenClawConfigError("CONFIG_INCLUDE", scope.topFile, `${path.basename(from)}: sibling keys of ${INCLUDE_KEY} need the included content to be an object`);
  return deepMerge(included, rest);
}

function loadInclude(scope: IncludeScope, includePath: string, from: string, chain: readonly string[]): unknown {
  const resolved = path.normalize(path.isAbsolute(includePath) ? includePath : path.resolve(path.dirname(from), includePath));
  const shown = `${INCLUDE_KEY} ${includePath}`;
  // Like OpenClaw: an include may not leave the top-level config's directory, lexically or through a symlink.
  if (!isInside(scope.rootDir, resolved) || !isInside(scope.rootRealDir, realpathOr(resolved))) {
    throw new OpenClawConfigError("CONFIG_INCLUDE", scope.topFile, `${shown}: outside the config directory ${scope.rootDir}`);
  }
  if (chain.includes(resolved)) throw new OpenClawConfigError("CONFIG_INCLUDE", scope.topFile, `${shown}: circular include (${[...chain, resolved].map((f) => path.basename(f)).join(" -> ")})`);
  if (chain.length > MAX_INCLUDE_DEPTH) throw new OpenClawConfigError("CONFIG_INCLUDE", scope.topFile, `${shown}: includes nested deeper than ${MAX_INCLUDE_DEPTH}`);
  return resolveIncludes(scope, parseFile(scope, resolved, shown), resolved, [...chain, resolved]);
}

function substituteString(scope: IncludeScope, value: string, at: string, env: NodeJS.ProcessEnv): string {
  if (!value.includes("${")) return value;
  let out = "";
  for (let i = 0; i < value.length; i++) {
    const escaped = value.startsWith("$${", i);
    if (value[i] !== "$" || (!escaped && value[i + 1] !== "{")) {
      out += value[i];
      continue;
    }
    const start = i + (escaped ? 3 : 2);
    const end = value.indexOf("}", start);
    const name = end === -1 ? "" : value.slice(start, end);
    const secret = /^(pass|gopass):./.test(name);
    if (end === -1 || !(ENV_NAME.test(name) || secret)) {
      out += value[i];
      continue;
    }
    if (escaped) out += `\${${name}}`;
    else if (secret) {
      // OpenClaw runs `pass` / `gopass` for these; this host runs no commands while reading a config.
      throw new OpenClawConfigError("CONFIG_UNSUPPORTED", scope.topFile, `${at || "(config)"}: secret references (\${${name.split(":")[0]}:...}) are not resolved by this host; put the value in an environment variable and write \${NAME}`);
    } else {
      const v = env[name];
      if (v === undefined || v === "") throw new OpenClawConfigError("CONFIG_ENV_MISSING", scope.topFile, `${at || "(config)"}: environment variable ${name} is not set`);
      out += v;
    }
    i = end;
  }
  return out;
}

function substituteEnv(scope: IncludeScope, value: unknown, at: string, env: NodeJS.ProcessEnv): unknown {
  if (typeof value === "string") return substituteString(scope, value, at, env);
  if (Array.isArray(value)) return value.map((item, index) => substituteEnv(scope, item, `${at}[${index}]`, env));
  if (isPlainObject(value)) {
    const result: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) result[key] = substituteEnv(scope, v, at ? `${at}.${key}` : key, env);
    return result;
  }
  return value;
}

/**
 * Read an OpenClaw config file as OpenClaw does (see the module comment); throws {@link OpenClawConfigError} naming
 * the file, the include or the config path at fault.
 *
 * @example
 * ```ts
 * const config = readOpenClawConfigFile(path.join(os.homedir(), ".openclaw", "openclaw.json"));
 * const loaded = await loadOpenClawPlugins(plugins, { openClawConfig: config, cwd });
 * ```
 */
export function readOpenClawConfigFile(file: string, opts: { env?: NodeJS.ProcessEnv | undefined } = {}): Record<string, unknown> {
  const topFile = path.resolve(file);
  const rootDir = path.dirname(topFile);
  const scope: IncludeScope = { topFile, rootDir, rootRealDir: realpathOr(rootDir) };
  const parsed = resolveIncludes(scope, parseFile(scope, topFile, file), topFile, [topFile]);
  if (!isPlainObject(parsed)) throw new OpenClawConfigError("CONFIG_NOT_OBJECT", topFile, `${file}: an OpenClaw config is an object`);
  return substituteEnv(scope, parsed, "", opts.env ?? process.env) as Record<string, unknown>;
}
